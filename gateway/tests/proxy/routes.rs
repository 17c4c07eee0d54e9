//! Routes whose paths overlap stack as nested layers do, the narrowest outermost: a narrower
//! route adds its limit and never lifts a broader one's, a shadow route least of all.

use crate::support::{Proxy, get_with, upstream};

/// `/api/` enforced at 3 a minute, `/api/search` at 1 and `/api/beta` in shadow mode at 1,
/// keyed alike, and a line of the access log per request.
fn overlapping(upstream: std::net::SocketAddr) -> String {
    format!(
        r#"
        [proxy]
        listen = "127.0.0.1:0"
        upstream = "http://{upstream}"
        access_log = "json"

        [policies.api]
        rules = [{{ name = "api", algorithm = "fixed_window", limit = 3, period = "1min" }}]
        [policies.narrow]
        rules = [{{ name = "narrow", algorithm = "fixed_window", limit = 1, period = "1min" }}]

        [routes.api]
        paths = ["/api/"]
        policy = "api"
        key = {{ header = "x-api-key" }}

        [routes.search]
        paths = ["/api/search"]
        policy = "narrow"
        key = {{ header = "x-api-key" }}

        [routes.beta]
        paths = ["/api/beta"]
        policy = "narrow"
        key = {{ header = "x-api-key" }}
        shadow = true
        "#
    )
}

/// A key over its `/api/` quota is refused on `/api/beta` too, though the shadow route of
/// `/api/beta` never refuses: a shadow route is decided beside the enforced limit of its paths,
/// not instead of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_route_never_lifts_the_enforced_limit_of_its_paths() {
    let upstream = upstream().await;
    let (proxy, log) = Proxy::start_with_stdout(&overlapping(upstream));
    let key = [("x-api-key", "k1")];
    // The shadow route counts each (its limit of 1 is passed from the second on) and refuses
    // none; the API's limit counts them too.
    for remaining in [2, 1, 0] {
        let response = get_with(&proxy.url("/api/beta/x"), &key).await;
        assert_eq!(response.status(), 200);
        // A shadow route tells the client nothing: the API's line alone.
        let lines: Vec<_> = response.headers().get_all("ratelimit").iter().collect();
        assert_eq!(lines, [format!("\"api\";r={remaining};t=60").as_str()]);
    }
    let refused = get_with(&proxy.url("/api/beta/x"), &key).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "60");
    // The access log names every route of the path, the narrowest first.
    let lines: Vec<serde_json::Value> = (0..4)
        .map(|_| serde_json::from_str(&log.next_line()).unwrap())
        .collect();
    assert_eq!(lines[0]["route"], "beta,api");
    assert_eq!(lines[0]["decision"], "allowed");
    assert_eq!(lines[3]["route"], "beta,api");
    assert_eq!(lines[3]["decision"], "denied");
}

/// A narrower enforced route adds its limit: a search counts against the search limit and
/// the API's; one the search limit refuses is not charged to the API's quota (the narrowest
/// decides first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_narrower_route_adds_its_limit_to_the_broader_one() {
    let upstream = upstream().await;
    let (proxy, _log) = Proxy::start_with_stdout(&overlapping(upstream));
    let key = [("x-api-key", "k2")];
    let search = get_with(&proxy.url("/api/search?q=1"), &key).await;
    assert_eq!(search.status(), 200);
    // Both routes' lines, in the IETF fields that list every layer's (one field line each,
    // the innermost first).
    let policies: Vec<_> = search
        .headers()
        .get_all("ratelimit-policy")
        .iter()
        .collect();
    assert_eq!(policies, ["\"api\";q=3;w=60", "\"narrow\";q=1;w=60"]);
    for _ in 0..3 {
        let refused = get_with(&proxy.url("/api/search?q=2"), &key).await;
        assert_eq!(refused.status(), 429);
    }
    // The API's quota paid for one search only: two of its three are left.
    for status in [200, 200, 429] {
        assert_eq!(get_with(&proxy.url("/api/x"), &key).await.status(), status);
    }
}
