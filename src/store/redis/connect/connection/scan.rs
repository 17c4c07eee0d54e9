//! Every key that matches a pattern, for an operator's reading (`store::region`'s holdings):
//! `SCAN` on the one server, or on every primary of a cluster (a cluster's `SCAN` would read
//! one node, and redis-rs sends it to any).

use std::sync::Arc;

use super::{Link, SharedConnection};
use crate::store::StoreError;

/// Keys read per `SCAN` step: a few at a time, so that the server never blocks on it.
const COUNT: u64 = 100;

impl SharedConnection {
    /// The keys that match `pattern` (a `SCAN MATCH` glob), on every primary.
    pub(in crate::store::redis) async fn scan(
        self: &Arc<Self>,
        pattern: &str,
    ) -> Result<Vec<String>, StoreError> {
        let checkout = self.get().await?;
        let mut keys = Vec::new();
        for node in self.primaries(&checkout.connection).await? {
            let mut cursor = 0_u64;
            loop {
                let mut scan = redis::cmd("SCAN");
                scan.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(COUNT);
                let mut connection = checkout.connection.clone();
                checkout.health.sending(self.now_ms());
                let reply = connection.query_at(&scan, node).await;
                let (next, names): (u64, Vec<String>) = self.settle(&checkout, reply)?;
                keys.extend(names);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(keys)
    }

    /// A slot of each primary (`CLUSTER SLOTS`), or one `None` for the one server.
    async fn primaries(self: &Arc<Self>, link: &Link) -> Result<Vec<Option<u16>>, StoreError> {
        if !link.is_cluster() {
            return Ok(vec![None]);
        }
        let ranges: Vec<Vec<redis::Value>> = self.query(redis::cmd("CLUSTER").arg("SLOTS")).await?;
        let mut primaries: Vec<(redis::Value, u16)> = Vec::new();
        for range in ranges {
            let (Some(start), Some(primary)) = (range.first(), range.get(2)) else {
                continue;
            };
            let start = redis::from_redis_value_ref::<u16>(start)
                .map_err(|err| StoreError::bad_reply(format!("CLUSTER SLOTS: {err}")))?;
            if !primaries.iter().any(|(known, _)| known == primary) {
                primaries.push((primary.clone(), start));
            }
        }
        Ok(primaries.into_iter().map(|(_, slot)| Some(slot)).collect())
    }
}
