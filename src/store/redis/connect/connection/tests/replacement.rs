//! Which connections are replaced: stale ones, replicas, dropped ones; not those that merely
//! answered an error.

use std::io;

use super::support::{FakeRedis, Ping, RedisServer, refusing_port};
use super::*;
use crate::store::redis::script::{Call, Entry};

#[test]
fn health_records_the_oldest_unanswered_request() {
    let health = Health::default();
    health.sending(10);
    health.sending(20);
    assert_eq!(health.waiting_since_ms.load(Ordering::Relaxed), 10);
    health.answered();
    assert_eq!(health.waiting_since_ms.load(Ordering::Relaxed), 0);
    health.sending(30);
    assert_eq!(health.waiting_since_ms.load(Ordering::Relaxed), 30);
}

#[tokio::test]
async fn a_connection_waiting_longer_than_stale_after_is_replaced() {
    let fake = FakeRedis::start();
    let stale_after = Duration::from_millis(20);
    let connection = supervisor_of(fake.addr(), stale_after, LONG);
    let checkout = expect_checkout(connection.get().await);

    // Answered requests keep a connection, however long ago they were sent.
    checkout.health.sending(connection.now_ms());
    checkout.health.answered();
    tokio::time::sleep(stale_after * 3).await;
    assert_eq!(expect_checkout(connection.get().await).generation, 1);

    checkout.health.sending(connection.now_ms());
    tokio::time::sleep(stale_after * 3).await;
    assert_eq!(expect_checkout(connection.get().await).generation, 2);
    assert_eq!(attempts(&connection), 2);
    assert_eq!(fake.accepted(), 2);

    // Within `stale_after`, a request still waiting keeps it.
    let patient = supervisor_of(fake.addr(), LONG, LONG);
    let checkout = expect_checkout(patient.get().await);
    checkout.health.sending(patient.now_ms());
    assert_eq!(expect_checkout(patient.get().await).generation, 1);
}

/// A frozen server: TCP stays open, a PING is never answered, and its caller gives up at its own
/// deadline. Once `stale_after` has passed, the next call gets a new connection.
#[tokio::test]
async fn a_frozen_server_is_noticed_and_its_connection_replaced() {
    let fake = FakeRedis::start();
    let connection = supervisor_of(fake.addr(), Duration::from_millis(100), LONG);
    assert_eq!(ping(&connection).await.unwrap(), "PONG");
    fake.set(Ping::Silent);
    let gave_up = tokio::time::timeout(Duration::from_millis(20), ping(&connection)).await;
    assert!(gave_up.is_err(), "a frozen server does not answer");
    fake.set(Ping::Pong);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ping(&connection).await.unwrap(), "PONG");
    assert_eq!(attempts(&connection), 2);
    assert_eq!(fake.accepted(), 2);
}

#[tokio::test]
async fn readonly_masterdown_and_a_dropped_connection_mean_reconnecting() {
    for reply in [Ping::ReadOnly, Ping::MasterDown, Ping::Close] {
        let fake = FakeRedis::start();
        let connection = supervisor_of(fake.addr(), LONG, LONG);
        assert_eq!(ping(&connection).await.unwrap(), "PONG");
        fake.set(reply);
        let error = ping(&connection).await.unwrap_err();
        assert!(
            matches!(
                error.kind(),
                StoreErrorKind::NeverSent | StoreErrorKind::ConnectionLost
            ),
            "{reply:?}: {error:?}"
        );
        assert_eq!(phase(&connection), Phase::Idle, "{reply:?}");
        fake.set(Ping::Pong);
        assert_eq!(ping(&connection).await.unwrap(), "PONG");
        assert_eq!(attempts(&connection), 2, "{reply:?}");
        assert_eq!(phase(&connection), Phase::Connected(2), "{reply:?}");
    }
}

#[tokio::test]
async fn a_command_error_keeps_the_connection() {
    let fake = FakeRedis::start();
    let connection = supervisor_of(fake.addr(), LONG, LONG);
    fake.set(Ping::Error);
    let error = ping(&connection).await.unwrap_err();
    assert!(error.kind() == StoreErrorKind::ErrorReply, "{error:?}");
    fake.set(Ping::Pong);
    assert_eq!(ping(&connection).await.unwrap(), "PONG");
    assert_eq!(phase(&connection), Phase::Connected(1));
    assert_eq!(attempts(&connection), 1);
}

#[test]
fn breaks_connection_means_io_errors_and_replicas() {
    let io = |kind| RedisError::from(io::Error::from(kind));
    let server = |kind| RedisError::from((ErrorKind::Server(kind), "from the server"));
    let breaking = [
        io(io::ErrorKind::ConnectionReset),
        io(io::ErrorKind::BrokenPipe),
        io(io::ErrorKind::UnexpectedEof),
        io(io::ErrorKind::TimedOut),
        server(ServerErrorKind::ReadOnly),
        server(ServerErrorKind::MasterDown),
    ];
    for err in &breaking {
        assert!(
            breaks_connection(err),
            "{err:?} should break the connection"
        );
    }
    let not_breaking = [
        server(ServerErrorKind::ResponseError),
        server(ServerErrorKind::NoScript),
        server(ServerErrorKind::BusyLoading),
        server(ServerErrorKind::NoPerm),
        RedisError::from((ErrorKind::Parse, "a reply of another type")),
        RedisError::from((ErrorKind::UnexpectedReturnType, "a reply of another type")),
        RedisError::from((ErrorKind::Client, "a client error")),
    ];
    for err in &not_breaking {
        assert!(
            !breaks_connection(err),
            "{err:?} should keep the connection"
        );
    }
}

/// The real thing: a write script on a real replica fails with READONLY, which replaces the
/// connection; a command error from the same server does not.
#[tokio::test]
async fn a_real_replica_answers_readonly_and_the_connection_is_replaced() {
    let (_refusing, primary) = refusing_port();
    let primary_port = primary.port().to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary_port]);
    let connection = supervisor_of(replica.addr(), LONG, LONG);
    assert_eq!(ping(&connection).await.unwrap(), "PONG");

    // A reset writes (DEL): on a replica, loading the library is refused first.
    let mut reset = Call::new(Entry::Reset, 0, 1);
    reset.key("k").arg("channel").arg("message");
    let error = connection.call::<()>(&reset).await.unwrap_err();
    assert!(
        matches!(
            error.kind(),
            StoreErrorKind::NeverSent | StoreErrorKind::ConnectionLost
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("read only replica"), "{error}");
    assert_eq!(phase(&connection), Phase::Idle);

    let error = connection
        .query::<()>(&redis::cmd("NO-SUCH-COMMAND"))
        .await
        .unwrap_err();
    assert!(error.kind() == StoreErrorKind::ErrorReply, "{error:?}");
    assert_eq!(phase(&connection), Phase::Connected(2));
    assert_eq!(ping(&connection).await.unwrap(), "PONG");
    assert_eq!(attempts(&connection), 2);
}
