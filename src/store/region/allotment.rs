//! The region's side of a global key (`lua/region.lua`): what the region holds of a window's
//! quota and has spent of it, in the region's own Redis, shared by the region's instances.

use crate::store::redis::wrapped::{Call, Entry};
use crate::store::{RedisStore, StoreError};

use super::global_key::GlobalKey;
use super::window::Window;

/// A window's counts in the region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Units held: allotments applied, less those surrendered.
    pub(crate) held: u64,
    /// Units spent.
    pub(crate) spent: u64,
    /// Units asked, admitted or refused, as the instances reported them.
    pub(crate) asked: u64,
}

impl Counts {
    pub(crate) fn unspent(&self) -> u64 {
        self.held.saturating_sub(self.spent)
    }
}

/// The region's Redis store, and the calls on it.
pub(crate) struct Region {
    pub(crate) store: RedisStore,
}

fn call(key: &GlobalKey, store: &RedisStore, window: Window, op: &str, now_us: u64) -> Call {
    let mut call = Call::new(Entry::Region, 0, 1);
    call.key(key.region_key(store.prefix(), window))
        .arg(op)
        .arg(window.ttl_ms(now_us));
    call
}

impl Region {
    /// Spends `cost` units of `window` if the region holds them: `(admitted, counts)`.
    pub(crate) async fn spend(
        &self,
        key: &GlobalKey,
        window: Window,
        cost: u32,
        now_us: u64,
    ) -> Result<(bool, Counts), StoreError> {
        let mut call = call(key, &self.store, window, "spend", now_us);
        call.arg(cost);
        let (admitted, held, spent): (i64, u64, u64) = self.store.run(&call).await?;
        Ok((
            admitted == 1,
            Counts {
                held,
                spent,
                asked: 0,
            },
        ))
    }

    /// Adds units the ledger granted by move `id`, once whatever the retries.
    pub(crate) async fn apply(
        &self,
        key: &GlobalKey,
        window: Window,
        id: &str,
        units: u64,
        now_us: u64,
    ) -> Result<bool, StoreError> {
        let mut call = call(key, &self.store, window, "apply", now_us);
        call.arg(id).arg(units);
        let (applied, _held): (i64, u64) = self.store.run(&call).await?;
        Ok(applied == 1)
    }

    /// Gives up to `most` unspent units up, by move `id`: the units given up (the same on a
    /// retry).
    pub(crate) async fn surrender(
        &self,
        key: &GlobalKey,
        window: Window,
        id: &str,
        most: u64,
        now_us: u64,
    ) -> Result<u64, StoreError> {
        let mut call = call(key, &self.store, window, "surrender", now_us);
        call.arg(id).arg(most);
        self.store.run(&call).await
    }

    /// Reports `asked` units asked here since the last report, and reads the window's counts.
    pub(crate) async fn sync(
        &self,
        key: &GlobalKey,
        window: Window,
        asked: u64,
        now_us: u64,
    ) -> Result<Counts, StoreError> {
        let mut call = call(key, &self.store, window, "sync", now_us);
        call.arg(asked);
        let (held, spent, asked): (u64, u64, u64) = self.store.run(&call).await?;
        Ok(Counts { held, spent, asked })
    }

    /// Whether this instance (`instance`) moves the region's allotments for the next `ttl_ms`:
    /// one instance of a region does, the first to ask, for as long as it keeps asking.
    pub(crate) async fn lead(&self, instance: &str, ttl_ms: u64) -> Result<bool, StoreError> {
        let mut call = Call::new(Entry::Region, 0, 1);
        call.key(format!("{}:region:mover", self.store.prefix()))
            .arg("lead")
            .arg(ttl_ms)
            .arg(instance);
        let leads: i64 = self.store.run(&call).await?;
        Ok(leads == 1)
    }
}

#[cfg(test)]
mod tests {
    use testkit::RedisServer;

    use super::*;
    use crate::key::Key;
    use crate::policy::{Policy, Rule};
    use crate::quota::Quota;
    use crate::store::redis::wrapped::{StorageKey, names};

    #[tokio::test]
    async fn a_region_spends_only_what_it_holds_and_each_move_applies_once() {
        let redis = RedisServer::start();
        let region = Region {
            store: RedisStore::open(&redis.url()).unwrap(),
        };
        let policy = Policy::global(Rule::fixed_window("api", Quota::per_second(100))).unwrap();
        let key = GlobalKey {
            client: StorageKey::new(&Key::from("customer")),
            states: names(&policy),
            policy,
        };
        let now = 5_000_000_000_000;
        let window = Window::at(now, 1_000_000);
        assert!(!region.spend(&key, window, 1, now).await.unwrap().0);
        assert!(region.apply(&key, window, "m1", 3, now).await.unwrap());
        assert!(!region.apply(&key, window, "m1", 3, now).await.unwrap());
        for _ in 0..3 {
            assert!(region.spend(&key, window, 1, now).await.unwrap().0);
        }
        let (admitted, counts) = region.spend(&key, window, 1, now).await.unwrap();
        assert!(!admitted);
        assert_eq!((counts.held, counts.spent), (3, 3));
        // Another window holds nothing of this one's.
        assert!(!region.spend(&key, window.next(), 1, now).await.unwrap().0);

        // A surrender gives up only unspent units, and a retry gives the same answer.
        assert!(region.apply(&key, window, "m2", 5, now).await.unwrap());
        assert_eq!(
            region.surrender(&key, window, "s1", 9, now).await.unwrap(),
            5
        );
        assert_eq!(
            region.surrender(&key, window, "s1", 9, now).await.unwrap(),
            5
        );
        let counts = region.sync(&key, window, 4, now).await.unwrap();
        assert_eq!((counts.held, counts.spent, counts.asked), (3, 3, 4));
        // Every write set a TTL: the window's end and one period more.
        let ttl = redis.pttl(&key.region_key("ratelimit", window));
        assert!((1_000..=2_000).contains(&ttl), "{ttl}");
    }
}
