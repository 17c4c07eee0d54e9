//! Property tests: random quotas and random traces of requests (arrival times, costs) for every
//! algorithm.
//!
//! - The `MemoryStore` and the `RedisStore` give identical decisions, also when the clock goes
//!   back, and also when the Redis store gets the requests of one instant at once (batched into
//!   one call after the first, a second client's requests between them).
//! - While time runs forward, both give the decision of a brute-force reference model written
//!   here independently of the crate: exact integer arithmetic in `u128`, no scaling tricks (the
//!   log model keeps every admitted time forever, the window model recounts its sub-intervals
//!   from the full history with the exact overlap of the trailing one and searches for the retry
//!   time instead of computing it, the bucket model counts tokens in units of 1/period of the
//!   unreduced quota). Where the crate documents its sliding window as approximate (`limit` ×
//!   sub-interval µs above 2^52, weights in coarser steps), the model checks the documented
//!   bounds instead: never more lenient than the exact estimate, above it by at most two steps'
//!   worth of the trailing count.
//! - Which rule a decision reports is computed here too, from the rule documented on `Decision`,
//!   not by the crate's `Decision::from_verdicts`.
//! - A policy of several rules of random algorithms is all or nothing.
//! - The traces are not vacuous: each property counts the denials, the requests that can never
//!   pass and, for several rules, the decisions reporting a rule other than the first and the
//!   requests one rule denied while another would have admitted them, and fails if any is
//!   missing.
//!
//! One `redis-server` serves every property test (each uses its own key prefix and a fresh client
//! key per case).
//!
//! `models` and `window_model` hold the reference models, `strategies` draws rules and traces,
//! and `harness` runs the traces on both stores and the models.

mod harness;
mod models;
mod strategies;
mod window_model;

use self::harness::check;
use self::strategies::{Algo, bucket, fixed_window, sliding_log, sliding_window};
use proptest::prelude::*;
use tower_redis_ratelimit::policy::MAX_PERIOD;

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
const MS: u64 = 1_000;
const S: u64 = 1_000_000;
const DAY: u64 = 86_400 * S;
const TEN_YEARS: u64 = MAX_PERIOD.as_micros() as u64;
/// Traces stay within a century of `T0`: times are µs in Lua numbers, exact up to 2^53 µs (the
/// year 2255), and a trace of ten-year steps would get there.
const LATEST: u64 = T0 + 100 * 365 * DAY;
/// The crate's documented bound for a sliding window's weights: `limit * steps <= 2^52`, so the
/// estimate is exact (steps of 1 µs) while `limit * sub-interval µs <= 2^52`.
const WEIGHT_RANGE: u64 = 1 << 52;

#[test]
fn fixed_window_matches_its_model_on_both_stores() {
    check("fw", 96, fixed_window().prop_map(|spec| vec![spec]));
}

#[test]
fn sliding_log_matches_its_model_on_both_stores() {
    check("log", 96, sliding_log().prop_map(|spec| vec![spec]));
}

#[test]
fn sliding_window_matches_its_model_on_both_stores() {
    check("sw", 128, sliding_window().prop_map(|spec| vec![spec]));
}

#[test]
fn token_bucket_matches_the_bucket_model_on_both_stores() {
    check(
        "tb",
        96,
        bucket(Algo::TokenBucket).prop_map(|spec| vec![spec]),
    );
}

#[test]
fn gcra_matches_the_bucket_model_on_both_stores() {
    check("gcra", 96, bucket(Algo::Gcra).prop_map(|spec| vec![spec]));
}

#[test]
fn policies_of_several_algorithms_are_all_or_nothing_on_both_stores() {
    // Sliding windows whose estimate the crate computes exactly: the model predicts the others
    // only within bounds, which leaves no exact verdict to pick the reported rule from.
    let exact_window = sliding_window().prop_filter("an exact estimate", |spec| {
        u128::from(spec.limit) * u128::from(spec.period_us / spec.sub_intervals())
            <= u128::from(WEIGHT_RANGE)
    });
    let any = prop_oneof![
        fixed_window(),
        sliding_log(),
        exact_window,
        bucket(Algo::TokenBucket),
        bucket(Algo::Gcra),
    ];
    check("multi", 64, proptest::collection::vec(any, 2..=3));
}
