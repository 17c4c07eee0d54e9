//! Concurrency limiting: `ConcurrencyLimitLayer`, the stores' slot operations, the heartbeat that
//! renews permits, and what happens to slots when requests, connections or Redis fail.

mod heartbeat;
mod layer;
mod partition;
mod soak;
mod store;
mod websocket;
