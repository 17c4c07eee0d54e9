//! Envoy's rate limit quota service (RLQS, `envoy.service.rate_limit_quota.v3`): each Envoy
//! decides every request locally, from a token bucket this service assigns it per bucket of
//! requests, and streams what it allowed and denied; the service splits each bucket's quota
//! among the Envoys that report it, in proportion to their demand, so that the fleet stays
//! within the quota. `gateway/docs/envoy.md` is the guide, with the bound and its proof.
//!
//! - [`file`](mod@file): `extensions.quota_service` of an Envoy file, as written;
//!   [`rules`]: validated, and which rule a bucket id matches.
//! - [`share`]: one bucket's quota split among its Envoys (the state transition);
//!   [`shares`]: where the shares are kept.
//! - [`assignment`]: what Envoy is sent.
//! - `metrics`: what `/metrics` says of the streams.
//! - `stream`: one Envoy's stream; `state`: what the streams share; [`QuotaService`]: the
//!   tonic service.

pub mod assignment;
pub mod file;
mod metrics;
pub mod rules;
mod service;
pub mod share;
pub mod shares;
mod state;
mod stream;

pub use self::service::{QUOTA_PATH_PREFIX, QuotaService};
pub use self::stream::{GRACE, MAX_BUCKET_ID_BYTES, MAX_BUCKETS};
