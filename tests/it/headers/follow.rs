//! A client doing exactly what the IETF headers say, for every algorithm on both stores: it
//! sends at once while `RateLimit` says quota remains, and otherwise waits `t` seconds (or, after
//! a refusal, `Retry-After`, which is never earlier than `t`). It is never refused after such a
//! wait, so never twice in a row. For the buckets, `t` is when the next request's worth drips
//! back (10/4 s here, told as 3), not when the bucket is empty.

use std::time::Duration;

use super::{Env, app, memory, redis, request};
use crate::support::header;
use tower_redis_ratelimit::respond::HeaderFamilies;
use tower_redis_ratelimit::{Quota, Rule};

fn rules() -> Vec<Rule> {
    let quota = Quota::new(4, Duration::from_secs(10)).with_burst(4);
    vec![
        Rule::fixed_window("fw", Quota::new(4, Duration::from_secs(10))),
        Rule::sliding_log("log", Quota::new(4, Duration::from_secs(10))),
        Rule::sliding_window("sw", Quota::new(4, Duration::from_secs(10)), 5),
        Rule::token_bucket("tb", quota),
        Rule::gcra("gcra", quota),
    ]
}

/// `r` and `t` of a `RateLimit` line.
fn remaining_and_wait(line: &str) -> (u64, u64) {
    let param = |name: &str| {
        line.split(';')
            .find_map(|part| part.strip_prefix(&format!("{name}=")))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line:?}"))
    };
    (param("r"), param("t"))
}

async fn follow(env: fn() -> Env) {
    for rule in rules() {
        let env = env();
        let app = app(&env, std::slice::from_ref(&rule), HeaderFamilies::ALL);
        let (mut admitted, mut waited) = (0, false);
        for step in 0..40 {
            let (response, _, _) = request(&app, &[]).await;
            let (remaining, t) = remaining_and_wait(&header(&response, "ratelimit"));
            let name = rule.name();
            if response.status() == 429 {
                assert!(
                    !waited,
                    "{name}, step {step}: refused after waiting as told"
                );
                let retry_after: u64 = header(&response, "retry-after").parse().unwrap();
                assert!(
                    retry_after >= t,
                    "{name}: Retry-After {retry_after} < t {t}"
                );
                env.clock.advance(Duration::from_secs(retry_after));
                waited = true;
                continue;
            }
            assert_eq!(response.status(), 200, "{name}, step {step}");
            admitted += 1;
            waited = false;
            if remaining == 0 {
                if matches!(name, "tb" | "gcra") {
                    assert!(t <= 3, "{name}: t = {t}, past the next unit's return");
                }
                // Told to wait t: the next request passes then.
                env.clock.advance(Duration::from_secs(t));
                waited = true;
            }
        }
        // Never refused after a wait, it was admitted in every step but none: the waits it was
        // told were when quota came back.
        assert_eq!(admitted, 40, "{}", rule.name());
    }
}

#[tokio::test]
async fn memory_a_client_following_the_headers_is_never_refused() {
    follow(memory).await;
}

#[tokio::test]
async fn redis_a_client_following_the_headers_is_never_refused() {
    follow(redis).await;
}
