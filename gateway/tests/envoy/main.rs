//! Envoy's rate limit service: the reference's documented configurations and requests, this
//! crate's differences (all or nothing, every algorithm), both stores, failures, reload,
//! invalid files, and the transports (h2c on TCP, a Unix socket). A module per area;
//! [`support`] writes the rules, serves them and holds the tonic client of envoy-types.

mod budget;
mod differences;
mod examples;
mod files;
#[path = "../common/process.rs"]
mod process;
mod redis;
mod serving;
mod support;
mod transport;
