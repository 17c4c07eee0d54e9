//! `ratelimit-gateway serve`, run as a process (the binary cargo built for these tests): asked
//! by a real nginx (`auth_request`), Traefik (ForwardAuth) and Caddy (`forward_auth`), each
//! configured as gateway/docs/gateways.md says, in front of a small upstream, and over plain HTTP as
//! they ask. A module per area; [`support`] starts the upstream, `serve` and the gateways,
//! each on a free port, and stops them when the test ends; [`scenarios`] is what every
//! gateway's clients must see.

mod caddy;
#[path = "../common/certificates.rs"]
mod certificates;
mod clients;
mod files;
mod forward_auth;
mod hostile;
mod lifecycle;
mod listeners;
mod nginx;
#[path = "../common/process.rs"]
mod process;
mod reset;
mod routes;
mod scenarios;
mod smoothing;
mod support;
mod traefik;
#[path = "../common/web.rs"]
mod web;
