//! What a client of each documented gateway (nginx, Traefik, Caddy) sees, one scenario per
//! function: `nginx`, `traefik` and `caddy` run each of them against their gateway, configured
//! as gateway/docs/gateways.md says, so that what the page promises holds for every one of them.

use std::time::{Duration, Instant};

use ratelimit_gateway::paths::normalise;
use testkit::RedisServer;

use crate::support::{Answer, Kind, Serve, behind_gateways, get, limits, raw_get, upstream};

/// A generous bound on an answer while Redis is down: the routes' deadline is 50 ms, and the
/// machine may be busy; what it rules out is a gateway (or `serve`) waiting for Redis.
const BOUNDED: Duration = Duration::from_secs(2);

/// Admitted requests reach the upstream as sent, their `RateLimit` headers where the block
/// puts them; the refusal is a 429 with `Retry-After` and the headers, for the client; another
/// client has a quota of its own; a path of no route passes without headers.
pub(crate) async fn limits_and_headers(kind: Kind) {
    let upstream = upstream().await;
    let serve = Serve::start(&behind_gateways(&limits(3)));
    let gateway = kind.start(upstream, &serve).await;
    for remaining in [2, 1, 0] {
        let admitted = gateway.get("127.0.0.2", "/api/x?page=1", &[]).await;
        assert_eq!(admitted.status, 200, "{}", gateway.log());
        assert_eq!(
            gateway.limit_headers(&admitted),
            (
                format!("\"api\";r={remaining};t=60"),
                "\"api\";q=3;w=60".to_owned()
            )
        );
        assert_eq!(admitted.header("retry-after"), "-");
        assert_eq!(admitted.body, "path /api/x?page=1");
    }
    let refused = gateway.get("127.0.0.2", "/api/x", &[]).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.header("retry-after"), "60");
    assert_eq!(refused.header("ratelimit"), "\"api\";r=0;t=60");
    assert_eq!(refused.header("ratelimit-policy"), "\"api\";q=3;w=60");
    if kind == Kind::Nginx {
        // nginx's own answer, from `error_page`: nothing of the 403 and its status reaches
        // the client.
        assert_eq!(refused.header("rejection-status"), "-");
        assert_eq!(refused.body, "Too Many Requests\n");
    } else {
        // `serve`'s own refusal, passed on as it is.
        assert_eq!(refused.header("content-type"), "application/problem+json");
        assert!(refused.body.contains("quota-exceeded"), "{}", refused.body);
    }
    let other = gateway.get("127.0.0.3", "/api/x", &[]).await;
    assert_eq!(other.status, 200);
    let open = gateway.get("127.0.0.2", "/open/x", &[]).await;
    assert_eq!(open.status, 200);
    assert_eq!(
        gateway.limit_headers(&open),
        ("-".to_owned(), "-".to_owned())
    );
    assert_eq!(open.header("ratelimit"), "-");
}

/// A client that writes the headers gateways name clients and requests in can neither spend
/// another client's quota nor escape its own: with one request a minute, 127.0.0.2 has spent
/// its own, and every forgery is refused (one that were read would be admitted, as
/// 127.0.0.3, as an address of no client yet, or as a path of no route); 127.0.0.3's request
/// then still passes.
pub(crate) async fn forged_headers_change_nothing(kind: Kind) {
    let upstream = upstream().await;
    let serve = Serve::start(&behind_gateways(&limits(1)));
    let gateway = kind.start(upstream, &serve).await;
    assert_eq!(gateway.get("127.0.0.2", "/api/x", &[]).await.status, 200);
    let forgeries = [
        ("x-forwarded-for", "127.0.0.3"),
        ("x-forwarded-for", "198.51.100.7"),
        ("x-forwarded-for", "198.51.100.8, 127.0.0.3"),
        ("forwarded", "for=127.0.0.3"),
        ("forwarded", "for=198.51.100.9"),
        ("x-real-ip", "127.0.0.3"),
        ("x-real-ip", "198.51.100.10"),
        // The target as the other endpoint's gateway names it, and as this one does.
        ("x-original-uri", "/open/x"),
        ("x-forwarded-uri", "/open/x"),
    ];
    for (name, value) in forgeries {
        let forged = gateway.get("127.0.0.2", "/api/x", &[(name, value)]).await;
        assert_eq!(forged.status, 429, "{name}: {value}\n{}", gateway.log());
    }
    let all_at_once = gateway.get("127.0.0.2", "/api/x", &forgeries).await;
    assert_eq!(all_at_once.status, 429);
    assert_eq!(gateway.get("127.0.0.3", "/api/x", &[]).await.status, 200);
    assert_eq!(gateway.get("127.0.0.3", "/api/x", &[]).await.status, 429);
}

