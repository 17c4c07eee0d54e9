//! The memory store's memory is bounded: a million distinct keys do not stay resident after their
//! windows end (explicit eviction and the background sweep), the allocator gets the memory back,
//! and `max_keys` caps the number of keys at any time.
//!
//! A counting global allocator measures live heap bytes. Tests in this file take a lock so that
//! one test's allocations never show up in another's measurement.

use std::alloc::System;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};
use tower_redis_ratelimit::clock::ManualClock;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::{Decision, MemoryStore, Policy, Quota, Rule, Store};
#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Live heap bytes of the whole process.
fn live_bytes() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// 2023-11-14T22:13:20Z, in µs.
const T0: u64 = 1_700_000_000_000_000;
const MILLION: usize = 1_000_000;
const MB: i64 = 1 << 20;

fn per_minute() -> Policy {
    Policy::try_from(Rule::fixed_window("fw", Quota::per_minute(10))).unwrap()
}

/// A runtime whose clock is paused: sleeping lets the background sweep run without waiting in real
/// time.
fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

/// The memory store answers synchronously: no runtime is needed to poll it (and without one, no
/// background sweep starts, so the test alone decides when state is dropped).
fn check(store: &MemoryStore, key: &Key, policy: &Policy, cost: u32) -> Decision {
    store
        .check(key, policy, cost)
        .now_or_never()
        .expect("the memory store answers at once")
        .unwrap()
}

fn fill(store: &MemoryStore, policy: &Policy, prefix: &str, count: usize) {
    for i in 0..count {
        let key = Key::from(format!("{prefix}-{i}"));
        assert!(check(store, &key, policy, 1).is_allowed());
    }
}

#[test]
fn a_million_keys_are_dropped_and_their_memory_returned_when_their_windows_end() {
    let _serial = serial();
    let clock = ManualClock::new(T0);
    // Room for twice the keys, so the cap plays no part here (see the `max_keys` tests).
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(2 * MILLION)
        .build();
    let policy = per_minute();
    let before = live_bytes();

    let started = Instant::now();
    fill(&store, &policy, "client", MILLION);
    let filled_in = started.elapsed();
    assert_eq!(store.len(), MILLION);
    let resident = live_bytes() - before;
    // Each key's state is really held (and counted by the allocator).
    assert!(
        resident > 50 * MILLION as i64,
        "{resident} bytes for a million keys"
    );
    eprintln!("1,000,000 keys in {filled_in:?}: {} MB live", resident / MB);

    // One microsecond before the windows end nothing may go: the state still matters.
    clock.advance(Duration::from_micros(60_000_000 - 1));
    assert_eq!(store.evict_expired(), 0);
    assert_eq!(store.len(), MILLION);
    assert_eq!(
        check(&store, &Key::from("client-123456"), &policy, 0).used(),
        1
    );

    // At the end of the windows everything goes, and the memory with it.
    clock.advance(Duration::from_micros(1));
    let started = Instant::now();
    assert_eq!(store.evict_expired(), MILLION);
    let evicted_in = started.elapsed();
    assert_eq!(store.len(), 0);
    assert!(store.is_empty());
    let left = live_bytes() - before;
    eprintln!("evicted in {evicted_in:?}: {left} bytes left");
    assert!(
        left < 2 * MB,
        "{left} bytes still live after eviction (were {resident})"
    );

    // The store works as before.
    let key = Key::from("client-7");
    assert_eq!(check(&store, &key, &policy, 1).used(), 1);
    assert_eq!(store.len(), 1);
}

