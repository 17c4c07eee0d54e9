//! The `Retry-After` a client is told: enough (waiting that long gets it in), rounded up to whole
//! seconds, and at least one.

use std::time::Duration;

use super::{PEER, Stores, app, micros};
use crate::support::{get as send, header, text};
use tower_redis_ratelimit::{Quota, Rule};

on_both_stores!(
    retry_after_header_is_enough_and_rounded_up,
    retry_after_is_at_least_one_second,
);

async fn retry_after_header_is_enough_and_rounded_up(stores: Stores) {
    let app = app(
        &stores,
        Rule::gcra("gcra", Quota::new(3, Duration::from_secs(10))),
        1,
    );
    for _ in 0..3 {
        assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    }
    // 3.333334 s to wait: told 4.
    let denied = send(&app, "/", PEER, &[]).await;
    assert_eq!(denied.status(), 429);
    assert_eq!(header(&denied, "retry-after"), "4");
    let body: serde_json::Value = serde_json::from_str(&text(denied).await).unwrap();
    assert_eq!(body["retry_after"], 4);
    // Retrying a second early (3 s) is too early: 0.333334 s remain, told 1.
    stores.clock.advance(Duration::from_secs(3));
    let early = send(&app, "/", PEER, &[]).await;
    assert_eq!(early.status(), 429);
    assert_eq!(header(&early, "retry-after"), "1");
    // Waiting as told gets in.
    stores.clock.advance(Duration::from_secs(1));
    assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);

    // Whenever it is told to wait, a client that waits exactly as long gets in.
    stores.clock.advance(Duration::from_secs(1_000));
    for _ in 0..3 {
        assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    }
    for _ in 0..5 {
        let denied = send(&app, "/", PEER, &[]).await;
        assert_eq!(denied.status(), 429);
        let seconds: u64 = header(&denied, "retry-after").parse().unwrap();
        assert!(seconds >= 1);
        stores.clock.advance(Duration::from_secs(seconds));
        assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    }
}

async fn retry_after_is_at_least_one_second(stores: Stores) {
    let app = app(
        &stores,
        Rule::fixed_window("fw", Quota::new(1, Duration::from_millis(10))),
        1,
    );
    assert_eq!(send(&app, "/", PEER, &[]).await.status(), 200);
    stores.clock.advance(micros(9_999));
    let denied = send(&app, "/", PEER, &[]).await;
    assert_eq!(denied.status(), 429);
    // 1 µs to wait, told 1 s.
    assert_eq!(header(&denied, "retry-after"), "1");
}
