//! Envoy's rate limit service: the reference's documented configurations and requests, this
//! crate's differences (all or nothing, every algorithm), a domain's placement (all or nothing,
//! or per descriptor), both stores, failures, reload,
//! invalid files, and the transports (h2c on TCP, a Unix socket, any `:authority`); then a
//! real Envoy configured as gateway/docs/envoy.md says in front of `serve`, and what its clients see. A
//! module per area; [`support`] writes the rules, serves them and holds the tonic client of
//! envoy-types, [`raw_h2`] a client that sends what tonic cannot, [`front`] starts the
//! upstream, `serve` and Envoy of the page.

mod budget;
mod differences;
mod documented;
mod examples;
mod files;
mod front;
mod live;
mod live_failures;
mod placement;
#[path = "../common/process.rs"]
mod process;
mod quota;
mod quota_live;
mod quota_shares;
mod raw_h2;
mod redis;
mod reset;
mod serving;
mod support;
mod transport;
#[path = "../common/web.rs"]
mod web;
