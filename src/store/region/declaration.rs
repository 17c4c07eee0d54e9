//! A ledger's declaration, its *birth*: written once by an operator
//! (`ratelimit-gateway ledger declare FILE`), read by the regions before they take from it.
//!
//! A ledger grants nothing without one: a Redis that restarted empty cannot know what it granted
//! before. The birth holds an epoch (when it was declared) and the regions' bound on clock skew,
//! by which every window an earlier life of the ledger may have granted is fenced.
//!
//! On a Redis Cluster a take reads the birth of its own hash slot: the declaration writes one
//! in every slot (16 384 calls, a few hundred at a time), and reading it reads them all, which
//! must agree. A primary that restarts empty loses its slots' births, and only those slots grant
//! nothing until the ledger is declared again (which writes the births missing, each with its
//! own epoch, and leaves the others).

use std::time::Duration;

use futures_util::future::try_join_all;

use super::ledger::Ledger;
use crate::clock::micros;
use crate::store::StoreError;
use crate::store::redis::wrapped::{Call, Entry};

/// Births read or written at once on a cluster (a round trip each 256): enough to fill the
/// round trips, few enough that a declaration never floods a node.
const AT_ONCE: usize = 256;

/// On a cluster, the slots whose births a region reads to learn whether the ledger is declared
/// (one in this many): a cheap question asked every tick while it is not, which a primary that
/// restarted empty answers "no" with a few of its slots.
const SAMPLE_EVERY: u16 = 1_024;

/// What [`Ledger::declare`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Declared {
    /// Declared now: it grants windows past its fence from this epoch on (µs since the Unix
    /// epoch, by the ledger's clock).
    Now {
        /// The new epoch.
        epoch: u64,
    },
    /// It was declared already, with the same max skew: left as it was.
    Already {
        /// The epoch it was declared at.
        epoch: u64,
    },
}

/// A ledger's declaration, as [`Ledger::birth`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Birth {
    /// When it was declared: µs since the Unix epoch, by the ledger's clock.
    pub epoch: u64,
    /// The regions' bound on clock skew it was declared with.
    pub max_skew: Duration,
}

impl Ledger {
    /// Declares this ledger, if it is not: it grants from now on, nothing of any window an
    /// earlier life of the ledger may have granted (a window starting within one period and
    /// twice `max_skew` of now, the regions' bound on clock skew). Safe to repeat: a ledger
    /// declared with the same `max_skew` is left as it is ([`Declared::Already`]); one declared
    /// with another is an error, and left as it is ([`declare_new`](Self::declare_new) changes
    /// it). For a ledger whose Redis is new, or was lost (restarted empty, or replaced); never
    /// write its keys by hand.
    pub async fn declare(&self, max_skew: Duration) -> Result<Declared, StoreError> {
        let (epoch, written) = self.write_birth(max_skew, "once").await?;
        Ok(if written {
            Declared::Now { epoch }
        } else {
            Declared::Already { epoch }
        })
    }

    /// Declares this ledger new whether or not it is: a new epoch, which fences every window
    /// starting within one period and twice `max_skew` of now. For a ledger whose Redis came
    /// back from a snapshot older than its last takes (it could grant them again), or to change
    /// its `max_skew`; the regions lose the units they were to get of the fenced windows.
    /// Returns the new epoch (µs since the Unix epoch, by the ledger's clock).
    pub async fn declare_new(&self, max_skew: Duration) -> Result<u64, StoreError> {
        Ok(self.write_birth(max_skew, "anew").await?.0)
    }

    /// The ledger's declaration, or `None` while it has none (it grants nothing). On a
    /// cluster, every slot's birth is read: a ledger declared in some slots only (a primary
    /// that restarted empty) is an error that names the slots without one, and the epoch is
    /// the latest of them all.
    pub async fn birth(&self) -> Result<Option<Birth>, StoreError> {
        let slots = self.birth_slots();
        let births = self.births(&slots).await?;
        agreed(&slots, &births)
    }

