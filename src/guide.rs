//! Long-form guides, kept in `docs/` and included here so that their examples run as doctests.
//! This module holds documentation only. The guides of the `ratelimit-gateway` binary (its
//! proxy, its decision service for nginx, Traefik, Caddy and Envoy) are the gateway crate's.

/// The architecture: each stage of a request and the module that does it, for the library and
/// the gateway binary.
#[doc = include_str!("../docs/architecture.md")]
pub mod architecture {}

/// The five rate-limit algorithms compared: promises, Redis layout, memory per key, an accuracy
/// study of the sliding window counter, and when to choose which.
///
/// (The chart is an image beside the markdown file, `docs/algorithms.svg`; it shows on GitHub
/// but not on docs.rs.)
///
#[doc = include_str!("../docs/algorithms.md")]
pub mod algorithms {}

/// The configuration file reference: every field of
/// [`LimitsConfig`](crate::config::LimitsConfig), its stores, policies, routes and keys.
#[cfg(feature = "config")]
#[doc = include_str!("../docs/configuration.md")]
pub mod configuration {}

/// Running the limits in production: choosing standalone, Sentinel or Cluster; failure modes and
/// the fallback; deadlines; Redis settings; what logs and headers say when something breaks; a
/// soak run with primaries killed every minute.
#[doc = include_str!("../docs/operations.md")]
pub mod operations {}

/// Observability: the metrics recorded through the `metrics` facade, and the logs.
#[doc = include_str!("../docs/observability.md")]
pub mod observability {}

/// Per-route limits in axum: layers on routes, groups and routers, sharing a store.
#[doc = include_str!("../docs/routes.md")]
pub mod routes {}

/// Rolling out and tailoring limits: shadow mode (deciding and counting without refusing, its
/// switch at run time and in a file), and plans (a policy per customer tier, chosen by your
/// authentication).
#[doc = include_str!("../docs/rollout.md")]
pub mod rollout {}

/// Keys and proxies: who a limit counts against, client addresses behind trusted proxies,
/// allow and deny lists.
#[doc = include_str!("../docs/keys.md")]
pub mod keys {}

/// The headers reference: every header, which responses carry it, refusal bodies, gRPC, the
/// partition key.
#[doc = include_str!("../docs/headers.md")]
pub mod headers {}

/// One quota across regions: global policies decided in each region from allotments of a
/// ledger, the bound and its proof, the failure table, deployment and measurements.
#[cfg(feature = "regions")]
#[doc = include_str!("../docs/regions.md")]
pub mod regions {}

/// The glossary: the one meaning of each word the code, the guides, the metrics and the
/// configuration file use.
#[doc = include_str!("../docs/glossary.md")]
pub mod glossary {}
