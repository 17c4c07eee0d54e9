//! [`QuotaService`]: Envoy's rate limit quota service (`StreamRateLimitQuotas`) as a tonic
//! service that a listener mounts under [`QUOTA_PATH_PREFIX`]; its rules replaced by a
//! reload, its shares and streams kept.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::{
    RateLimitQuotaService as Rlqs, RateLimitQuotaServiceServer,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use futures_util::Stream;
use tokio::sync::mpsc;

use tower_redis_ratelimit::config::Limits;

use super::rules::Rules;
use super::state::{InForce, Inner};
use crate::config::EnvoyFilesError;
use crate::envoy::file;

/// The path every request of the protocol starts with: a listener hands requests under it to
/// [`QuotaService::grpc`].
pub const QUOTA_PATH_PREFIX: &str = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/";

/// How many assignments may wait for one Envoy's stream before its reports wait for them.
const QUEUED_ANSWERS: usize = 16;

/// Envoy's rate limit quota service over the `extensions.quota_service` of the Envoy files.
/// Cheap to clone.
#[derive(Clone)]
pub struct QuotaService {
    inner: Arc<Inner>,
}

impl QuotaService {
    /// Reads the Envoy files at `files` (a YAML file or a directory of them): each domain's
    /// shares are kept in the store its file names (`extensions.store`) among `limits`'
    /// stores, when it is a Redis one, and in this process otherwise.
    pub fn load(files: &Path, limits: &Limits) -> Result<Self, EnvoyFilesError> {
        let rules = Rules::build(&file::read(files)?)?;
        Ok(Self {
            inner: Arc::new(Inner::new(InForce::new(rules, limits)?)),
        })
    }

    /// This service with the rules of `reloaded` (a reload's): its streams go on, each
    /// bucket settled again under the new rules at once.
    pub fn reload_from(&self, reloaded: &QuotaService) -> QuotaService {
        self.inner.replace(reloaded.inner.in_force());
        self.export_metrics();
        self.clone()
    }

    /// Ends every stream once `shutdown` starts draining: Envoy's streams do not end by
    /// themselves, and a drain would wait for them until its timeout.
    pub fn close_on_drain(&self, mut shutdown: crate::runtime::Shutdown) {
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            shutdown.draining().await;
            inner.close();
        });
    }

    /// Exports its metrics at 0 (the streams' gauge, and each domain's series) in the
    /// recorder installed now: called once the admin address has installed the process's,
    /// and after each reload (a domain added).
    pub fn export_metrics(&self) {
        let in_force = self.inner.in_force();
        super::metrics::export(
            in_force
                .rules()
                .describe()
                .iter()
                .map(|(domain, ..)| domain.as_str()),
        );
    }

    /// Each domain with its file and number of bucket rules, for `check`.
    pub fn domains(&self) -> Vec<(String, PathBuf, usize)> {
        self.inner.in_force().rules().describe()
    }

    /// The service as tonic serves it: a tower service of HTTP/2 requests under
    /// [`QUOTA_PATH_PREFIX`].
    pub fn grpc(&self) -> RateLimitQuotaServiceServer<QuotaService> {
        RateLimitQuotaServiceServer::new(self.clone())
    }
}

/// The assignments of one stream, as tonic sends them.
type Answers = Pin<Box<dyn Stream<Item = Result<RateLimitQuotaResponse, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl Rlqs for QuotaService {
    type StreamRateLimitQuotasStream = Answers;

    async fn stream_rate_limit_quotas(
        &self,
        request: tonic::Request<tonic::Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<tonic::Response<Answers>, tonic::Status> {
        let (sender, receiver) = mpsc::channel(QUEUED_ANSWERS);
        let holder = self.inner.next_holder();
        // `serve`'s listeners put the client's address in every request's extensions.
        let peer = request.extensions().get::<std::net::SocketAddr>().copied();
        tokio::spawn(super::stream::run(
            Arc::clone(&self.inner),
            holder,
            peer,
            request.into_inner(),
            sender,
        ));
        let answers = futures_util::stream::unfold(receiver, |mut receiver| async move {
            receiver.recv().await.map(|answer| (answer, receiver))
        });
        Ok(tonic::Response::new(Box::pin(answers)))
    }
}
