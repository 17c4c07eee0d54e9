//! A real Envoy, configured as gateway/docs/envoy.md says, asking `serve` (a process) over the page's
//! rules: what a client of Envoy sees. Limits and their headers, 429s, a client that forges
//! its address, paths that name `/api/` in other words, many requests at once, and the Unix
//! socket variant.

use std::time::{Duration, SystemTime};

use testkit::RedisServer;

use crate::front::{Front, Setup};
use crate::web::{client_from, get, header, raw_get};

/// The page's limits, as its rules file names them.
const POLICY_API: &str = "\"per_client\";q=50;w=60, \"api\";q=20;w=60";
const POLICY_OTHER: &str = "\"per_client\";q=50;w=60";

/// A response's `RateLimit` without its `t=`: the limit that decided and what is left of it
/// (`t=` counts down with the clock).
fn left(response: &reqwest::Response) -> String {
    until_t(&header(response, "ratelimit"))
}

/// A `RateLimit` value without its `t=`.
fn until_t(value: &str) -> String {
    value.split(";t=").next().unwrap().to_owned()
}

/// The `t=` of a response's `RateLimit`: seconds until the quota is back.
fn reset(response: &reqwest::Response) -> u64 {
    let value = header(response, "ratelimit");
    let (_, t) = value
        .split_once(";t=")
        .unwrap_or_else(|| panic!("RateLimit {value:?}"));
    t.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoys_clients_get_the_limits_headers_and_429s() {
    let redis = RedisServer::start();
    let front = Front::start(&redis, Setup::DOCUMENTED).await;
    let first = get("127.0.0.2", &front.url("/api/x?page=1"), &[]).await;
    assert_eq!(first.status(), 200, "{}", front.log());
    assert_eq!(header(&first, "ratelimit-policy"), POLICY_API);
    assert_eq!(header(&first, "ratelimit"), "\"api\";r=19;t=60");
    assert_eq!(header(&first, "rate-limiting-total-requests"), "1");
    assert_eq!(header(&first, "rate-limiting-state"), "Allow");
    let expires = humantime::parse_rfc3339(&header(&first, "rate-limiting-expires-at")).unwrap();
    let now = SystemTime::now();
    assert!(
        expires > now && expires <= now + Duration::from_secs(61),
        "{expires:?}"
    );
    assert_eq!(header(&first, "retry-after"), "-");
    // The service answered, to the request as the client sent it.
    assert_eq!(first.text().await.unwrap(), "path /api/x?page=1");
    for remaining in (0..19).rev() {
        let response = get("127.0.0.2", &front.url("/api/x"), &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(left(&response), format!("\"api\";r={remaining}"));
        assert_eq!(
            header(&response, "rate-limiting-total-requests"),
            (20 - remaining).to_string()
        );
    }
    let refused = get("127.0.0.2", &front.url("/api/x"), &[]).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(left(&refused), "\"api\";r=0");
    assert!((1..=60).contains(&reset(&refused)), "{refused:?}");
    assert_eq!(header(&refused, "retry-after"), reset(&refused).to_string());
    assert_eq!(header(&refused, "ratelimit-policy"), POLICY_API);
    assert_eq!(header(&refused, "rate-limiting-state"), "Deny");
    // Envoy answered it: the service saw no request.
    assert_eq!(header(&refused, "x-envoy-ratelimited"), "true");
    // Outside /api/ only the client's own limit: 20 spent of its 50 (the refusal counted
    // nothing), and the headers name it alone.
    let elsewhere = get("127.0.0.2", &front.url("/x"), &[]).await;
    assert_eq!(elsewhere.status(), 200);
    assert_eq!(left(&elsewhere), "\"per_client\";r=29");
    assert_eq!(header(&elsewhere, "ratelimit-policy"), POLICY_OTHER);
}

/// Envoy keys a client by the address of its connection (`use_remote_address: true`): what the
/// client writes about itself is not read, neither to spend another client's quota nor to get
/// a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_client_address_spends_no_other_quota_and_escapes_none() {
    let redis = RedisServer::start();
    let front = Front::start(&redis, Setup::DOCUMENTED).await;
    let url = front.url("/x");
    let naming_the_other = [
        ("x-forwarded-for", "127.0.0.3"),
        ("forwarded", "for=127.0.0.3"),
        ("x-real-ip", "127.0.0.3"),
    ];
    for (spent, forged) in naming_the_other.iter().enumerate() {
        let response = get("127.0.0.2", &url, &[*forged]).await;
        assert_eq!(response.status(), 200, "{}", front.log());
        assert_eq!(
            left(&response),
            format!("\"per_client\";r={}", 49 - spent),
            "{forged:?}"
        );
    }
    // The client they named has its whole quota.
    let other = get("127.0.0.3", &url, &[]).await;
    assert_eq!(left(&other), "\"per_client\";r=49");
    // A new address with every request is still the same client.
    for remaining in (0..47).rev() {
        let fresh = format!("198.51.100.{remaining}");
        let response = get("127.0.0.2", &url, &[("x-forwarded-for", &fresh)]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(left(&response), format!("\"per_client\";r={remaining}"));
    }
    let escapes = [
        ("x-forwarded-for", "198.51.100.200"),
        ("x-forwarded-for", "127.0.0.3"),
        ("forwarded", "for=198.51.100.200"),
        ("x-real-ip", "198.51.100.200"),
    ];
    for forged in escapes {
        let response = get("127.0.0.2", &url, &[forged]).await;
        assert_eq!(response.status(), 429, "{forged:?}");
        assert_eq!(left(&response), "\"per_client\";r=0");
    }
    let other = get("127.0.0.3", &url, &[]).await;
    assert_eq!(left(&other), "\"per_client\";r=48");
}

/// Envoy normalises the path before it matches (`normalize_path`, `merge_slashes`): each
/// variant is served as `/api/x` and counted against the `/api/` limit, before and after it is
/// spent; an encoded `/` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_that_name_api_in_other_words_count_against_it() {
    let redis = RedisServer::start();
    let front = Front::start(&redis, Setup::DOCUMENTED).await;
    let variants = ["/%61pi/x", "//api/x", "/./api/x", "/static/../api/x"];
    // Sent as written (reqwest would resolve `/./` and `/../` itself).
    for (spent, variant) in variants.iter().enumerate() {
        let response = raw_get("127.0.0.2", front.addr, variant, &[]).await;
        assert_eq!(response.status, 200, "{variant}: {}", front.log());
        assert_eq!(
            until_t(&response.header("ratelimit")),
            format!("\"api\";r={}", 19 - spent),
            "{variant}"
        );
        assert_eq!(response.body, "path /api/x", "{variant}");
    }
    let encoded = raw_get("127.0.0.2", front.addr, "/api%2Fx", &[]).await;
    assert_eq!(encoded.status, 400);
    for remaining in (0..16).rev() {
        let response = get("127.0.0.2", &front.url("/api/x"), &[]).await;
        assert_eq!(left(&response), format!("\"api\";r={remaining}"));
    }
    for variant in variants {
        for client in ["127.0.0.2", "127.0.0.3"] {
            let response = raw_get(client, front.addr, variant, &[]).await;
            assert_eq!(response.status, 429, "{variant} from {client}");
            let left = until_t(&response.header("ratelimit"));
            assert_eq!(left, "\"api\";r=0", "{variant} from {client}");
        }
    }
    // The encoded `/` was refused before it was counted: the client's own limit saw the 20
    // admitted requests only.
    let elsewhere = get("127.0.0.2", &front.url("/x"), &[]).await;
    assert_eq!(left(&elsewhere), "\"per_client\";r=29");
}

/// 200 requests of one client at once, against its 50: exactly 50 pass, each told a different
/// remaining; every refusal is the limit's (none is a failure mode's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_requests_at_once_against_fifty_admit_fifty() {
    let redis = RedisServer::start();
    // The count is under test here, not the time. On two cores shared with the rest of the
    // suite, a burst of 200 through Envoy and a debug build of `serve` has kept decisions
    // waiting past the page's 100 ms, and the page's `failure_mode = "open"` then admitted
    // them unlimited, as it should: a deadline and a timeout far away keep that out.
    let patient = Setup {
        deadline: Some("5s"),
        envoy_timeout: Some("10s"),
        ..Setup::DOCUMENTED
    };
    let front = Front::start(&redis, patient).await;
    let client = client_from("127.0.0.2");
    let url = front.url("/x");
    let requests = (0..200).map(|_| {
        let client = client.clone();
        let url = url.clone();
        tokio::spawn(async move { client.get(url).send().await.unwrap() })
    });
    let mut remaining = Vec::new();
    let mut refused = 0;
    for response in futures_util::future::join_all(requests).await {
        let response = response.unwrap();
        let told = left(&response);
        match response.status().as_u16() {
            200 => remaining.push(
                told.strip_prefix("\"per_client\";r=")
                    .unwrap_or_else(|| panic!("{response:?}\n{}", front.log()))
                    .parse::<u32>()
                    .unwrap(),
            ),
            429 => {
                assert_eq!(told, "\"per_client\";r=0");
                refused += 1;
            }
            other => panic!("{other}: {response:?}"),
        }
    }
    remaining.sort_unstable();
    assert_eq!(remaining, (0..50).collect::<Vec<u32>>());
    assert_eq!(refused, 150);
}

/// The page's Unix socket cluster: Envoy asks `serve` over the pipe, and the limits hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_the_unix_socket_the_limits_hold() {
    let redis = RedisServer::start();
    let setup = Setup {
        unix: true,
        ..Setup::DOCUMENTED
    };
    let front = Front::start(&redis, setup).await;
    let url = front.url("/api/x");
    let first = get("127.0.0.2", &url, &[]).await;
    assert_eq!(first.status(), 200, "{}", front.log());
    assert_eq!(header(&first, "ratelimit"), "\"api\";r=19;t=60");
    for remaining in (0..19).rev() {
        let response = get("127.0.0.3", &url, &[]).await;
        assert_eq!(left(&response), format!("\"api\";r={remaining}"));
    }
    let refused = get("127.0.0.4", &url, &[]).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(left(&refused), "\"api\";r=0");
}
