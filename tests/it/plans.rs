//! Plans and exemptions: the policy chosen per request by the customer's plan (with a default),
//! allow and deny lists of keys and networks, from code and from a configuration file.

use axum::Router;
use axum::routing::get;
use http::{HeaderMap, StatusCode};
use tower_redis_ratelimit::config::LimitsConfig;
use tower_redis_ratelimit::key::{ClientIp, Exemptions, ForwardedHeader, HeaderKey};
use tower_redis_ratelimit::rate::Plan;
use tower_redis_ratelimit::{Policy, Quota, RateLimitLayer, Rule};

use crate::support::logs::Logs;
use crate::support::{header, timed_get};

/// An axum middleware standing in for authentication: the `x-plan` header becomes the
/// request's [`Plan`].
async fn authenticate(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let plan = request
        .headers()
        .get("x-plan")
        .and_then(|value| value.to_str().ok())
        .map(Plan::new);
    if let Some(plan) = plan {
        request.extensions_mut().insert(plan);
    }
    next.run(request).await
}

fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer)
        .layer(axum::middleware::from_fn(authenticate))
}

/// How many of `n` requests pass, as `client` of `plan`, from `peer`; and the last headers.
async fn passed(
    app: &Router,
    peer: &str,
    client: &str,
    plan: Option<&str>,
    n: usize,
) -> (usize, HeaderMap) {
    let mut headers = vec![("x-client", client)];
    if let Some(plan) = plan {
        headers.push(("x-plan", plan));
    }
    let (mut passed, mut last) = (0, HeaderMap::new());
    for _ in 0..n {
        let (response, _) = timed_get(app, "/", peer, &headers).await;
        if response.status() == StatusCode::OK {
            passed += 1;
        }
        last = response.headers().clone();
    }
    (passed, last)
}

#[tokio::test]
async fn each_plan_gets_its_own_quota_and_no_plan_gets_the_default() {
    let pro = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(5))).unwrap();
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(2)))
        .plan("pro", &pro)
        .key(HeaderKey::new("x-client"))
        .build()
        .unwrap();
    let app = app(layer);
    let peer = "203.0.113.7:4000";
    let (free, headers) = passed(&app, peer, "a", None, 8).await;
    assert_eq!(free, 2);
    assert_eq!(headers["ratelimit-policy"], r#""api";q=2;w=60"#);
    let (pro, headers) = passed(&app, peer, "b", Some("pro"), 8).await;
    assert_eq!(pro, 5);
    assert_eq!(headers["ratelimit-policy"], r#""api";q=5;w=60"#);
    // A plan the layer lacks is the default, and not silently: it is logged (and counted, see
    // `metrics`).
    let (log, _guard) = Logs::capture();
    assert_eq!(passed(&app, peer, "c", Some("gold"), 8).await.0, 2);
    let warned = log.lines_with("a request's plan is none of this limit's plans");
    assert_eq!(warned.len(), 1, "at most one line a second: {}", log.text());
    assert!(
        warned[0].contains(r#"plan="gold" plans=["pro"]"#),
        "{}",
        warned[0]
    );
}

#[tokio::test]
async fn allowed_keys_and_networks_pass_unchecked_and_denied_ones_are_refused() {
    let exemptions = Exemptions::new()
        .allow_networks(["10.0.0.0/8"])
        .deny_key("192.0.2.66")
        .deny_networks(["198.51.100.0/24"]);
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(1)))
        .key(ClientIp::peer())
        .exemptions(exemptions)
        .build()
        .unwrap();
    let app = app(layer);
    let (internal, headers) = passed(&app, "10.1.2.3:5000", "-", None, 5).await;
    assert_eq!(internal, 5);
    assert_eq!(
        header_of(&headers, "ratelimit"),
        "",
        "an allowed key is not checked"
    );
    assert_eq!(passed(&app, "203.0.113.9:5000", "-", None, 5).await.0, 1);
    for peer in ["192.0.2.66:5000", "198.51.100.4:5000"] {
        let (response, _) = timed_get(&app, "/", peer, &[]).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{peer}");
        assert_eq!(
            header(&response, "content-type"),
            "application/problem+json"
        );
    }
}

