//! `ratelimit-gateway`: the limits of [`tower_redis_ratelimit`] in front of a service written
//! in any language, run from one configuration file.
//!
//! - `ratelimit-gateway proxy CONFIG`: a rate-limiting reverse proxy ([`proxy`]).
//! - `ratelimit-gateway serve CONFIG`: the decision service that nginx (`auth_request`),
//!   Traefik (ForwardAuth) and Caddy (`forward_auth`) ask before they serve a request
//!   ([`serve`]), and Envoy's rate limit service over envoyproxy/ratelimit's files ([`envoy`]),
//!   on the same listeners.
//! - `ratelimit-gateway check CONFIG`: validates a file and says what it would run ([`check`]).
//! - `ratelimit-gateway reset CONFIG --route R --key K`: lifts a ban in the file's Redis store,
//!   for every process sharing it ([`reset`]); the admin address's `POST /reset` does the same
//!   in a running process.
//!
//! The file holds the library's limits (`stores`, `policies`, `routes`, `concurrency`,
//! `shadow`: the crate's `docs/configuration.md`) and the gateway's own tables (`[proxy]`, `[serve]`),
//! read together ([`config`]). The guides ([`guide`]: [proxy](guide::proxy),
//! [gateways](guide::gateways), [Envoy](guide::envoy)) are the reference.
//!
//! Install it from a clone of the repository with `cargo install --locked --path gateway`.
//! This library is the same program in parts, for a test or an example that embeds the proxy
//! ([`proxy::Proxy`]).

pub mod check;
pub mod config;
pub mod envoy;
pub mod guide;
mod hex;
pub mod ledger;
pub mod paths;
pub mod proxy;
pub mod reset;
pub mod runtime;
pub mod serve;
pub mod version;
