//! Per-route configuration in one axum 0.8 router (`Router::layer`, `Router::route_layer`,
//! `MethodRouter::layer`, `tower::ServiceBuilder`), nested limits, and services that share a
//! limit through clones.

use std::convert::Infallible;

use crate::support::{RedisServer, get as send, header};
use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Method, Request, Response};
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
use tower_redis_ratelimit::key::{ClientIp, GlobalKey, HeaderKey, KeyExtractor};
use tower_redis_ratelimit::{MemoryStore, Quota, RateLimitLayer, RedisStore, Rule, Store};

const PEER: &str = "203.0.113.5:1000";

fn limit(name: &str, per_hour: u32, key: impl KeyExtractor) -> RateLimitLayer {
    RateLimitLayer::builder()
        .rule(Rule::fixed_window(name, Quota::per_hour(per_hour)))
        .key(key)
        .build()
        .unwrap()
}

async fn ok() -> &'static str {
    "ok"
}

/// One router, four ways to attach a limit:
/// - `/a`: `MethodRouter::layer`, 2 per hour per API key;
/// - `/b`: `Router::route_layer` on a merged router, 3 per hour per client address;
/// - `/c`: a `ServiceBuilder` on a `MethodRouter` with GET and POST, 1 per hour for everyone;
/// - `/open`: no route limit;
/// - everything, unmatched paths included: `Router::layer`, `site_limit` per client address.
fn app(site_limit: u32) -> Router {
    let b = Router::new()
        .route("/b", get(ok))
        .route_layer(limit("route-b", 3, ClientIp::peer()));
    Router::new()
        .route(
            "/a",
            get(ok).layer(limit("route-a", 2, HeaderKey::new("x-api-key"))),
        )
        .route(
            "/c",
            get(ok).post(ok).layer(ServiceBuilder::new().layer(limit(
                "route-c",
                1,
                GlobalKey::new("c"),
            ))),
        )
        .route("/open", get(ok))
        .merge(b)
        .layer(limit("site", site_limit, ClientIp::peer()))
}

async fn status(app: &Router, uri: &str, peer: &str, headers: &[(&str, &str)]) -> u16 {
    send(app, uri, peer, headers).await.status().as_u16()
}

