//! Concurrency permits in Redis: `lua/concurrency.lua` (which holds the KEYS/ARGV/reply contract),
//! invoked once per acquisition or release, and once per slot for a batch of renewals.

use std::collections::HashMap;
use std::sync::Arc;

use super::script::{Call, Entry};
use super::{Inner, RedisStore};
use crate::clock::micros;
use crate::store::permits::heartbeat::{Heartbeat, Renews};
use crate::store::permits::{
    Acquired, PermitId, PermitStore, PermitTtl, Renewal, Slot, ttl_micros,
};
use crate::store::redis::key::StorageKey;
use crate::store::{StoreError, StoreFuture};
use futures_util::future::join_all;

/// The Redis key of a slot: `<prefix>:<limit name>:cc:{<client key>}`. The client key is the hash
/// tag, so different clients' slots spread over a cluster.
pub(super) fn slot_key(prefix: &str, slot: &Slot) -> String {
    format!(
        "{prefix}:{}:cc:{{{}}}",
        slot.name(),
        StorageKey::new(slot.key()).as_str()
    )
}

/// A call of `operation` on `key` (`lua/concurrency.lua`), with the time arguments every
/// operation takes.
fn invocation(inner: &Inner, key: String, operation: &str) -> Call {
    let mut call = Call::new(Entry::Concurrency, 0, 1);
    call.key(key).arg(operation);
    match &inner.clock {
        Some(clock) => call.arg(clock.now_micros()),
        None => call.arg(""),
    };
    call.arg(inner.min_ttl_ms);
    call
}

fn acquire(
    inner: &Arc<Inner>,
    slot: &Slot,
    permit: PermitId,
    limit: u32,
    ttl: PermitTtl,
) -> StoreFuture<Acquired> {
    let mut call = invocation(inner, slot_key(&inner.prefix, slot), "acquire");
    call.arg(permit.to_string())
        .arg(limit)
        .arg(ttl_micros(ttl.duration()));
    let (inner, slot) = (inner.clone(), slot.clone());
    StoreFuture::new(async move {
        let reply: Vec<i64> = inner.connection.call(&call).await?;
        let (admitted, in_flight) = pair(&reply)?;
        if admitted {
            Heartbeat::hold(&inner, slot, permit, ttl);
        }
        Ok(Acquired::new(admitted, in_flight))
    })
}

fn release(inner: &Arc<Inner>, slot: &Slot, permit: PermitId) -> StoreFuture<bool> {
    // At once, not when the future runs: a permit whose release never reaches Redis must not be
    // kept alive by the heartbeat.
    inner.heartbeat.forget(permit);
    let mut call = invocation(inner, slot_key(&inner.prefix, slot), "release");
    call.arg(permit.to_string());
    let connection = inner.connection.clone();
    StoreFuture::new(async move {
        let reply: Vec<i64> = connection.call(&call).await?;
        pair(&reply).map(|(held, _)| held)
    })
}

impl RedisStore {
    /// How many permits this store's heartbeat is renewing (held by this process, not released,
    /// not found gone).
    pub fn renewing(&self) -> usize {
        self.inner.heartbeat.len()
    }
}

impl PermitStore for RedisStore {
    fn acquire(
        &self,
        slot: &Slot,
        permit: PermitId,
        limit: u32,
        ttl: PermitTtl,
    ) -> StoreFuture<Acquired> {
        acquire(&self.inner, slot, permit, limit, ttl)
    }

    fn release(&self, slot: &Slot, permit: PermitId) -> StoreFuture<bool> {
        release(&self.inner, slot, permit)
    }

    fn renew(&self, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        Renews::renew(&self.inner, renewals)
    }
}

impl Renews for Inner {
    fn heartbeat(&self) -> &Heartbeat {
        &self.heartbeat
    }

    /// One call per slot and TTL, all sent at once over the multiplexed connection (so they
    /// travel as one pipeline), each loading the library or script on its own if needed. When some calls fail, the
    /// others still count: their gone permits are forgotten, then the first error is answered.
    fn renew(self: &Arc<Self>, renewals: &[Renewal]) -> StoreFuture<Vec<PermitId>> {
        let mut groups: HashMap<(String, u64), Vec<PermitId>> = HashMap::new();
        for renewal in renewals {
            let group = (
                slot_key(&self.prefix, &renewal.slot),
                micros(renewal.ttl).max(1),
            );
            groups.entry(group).or_default().push(renewal.permit);
        }
        let calls: Vec<_> = groups
            .into_iter()
            .map(|((key, ttl), permits)| {
                let mut call = invocation(self, key, "renew");
                call.arg(ttl);
                for permit in &permits {
                    call.arg(permit.to_string());
                }
                let connection = self.connection.clone();
                async move {
                    let reply: Vec<i64> = connection.call(&call).await?;
                    if reply.len() != permits.len() {
                        return Err(StoreError::bad_reply(format!(
                            "renewing {} permits answered {} values",
                            permits.len(),
                            reply.len()
                        )));
                    }
                    Ok(permits
                        .into_iter()
                        .zip(reply)
                        .filter(|(_, renewed)| *renewed == 0)
                        .map(|(permit, _)| permit)
                        .collect::<Vec<_>>())
                }
            })
            .collect();
        let inner = self.clone();
        StoreFuture::new(async move {
            // Each slot on its own: one failing call (a key clobbered by another program, a
            // reply of the wrong shape) must not keep every other slot from being renewed or
            // from having its gone permits forgotten.
            let mut gone = Vec::new();
            let mut failed = None;
            for result in join_all(calls).await {
                match result {
                    Ok(slot_gone) => gone.extend(slot_gone),
                    Err(err) => {
                        failed.get_or_insert(err);
                    }
                }
            }
            inner.heartbeat.forget_gone(&gone);
            match failed {
                Some(err) => Err(err),
                None => Ok(gone),
            }
        })
    }
}

/// A `{flag, count}` reply.
fn pair(reply: &[i64]) -> Result<(bool, u64), StoreError> {
    match *reply {
        [flag @ (0 | 1), count] if count >= 0 => Ok((flag == 1, count as u64)),
        _ => Err(StoreError::bad_reply(format!(
            "expected {{0 or 1, count}} from the concurrency script, got {reply:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_keys_hash_tag_the_client_and_digest_long_keys() {
        let slot = Slot::new("ws", "user-7").unwrap();
        assert_eq!(slot_key("rl", &slot), "rl:ws:cc:{user-7}");
        let long = Slot::new("ws", "u".repeat(200)).unwrap();
        let key = slot_key("rl", &long);
        assert!(key.starts_with("rl:ws:cc:{#") && key.len() < 50, "{key}");
    }

    #[test]
    fn malformed_replies_are_protocol_errors() {
        assert_eq!(pair(&[1, 3]).unwrap(), (true, 3));
        assert!(pair(&[2, 3]).is_err());
        assert!(pair(&[1, -3]).is_err());
        assert!(pair(&[1]).is_err());
    }
}
