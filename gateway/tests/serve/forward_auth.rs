//! `/forward_auth` as Traefik's ForwardAuth and Caddy's `forward_auth` use it: 2xx with the
//! rate-limit headers (which `authResponseHeaders` / `copy_headers` pass on) when admitted; the
//! limit's own refusal, passed to the client as it is, when not. Plans, shadow mode and the
//! endpoints' shapes side by side.

use crate::support::{Serve, get, header, limits};

/// `serve` on TCP with the default gateways (loopback): the tests ask as the gateway would.
fn serve(extra: &str) -> Serve {
    Serve::start(&format!(
        r#"
        [serve]
        listen = "127.0.0.1:0"
        access_log = "off"
        {}
        {extra}
        "#,
        limits(2)
    ))
}

/// The headers Traefik and Caddy send about a request of `client` for `uri`.
fn asked<'a>(uri: &'a str, client: &'a str) -> [(&'a str, &'a str); 5] {
    [
        ("x-forwarded-method", "GET"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "example.com"),
        ("x-forwarded-uri", uri),
        ("x-forwarded-for", client),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admitted_is_200_with_headers_and_refused_is_the_limits_429() {
    let serve = serve("");
    let url = serve.url("/forward_auth");
    for remaining in [1, 0] {
        let admitted = get("127.0.0.1", &url, &asked("/api/orders?id=7", "203.0.113.5")).await;
        assert_eq!(admitted.status(), 200);
        assert_eq!(
            header(&admitted, "ratelimit"),
            format!("\"api\";r={remaining};t=60")
        );
        assert_eq!(header(&admitted, "ratelimit-policy"), "\"api\";q=2;w=60");
        assert_eq!(header(&admitted, "rate-limiting-state"), "Allow");
        assert_eq!(header(&admitted, "x-request-id").len(), 32);
        // Nothing for the gateway to copy into the request but the headers.
        assert_eq!(admitted.text().await.unwrap(), "");
    }
    let refused = get(
        "127.0.0.1",
        &url,
        &[
            asked("/api/orders", "203.0.113.5").as_slice(),
            &[("x-request-id", "req-9")],
        ]
        .concat(),
    )
    .await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after"), "60");
    assert_eq!(header(&refused, "ratelimit"), "\"api\";r=0;t=60");
    assert_eq!(header(&refused, "rate-limiting-state"), "Deny");
    assert_eq!(header(&refused, "content-type"), "application/problem+json");
    assert_eq!(header(&refused, "x-request-id"), "req-9");
    assert!(refused.text().await.unwrap().contains("quota-exceeded"));
    // The same refusal at /auth_request: 403, its status beside it, no body for nginx to drop.
    let nginx_shape = get(
        "127.0.0.1",
        &serve.url("/auth_request"),
        &[
            ("x-original-uri", "/api/orders"),
            ("x-forwarded-for", "203.0.113.5"),
        ],
    )
    .await;
    assert_eq!(nginx_shape.status(), 403);
    assert_eq!(header(&nginx_shape, "rejection-status"), "429");
    assert_eq!(header(&nginx_shape, "retry-after"), "60");
    assert_eq!(header(&nginx_shape, "ratelimit"), "\"api\";r=0;t=60");
    assert_eq!(nginx_shape.text().await.unwrap(), "");
    // Another client, and a path of no route (admitted without headers), at both endpoints.
    let other = get("127.0.0.1", &url, &asked("/api/orders", "203.0.113.6")).await;
    assert_eq!(other.status(), 200);
    let unlimited = get("127.0.0.1", &url, &asked("/static/app.js", "203.0.113.5")).await;
    assert_eq!(unlimited.status(), 200);
    assert_eq!(header(&unlimited, "ratelimit"), "-");
    let unlimited = get(
        "127.0.0.1",
        &serve.url("/auth_request"),
        &[
            ("x-original-uri", "/static/app.js"),
            ("x-forwarded-for", "203.0.113.5"),
        ],
    )
    .await;
    assert_eq!(unlimited.status(), 204);
}

/// A route's `plans` with its `plan_header`, read from the request's headers the gateway passes
/// on; a route in shadow mode decides and counts but admits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_and_shadow_mode_decide_as_in_the_proxy() {
    let serve = Serve::start(
        r#"
        [serve]
        listen = "127.0.0.1:0"
        access_log = "off"

        [policies.free]
        rules = [{ name = "free", algorithm = "fixed_window", limit = 1, period = "1min" }]

        [policies.pro]
        rules = [{ name = "pro", algorithm = "fixed_window", limit = 3, period = "1min" }]

        [routes.api]
        paths = ["/api/"]
        policy = "free"
        plans = { pro = "pro" }
        plan_header = "x-plan"
        key = { header = "x-api-key" }

        [routes.beta]
        paths = ["/beta/"]
        policy = "free"
        key = { header = "x-api-key" }
        shadow = true
        "#,
    );
    let url = serve.url("/forward_auth");
    let ask = |uri: &'static str, key: &'static str, plan: Option<&'static str>| {
        let mut headers = vec![("x-forwarded-uri", uri), ("x-api-key", key)];
        headers.extend(plan.map(|plan| ("x-plan", plan)));
        let url = url.clone();
        async move { get("127.0.0.1", &url, &headers).await }
    };
    assert_eq!(ask("/api/x", "free-key", None).await.status(), 200);
    assert_eq!(ask("/api/x", "free-key", None).await.status(), 429);
    for remaining in [2, 1, 0] {
        let pro = ask("/api/x", "pro-key", Some("pro")).await;
        assert_eq!(pro.status(), 200);
        assert_eq!(
            header(&pro, "ratelimit"),
            format!("\"pro\";r={remaining};t=60")
        );
    }
    assert_eq!(ask("/api/x", "pro-key", Some("pro")).await.status(), 429);
    // Shadow: counted, never refused, nothing told.
    for _ in 0..3 {
        let shadow = ask("/beta/x", "free-key", None).await;
        assert_eq!(shadow.status(), 200);
    }
    // A request without its key: the route's own 400, at both endpoints.
    let keyless = get("127.0.0.1", &url, &[("x-forwarded-uri", "/api/x")]).await;
    assert_eq!(keyless.status(), 400);
    let keyless = get(
        "127.0.0.1",
        &serve.url("/auth_request"),
        &[("x-original-uri", "/api/x")],
    )
    .await;
    assert_eq!(keyless.status(), 403);
    assert_eq!(header(&keyless, "rejection-status"), "400");
}
