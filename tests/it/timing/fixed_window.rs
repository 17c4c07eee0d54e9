//! The fixed window through time: it starts with a key's first request, ends exactly a period
//! later, and each key has its own.

use std::time::Duration;

use super::{Stores, T0, expect, fixed_window, micros};
use tower_redis_ratelimit::decision::Outcome;

on_both_stores!(
    fixed_window_resets_exactly_at_the_end_of_the_window,
    each_key_has_its_own_window,
);

async fn fixed_window_resets_exactly_at_the_end_of_the_window(stores: Stores) {
    let policy = fixed_window();
    // The window starts with the key's first request (3.25 s past a whole second), not at an
    // epoch-aligned boundary.
    let start = T0 + 3_250_000;
    stores.clock.set(start);
    for used in 1..=5 {
        assert_eq!(
            stores.check("k", &policy, 1).await,
            expect(&policy, Outcome::Allowed, 5 - used, used, 10_000_000, 0)
        );
    }
    assert_eq!(
        stores.check("k", &policy, 1).await,
        expect(&policy, Outcome::Denied, 0, 5, 10_000_000, 10_000_000)
    );
    // Denials during the window say how long is left, and do not move the window.
    for at in [1_000_000, 5_000_000, 9_999_000] {
        stores.clock.set(start + at);
        let left = 10_000_000 - at;
        assert_eq!(
            stores.check("k", &policy, 1).await,
            expect(&policy, Outcome::Denied, 0, 5, left, left)
        );
    }
    // One microsecond before the end: still denied, with 1 µs to wait.
    stores.clock.set(start + 10_000_000 - 1);
    let denied = stores.check("k", &policy, 1).await;
    assert_eq!(denied, expect(&policy, Outcome::Denied, 0, 5, 1, 1));
    assert_eq!(denied.retry_after(), Some(micros(1)));
    // At the end exactly: a new window, starting now.
    stores.advance_us(1);
    assert_eq!(
        stores.check("k", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 4, 1, 10_000_000, 0)
    );
    // The state is one key's; in Redis, one hash with a TTL.
    stores.assert_stored(1, &["ratelimit:fw:fw-10s:{k}"]);
    stores.advance_us(9_999_999);
    assert_eq!(
        stores.check("k", &policy, 4).await,
        expect(&policy, Outcome::Allowed, 0, 5, 1, 0)
    );
    stores.advance_us(1);
    assert_eq!(
        stores.check("k", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 4, 1, 10_000_000, 0)
    );
}

async fn each_key_has_its_own_window(stores: Stores) {
    let policy = fixed_window();
    assert!(stores.check("a", &policy, 5).await.is_allowed());
    stores.clock.advance(Duration::from_secs(4));
    assert!(stores.check("b", &policy, 5).await.is_allowed());
    stores.clock.advance(Duration::from_secs(6));
    // a's window ended now; b's has 4 s to go.
    assert_eq!(
        stores.check("a", &policy, 1).await,
        expect(&policy, Outcome::Allowed, 4, 1, 10_000_000, 0)
    );
    assert_eq!(
        stores.check("b", &policy, 1).await,
        expect(&policy, Outcome::Denied, 0, 5, 4_000_000, 4_000_000)
    );
}
