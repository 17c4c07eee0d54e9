//! A real nginx, configured as docs/gateways.md says, asking `serve` through `auth_request`:
//! what a client of nginx sees.

use std::time::{Duration, Instant};

use testkit::RedisServer;

use crate::support::{Serve, get, header, limits, nginx, upstream};

/// `serve` on TCP, trusting nginx's address only: the tests' clients, on other loopback
/// addresses, are clients of their own.
fn serve_config(limit: u32) -> String {
    format!(
        r#"
        [serve]
        listen = "127.0.0.1:0"
        gateways = ["127.0.0.1"]
        access_log = "off"
        {}
        "#,
        limits(limit)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_clients_get_the_limits_headers_and_429s() {
    let upstream = upstream().await;
    let serve = Serve::start(&serve_config(3));
    let nginx = nginx(upstream, serve.addr.as_deref().unwrap());
    let url = |path: &str| format!("http://{}{path}", nginx.addr());
    for remaining in [2, 1, 0] {
        let response = get("127.0.0.2", &url("/api/x?page=1"), &[]).await;
        assert_eq!(response.status(), 200, "{}", nginx.error_log());
        assert_eq!(
            header(&response, "ratelimit"),
            format!("\"api\";r={remaining};t=60")
        );
        assert_eq!(header(&response, "ratelimit-policy"), "\"api\";q=3;w=60");
        assert_eq!(header(&response, "retry-after"), "-");
        // The upstream served the request as the client sent it.
        assert_eq!(response.text().await.unwrap(), "path /api/x?page=1");
    }
    let refused = get("127.0.0.2", &url("/api/x"), &[]).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after"), "60");
    assert_eq!(header(&refused, "ratelimit"), "\"api\";r=0;t=60");
    assert_eq!(header(&refused, "ratelimit-policy"), "\"api\";q=3;w=60");
    // The status travels to nginx only: the client sees nothing of the 403 either.
    assert_eq!(header(&refused, "rejection-status"), "-");
    assert_eq!(refused.text().await.unwrap(), "Too Many Requests\n");
    // What the client writes into X-Forwarded-For is not read: nginx appends the address it
    // sees, and that is the client.
    let spoofing = get(
        "127.0.0.2",
        &url("/api/x"),
        &[("x-forwarded-for", "198.51.100.7")],
    )
    .await;
    assert_eq!(spoofing.status(), 429);
    // Paths that an upstream serves as /api/x are /api/x for the limit too.
    for variant in ["/%61pi/x", "//api/x", "/./api/x", "/static/../api/x"] {
        let response = get("127.0.0.2", &url(variant), &[]).await;
        assert_eq!(response.status(), 429, "{variant}");
    }
    // Another client has its own quota.
    assert_eq!(get("127.0.0.3", &url("/api/x"), &[]).await.status(), 200);
    // Paths of no route pass unlimited, without rate-limit headers.
    let open = get("127.0.0.2", &url("/open/x"), &[]).await;
    assert_eq!(open.status(), 200);
    assert_eq!(header(&open, "ratelimit"), "-");
    assert_eq!(header(&open, "ratelimit-policy"), "-");
}

/// With Redis gone, a route failing open admits (nginx serves the request) and one failing
/// closed refuses with 503 and `Retry-After: 1`, each within the route's deadline; `/readyz`
/// says which store is down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_clients_get_fail_open_and_fail_closed_when_redis_is_down() {
    let mut redis = RedisServer::start();
    let upstream = upstream().await;
    let admin = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = format!(
        r#"
        [serve]
        listen = "127.0.0.1:0"
        gateways = ["127.0.0.1"]
        access_log = "off"
        admin = "{admin}"

        [stores.shared]
        type = "redis"
        url = "{}"

        [policies.api]
        rules = [{{ name = "api", algorithm = "fixed_window", limit = 100, period = "1min" }}]

        [routes.open]
        paths = ["/open/"]
        policy = "api"
        key = {{ client_ip = {{}} }}
        deadline = "50ms"

        [routes.closed]
        paths = ["/closed/"]
        policy = "api"
        key = {{ client_ip = {{}} }}
        failure_mode = "closed"
        deadline = "50ms"
        "#,
        redis.url()
    );
    let serve = Serve::start(&config);
    let nginx = nginx(upstream, serve.addr.as_deref().unwrap());
    let url = |path: &str| format!("http://{}{path}", nginx.addr());
    let open = get("127.0.0.2", &url("/open/x"), &[]).await;
    assert_eq!(open.status(), 200);
    assert_eq!(header(&open, "ratelimit"), "\"api\";r=99;t=60");
    let closed = get("127.0.0.2", &url("/closed/x"), &[]).await;
    assert_eq!(closed.status(), 200);
    let readyz = format!("http://{admin}/readyz");
    assert_eq!(get("127.0.0.1", &readyz, &[]).await.status(), 200);
    redis.kill();
    let not_ready = get("127.0.0.1", &readyz, &[]).await;
    assert_eq!(not_ready.status(), 503);
    assert!(not_ready.text().await.unwrap().contains("store shared"));
    for _ in 0..3 {
        let started = Instant::now();
        let open = get("127.0.0.2", &url("/open/x"), &[]).await;
        assert_eq!(open.status(), 200, "{}", nginx.error_log());
        assert_eq!(open.text().await.unwrap(), "path /open/x");
        let closed = get("127.0.0.2", &url("/closed/x"), &[]).await;
        assert_eq!(closed.status(), 503);
        assert_eq!(header(&closed, "retry-after"), "1");
        assert_eq!(header(&closed, "ratelimit-policy"), "\"api\";q=100;w=60");
        assert_eq!(closed.text().await.unwrap(), "Service Unavailable\n");
        // Two questions, each bounded by its 50 ms deadline (a reconnection attempt may add a
        // little): never the hang of a client waiting for Redis.
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}

/// nginx asks a `serve` beside it on its Unix socket: no network hop, and the socket's peers
/// are trusted gateways. nginx's request id names the request in `serve`'s log and upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nginx_asks_over_a_unix_socket() {
    let upstream = upstream().await;
    let config = format!(
        r#"
        [serve]
        socket = "{{dir}}/serve.sock"
        access_log = "json"
        {}
        "#,
        limits(1)
    );
    let (serve, log) = Serve::start_with_stdout(&config);
    assert_eq!(serve.addr, None);
    let socket = serve.dir().join("serve.sock");
    let nginx = nginx(upstream, &format!("unix:{}", socket.display()));
    let url = format!("http://{}/api/x", nginx.addr());
    let admitted = get("127.0.0.2", &url, &[]).await;
    assert_eq!(admitted.status(), 200, "{}", nginx.error_log());
    assert_eq!(header(&admitted, "ratelimit"), "\"api\";r=0;t=60");
    let line = log.next_line();
    let entry: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(entry["client"], "127.0.0.2");
    assert_eq!(entry["decision"], "allowed");
    let id = header(&admitted, "x-seen-request-id");
    assert_eq!(id.len(), 32, "{id}");
    assert_eq!(entry["request_id"], id.as_str());
    assert_eq!(get("127.0.0.2", &url, &[]).await.status(), 429);
    // Keyed by the client nginx names, not by the socket.
    assert_eq!(get("127.0.0.3", &url, &[]).await.status(), 200);
}
