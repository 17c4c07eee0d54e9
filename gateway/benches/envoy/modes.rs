//! What each mode serves, and the requests the generator sends it.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as Rls, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use testkit::BoxError;
use tower_redis_ratelimit::deadpool_redis::redis;

use crate::serving::Served;
use crate::workload::{RULES, request};

/// One server of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A tonic handler that answers OK (one status per descriptor) without limiting: the
    /// floor, with as many descriptors per request as the service's modes it is compared with.
    Bare { descriptors: usize },
    /// The same handler making one raw `EVALSHA` (an `INCR` and a `PEXPIRE`) per request.
    Evalsha,
    /// The service: its store, descriptors per request, and whether they are mostly refused.
    Service {
        redis: bool,
        descriptors: usize,
        denied: bool,
    },
}

impl Mode {
    pub(crate) const ALL: [Mode; 11] = [
        Mode::Bare { descriptors: 1 },
        Mode::Bare { descriptors: 3 },
        Mode::Evalsha,
        Mode::Service {
            redis: false,
            descriptors: 1,
            denied: false,
        },
        Mode::Service {
            redis: false,
            descriptors: 3,
            denied: false,
        },
        Mode::Service {
            redis: false,
            descriptors: 1,
            denied: true,
        },
        Mode::Service {
            redis: false,
            descriptors: 3,
            denied: true,
        },
        Mode::Service {
            redis: true,
            descriptors: 1,
            denied: false,
        },
        Mode::Service {
            redis: true,
            descriptors: 3,
            denied: false,
        },
        Mode::Service {
            redis: true,
            descriptors: 1,
            denied: true,
        },
        Mode::Service {
            redis: true,
            descriptors: 3,
            denied: true,
        },
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Bare { descriptors: 1 } => "bare tonic handler, 1 descriptor",
            Mode::Bare { .. } => "bare tonic handler, 3 descriptors",
            Mode::Evalsha => "one raw EVALSHA",
            Mode::Service {
                redis: false,
                descriptors: 1,
                denied: false,
            } => "in-process, 1 descriptor, allowed",
            Mode::Service {
                redis: false,
                descriptors: _,
                denied: false,
            } => "in-process, 3 descriptors, allowed",
            Mode::Service {
                redis: false,
                descriptors: 1,
                denied: true,
            } => "in-process, 1 descriptor, denied",
            Mode::Service {
                redis: false,
                descriptors: _,
                denied: true,
            } => "in-process, 3 descriptors, denied",
            Mode::Service {
                redis: true,
                descriptors: 1,
                denied: false,
            } => "Redis, 1 descriptor, allowed",
            Mode::Service {
                redis: true,
                descriptors: _,
                denied: false,
            } => "Redis, 3 descriptors, allowed",
            Mode::Service {
                redis: true,
                descriptors: 1,
                denied: true,
            } => "Redis, 1 descriptor, denied",
            Mode::Service {
                redis: true,
                descriptors: _,
                denied: true,
            } => "Redis, 3 descriptors, denied",
        }
    }

    /// Whether its requests reach Redis.
    pub(crate) fn uses_redis(self) -> bool {
        matches!(self, Mode::Evalsha | Mode::Service { redis: true, .. })
    }

    /// Descriptors per request.
    pub(crate) fn descriptors(self) -> usize {
        match self {
            Mode::Bare { descriptors } | Mode::Service { descriptors, .. } => descriptors,
            Mode::Evalsha => 1,
        }
    }

    /// The `n`th request of the run.
    pub(crate) fn request(self, n: u64) -> RateLimitRequest {
        match self {
            Mode::Service {
                descriptors,
                denied,
                ..
            } => request(denied, descriptors, n),
            Mode::Bare { descriptors } => request(false, descriptors, n),
            Mode::Evalsha => request(false, 1, n),
        }
    }
}

/// A mode's server, listening until dropped.
pub(crate) struct Server {
    pub(crate) mode: Mode,
    pub(crate) served: Served,
}

impl Server {
    /// Starts `mode`'s server on a free port (inside the servers' runtime).
    pub(crate) async fn start(mode: Mode, redis_url: &str) -> Result<Server, BoxError> {
        let served = match mode {
            Mode::Bare { .. } => Served::start(RateLimitServiceServer::new(Bare(None))).await?,
            Mode::Evalsha => {
                let client = redis::Client::open(redis_url)?;
                let connection = client.get_multiplexed_async_connection().await?;
                Served::start(RateLimitServiceServer::new(Bare(Some(connection)))).await?
            }
            Mode::Service { redis, .. } => {
                let stores = if redis {
                    format!("[stores.shared]\ntype = \"redis\"\nurl = \"{redis_url}\"\n")
                } else {
                    String::new()
                };
                Served::rules(&RULES, &stores).await?
            }
        };
        Ok(Server { mode, served })
    }
}

/// The floors: OK for every descriptor, after one `EVALSHA` when it has a connection.
struct Bare(Option<redis::aio::MultiplexedConnection>);

static SCRIPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "local n = redis.call('INCR', KEYS[1]) redis.call('PEXPIRE', KEYS[1], 60000) return n",
    )
});

#[tonic::async_trait]
impl Rls for Bare {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        let request = request.into_inner();
        if let Some(connection) = &self.0 {
            let key = request
                .descriptors
                .first()
                .and_then(|descriptor| descriptor.entries.first())
                .map_or(String::new(), |entry| format!("bench:{{{}}}", entry.value));
            let _: i64 = SCRIPT
                .key(key)
                .invoke_async(&mut connection.clone())
                .await
                .map_err(|err| tonic::Status::unavailable(err.to_string()))?;
        }
        let ok = DescriptorStatus {
            code: Code::Ok.into(),
            ..DescriptorStatus::default()
        };
        Ok(tonic::Response::new(RateLimitResponse {
            overall_code: Code::Ok.into(),
            statuses: vec![ok; request.descriptors.len()],
            ..RateLimitResponse::default()
        }))
    }
}
