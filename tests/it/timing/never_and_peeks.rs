//! Requests that can never pass (a cost above what a rule can ever hold: `Never`, not `Denied`,
//! consuming nothing, a 429 without `Retry-After`), and cost-0 peeks that report without consuming
//! or writing, down to a report-only layer beside an enforcing one.

use std::time::Duration;

use tower_redis_ratelimit::{Policy, Quota, Rule};

use super::{PEER, Stores, app, expect, fixed_window, gcra, micros};
use crate::support::{get as send, header, text};
use tower_redis_ratelimit::decision::Outcome;

on_both_stores!(
    cost_above_the_burst_can_never_pass,
    a_never_admissible_request_gets_a_429_without_retry_after,
    cost_zero_peeks_at_a_fixed_window_without_consuming,
    cost_zero_peeks_at_a_gcra_bucket_without_consuming,
    a_report_only_layer_with_cost_zero_shows_the_enforcing_layers_state,
    never_and_peeks_on_a_draining_bucket,
);

async fn cost_above_the_burst_can_never_pass(stores: Stores) {
    let policy = gcra();
    let never = stores.check("k", &policy, 4).await;
    assert_eq!(never, expect(&policy, Outcome::Never, 3, 0, 0, 0));
    assert_eq!(never.retry_after(), None);
    assert!(!never.is_allowed());
    // It consumed nothing: the whole burst is still there.
    assert_eq!(
        stores.check("k", &policy, 3).await,
        expect(&policy, Outcome::Allowed, 0, 3, 10_000_000, 0)
    );
    // Never, not Denied, even when the bucket is full: waiting would not help.
    assert_eq!(
        stores.check("k", &policy, 4).await,
        expect(&policy, Outcome::Never, 0, 3, 10_000_000, 0)
    );
    // The burst bounds it, not the rate: 10 per second with a burst of 4 never admits 5 at once.
    let policy = Policy::try_from(Rule::gcra("b4", Quota::per_second(10).with_burst(4))).unwrap();
    assert_eq!(
        stores.check("k", &policy, 5).await.outcome(),
        Outcome::Never
    );
    assert_eq!(
        stores.check("k", &policy, 4).await.outcome(),
        Outcome::Allowed
    );
    // Fixed window: a cost above the limit.
    let policy = fixed_window();
    assert_eq!(
        stores.check("k", &policy, 6).await,
        expect(&policy, Outcome::Never, 5, 0, 10_000_000, 0)
    );
    // Only the admitted requests wrote state: the client's, for the two buckets.
    stores.assert_stored(
        1,
        &[
            "ratelimit:gcra:gcra-3/10s:{k}",
            "ratelimit:b4:gcra-10/1s:{k}",
        ],
    );
}

async fn a_never_admissible_request_gets_a_429_without_retry_after(stores: Stores) {
    let app = app(
        &stores,
        Rule::gcra("gcra", Quota::new(3, Duration::from_secs(10))),
        4,
    );
    for _ in 0..3 {
        let response = send(&app, "/", PEER, &[]).await;
        assert_eq!(response.status(), 429);
        assert_eq!(header(&response, "retry-after"), "");
        assert_eq!(header(&response, "rate-limiting-state"), "Deny");
        let body: serde_json::Value = serde_json::from_str(&text(response).await).unwrap();
        assert!(body.get("retry_after").is_none(), "{body}");
        assert_eq!(
            body["detail"],
            "This request costs 4 but the rate limit \"gcra\" (3 per 10s) admits at most 3 at once; \
             it can never be allowed, so do not retry it."
        );
    }
    stores.assert_stored(0, &[]);
}

