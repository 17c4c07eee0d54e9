//! The integration tests, in one binary: the crate and the shared support are built and linked
//! once. Each module specifies one area; those that need Redis start their own `redis-server`
//! through [`support`].
//!
//! Two tests keep binaries of their own: `memory_bound` installs a counting global allocator, and
//! `concurrency_crash` re-executes itself as a child process that is killed.

#[path = "../support/mod.rs"]
mod support;

mod concurrency;
mod conformance;
mod failure_log;
mod handlers;
mod headers;
mod keys;
mod multi_quota;
mod never;
mod properties;
mod quickstart;
mod redis;
mod routes;
mod shed;
mod timing;
