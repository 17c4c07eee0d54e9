//! Envoy's rate limit service (RLS v3, `envoy.service.ratelimit.v3.RateLimitService`) over the
//! configuration files of envoyproxy/ratelimit, read unchanged: Envoy, Istio, Envoy Gateway,
//! Contour and kgateway switch to it by changing one address. `gateway/docs/envoy.md` in the repository
//! is the guide: what is the same as the reference, what differs and why, and the Envoy and
//! Istio configuration that points at it.
//!
//! - [`file`](mod@file): the YAML files as written, and the gateway's extensions (`extensions:` keys).
//! - [`placement`]: where a domain's counters live, and so whether a request's descriptors are
//!   decided all or nothing or each on its own.
//! - [`limit`]: a `rate_limit`, its units and extensions.
//! - [`tree`]: the reference's validation, and each domain's descriptor tree; `loaded`: the
//!   trees with each domain's store.
//! - [`matching`]: which limit a descriptor gets (most specific first, wildcards, `replaces`).
//! - `budget`: the caller's `grpc-timeout`, and the store deadline it leaves.
//! - `decide`: one request decided in the domain's store; `calls`: its store calls, as the
//!   domain's placement says; `status`: the answer Envoy gets; `group_headers`: the headers of
//!   limits decided together, made once per group.
//! - `reset`: a descriptor's counter reset, named as `decide` names it.
//! - [`metrics`]: the reference's per-descriptor counters; `unknown`: the warning of a domain
//!   the files do not have.
//! - [`RateLimitService`]: the tonic service, mounted by a listener under [`PATH_PREFIX`].
//! - [`watch`]: a reload when the files change.
//! - [`quota`]: Envoy's rate limit quota service (RLQS), over the same files.

mod budget;
mod calls;
mod counted;
mod decide;
pub mod file;
mod group_headers;
pub mod limit;
mod loaded;
pub mod matching;
pub mod metrics;
pub mod placement;
pub mod quota;
mod reset;
mod service;
mod status;
pub mod tree;
mod unknown;
pub mod watch;

pub use self::decide::MAX_DESCRIPTORS;
pub use self::service::{Asked, PATH_PREFIX, RateLimitService};