/// Networks match the client's address on a layer keyed by API key: the peer, or behind trusted
/// proxies the address they forwarded, never an address the client wrote itself.
#[tokio::test]
async fn networks_match_the_client_address_whatever_the_key() {
    let behind = ClientIp::behind_proxies(ForwardedHeader::XForwardedFor, ["10.0.0.0/8"]).unwrap();
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(1)))
        .key(HeaderKey::new("x-client"))
        .exemptions(
            Exemptions::new()
                .allow_networks(["192.168.0.0/16"])
                .deny_networks(["198.51.100.0/24"])
                .client_ip(behind),
        )
        .build()
        .unwrap();
    let app = app(layer);
    let status = |forwarded: &'static str, peer: &'static str| {
        let app = app.clone();
        async move {
            let headers = [("x-client", "k1"), ("x-forwarded-for", forwarded)];
            timed_get(&app, "/", peer, &headers)
                .await
                .0
                .status()
                .as_u16()
        }
    };
    // Through the load balancer at 10.0.0.5: an internal client passes unchecked, every time.
    for _ in 0..3 {
        assert_eq!(status("192.168.4.4", "10.0.0.5:443").await, 200);
    }
    // A denied network is refused whatever its key.
    assert_eq!(status("198.51.100.7", "10.0.0.5:443").await, 403);
    // Anyone else is limited by the key (1 a minute for k1): the forwarded address a client
    // wrote itself, left of what the balancer added, is never read.
    assert_eq!(
        status("192.168.4.4, 203.0.113.9", "10.0.0.5:443").await,
        200
    );
    assert_eq!(
        status("192.168.4.4, 203.0.113.9", "10.0.0.5:443").await,
        429
    );
    // Without a trusted proxy in between, the peer is the client.
    assert_eq!(status("192.168.4.4", "203.0.113.9:443").await, 429);

    // A layer keyed by API key cannot guess where client addresses come from.
    let error = RateLimitLayer::builder()
        .rule(Rule::fixed_window("api", Quota::per_minute(1)))
        .key(HeaderKey::new("x-client"))
        .exemptions(Exemptions::new().allow_networks(["10.0.0.0/8"]))
        .build()
        .unwrap_err();
    assert!(
        error.to_string().contains("Exemptions::client_ip"),
        "{error}"
    );
}

