//! Routes whose paths overlap stack in `serve` as in `proxy`: a shadow route rolled out for
//! `/api/search` is decided beside the enforced `/api/` limit, never instead of it; and
//! `check` prints every route a path meets.

use std::process::Command;

use crate::support::{BINARY, Serve, get, header};

const OVERLAPPING: &str = r#"
    [serve]
    listen = "127.0.0.1:0"
    access_log = "off"

    [policies.api]
    rules = [{ name = "api", algorithm = "fixed_window", limit = 2, period = "1min" }]
    [policies.search]
    rules = [{ name = "search", algorithm = "gcra", limit = 10, period = "1min" }]

    [routes.api]
    paths = ["/api/"]
    policy = "api"
    key = { header = "x-api-key" }

    [routes.search]               # the new limit, rolled out in shadow mode
    paths = ["/api/search"]
    policy = "search"
    key = { header = "x-api-key" }
    shadow = true
"#;

/// docs/rollout.md's shadow route, given paths in the gateway: a key over its `/api/` quota is
/// refused on `/api/search` as everywhere under `/api/`, at both endpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_route_never_lifts_the_enforced_limit_of_its_paths() {
    let serve = Serve::start(OVERLAPPING);
    let ask = |uri: &'static str| {
        let url = serve.url("/forward_auth");
        async move {
            get(
                "127.0.0.1",
                &url,
                &[("x-forwarded-uri", uri), ("x-api-key", "k1")],
            )
            .await
        }
    };
    assert_eq!(ask("/api/search?q=1").await.status(), 200);
    assert_eq!(ask("/api/x").await.status(), 200);
    let refused = ask("/api/search?q=2").await;
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "ratelimit"), "\"api\";r=0;t=60");
    let refused = get(
        "127.0.0.1",
        &serve.url("/auth_request"),
        &[("x-original-uri", "/api/search"), ("x-api-key", "k1")],
    )
    .await;
    assert_eq!(refused.status(), 403);
    assert_eq!(header(&refused, "rejection-status"), "429");
}

/// `check` lists, for each path prefix, every route a request under it meets, in order.
#[test]
fn check_prints_every_route_a_path_meets() {
    let serve_file = testkit::TempDir::new("check-routes").unwrap();
    let path = serve_file.path().join("serve.toml");
    std::fs::write(&path, OVERLAPPING).unwrap();
    let output = Command::new(BINARY)
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(output.status.success(), "{stdout}");
    // Each rule and route in the file's words, a route's shadow mode and whose switch turns it
    // included.
    for line in [
        "  api: api: fixed_window, limit 2 per 1m",
        "  search: search: gcra, limit 10 per 1m",
        "  search: paths [\"/api/search\"], policy search, key header x-api-key, shadow (its own switch)",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no {line:?} in:\n{stdout}"
        );
    }
    let paths = stdout
        .split_once("paths (a request meets every route of its path, in this order):\n")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no paths in:\n{stdout}"));
    assert_eq!(paths, "  /api/search: search, api\n  /api/: api\n");
}
