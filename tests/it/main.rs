//! The integration tests, in one binary: the crate and the shared support are built and linked
//! once. Each module specifies one area; those that need Redis start their own `redis-server`
//! through [`support`].
//!
//! Two tests keep binaries of their own: `memory_bound` installs a counting global allocator, and
//! `concurrency_crash` re-executes itself as a child process that is killed.

mod client;
mod concurrency;
mod config;
mod config_file;
mod config_tls;
mod conformance;
mod decision_log;
mod docs_names;
mod docs_settings;
mod docs_words;
mod failure_log;
mod getting_started;
mod grpc;
mod handlers;
mod headers;
mod keys;
mod memory;
mod metrics;
mod multi_quota;
mod never;
mod plans;
mod properties;
mod quickstart;
mod redis;
#[cfg(feature = "regions")]
mod regions;
mod reset;
mod routes;
mod shadow;
mod shed;
mod smoothing;
#[path = "../support/mod.rs"]
mod support;
mod timing;
