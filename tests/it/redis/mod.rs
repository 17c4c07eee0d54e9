//! The Redis store on its own: exact counts across replicas, outages and stalls, the names of its
//! keys, what its scripts write, and its life across tokio runtimes.

mod batching;
#[cfg(feature = "cluster")]
mod cluster;
mod counts;
mod denial_cache;
mod failure;
mod fallback;
mod freeze;
mod functions;
mod key_format;
mod leases;
mod persistence;
mod reset;
mod runtime;
mod scripts;
#[cfg(feature = "sentinel")]
mod sentinel;
mod tls;