async fn cost_zero_peeks_at_a_fixed_window_without_consuming(stores: Stores) {
    let policy = fixed_window();
    // Nothing stored yet: the full quota, and still nothing stored.
    assert_eq!(
        stores.check("k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 5, 0, 10_000_000, 0)
    );
    stores.assert_stored(0, &[]);
    // A peek does not start the window: the first real request, 5 s later, does.
    stores.clock.advance(Duration::from_secs(5));
    assert!(stores.check("k", &policy, 2).await.is_allowed());
    stores.clock.advance(Duration::from_secs(3));
    for _ in 0..10 {
        assert_eq!(
            stores.check("k", &policy, 0).await,
            expect(&policy, Outcome::Allowed, 3, 2, 7_000_000, 0)
        );
    }
    assert_eq!(
        stores.check("k", &policy, 3).await,
        expect(&policy, Outcome::Allowed, 0, 5, 7_000_000, 0)
    );
    // A peek at a spent window reports it (nothing left) but is not itself refused.
    assert_eq!(
        stores.check("k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 0, 5, 7_000_000, 0)
    );
    assert_eq!(
        stores.check("k", &policy, 1).await.outcome(),
        Outcome::Denied
    );
}

async fn cost_zero_peeks_at_a_gcra_bucket_without_consuming(stores: Stores) {
    let policy = gcra();
    assert_eq!(
        stores.check("k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 3, 0, 0, 0)
    );
    assert!(stores.check("k", &policy, 2).await.is_allowed());
    for _ in 0..10 {
        assert_eq!(
            stores.check("k", &policy, 0).await,
            expect(&policy, Outcome::Allowed, 1, 2, 6_666_667, 0)
        );
    }
    // Time passes between peeks: they see the bucket drain, and leave it as it was.
    stores.clock.advance(micros(1_000_000));
    assert_eq!(
        stores.check("k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 1, 2, 5_666_667, 0)
    );
    assert_eq!(
        stores.check("k", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 0, 3, 9_000_000, 0)
    );
}

async fn a_report_only_layer_with_cost_zero_shows_the_enforcing_layers_state(stores: Stores) {
    let rule = Rule::fixed_window("fw", Quota::new(5, Duration::from_secs(10)));
    let enforce = app(&stores, rule.clone(), 1);
    // Same store, same rule, same key, cost 0: reports and never refuses.
    let report = app(&stores, rule, 0);
    for _ in 0..2 {
        assert_eq!(send(&enforce, "/", PEER, &[]).await.status(), 200);
    }
    for _ in 0..10 {
        let response = send(&report, "/", PEER, &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "rate-limiting-total-requests"), "2");
        assert_eq!(header(&response, "ratelimit"), r#""fw";r=3;t=10"#);
    }
    for _ in 0..3 {
        assert_eq!(send(&enforce, "/", PEER, &[]).await.status(), 200);
    }
    assert_eq!(send(&enforce, "/", PEER, &[]).await.status(), 429);
    let response = send(&report, "/", PEER, &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "rate-limiting-total-requests"), "5");
    assert_eq!(header(&response, "ratelimit"), r#""fw";r=0;t=10"#);
}

/// Never and peeks on a bucket part drained, and on a fixed window with nothing stored: neither
/// writes anything.
async fn never_and_peeks_on_a_draining_bucket(stores: Stores) {
    let policy = gcra();
    assert_eq!(
        stores.check("k", &policy, 4).await,
        expect(&policy, Outcome::Never, 3, 0, 0, 0)
    );
    assert_eq!(
        stores.check("k", &policy, 0).await,
        expect(&policy, Outcome::Allowed, 3, 0, 0, 0)
    );
    stores.assert_stored(0, &[]);
    assert!(stores.check("k", &policy, 2).await.is_allowed());
    stores.advance_us(1_000_000);
    for _ in 0..3 {
        assert_eq!(
            stores.check("k", &policy, 0).await,
            expect(&policy, Outcome::Allowed, 1, 2, 5_666_667, 0)
        );
    }
    assert_eq!(
        stores.check("k", &policy, 4).await,
        expect(&policy, Outcome::Never, 1, 2, 5_666_667, 0)
    );
    let fw = fixed_window();
    assert_eq!(
        stores.check("k", &fw, 6).await,
        expect(&fw, Outcome::Never, 5, 0, 10_000_000, 0)
    );
    assert_eq!(
        stores.check("k", &fw, 0).await,
        expect(&fw, Outcome::Allowed, 5, 0, 10_000_000, 0)
    );
    stores.assert_stored(1, &["ratelimit:gcra:gcra-3/10s:{k}"]);
}
