//! One quota across regions, run as processes of the binary: three regions, each its own
//! `redis-server` and two `ratelimit-gateway proxy` processes configured as docs/regions.md
//! tells operators, a ledger declared with `ratelimit-gateway ledger declare` and reached
//! through links of 40, 80 and 150 ms one way ([`world`]), load drivers asking each region at a
//! rate a scenario sets ([`drive`]), and an upstream that logs every request it is sent
//! ([`upstream`]). Every scenario counts, from the upstream's own log, the admissions of each
//! aligned window: never above the quota worldwide (or emergency mode's documented bound), and
//! what the scenario should let through; and that no request waits on the ledger, a global
//! policy's p50 beside a plain policy's asked alongside ([`tally`]). The scenarios are the
//! library's `tests/it/regions` (in process there).
//!
//! Windows are one second. `cargo test -p tower-redis-ratelimit-gateway --test proxy regions --
//! --nocapture` prints each scenario's figures (docs/regions.md, "Measured through the binary").

mod cluster;
mod decided;
mod demand;
mod drive;
mod failures;
mod partition;
mod rates;
mod tally;
mod upstream;
mod world;
