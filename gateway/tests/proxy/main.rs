//! `ratelimit-gateway proxy`, run as a process (the binary cargo built for these tests) in front
//! of a small upstream started here. A module per area; [`support`] starts the upstream and the
//! proxy, each on a free port, and stops them when the test ends.

mod admin;
#[path = "../common/certificates.rs"]
mod certificates;
mod files;
mod http2;
mod ledger;
mod lifecycle;
mod limits;
mod logs;
mod operations;
mod paths;
#[path = "../common/process.rs"]
mod process;
mod redis_tls;
mod regions;
mod reset;
mod routes;
mod smoothing;
mod streaming;
mod support;
mod systemd;
mod timeouts;
mod tls;
mod upstream;
mod websockets;
