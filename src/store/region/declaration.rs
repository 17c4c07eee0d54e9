//! A ledger's declaration, its *birth*: written once by an operator
//! (`ratelimit-gateway ledger declare FILE`), read by the regions before they take from it.
//!
//! A ledger grants nothing without one: a Redis that restarted empty cannot know what it granted
//! before. The birth holds an epoch (when it was declared) and the regions' bound on clock skew,
//! by which every window an earlier life of the ledger may have granted is fenced.

use std::time::Duration;

use super::ledger::Ledger;
use crate::clock::micros;
use crate::store::StoreError;
use crate::store::redis::wrapped::{Call, Entry};

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

    /// The ledger's declaration, or `None` while it has none (it grants nothing).
    pub async fn birth(&self) -> Result<Option<Birth>, StoreError> {
        let mut call = Call::new(Entry::Ledger, 0, 1);
        call.key(self.birth_key()).arg("birth").arg(1);
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
    /// ledger waits for hold it: the epoch, and whether it was written now.
    async fn write_birth(&self, max_skew: Duration, mode: &str) -> Result<(u64, bool), StoreError> {
        let mut call = Call::new(Entry::Ledger, 0, 1);
        call.key(self.birth_key())
            .arg("declare")
            .arg(1)
            .arg(micros(max_skew))
            .arg(mode);
        let ((epoch, written), _): ((u64, u32), u32) = self
            .store
            .run_and_wait(&call, self.replicas, self.wait)
            .await?;
        Ok((epoch, written == 1))
    }
}

#[cfg(test)]
mod tests {
    use testkit::RedisServer;

    use super::*;
    use crate::store::RedisStore;

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
