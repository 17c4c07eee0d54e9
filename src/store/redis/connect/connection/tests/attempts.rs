//! Connection attempts: the backoff, one attempt shared by every caller, attempts that outlive
//! their callers or die.

use std::sync::atomic::AtomicUsize;

use super::support::{FakeRedis, refusing_port, unanswering_port};
use super::*;

#[test]
fn the_backoff_doubles_from_first_and_stops_at_max() {
    let backoff = (Duration::from_millis(50), Duration::from_secs(1));
    let waits: Vec<u64> = (0..8)
        .map(|failures| backoff_delay(failures, backoff).as_millis() as u64)
        .collect();
    assert_eq!(waits, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
    // No overflow, however long the outage or the setting.
    assert_eq!(backoff_delay(u64::MAX, backoff), Duration::from_secs(1));
    assert_eq!(backoff_delay(u64::MAX, (LONG, LONG)), LONG);
    assert_eq!(backoff_delay(3, (Duration::ZERO, LONG)), Duration::ZERO);
}

#[test]
fn each_failed_attempt_backs_off_longer() {
    let (_refusing, addr) = refusing_port();
    let connection = SharedConnection::new(
        from_pool(pool_to(addr, LONG)),
        LONG,
        (Duration::from_secs(60), Duration::from_secs(600)),
        true,
    );
    for (failures, wait) in [(0, 60), (1, 120), (2, 240), (3, 480), (4, 600), (5, 600)] {
        let before = Instant::now();
        let mut state = connection.lock();
        connection.back_off(&mut state, StoreError::bad_reply("test"));
        let State::Failed { retry_at, .. } = &*state else {
            panic!("not failed after back_off");
        };
        let wait = Duration::from_secs(wait);
        assert!(
            *retry_at >= before + wait && *retry_at <= Instant::now() + wait,
            "after {failures} failures"
        );
    }
}

#[tokio::test]
async fn calls_during_the_backoff_fail_at_once_without_an_attempt() {
    let (_refusing, addr) = refusing_port();
    let connection = supervisor_of(addr, LONG, LONG);
    let first = expect_err(connection.get().await);
    assert!(
        matches!(
            first.kind(),
            StoreErrorKind::NeverSent | StoreErrorKind::ConnectionLost
        ),
        "{first:?}"
    );
    #[cfg(feature = "concurrency")]
    assert!(
        first.never_sent(),
        "a failed connection sent nothing: {first:?}"
    );
    assert_eq!(phase(&connection), Phase::Failed);
    for _ in 0..100 {
        let again = expect_err(connection.get().await);
        assert_eq!(again.to_string(), first.to_string());
    }
    assert_eq!(
        attempts(&connection),
        1,
        "calls during the backoff must not connect"
    );
}

#[tokio::test]
async fn the_first_call_after_the_backoff_tries_again_and_a_success_resets_it() {
    let (_refusing, refused) = refusing_port();
    let fake = FakeRedis::start();
    let (connect, target) = switchable(pool_to(refused, LONG));
    let connection = supervisor(connect, LONG, Duration::from_millis(5));
    expect_err(connection.get().await);
    tokio::time::sleep(Duration::from_millis(20)).await;
    expect_err(connection.get().await);
    assert_eq!(attempts(&connection), 2);
    assert_eq!(connection.failures.load(Ordering::Relaxed), 2);

    *target.lock().unwrap() = pool_to(fake.addr(), LONG);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let checkout = expect_checkout(connection.get().await);
    assert_eq!(checkout.generation, 1);
    assert_eq!(attempts(&connection), 3);
    assert_eq!(connection.failures.load(Ordering::Relaxed), 0);
    assert_eq!(ping(&connection).await.unwrap(), "PONG");
}

#[tokio::test]
async fn concurrent_callers_share_one_attempt() {
    let fake = FakeRedis::start();
    let gate = Arc::new(Semaphore::new(0));
    let connect = gated(pool_to(fake.addr(), LONG), gate.clone());
    let connection = supervisor(connect, LONG, LONG);
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let connection = connection.clone();
            tokio::spawn(async move { connection.get().await.map(|checkout| checkout.generation) })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(phase(&connection), Phase::Connecting);
    gate.add_permits(1000);
    for caller in callers {
        assert_eq!(caller.await.unwrap().unwrap(), 1);
    }
    assert_eq!(attempts(&connection), 1);
    assert_eq!(fake.accepted(), 1);
}

#[tokio::test]
async fn concurrent_callers_share_one_failed_attempt() {
    let (_refusing, addr) = refusing_port();
    let gate = Arc::new(Semaphore::new(0));
    let connection = supervisor(gated(pool_to(addr, LONG), gate.clone()), LONG, LONG);
    let callers: Vec<_> = (0..16)
        .map(|_| {
            let connection = connection.clone();
            tokio::spawn(async move { expect_err(connection.get().await).to_string() })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    gate.add_permits(1000);
    let mut errors = Vec::new();
    for caller in callers {
        errors.push(caller.await.unwrap());
    }
    errors.dedup();
    assert_eq!(
        errors.len(),
        1,
        "every caller gets the one attempt's error: {errors:?}"
    );
    assert_eq!(attempts(&connection), 1);
}

#[tokio::test]
async fn an_attempt_completes_after_its_callers_gave_up() {
    let fake = FakeRedis::start();
    let gate = Arc::new(Semaphore::new(0));
    let connection = supervisor(gated(pool_to(fake.addr(), LONG), gate.clone()), LONG, LONG);
    let gave_up = tokio::time::timeout(Duration::from_millis(20), connection.get()).await;
    assert!(gave_up.is_err(), "the attempt waits for the gate");
    gate.add_permits(1000);
    let deadline = Instant::now() + Duration::from_secs(10);
    while phase(&connection) != Phase::Connected(1) {
        assert!(Instant::now() < deadline, "the attempt never finished");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(expect_checkout(connection.get().await).generation, 1);
    assert_eq!(attempts(&connection), 1);
}

#[tokio::test]
async fn a_panicked_attempt_counts_as_failed_and_the_next_call_tries_again() {
    let fake = FakeRedis::start();
    let pool = pool_to(fake.addr(), LONG);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let connect: Connect = Box::new(move || {
        let (pool, first) = (pool.clone(), counted.fetch_add(1, Ordering::SeqCst) == 0);
        async move {
            assert!(!first, "the first connection attempt panics (on purpose)");
            pool.get()
                .await
                .map(|c| Link::Server(deadpool_redis::Connection::take(c)))
        }
        .boxed()
    });
    let connection = supervisor(connect, LONG, Duration::from_millis(5));
    let error = expect_err(connection.get().await);
    assert!(
        error.to_string().contains("ended without an outcome"),
        "{error}"
    );
    #[cfg(feature = "concurrency")]
    assert!(error.never_sent(), "{error:?}");
    assert_eq!(phase(&connection), Phase::Failed);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(expect_checkout(connection.get().await).generation, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn an_attempt_whose_runtime_shut_down_counts_as_failed() {
    let unanswering = unanswering_port();
    let fake = FakeRedis::start();
    let (connect, target) = switchable(pool_to(unanswering.local_addr().unwrap(), LONG));
    let connection = supervisor(connect, LONG, Duration::from_millis(5));
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    runtime().block_on(async {
        let gave_up = tokio::time::timeout(Duration::from_millis(50), connection.get()).await;
        assert!(gave_up.is_err(), "nothing answers the connection's set-up");
    });
    // That runtime is gone, and the attempt's task with it.
    assert_eq!(phase(&connection), Phase::Connecting);
    *target.lock().unwrap() = pool_to(fake.addr(), LONG);
    runtime().block_on(async {
        let error = expect_err(connection.get().await);
        assert!(
            error.to_string().contains("ended without an outcome"),
            "{error}"
        );
        assert_eq!(phase(&connection), Phase::Failed);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(expect_checkout(connection.get().await).generation, 1);
        assert_eq!(ping(&connection).await.unwrap(), "PONG");
    });
    assert_eq!(attempts(&connection), 2);
}