/// `/%61pi/x`, `//api/x`, `/./api/x` and `/static/../api/x`, sent as written, count against
/// the `/api/` route, and the upstream is asked for a path that is `/api/x` once normalised
/// (the path the limit counted); an encoded `/`, which servers read differently, is refused.
pub(crate) async fn path_variants_count_as_the_path(kind: Kind) {
    let upstream = upstream().await;
    let serve = Serve::start(&behind_gateways(&limits(5)));
    let gateway = kind.start(upstream, &serve).await;
    let variants = [
        "/api/x",
        "/%61pi/x",
        "//api/x",
        "/./api/x",
        "/static/../api/x",
    ];
    for (variant, remaining) in variants.iter().zip((0..5).rev()) {
        let admitted = gateway.get("127.0.0.2", variant, &[]).await;
        assert_eq!(admitted.status, 200, "{variant}\n{}", gateway.log());
        assert_eq!(
            gateway.limit_headers(&admitted).0,
            format!("\"api\";r={remaining};t=60"),
            "{variant}"
        );
        let served = admitted.body.strip_prefix("path ").unwrap();
        assert_eq!(normalise(served).unwrap(), "/api/x", "{variant}: {served}");
    }
    for variant in variants {
        let refused = gateway.get("127.0.0.2", variant, &[]).await;
        assert_eq!(refused.status, 429, "{variant}");
    }
    let encoded_slash = gateway.get("127.0.0.3", "/api%2Fx", &[]).await;
    assert_eq!(encoded_slash.status, 400, "{}", gateway.log());
}

/// How Redis fails.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Outage {
    /// SIGSTOP: connections stay open and nothing answers, the case where a gateway that
    /// gives up before `serve`'s deadline would decide with its own failure mode.
    Frozen,
    /// SIGKILL: connections refused.
    Killed,
}

/// With Redis down, a route failing open admits (the upstream's 200) and one failing closed
/// refuses (503, `Retry-After: 1`), every answer bounded; the gateway neither waits for
/// Redis nor replaces `serve`'s answer with its own.
pub(crate) async fn redis_down(kind: Kind, outage: Outage) {
    let mut redis = RedisServer::start();
    let upstream = upstream().await;
    let admin = crate::process::free_addr();
    let routes = [("open", "open", "50ms"), ("closed", "closed", "50ms")];
    let serve = Serve::start(&behind_gateways(&format!(
        "admin = \"{admin}\"\n{}",
        in_redis(&redis, 100, &routes)
    )));
    let gateway = kind.start(upstream, &serve).await;
    // Both routes decided by Redis first: connected, counting. On a busy machine the first
    // decisions (a connection, a script to load) may outlast the 50 ms deadline: ask until
    // one is decided.
    for path in ["/open/x", "/closed/x"] {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = gateway.get("127.0.0.2", path, &[]).await;
            if answer.status == 200 && gateway.limit_headers(&answer).0.starts_with("\"api\";r=") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{path} never decided: {answer:?}"
            );
        }
    }
    let readyz = format!("http://{admin}/readyz");
    assert_eq!(get("127.0.0.1", &readyz, &[]).await.status(), 200);
    match outage {
        Outage::Frozen => redis.freeze(),
        Outage::Killed => {
            redis.kill();
            let not_ready = get("127.0.0.1", &readyz, &[]).await;
            assert_eq!(not_ready.status(), 503);
            assert!(not_ready.text().await.unwrap().contains("store shared"));
        }
    }
    for _ in 0..3 {
        let started = Instant::now();
        let open = gateway.get("127.0.0.2", "/open/x", &[]).await;
        let took = started.elapsed();
        assert_eq!(open.status, 200, "{}", gateway.log());
        assert_eq!(open.body, "path /open/x");
        assert!(took < BOUNDED, "fail-open took {took:?}");
        let started = Instant::now();
        let closed = gateway.get("127.0.0.2", "/closed/x", &[]).await;
        let took = started.elapsed();
        assert_eq!(closed.status, 503, "{}", gateway.log());
        assert_eq!(closed.header("retry-after"), "1");
        assert_eq!(closed.header("ratelimit-policy"), "\"api\";q=100;w=60");
        assert!(took < BOUNDED, "fail-closed took {took:?}");
    }
}