    /// Whether the ledger is declared, as cheaply as can be told: its birth on one server; on
    /// a cluster, the births of a sample of slots, all of which must be there.
    pub(crate) async fn declared(&self) -> Result<bool, StoreError> {
        let slots: Vec<Option<u16>> = self
            .birth_slots()
            .into_iter()
            .step_by(usize::from(SAMPLE_EVERY))
            .collect();
        let births = self.births(&slots).await?;
        Ok(births.iter().all(Option::is_some))
    }

    /// The births of `slots`, in their order.
    async fn births(&self, slots: &[Option<u16>]) -> Result<Vec<Option<Birth>>, StoreError> {
        let mut births = Vec::with_capacity(slots.len());
        for chunk in slots.chunks(AT_ONCE) {
            births.extend(try_join_all(chunk.iter().map(|&slot| self.read_birth(slot))).await?);
        }
        Ok(births)
    }

    async fn read_birth(&self, slot: Option<u16>) -> Result<Option<Birth>, StoreError> {
        let mut call = Call::new(Entry::Ledger, 0, 1);
        call.key(self.birth_key(slot)).arg("birth").arg(1);
        let birth: String = self.store.run(&call).await?;
        if birth.is_empty() {
            return Ok(None);
        }
        let fields: Vec<u64> = birth
            .split(' ')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| StoreError::bad_reply(format!("a ledger's birth of {birth:?}")))?;
        match fields[..] {
            [epoch, _, skew] => Ok(Some(Birth {
                epoch,
                max_skew: Duration::from_micros(skew),
            })),
            _ => Err(StoreError::bad_reply(format!(
                "a ledger's birth of {birth:?}"
            ))),
        }
    }

    /// Writes the birth (`mode` `once` or `anew`, `lua/ledger.lua`), once the replicas the
    /// ledger waits for hold it: the epoch, and whether it was written now. On a cluster, in
    /// every slot: `once` first reads them all, so that a conflicting declaration writes none
    /// (the first conflicting slot's call answers the conflict); the epoch is the latest one
    /// written, and the replicas are waited for once, on every primary, after the last.
    async fn write_birth(&self, max_skew: Duration, mode: &str) -> Result<(u64, bool), StoreError> {
        let call = |slot| {
            let mut call = Call::new(Entry::Ledger, 0, 1);
            call.key(self.birth_key(slot))
                .arg("declare")
                .arg(1)
                .arg(micros(max_skew))
                .arg(mode);
            call
        };
        if !self.store.is_cluster() {
            let ((epoch, written), _): ((u64, u32), u32) = self
                .store
                .run_and_wait(&call(None), self.replicas, self.wait)
                .await?;
            return Ok((epoch, written == 1));
        }
        let slots = self.birth_slots();
        if mode == "once" {
            let births = self.births(&slots).await?;
            let conflict = slots.iter().zip(&births).find_map(|(&slot, birth)| {
                birth
                    .filter(|birth| birth.max_skew != max_skew)
                    .map(|_| slot)
            });
            if let Some(slot) = conflict {
                let _: (u64, u32) = self.store.run(&call(slot)).await?;
            }
        }
        let mut written: Vec<(u64, u32)> = Vec::with_capacity(slots.len());
        for chunk in slots.chunks(AT_ONCE) {
            let calls: Vec<Call> = chunk.iter().map(|&slot| call(slot)).collect();
            written.extend(
                try_join_all(calls.iter().map(|call| self.store.run::<(u64, u32)>(call))).await?,
            );
        }
        if self.replicas > 0 {
            // Sent to every primary, on the connections that carried the writes.
            let mut wait = redis::cmd("WAIT");
            wait.arg(self.replicas).arg(
                u64::try_from(self.wait.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            );
            let _: u32 = self.store.query(&wait).await?;
        }
        // The latest epoch written now, or, when none was, the latest there was.
        let latest = |now: bool| {
            written
                .iter()
                .filter(|(_, written)| (*written == 1) == now)
                .map(|(epoch, _)| *epoch)
                .max()
        };
        Ok(match latest(true) {
            Some(epoch) => (epoch, true),
            None => (latest(false).unwrap_or_default(), false),
        })
    }
}

