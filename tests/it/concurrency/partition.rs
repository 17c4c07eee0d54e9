//! A release that never reaches Redis (seed 000's partitioned server): the heartbeat stops
//! renewing the permit at once, so its TTL ends it, while the permits still held keep theirs.
//!
//! The store talks to Redis through a TCP proxy that the test can cut, as a network partition
//! does: freezing Redis (SIGSTOP, `CLIENT PAUSE`) only delays the release, which then runs when
//! Redis resumes, and restarting it loses every permit.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::logs::Logs;
use crate::support::{RedisServer, eventually};
use axum::body::Body;
use http::{Request, Response, StatusCode};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tower::{ServiceExt, service_fn};
use tower_layer::Layer;
use tower_redis_ratelimit::concurrency::ConcurrencyPermit;
use tower_redis_ratelimit::key::HeaderKey;
use tower_redis_ratelimit::store::permits::PermitId;
use tower_redis_ratelimit::{ConcurrencyLimitLayer, RedisStore};

/// A TCP proxy in front of Redis. Cut, it closes its connections and every new one as soon as it
/// is accepted, so nothing gets through; healed, it forwards again.
struct Link {
    port: u16,
    cut: watch::Sender<bool>,
    /// Connections being forwarded right now.
    open: Arc<AtomicUsize>,
}

/// Counts a forwarded connection while it lives.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Link {
    async fn to(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (cut, watching) = watch::channel(false);
        let open = Arc::new(AtomicUsize::new(0));
        let counter = open.clone();
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut cut = watching.clone();
                if *cut.borrow() {
                    continue;
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let open = Open(counter.clone());
                tokio::spawn(async move {
                    let _open = open;
                    let Ok(mut redis) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut redis) => {}
                        _ = cut.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { port, cut, open }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Cuts the link, and returns once no connection forwards anything any more: until the
    /// forwarding tasks have seen the cut, a command sent now could still get through.
    async fn cut(&self) {
        self.cut.send_replace(true);
        eventually(Duration::from_secs(5), "the link is cut", || async {
            self.open.load(Ordering::SeqCst) == 0
        })
        .await;
    }

    fn heal(&self) {
        self.cut.send_replace(false);
    }
}

/// A permit's TTL end in Redis (µs), or `None` once it is gone.
fn score(redis: &RedisServer, key: &str, permit: PermitId) -> Option<u64> {
    let score = redis.cli(&["ZSCORE", key, &permit.to_string()]);
    score.parse::<f64>().ok().map(|score| score as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_never_arrives_is_left_to_the_ttl() {
    let logs = Logs::capture_globally();
    let redis = RedisServer::start();
    let link = Link::to(redis.port()).await;
    let key = "ratelimit:ws:cc:{user}";
    let ttl = Duration::from_secs(6);
    // The handler hands the test a clone of its permit, which then holds the slot.
    let (permits, mut held) = mpsc::unbounded_channel();
    let service = ConcurrencyLimitLayer::builder()
        .name("ws")
        .max_in_flight(2)
        .key(HeaderKey::new("x-user"))
        .store(RedisStore::open(&link.url()).unwrap())
        .permit_ttl(ttl)
        .renew_every(Duration::from_millis(200))
        .deadline(Duration::from_secs(2))
        .build()
        .unwrap()
        .layer(service_fn(move |request: Request<Body>| {
            let permit = request.extensions().get::<ConcurrencyPermit>().cloned();
            permits.send(permit.expect("admitted")).unwrap();
            async { Ok::<_, Infallible>(Response::new(Body::empty())) }
        }));
    let mut take = async || {
        let request = Request::get("/")
            .header("x-user", "user")
            .body(Body::empty());
        let response = service.clone().oneshot(request.unwrap()).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        held.recv().await.unwrap()
    };
    let (kept, dropped) = (take().await, take().await);
    assert_eq!(redis.zcard(key), 2);

    // Cut off, the release fails every attempt and gives up, without reaching Redis.
    link.cut().await;
    let dropped_at = tokio::time::Instant::now();
    let dropped = {
        let id = dropped.id();
        drop(dropped);
        id
    };
    // Every test of the binary logs there: only this permit's line counts.
    let field = format!("id={dropped}");
    eventually(Duration::from_secs(10), "the release gives up", || async {
        logs.lines_with("its TTL will end it")
            .iter()
            .any(|line| line.split_whitespace().any(|word| word == field))
    })
    .await;
    let ended = score(&redis, key, dropped).expect("the release never reached Redis");

    // Healed: the permit still held is renewed again; the dropped one is not.
    link.heal();
    let kept_before = score(&redis, key, kept.id()).unwrap();
    eventually(Duration::from_secs(5), "renewals resume", || async {
        score(&redis, key, kept.id()).is_some_and(|score| score > kept_before)
    })
    .await;
    assert_eq!(
        score(&redis, key, dropped),
        Some(ended),
        "the heartbeat no longer renews a released permit"
    );

    // Its TTL ends it: within the TTL of its release (plus a renewal that drops it, and
    // slack for a loaded machine).
    eventually(
        (ttl + Duration::from_secs(2)).saturating_sub(dropped_at.elapsed()),
        "the dropped permit's ttl ends",
        || async { score(&redis, key, dropped).is_none() },
    )
    .await;
    assert!(
        score(&redis, key, kept.id()).is_some(),
        "the kept permit is live"
    );
    assert_eq!(redis.zcard(key), 1);

    drop(kept);
    eventually(
        Duration::from_secs(5),
        "the kept permit given back",
        || async { redis.keys().is_empty() },
    )
    .await;
}
