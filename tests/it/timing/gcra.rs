//! GCRA through time: the burst back to back, then one request per emission interval with no
//! drift, and a full refill after the bucket's window.

use std::time::Duration;

use super::{Stores, T0, expect, gcra, micros};
use tower_redis_ratelimit::decision::Outcome;

on_both_stores!(
    gcra_admits_the_burst_back_to_back_then_refuses,
    gcra_spaces_requests_one_per_ten_thirds_of_a_second_after_the_burst,
    gcra_refills_completely_after_its_window,
);

async fn gcra_admits_the_burst_back_to_back_then_refuses(stores: Stores) {
    let policy = gcra();
    let decisions = [
        stores.check("k", &policy, 1).await,
        stores.check("k", &policy, 1).await,
        stores.check("k", &policy, 1).await,
        stores.check("k", &policy, 1).await,
    ];
    assert_eq!(
        decisions,
        [
            // The bucket empties 10/3 s per request, rounded up to the microsecond.
            expect(&policy, Outcome::Allowed, 2, 1, 3_333_334, 0),
            expect(&policy, Outcome::Allowed, 1, 2, 6_666_667, 0),
            expect(&policy, Outcome::Allowed, 0, 3, 10_000_000, 0),
            expect(&policy, Outcome::Denied, 0, 3, 10_000_000, 3_333_334),
        ]
    );
}

async fn gcra_spaces_requests_one_per_ten_thirds_of_a_second_after_the_burst(stores: Stores) {
    let policy = gcra();
    for _ in 0..3 {
        assert!(stores.check("k", &policy, 1).await.is_allowed());
    }
    // A greedy client: on every denial it waits one microsecond less than told (still denied),
    // then the last microsecond (admitted).
    let mut admitted_at = Vec::new();
    while admitted_at.len() < 9 {
        let denied = stores.check("k", &policy, 1).await;
        assert_eq!(denied.outcome(), Outcome::Denied);
        let wait = denied.retry_after().unwrap();
        assert!(wait > Duration::ZERO);
        stores.clock.advance(wait - micros(1));
        let early = stores.check("k", &policy, 1).await;
        assert_eq!(early.outcome(), Outcome::Denied, "1 µs early");
        assert_eq!(early.retry_after(), Some(micros(1)));
        stores.advance_us(1);
        let admitted = stores.check("k", &policy, 1).await;
        assert!(admitted.is_allowed(), "after waiting {wait:?}");
        assert_eq!(admitted.remaining(), 0);
        admitted_at.push(stores.now() - T0);
    }
    // The k-th request after the burst passes at ceil(k * 10 s / 3): one per 10/3 s, no drift.
    let expected: Vec<u64> = (1..=9u64).map(|k| (k * 10_000_000).div_ceil(3)).collect();
    assert_eq!(admitted_at, expected);
    assert_eq!(admitted_at[2], 10_000_000, "3 more per 10 s");
    assert_eq!(admitted_at[8], 30_000_000);
}

async fn gcra_refills_completely_after_its_window(stores: Stores) {
    let policy = gcra();
    assert!(stores.check("k", &policy, 3).await.is_allowed());
    stores.advance_us(10_000_000 - 1);
    // 1 µs before the bucket is empty: 3 units of 1/10^7 request remain, so a burst of 3 does
    // not fit yet (2 would).
    let almost = stores.check("k", &policy, 3).await;
    assert_eq!(almost, expect(&policy, Outcome::Denied, 2, 1, 1, 1));
    stores.advance_us(1);
    assert_eq!(
        stores.check("k", &policy, 3).await,
        expect(&policy, Outcome::Allowed, 0, 3, 10_000_000, 0)
    );
}
