//! [`RateLimitService`]: the Envoy files loaded (and reloaded) with their stores, answering Envoy's
//! `ShouldRateLimit` as a tonic service that a listener mounts under [`PATH_PREFIX`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService as Rls, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tower_redis_ratelimit::config::Limits;

use super::budget::{GRPC_TIMEOUT, parse_grpc_timeout, store_deadline};
use super::decide::decide;
use super::loaded::{Loaded, load};
use super::placement::Placement;
use crate::config::{EnvoyFilesError, EnvoySettings};

/// The path every request of the protocol starts with: a listener hands requests under it to
/// [`RateLimitService::grpc`].
pub const PATH_PREFIX: &str = "/envoy.service.ratelimit.v3.RateLimitService/";

/// What a question was and how it was answered, put in its answer's extensions for the access
/// log.
#[derive(Clone, Debug)]
pub struct Asked {
    /// The domain asked about.
    pub domain: String,
    /// How many descriptors it holds.
    pub descriptors: usize,
    /// The overall code answered: `OK`, `OVER_LIMIT` or `UNKNOWN`.
    pub code: &'static str,
}

/// Envoy's rate limit service over the rules of envoyproxy/ratelimit's files. Cheap to clone.
///
/// A reload loads a new one with the limits of the reload
/// ([`LimitsConfig::rebuild`](tower_redis_ratelimit::config::LimitsConfig::rebuild)): the
/// stores whose settings did not change are the same stores, and a descriptor's counter is
/// named by its domain, its entries and its quota, so counts go on.
#[derive(Clone)]
pub struct RateLimitService {
    settings: EnvoySettings,
    loaded: Arc<Loaded>,
}

impl RateLimitService {
    /// Reads the Envoy files at `files` (a YAML file or a directory of them) and finds each domain's
    /// store among `limits`' stores.
    pub fn load(
        files: &Path,
        settings: EnvoySettings,
        limits: &Limits,
    ) -> Result<Self, EnvoyFilesError> {
        Ok(Self {
            settings,
            loaded: Arc::new(load(files, limits)?),
        })
    }

    /// Exports its failure counter at 0 (before its first failure) in the recorder installed
    /// now: called once the admin address has installed the process's.
    pub fn export_metrics(&self) {
        super::status::export_failures();
    }

    /// The service as tonic serves it: a tower service of HTTP/2 requests under
    /// [`PATH_PREFIX`].
    pub fn grpc(&self) -> RateLimitServiceServer<RateLimitService> {
        RateLimitServiceServer::new(self.clone())
    }

    /// Answers one HTTP/2 request of the protocol (its path under [`PATH_PREFIX`]): what a
    /// listener that serves other requests too hands these to. Another path under the prefix
    /// is answered as gRPC answers an unknown method (`UNIMPLEMENTED`).
    pub async fn call<B>(&self, request: http::Request<B>) -> http::Response<tonic::body::Body>
    where
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    {
        use tower::Service;
        match self.grpc().call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }

    /// Decides one request, as `ShouldRateLimit` does, within the configured deadline.
    pub async fn should_rate_limit(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, tonic::Status> {
        decide(&self.loaded, &self.settings, request).await
    }

    /// Decides one request for a caller that waits at most `budget` (its `grpc-timeout`): the
    /// store gets the configured deadline or half the budget, whichever is shorter, so that
    /// `failure_mode` answers before the caller gives up and its own failure mode decides.
    async fn should_rate_limit_within(
        &self,
        request: &RateLimitRequest,
        budget: Option<std::time::Duration>,
    ) -> Result<RateLimitResponse, tonic::Status> {
        let settings = EnvoySettings {
            deadline: store_deadline(self.settings.deadline, budget),
            ..self.settings
        };
        decide(&self.loaded, &settings, request).await
    }

    /// Resets the counter that the descriptor of `entries` (`(key, value)`, in order) counts in,
    /// in `domain`'s store: in every instance sharing a Redis store. Says what it did.
    pub async fn reset(
        &self,
        domain: &str,
        entries: &[(String, String)],
    ) -> Result<String, crate::runtime::ResetError> {
        super::reset::reset(&self.loaded, domain, entries).await
    }

    /// Whether the files have `domain`, and the store it counts in (`None`: the default one).
    pub fn domain_store(&self, domain: &str) -> Option<Option<&str>> {
        let domain = self.loaded.domains.get(domain)?;
        Some(domain.store.as_deref())
    }

    /// Where `domain`'s counters live and how its requests are decided, when the files have it.
    pub fn placement(&self, domain: &str) -> Option<Placement> {
        Some(self.loaded.domains.get(domain)?.placement)
    }

    /// Each domain with the file it came from, for `check`.
    pub fn domains(&self) -> Vec<(String, PathBuf)> {
        let mut domains: Vec<_> = self
            .loaded
            .domains
            .iter()
            .map(|(name, domain)| (name.to_owned(), domain.file.clone()))
            .collect();
        domains.sort();
        domains
    }
}

#[tonic::async_trait]
impl Rls for RateLimitService {
    async fn should_rate_limit(
        &self,
        request: tonic::Request<RateLimitRequest>,
    ) -> Result<tonic::Response<RateLimitResponse>, tonic::Status> {
        // Envoy sends its filter's `timeout` (20 ms when unset) as `grpc-timeout`.
        let budget = request
            .metadata()
            .get(GRPC_TIMEOUT)
            .and_then(|value| value.to_str().ok())
            .and_then(parse_grpc_timeout);
        let asked = request.get_ref();
        let decided = self.should_rate_limit_within(asked, budget).await?;
        let code = Code::try_from(decided.overall_code).unwrap_or(Code::Unknown);
        let mut response = tonic::Response::new(decided);
        // For the access log, which sees the answer as HTTP/2 frames only.
        response.extensions_mut().insert(Asked {
            domain: asked.domain.clone(),
            descriptors: asked.descriptors.len(),
            code: code.as_str_name(),
        });
        Ok(response)
    }
}
