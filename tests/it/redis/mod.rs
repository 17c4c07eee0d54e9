//! The Redis store on its own: exact counts across replicas, outages and stalls, the names of its
//! keys, what its scripts write, and its life across tokio runtimes.

mod counts;
mod denial_cache;
mod failure;
mod freeze;
mod key_format;
mod runtime;
mod scripts;
