//! A rate limit service over rules written by the test, served on a TCP or Unix socket
//! listener (h2c) as `serve` serves it, and a tonic client of envoy-types.

use std::net::SocketAddr;
use std::path::PathBuf;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use ratelimit_gateway::config::EnvoySettings;
use ratelimit_gateway::envoy::RateLimitService;
use ratelimit_gateway::runtime::{self, Connections, Listener, ShutdownTrigger};
use testkit::TempDir;
use tonic::transport::Channel;
use tower_redis_ratelimit::HeaderFamilies;
use tower_redis_ratelimit::admission::FailureMode;
use tower_redis_ratelimit::config::{Format, Limits, LimitsConfig};

/// How long a store may take in these tests.
const DEADLINE: std::time::Duration = std::time::Duration::from_millis(500);

/// Files in a directory of their own, and the limits (stores) of a TOML file's text.
pub(crate) struct Files {
    pub(crate) dir: TempDir,
    pub(crate) limits: Limits,
    pub(crate) config: LimitsConfig,
}

impl Files {
    /// `files` (name, YAML) in a new directory; `stores` is the TOML of the stores.
    pub(crate) fn new(files: &[(&str, &str)], stores: &str) -> Files {
        let dir = TempDir::new("envoy-rules").expect("a temporary directory");
        for (name, yaml) in files {
            std::fs::write(dir.path().join(name), yaml).expect("the rules written");
        }
        let config = LimitsConfig::parse(stores, Format::Toml).expect("the stores");
        let limits = config.build().expect("the stores built");
        Files {
            dir,
            limits,
            config,
        }
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// The service over these rules, failing as `failure_mode` says.
    pub(crate) fn service(&self, failure_mode: FailureMode) -> RateLimitService {
        self.service_within(failure_mode, DEADLINE)
    }

    /// [`service`](Self::service), waiting for its store up to `deadline`.
    pub(crate) fn service_within(
        &self,
        failure_mode: FailureMode,
        deadline: std::time::Duration,
    ) -> RateLimitService {
        let settings = EnvoySettings {
            failure_mode,
            deadline,
            headers: HeaderFamilies::DEFAULT,
        };
        RateLimitService::load(&self.path(), settings, &self.limits).expect("the rules load")
    }
}

/// The error loading `files` (name, YAML), as printed, the directory left out.
pub(crate) fn refused(files: &[(&str, &str)]) -> String {
    let rules = Files::new(files, "");
    let err = RateLimitService::load(
        &rules.path(),
        EnvoySettings {
            failure_mode: FailureMode::Open,
            deadline: std::time::Duration::from_millis(100),
            headers: HeaderFamilies::DEFAULT,
        },
        &rules.limits,
    )
    .err()
    .expect("refused");
    let text = err.to_string();
    text.replace(&format!("{}/", rules.path().display()), "")
}

/// A service served on `listener`, until dropped.
pub(crate) struct Served {
    _trigger: ShutdownTrigger,
}

pub(crate) fn serve(service: RateLimitService, listener: Listener) -> Served {
    // As `serve` runs it: any `:authority` taken.
    let connections = Connections {
        any_authority: true,
        ..Connections::defaults()
    };
    serve_with(service, listener, connections)
}

/// [`serve`] with `connections` of the test's choosing.
pub(crate) fn serve_with(
    service: RateLimitService,
    listener: Listener,
    connections: Connections,
) -> Served {
    let (trigger, shutdown) = ShutdownTrigger::new();
    let handler = move |request| {
        let service = service.clone();
        async move { service.call(request).await }
    };
    tokio::spawn(runtime::serve_connections(
        listener,
        connections,
        runtime::Workers::none(),
        handler,
        shutdown,
    ));
    Served { _trigger: trigger }
}

/// The service on a TCP port, and a client of it.
pub(crate) async fn tcp(service: RateLimitService) -> (Served, RateLimitServiceClient<Channel>) {
    let listener = Listener::tcp(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("a port");
    let addr = match listener.address().expect("its address") {
        runtime::Address::Tcp(addr) => addr,
        other => panic!("not TCP: {other}"),
    };
    let served = serve(service, listener);
    let client = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .expect("connected");
    (served, client)
}

/// A request of `domain` with descriptors of entries.
pub(crate) fn request(domain: &str, descriptors: &[&[(&str, &str)]]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors: descriptors
            .iter()
            .map(|entries| descriptor(entries))
            .collect(),
        hits_addend: 0,
    }
}

pub(crate) fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(key, value)| Entry {
                key: (*key).to_owned(),
                value: (*value).to_owned(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}

/// Asks the service directly (no transport), for tests of what it decides.
pub(crate) async fn ask(
    service: &RateLimitService,
    request: &RateLimitRequest,
) -> RateLimitResponse {
    service.should_rate_limit(request).await.expect("an answer")
}

/// Each status's code, then the overall code.
pub(crate) fn codes(response: &RateLimitResponse) -> (Vec<Code>, Code) {
    let code = |code: i32| Code::try_from(code).expect("a code");
    (
        response
            .statuses
            .iter()
            .map(|status| code(status.code))
            .collect(),
        code(response.overall_code),
    )
}

/// Each status's remaining.
pub(crate) fn remaining(response: &RateLimitResponse) -> Vec<u32> {
    response
        .statuses
        .iter()
        .map(|status| status.limit_remaining)
        .collect()
}

/// The value of `name` among the headers to add.
pub(crate) fn header<'a>(response: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    response
        .response_headers_to_add
        .iter()
        .find(|header| header.key.eq_ignore_ascii_case(name))
        .map(|header| header.value.as_str())
}

/// The TOML of one Redis store at `url`.
pub(crate) fn redis_store(url: &str) -> String {
    format!("[stores.shared]\ntype = \"redis\"\nurl = \"{url}\"\nconnect_timeout = \"200ms\"\n")
}

/// The overall codes of `times` requests, one after another.
pub(crate) async fn overall(
    service: &RateLimitService,
    request: &RateLimitRequest,
    times: usize,
) -> Vec<Code> {
    let mut seen = Vec::with_capacity(times);
    for _ in 0..times {
        seen.push(codes(&ask(service, request).await).1);
    }
    seen
}

/// A client of the service on the Unix socket at `path`.
pub(crate) async fn unix_client(path: &std::path::Path) -> RateLimitServiceClient<Channel> {
    RateLimitServiceClient::new(unix_channel(path).await)
}

/// A gRPC channel to the Unix socket at `path`.
pub(crate) async fn unix_channel(path: &std::path::Path) -> Channel {
    let path = path.to_owned();
    tonic::transport::Endpoint::from_static("http://localhost")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await
        .expect("connected")
}
