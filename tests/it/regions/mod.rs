//! One quota across regions (`store::region::RegionStore`): three regions on one machine, each its own
//! `redis-server` and instances, a ledger reached through links that add 30, 100 and 150 ms
//! and cut on command ([`world`]). Every scenario checks, from the log of every admission with
//! its time, that no window admitted more than the quota worldwide (or, in emergency mode, the
//! documented bound), and that the regions did admit what the scenario should let through.
//! Windows are one second (four in `spread`), so the whole module takes tens of seconds.

#[cfg(feature = "cluster")]
mod cluster;
mod config;
mod demand;
mod failures;
mod give_back;
mod partition;
mod rates;
mod spread;
mod world;