#[test]
fn the_background_sweep_drops_expired_state_by_itself() {
    let _serial = serial();
    paused_runtime().block_on(async {
        let clock = ManualClock::new(T0);
        let store = MemoryStore::builder()
            .clock(clock.clone())
            .sweep_every(Duration::from_millis(50))
            .build();
        let policy = per_minute();
        // Used inside the runtime: the sweep starts with the first check.
        for i in 0..10_000 {
            let key = Key::from(format!("client-{i}"));
            assert!(store.check(&key, &policy, 1).await.unwrap().is_allowed());
        }
        assert_eq!(store.len(), 10_000);
        // Ten sweeps while the windows last drop nothing.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(store.len(), 10_000);
        // The windows end; nobody calls `evict_expired`: the sweep empties the store.
        clock.advance(Duration::from_secs(60));
        let mut waited = Duration::ZERO;
        while !store.is_empty() {
            assert!(
                waited < Duration::from_secs(5),
                "{} keys left after {waited:?} of sweeps every 50 ms",
                store.len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
            waited += Duration::from_millis(10);
        }
        assert!(waited <= Duration::from_millis(100), "took {waited:?}");
    });
}

#[test]
fn a_store_that_outlives_its_runtime_is_swept_by_the_next_one() {
    let _serial = serial();
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .sweep_every(Duration::from_millis(50))
        .build();
    let policy = per_minute();
    let key = |i: usize| Key::from(format!("client-{i}"));
    // The first runtime starts the sweep, then shuts down, ending it.
    let first = paused_runtime();
    first.block_on(async {
        for i in 0..100 {
            assert!(store.check(&key(i), &policy, 1).await.unwrap().is_allowed());
        }
    });
    drop(first);
    // A second runtime uses the same store: its first check must start a sweep of its own.
    paused_runtime().block_on(async {
        assert!(
            store
                .check(&key(100), &policy, 1)
                .await
                .unwrap()
                .is_allowed()
        );
        assert_eq!(store.len(), 101);
        clock.advance(Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(store.is_empty(), "{} keys left: no sweep ran", store.len());
    });
}
#[test]
fn max_keys_bounds_the_number_of_keys() {
    let _serial = serial();
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(1_000)
        .build();
    let policy = per_minute();
    for batch in 0..20 {
        // Each key a millisecond after the last, so older keys expire sooner.
        for i in 0..1_000 {
            clock.advance(Duration::from_millis(1));
            let key = Key::from(format!("client-{batch}-{i}"));
            assert!(check(&store, &key, &policy, 1).is_allowed());
        }
        assert!(store.len() <= 1_000, "{} keys held", store.len());
    }
    // 20,000 keys went through a store of 1,000: it is full, not over.
    assert_eq!(store.len(), 1_000);
}

#[test]
fn a_full_store_forgets_expired_state_before_live_state() {
    let _serial = serial();
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(1_000)
        .build();
    let policy = per_minute();
    // 300 keys whose windows end at +60 s, 200 whose windows end at +90 s.
    fill(&store, &policy, "old", 300);
    clock.advance(Duration::from_secs(30));
    fill(&store, &policy, "live", 200);
    // At +61 s, 300 more keys: shards fill up (about 62 keys each), and what they drop to make
    // room is the expired state, never a live key. (Live keys stay far below any shard's cap.)
    clock.advance(Duration::from_secs(31));
    fill(&store, &policy, "new", 300);
    assert!(store.len() <= 1_000);
    for (prefix, count) in [("live", 200), ("new", 300)] {
        for i in 0..count {
            let key = Key::from(format!("{prefix}-{i}"));
            assert_eq!(
                check(&store, &key, &policy, 0).used(),
                1,
                "{prefix}-{i} was forgotten"
            );
        }
    }
    // What is left of the expired state goes with the next sweep; the live keys stay.
    let held = store.len();
    assert!(held >= 500);
    assert_eq!(store.evict_expired(), held - 500);
    assert_eq!(store.len(), 500);
}

#[test]
fn max_keys_bounds_memory_whatever_the_number_of_keys() {
    let _serial = serial();
    let clock = ManualClock::new(T0);
    let store = MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(1_000)
        .build();
    let policy = per_minute();
    let empty = live_bytes();
    // A hundred times as many distinct keys as it may hold, all live: the store stays full.
    fill(&store, &policy, "first", 100_000);
    assert_eq!(store.len(), 1_000);
    let full = live_bytes();
    // Unbounded, 100,000 keys would take about 27 MB (see the million-key test).
    assert!(full - empty < MB, "{} bytes for 1,000 keys", full - empty);
    // And it stays at that size however many more keys come.
    fill(&store, &policy, "second", 100_000);
    assert_eq!(store.len(), 1_000);
    let grown = live_bytes() - full;
    assert!(
        grown.abs() < 64 * 1024,
        "{grown} bytes more after 100,000 more keys"
    );
}