fn lines(response: &Response<Body>, name: &str) -> Vec<String> {
    response
        .headers()
        .get_all(name)
        .iter()
        .map(|value| value.to_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn each_route_has_its_own_key_and_quota() {
    let app = app(1000);
    let k1 = [("x-api-key", "k1")];
    // /a: 2 per API key.
    assert_eq!(status(&app, "/a", PEER, &k1).await, 200);
    assert_eq!(status(&app, "/a", "198.51.100.1:1", &k1).await, 200);
    assert_eq!(status(&app, "/a", PEER, &k1).await, 429);
    assert_eq!(status(&app, "/a", PEER, &[("x-api-key", "k2")]).await, 200);
    assert_eq!(status(&app, "/a", PEER, &[]).await, 400, "/a needs its key");
    // /b: 3 per address, untouched by what /a counted for the same client.
    for _ in 0..3 {
        assert_eq!(status(&app, "/b", PEER, &k1).await, 200);
    }
    assert_eq!(status(&app, "/b", PEER, &k1).await, 429);
    assert_eq!(status(&app, "/b", "198.51.100.1:1", &[]).await, 200);
    // /c: 1 for everyone, whatever the method.
    assert_eq!(status(&app, "/c", PEER, &[]).await, 200);
    let post = Request::builder()
        .method(Method::POST)
        .uri("/c")
        .extension(axum::extract::ConnectInfo(
            "198.51.100.1:1".parse::<std::net::SocketAddr>().unwrap(),
        ))
        .body(Body::empty())
        .unwrap();
    assert_eq!(app.clone().oneshot(post).await.unwrap().status(), 429);
    assert_eq!(status(&app, "/c", "198.51.100.2:1", &[]).await, 429);
    // /a is still exhausted for k1 and /b for PEER: limits are independent, not reset by others.
    assert_eq!(status(&app, "/a", PEER, &k1).await, 429);
    assert_eq!(status(&app, "/b", PEER, &[]).await, 429);
    // No route limit on /open.
    for _ in 0..10 {
        assert_eq!(status(&app, "/open", PEER, &[]).await, 200);
    }
}

#[tokio::test]
async fn router_wide_and_route_limits_both_apply() {
    // The site admits 4 requests per address.
    let app = app(4);
    let k1 = [("x-api-key", "k1")];

    // Both limits report, as two lines of each IETF list: the route's (inner) first.
    let response = send(&app, "/a", PEER, &k1).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        lines(&response, "ratelimit-policy"),
        [r#""route-a";q=2;w=3600"#, r#""site";q=4;w=3600"#]
    );
    assert_eq!(
        lines(&response, "ratelimit"),
        [r#""route-a";r=1;t=3600"#, r#""site";r=3;t=3600"#]
    );
    assert_eq!(status(&app, "/a", PEER, &k1).await, 200);

    // The route limit refuses: a 429 with the route's own answer, and the site's lines too (the
    // site layer, outside, had admitted and counted the request).
    let response = send(&app, "/a", PEER, &k1).await;
    assert_eq!(response.status(), 429);
    assert_eq!(
        lines(&response, "ratelimit"),
        [r#""route-a";r=0;t=3600"#, r#""site";r=1;t=3600"#]
    );
    assert_eq!(lines(&response, "retry-after"), ["3600"]);
    // The single-valued headers are the inner layer's: the site's "Allow" must not hide the
    // route's "Deny" on a 429.
    assert_eq!(lines(&response, "rate-limiting-state"), ["Deny"]);
    assert_eq!(lines(&response, "rate-limiting-total-requests"), ["2"]);
    assert_eq!(
        lines(&response, "content-type"),
        ["application/problem+json"]
    );
    let body = crate::support::text(response).await;
    assert!(body.contains(r#""policy":"route-a""#), "{body}");

    // No API key: the route answers 400 and names its policy, with no decision to report; the
    // site, outside, admitted and counted the request and adds its own lines.
    let response = send(&app, "/a", PEER, &[]).await;
    assert_eq!(response.status(), 400);
    assert_eq!(
        lines(&response, "ratelimit-policy"),
        [r#""route-a";q=2;w=3600"#, r#""site";q=4;w=3600"#]
    );
    assert_eq!(lines(&response, "ratelimit"), [r#""site";r=0;t=3600"#]);
    assert_eq!(lines(&response, "retry-after"), Vec::<String>::new());

    // The site limit is spent: every route refuses, even /b whose own limit is untouched. The
    // site refuses before the route layer runs, so only the site reports.
    for uri in ["/open", "/b", "/c"] {
        let response = send(&app, uri, PEER, &k1).await;
        assert_eq!(response.status(), 429, "{uri}");
        assert_eq!(
            lines(&response, "ratelimit"),
            [r#""site";r=0;t=3600"#],
            "{uri}"
        );
        assert_eq!(header(&response, "rate-limiting-state"), "Deny");
    }
    // Another address still has both.
    assert_eq!(status(&app, "/b", "198.51.100.1:1", &[]).await, 200);
}

#[tokio::test]
async fn route_layer_does_not_limit_unmatched_paths_but_router_layer_does() {
    let app = app(2);
    // An unknown path: 404, counted by the router-wide layer only.
    let response = send(&app, "/nope", PEER, &[]).await;
    assert_eq!(response.status(), 404);
    assert_eq!(
        lines(&response, "ratelimit-policy"),
        [r#""site";q=2;w=3600"#]
    );
    assert_eq!(status(&app, "/nope", PEER, &[]).await, 404);
    assert_eq!(status(&app, "/nope", PEER, &[]).await, 429);
    // /b's route layer never ran for them: its limit is whole for another address.
    for _ in 0..2 {
        let response = send(&app, "/b", "198.51.100.1:1", &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            lines(&response, "ratelimit-policy"),
            [r#""route-b";q=3;w=3600"#, r#""site";q=2;w=3600"#]
        );
    }
}

#[tokio::test]
async fn one_layer_on_two_routes_is_one_limit() {
    let shared = limit("shared", 3, ClientIp::peer());
    let app = Router::new()
        .route("/x", get(ok).layer(shared.clone()))
        .route("/y", get(ok).layer(shared));
    let mut statuses = Vec::new();
    for uri in ["/x", "/y", "/x", "/y", "/x"] {
        statuses.push(status(&app, uri, PEER, &[]).await);
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
}

#[tokio::test]
async fn service_builder_stacks_two_limits_on_one_route() {
    let app = Router::new().route(
        "/",
        get(ok).layer(
            ServiceBuilder::new()
                .layer(limit("per-client", 2, ClientIp::peer()))
                .layer(limit("per-key", 3, HeaderKey::new("x-api-key"))),
        ),
    );
    let response = send(&app, "/", PEER, &[("x-api-key", "k1")]).await;
    assert_eq!(response.status(), 200);
    // ServiceBuilder's first layer is the outermost: it stamps last.
    assert_eq!(
        lines(&response, "ratelimit"),
        [r#""per-key";r=2;t=3600"#, r#""per-client";r=1;t=3600"#]
    );
    assert_eq!(status(&app, "/", PEER, &[("x-api-key", "k1")]).await, 200);
    // The client address is spent; the key is not.
    assert_eq!(status(&app, "/", PEER, &[("x-api-key", "k1")]).await, 429);
    assert_eq!(
        status(&app, "/", "198.51.100.1:1", &[("x-api-key", "k1")]).await,
        200
    );
    // Now the key is spent too (3 admitted by the key layer).
    assert_eq!(
        status(&app, "/", "198.51.100.2:1", &[("x-api-key", "k1")]).await,
        429
    );
}

// ---------------------------------------------------------------------------------------------
// Clones of one `RateLimit<S>` share its limit, on a synchronous store (memory) and on one that
// awaits I/O (Redis, where the call moves the ready inner service into the future).

async fn clones_share_the_limit(store: impl Store) {
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("clones", Quota::per_hour(3)))
        .key(GlobalKey::new("all"))
        .store(store)
        .deadline(std::time::Duration::from_secs(5))
        .build()
        .unwrap();
    let service =
        ServiceBuilder::new()
            .layer(layer)
            .service(service_fn(|_: Request<Body>| async {
                Ok::<_, Infallible>(Response::new(Body::from("ok")))
            }));
    let mut first = service.clone();
    let second = service.clone();
    let mut statuses = Vec::new();
    // Through `ready` + `call` on one clone, twice...
    for _ in 0..2 {
        let response = first
            .ready()
            .await
            .unwrap()
            .call(Request::new(Body::empty()))
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
    }
    // ...through `oneshot` on another clone and on the original.
    statuses.push(
        second
            .clone()
            .oneshot(Request::new(Body::empty()))
            .await
            .unwrap()
            .status()
            .as_u16(),
    );
    statuses.push(
        service
            .clone()
            .oneshot(Request::new(Body::empty()))
            .await
            .unwrap()
            .status()
            .as_u16(),
    );
    statuses.push(
        first
            .oneshot(Request::new(Body::empty()))
            .await
            .unwrap()
            .status()
            .as_u16(),
    );
    assert_eq!(statuses, [200, 200, 200, 429, 429]);
    // Even a clone made after the limit was spent.
    let late = service.clone();
    let response = late.oneshot(Request::new(Body::empty())).await.unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(header(&response, "rate-limiting-total-requests"), "3");
    let response = service.oneshot(Request::new(Body::empty())).await.unwrap();
    assert_eq!(response.status(), 429);
}

#[tokio::test]
async fn clones_of_a_service_share_a_memory_limit() {
    clones_share_the_limit(MemoryStore::new()).await;
}

#[tokio::test]
async fn clones_of_a_service_share_a_redis_limit() {
    let redis = RedisServer::start();
    clones_share_the_limit(RedisStore::open(&redis.url()).unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clones_admit_exactly_the_limit() {
    let layer = RateLimitLayer::builder()
        .rule(Rule::fixed_window("clones", Quota::per_hour(25)))
        .key(GlobalKey::new("all"))
        .build()
        .unwrap();
    let service =
        ServiceBuilder::new()
            .layer(layer)
            .service(service_fn(|_: Request<Body>| async {
                Ok::<_, Infallible>(Response::new(Body::from("ok")))
            }));
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let service = service.clone();
            tokio::spawn(async move {
                service
                    .oneshot(Request::new(Body::empty()))
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        if task.await.unwrap() == 200 {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 25);
}
