//! Envoy's rate limit service: the reference's documented configurations and requests, this
//! crate's differences (all or nothing, every algorithm), both stores, failures, reload,
//! invalid files, and the transports (h2c on TCP, a Unix socket, any `:authority`). A module
//! per area; [`support`] writes the rules, serves them and holds the tonic client of
//! envoy-types, [`raw_h2`] a client that sends what tonic cannot.

mod differences;
mod examples;
mod files;
#[path = "../common/process.rs"]
mod process;
mod raw_h2;
mod redis;
mod serving;
mod support;
mod transport;
