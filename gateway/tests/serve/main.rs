//! `ratelimit-gateway serve`, run as a process (the binary cargo built for these tests): asked
//! by a real nginx through `auth_request` in front of a small upstream, and over plain HTTP as
//! Traefik's ForwardAuth and Caddy's `forward_auth` ask. A module per area; [`support`] starts
//! the upstream, `serve` and nginx, each on a free port, and stops them when the test ends.

mod clients;
mod files;
mod forward_auth;
mod hostile;
mod lifecycle;
mod listeners;
mod nginx;
#[path = "../common/process.rs"]
mod process;
mod support;
#[path = "../common/web.rs"]
mod web;