/// 200 requests of one client at once, against a limit of 50 in Redis: exactly 50 admitted
/// and 150 refused, whatever the gateway does with so many questions at once. The route fails
/// closed with a deadline of seconds: on a busy machine some of 200 decisions at once outlast
/// the default 100 ms, and failing open would admit those unchecked (by design; what this
/// test counts is what Redis decided).
pub(crate) async fn concurrent_requests_admit_exactly_the_limit(kind: Kind) {
    let redis = RedisServer::start();
    let upstream = upstream().await;
    let serve = Serve::start(&behind_gateways(&in_redis(
        &redis,
        50,
        &[("api", "closed", "10s")],
    )));
    let gateway = kind.start(upstream, &serve).await;
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let addr = gateway.addr;
        requests.spawn(async move { raw_get("127.0.0.2", addr, "/api/x", &[]).await });
    }
    let answers = requests.join_all().await;
    let count = |status: u16| {
        answers
            .iter()
            .filter(|answer| answer.status == status)
            .count()
    };
    let seen: Vec<_> = answers
        .iter()
        .map(|answer| (answer.status, gateway.limit_headers(answer).0))
        .collect();
    assert_eq!(
        (count(200), count(429)),
        (50, 150),
        "{seen:?}\n{}",
        gateway.log()
    );
}

/// The gateway asks `serve` on its Unix socket: a client's requests are keyed by the client
/// the gateway names, not by the socket's peer. Returns the first admitted answer and its
/// access-log entry.
pub(crate) async fn over_a_unix_socket(kind: Kind) -> (Answer, serde_json::Value) {
    let upstream = upstream().await;
    let config = format!(
        "[serve]\nsocket = \"{{dir}}/serve.sock\"\naccess_log = \"json\"\n{}",
        limits(1)
    );
    let (serve, log) = Serve::start_with_stdout(&config);
    assert_eq!(serve.addr, None);
    let gateway = kind.start(upstream, &serve).await;
    let admitted = gateway.get("127.0.0.2", "/api/x", &[]).await;
    assert_eq!(admitted.status, 200, "{}", gateway.log());
    assert_eq!(gateway.limit_headers(&admitted).0, "\"api\";r=0;t=60");
    let entry: serde_json::Value = serde_json::from_str(&log.next_line()).unwrap();
    assert_eq!(entry["client"], "127.0.0.2");
    assert_eq!(entry["decision"], "allowed");
    assert_eq!(gateway.get("127.0.0.2", "/api/x", &[]).await.status, 429);
    assert_eq!(gateway.get("127.0.0.3", "/api/x", &[]).await.status, 200);
    (admitted, entry)
}

/// Limits in `redis`: the policy `api` of `limit` requests a minute, and for each
/// `(name, failure_mode, deadline)` the route `name` of the paths under `/name/`, keyed by the
/// client's address.
fn in_redis(redis: &RedisServer, limit: u32, routes: &[(&str, &str, &str)]) -> String {
    let mut tables = format!(
        r#"
        [stores.shared]
        type = "redis"
        url = "{}"

        [policies.api]
        rules = [{{ name = "api", algorithm = "fixed_window", limit = {limit}, period = "1min" }}]
        "#,
        redis.url()
    );
    for (name, failure_mode, deadline) in routes {
        tables.push_str(&format!(
            r#"
            [routes.{name}]
            paths = ["/{name}/"]
            policy = "api"
            key = {{ client_ip = {{}} }}
            failure_mode = "{failure_mode}"
            deadline = "{deadline}"
            "#
        ));
    }
    tables
}

/// In a gateway's module, a test of each scenario that every gateway passes alike (named
/// after it: `caddy::fails_open_and_closed_while_redis_is_frozen`), for the gateway `$kind`.
macro_rules! every_gateways_scenarios {
    ($kind:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn clients_get_the_limits_headers_and_429s() {
            $crate::scenarios::limits_and_headers($kind).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn clients_cannot_forge_their_address_or_target() {
            $crate::scenarios::forged_headers_change_nothing($kind).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn path_variants_count_as_the_path() {
            $crate::scenarios::path_variants_count_as_the_path($kind).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn fails_open_and_closed_while_redis_is_frozen() {
            $crate::scenarios::redis_down($kind, $crate::scenarios::Outage::Frozen).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn fails_open_and_closed_when_redis_is_killed() {
            $crate::scenarios::redis_down($kind, $crate::scenarios::Outage::Killed).await;
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn admits_exactly_the_limit_of_concurrent_requests() {
            $crate::scenarios::concurrent_requests_admit_exactly_the_limit($kind).await;
        }
    };
}
pub(crate) use every_gateways_scenarios;