fn header_of(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn plans_and_lists_come_from_a_configuration_file() {
    let limits: LimitsConfig = toml::from_str(
        r#"
        [policies.free]
        rules = [{ name = "api", algorithm = "fixed_window", limit = 1, period = "1min" }]
        [policies.pro]
        rules = [{ name = "api", algorithm = "fixed_window", limit = 3, period = "1min" }]
        [routes.api]
        policy = "free"
        plans = { pro = "pro" }
        key = { header = "x-client" }
        allow = { keys = ["internal"] }
        deny = { keys = ["banned"] }
        "#,
    )
    .unwrap();
    let limits = limits.build().unwrap();
    let app = app(limits.layer("api").unwrap().clone());
    let peer = "203.0.113.7:4000";
    assert_eq!(passed(&app, peer, "a", None, 4).await.0, 1);
    assert_eq!(passed(&app, peer, "b", Some("pro"), 4).await.0, 3);
    assert_eq!(passed(&app, peer, "internal", None, 4).await.0, 4);
    assert_eq!(passed(&app, peer, "banned", None, 4).await.0, 0);

    let unknown: LimitsConfig = toml::from_str(
        r#"
        [policies.free]
        rules = [{ name = "api", algorithm = "fixed_window", limit = 1, period = "1min" }]
        [routes.api]
        policy = "free"
        plans = { pro = "nope" }
        key = { header = "x-client" }
        "#,
    )
    .unwrap();
    assert_eq!(
        unknown.build().unwrap_err().to_string(),
        r#"`routes.api.plans.pro`: no policy named "nope" (there are "free")"#
    );
}

/// From a file: networks on a route keyed by API key match the client's address as the route's
/// `client_ip` finds it; without `client_ip`, the file is refused with the field named.
#[tokio::test]
async fn a_files_networks_match_the_client_address_or_the_file_is_refused() {
    let file = |key: &str, client_ip: &str| {
        toml::from_str::<LimitsConfig>(&format!(
            r#"
            [policies.free]
            rules = [{{ name = "api", algorithm = "fixed_window", limit = 1, period = "1min" }}]
            [routes.api]
            policy = "free"
            key = {key}
            allow = {{ keys = ["internal"] }}
            deny = {{ networks = ["198.51.100.0/24"] }}
            {client_ip}
            "#
        ))
        .unwrap()
    };
    let by_api_key = r#"{ header = "x-client" }"#;
    let limits = file(by_api_key, "client_ip = {}").build().unwrap();
    let keyed = app(limits.layer("api").unwrap().clone());
    assert_eq!(passed(&keyed, "198.51.100.7:1", "a", None, 2).await.0, 0);
    assert_eq!(passed(&keyed, "203.0.113.7:1", "a", None, 2).await.0, 1);

    assert_eq!(
        file(by_api_key, "").build().unwrap_err().to_string(),
        "`routes.api.deny.networks`: allow and deny networks match the client's address, which \
         this key does not read: say how to find it with `Exemptions::client_ip` (in a \
         configuration file, the route's `client_ip`): the TCP peer, or the address your trusted \
         proxies forward"
    );
    // A key that falls back to the client address finds it with that fallback.
    let limits = file(r#"{ header = "x-client", or = { client_ip = {} } }"#, "")
        .build()
        .unwrap();
    let falling_back = app(limits.layer("api").unwrap().clone());
    assert_eq!(
        passed(&falling_back, "198.51.100.7:1", "a", None, 2)
            .await
            .0,
        0
    );

    // `client_ip` with no network to use it is a mistake too.
    let unused: LimitsConfig = toml::from_str(
        r#"
        [policies.free]
        rules = [{ name = "api", algorithm = "fixed_window", limit = 1, period = "1min" }]
        [routes.api]
        policy = "free"
        key = { header = "x-client" }
        client_ip = {}
        "#,
    )
    .unwrap();
    assert_eq!(
        unused.build().unwrap_err().to_string(),
        "`routes.api.client_ip`: is set, but the route lists no allow or deny network that would \
         use it: remove it"
    );
}

/// A file's route with `plan_header` finds each request's plan in that header, with no
/// authentication layer to put a `Plan` into its extensions (as the gateway binary runs it); the
/// header without plans, or a name HTTP does not allow, is refused with the field named.
#[tokio::test]
async fn a_files_route_takes_the_plan_from_the_header_it_names() {
    let file = |plans: &str, header: &str| {
        toml::from_str::<LimitsConfig>(&format!(
            r#"
            [policies.free]
            rules = [{{ name = "api", algorithm = "fixed_window", limit = 1, period = "1min" }}]
            [policies.pro]
            rules = [{{ name = "api", algorithm = "fixed_window", limit = 3, period = "1min" }}]
            [routes.api]
            policy = "free"
            key = {{ header = "x-client" }}
            {plans}
            plan_header = "{header}"
            "#
        ))
        .unwrap()
    };
    let limits = file(r#"plans = { pro = "pro" }"#, "x-plan")
        .build()
        .unwrap();
    // No authentication layer: only the header names the plan.
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(limits.layer("api").unwrap().clone());
    let peer = "203.0.113.7:4000";
    assert_eq!(passed(&app, peer, "a", None, 4).await.0, 1);
    assert_eq!(passed(&app, peer, "b", Some("pro"), 4).await.0, 3);
    assert_eq!(passed(&app, peer, "c", Some("gold"), 4).await.0, 1);

    assert_eq!(
        file("", "x-plan").build().unwrap_err().to_string(),
        "`routes.api.plan_header`: chooses a plan, but the route has no `plans`: add them or \
         remove this"
    );
    assert_eq!(
        file(r#"plans = { pro = "pro" }"#, "x plan")
            .build()
            .unwrap_err()
            .to_string(),
        r#"`routes.api.plan_header`: "x plan" is not a valid header name: use letters, digits and '-'"#
    );
}