/// The one declaration the births of `slots` make: none when no slot has one; an error when
/// some lack one, or they disagree on the skew; else the latest epoch.
fn agreed(slots: &[Option<u16>], births: &[Option<Birth>]) -> Result<Option<Birth>, StoreError> {
    let missing: Vec<u16> = slots
        .iter()
        .zip(births)
        .filter(|(_, birth)| birth.is_none())
        .map(|(slot, _)| slot.unwrap_or_default())
        .collect();
    let declared: Vec<Birth> = births.iter().flatten().copied().collect();
    let Some(latest) = declared.iter().max_by_key(|birth| birth.epoch) else {
        return Ok(None);
    };
    if !missing.is_empty() {
        return Err(StoreError::error_reply(format!(
            "ledger declared in {} of {} hash slots only, not in {} (a primary that restarted \
             empty?): those grant nothing; declare it (ratelimit-gateway ledger declare FILE): \
             the slots declared are left as they are",
            declared.len(),
            slots.len(),
            ranges(&missing)
        )));
    }
    if declared
        .iter()
        .any(|birth| birth.max_skew != latest.max_skew)
    {
        return Err(StoreError::error_reply(
            "ledger declared with different max_skew in different hash slots: declare it anew \
             (ratelimit-gateway ledger declare --anew FILE)",
        ));
    }
    Ok(Some(*latest))
}

/// `slots` (ascending) as ranges: `slots 0-5460, slot 10923`.
fn ranges(slots: &[u16]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut start = 0;
    for index in 0..slots.len() {
        let ends = index + 1 == slots.len() || slots[index + 1] != slots[index] + 1;
        if ends {
            out.push(if start == index {
                format!("slot {}", slots[index])
            } else {
                format!("slots {}-{}", slots[start], slots[index])
            });
            start = index + 1;
        }
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use testkit::RedisServer;

    use super::*;
    use crate::store::RedisStore;

    #[test]
    fn a_ledger_declared_in_some_slots_only_names_the_others() {
        let birth = |epoch| {
            Some(Birth {
                epoch,
                max_skew: Duration::from_millis(10),
            })
        };
        let slots: Vec<Option<u16>> = (0..6).map(Some).collect();
        assert_eq!(agreed(&slots, &[None; 6]).unwrap(), None);
        let all = [birth(5), birth(7), birth(6), birth(5), birth(5), birth(5)];
        assert_eq!(agreed(&slots, &all).unwrap(), birth(7));
        let partly = [None, None, birth(5), None, birth(5), None];
        let error = agreed(&slots, &partly).unwrap_err().to_string();
        assert!(
            error.contains("declared in 2 of 6 hash slots only, not in slots 0-1, slot 3, slot 5"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn declaring_twice_changes_nothing_and_a_conflict_is_refused() {
        let redis = RedisServer::start();
        let ledger = Ledger::new(RedisStore::open(&redis.url()).unwrap());
        assert_eq!(ledger.birth().await.unwrap(), None);
        let skew = Duration::from_millis(20);
        let Declared::Now { epoch } = ledger.declare(skew).await.unwrap() else {
            panic!("a ledger never declared is declared now");
        };
        assert_eq!(
            ledger.declare(skew).await.unwrap(),
            Declared::Already { epoch }
        );
        let conflict = ledger.declare(Duration::from_millis(50)).await.unwrap_err();
        assert!(
            conflict
                .to_string()
                .contains("declared with max_skew 20000 us"),
            "{conflict}"
        );
        let birth = ledger.birth().await.unwrap().unwrap();
        assert_eq!((birth.epoch, birth.max_skew), (epoch, skew));
        // Declared anew: a later epoch, the new skew.
        let anew = ledger.declare_new(Duration::from_millis(50)).await.unwrap();
        assert!(anew > epoch);
        assert_eq!(
            ledger.birth().await.unwrap().unwrap().max_skew,
            Duration::from_millis(50)
        );
    }
}
