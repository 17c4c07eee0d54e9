//! [`GlobalKey`]: a client key under a global policy, what allotments are counted for, and the
//! Redis keys that count them in a region and on the ledger.

use crate::clock::micros;
use crate::policy::Policy;
use crate::store::redis::wrapped::{Names, StorageKey};

use super::window::Window;

/// What tells a global key apart in an instance's tables: its rule's state name and its client
/// key's storage form.
pub(crate) type KeyId = (Box<str>, Box<str>);

/// A client key under a global policy (one fixed-window rule).
#[derive(Clone, Debug)]
pub(crate) struct GlobalKey {
    pub(in crate::store) client: StorageKey,
    pub(crate) policy: Policy,
    /// The policy's state names (of its one rule), from the region store's table of them.
    pub(in crate::store) states: Names,
}

impl GlobalKey {
    /// The rule's quota: units per window, worldwide.
    pub(crate) fn quota(&self) -> u64 {
        u64::from(self.policy.rules()[0].quota().limit())
    }

    pub(crate) fn period_us(&self) -> u64 {
        micros(self.policy.rules()[0].quota().period()).max(1)
    }

    /// The region's hash of `window`: `<prefix>:region:<rule>:<code>:{<client>}:<index>` (the
    /// client key is the hash tag, as for every key of the Redis store).
    pub(crate) fn region_key(&self, prefix: &str, window: Window) -> String {
        self.window_key(prefix, "region", window)
    }

    /// The ledger's hash of `window`, `<prefix>:ledger:<rule>:<code>:{<client>}:<index>`.
    pub(crate) fn ledger_key(&self, prefix: &str, window: Window) -> String {
        self.window_key(prefix, "ledger", window)
    }

    fn window_key(&self, prefix: &str, side: &str, window: Window) -> String {
        format!(
            "{prefix}:{side}:{}:{{{}}}:{}",
            self.states[0],
            self.client.as_str(),
            window.index
        )
    }

    /// What tells this key apart in an instance's tables: the state name and the client.
    pub(crate) fn id(&self) -> KeyId {
        (self.states[0].clone(), self.client.as_str().into())
    }
}
