//! [`GlobalKey`]: a client key under a global policy, what allotments are counted for, and the
//! Redis keys that count them in a region and on the ledger.

use crate::clock::micros;
use crate::policy::Policy;
use crate::store::redis::wrapped::{Names, StorageKey};

use super::meter::Meter;
use super::window::Window;

/// What tells a global key apart in an instance's tables: its rule's state name and its client
/// key's storage form.
pub(crate) type KeyId = (Box<str>, Box<str>);

/// A client key under a global policy (one rule, allotted in windows: see `policy::global`).
#[derive(Clone, Debug)]
pub(crate) struct GlobalKey {
    pub(in crate::store) client: StorageKey,
    pub(crate) policy: Policy,
    /// The policy's state names (of its one rule), from the region store's table of them.
    pub(in crate::store) states: Names,
}

impl GlobalKey {
    /// The rule's limit: units per period, worldwide.
    pub(crate) fn limit(&self) -> u64 {
        u64::from(self.policy.rules()[0].quota().limit())
    }

    /// The most units of one window the ledger may grant: the limit, or a bucket's burst. A
    /// request of a higher cost is never admitted.
    pub(crate) fn quota(&self) -> u64 {
        self.meter().most(self.limit())
    }

    /// The units a window refills at the rule's rate (the limit over the windows of a period): what
    /// an emergency share is a fraction of.
    pub(crate) fn window_quota(&self) -> u64 {
        self.limit() / u64::from(self.policy.window_count())
    }

    pub(crate) fn meter(&self) -> Meter {
        Meter::of(&self.policy)
    }

    /// The rule's period (µs).
    pub(crate) fn rule_period_us(&self) -> u64 {
        micros(self.policy.rules()[0].quota().period()).max(1)
    }

    /// A window's length (µs): what the regions and the ledger count as a window.
    pub(crate) fn period_us(&self) -> u64 {
        (self.rule_period_us() / u64::from(self.policy.window_count())).max(1)
    }

    /// How long (ms, at least 1) the ledger keeps what it writes of `window` from `now_us`: to
    /// the window's end and as long as its grants bear on others ([`Meter::memory_us`]).
    pub(crate) fn ledger_ttl_ms(&self, window: Window, now_us: u64) -> u64 {
        let memory = self.meter().memory_us(self.limit(), window.period_us);
        window
            .end_us()
            .saturating_add(memory)
            .saturating_sub(now_us)
            .div_ceil(1_000)
            .max(1)
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

    /// A rule allotted in several windows a period names its window count too: regions whose
    /// rules were allotted differently (a burst changed in one of them first) never count one
    /// another's windows as their own.
    fn window_key(&self, prefix: &str, side: &str, window: Window) -> String {
        let client = self.client.as_str();
        match self.policy.window_count() {
            1 => format!(
                "{prefix}:{side}:{}:{{{client}}}:{}",
                self.states[0], window.index
            ),
            windows => format!(
                "{prefix}:{side}:{}:w{windows}:{{{client}}}:{}",
                self.states[0], window.index
            ),
        }
    }

    /// The ledger's token bucket of a bucket rule, `<prefix>:ledger:<rule>:<code>:w<k>:{<client>}:meter`.
    pub(crate) fn meter_key(&self, prefix: &str) -> String {
        format!(
            "{prefix}:ledger:{}:w{}:{{{}}}:meter",
            self.states[0],
            self.policy.window_count(),
            self.client.as_str()
        )
    }

    /// What tells this key apart in an instance's tables: the state name and the client.
    pub(crate) fn id(&self) -> KeyId {
        (self.states[0].clone(), self.client.as_str().into())
    }
}
