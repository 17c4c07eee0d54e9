//! [`Reset`]: what a reset deleted, as every instance hears it on the reset channel.
//!
//! The message is text, words separated by spaces: `reset1 <client> <state>...`, the client's
//! storage key (verbatim or its digest, never the raw key, which may be a secret: the channel is
//! readable by any client of the server) and each rule's state name, `<rule>:<state code>` (the
//! part of its Redis key that a quota change renames). None of them holds a space: storage keys
//! are printable ASCII, rule names and state codes narrower still.

use crate::key::Key;
use crate::store::redis::key::StorageKey;

/// The first word: a message format of another version is ignored rather than misread.
const VERSION: &str = "reset1";

/// One reset: the state of these rules deleted for this client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::store::redis) struct Reset {
    client: Box<str>,
    states: Box<[Box<str>]>,
}

impl Reset {
    /// The reset of `client` (a storage key) under every rule of a policy, whose state names
    /// are `states`.
    pub(in crate::store::redis) fn new(client: &str, states: &[Box<str>]) -> Self {
        Self {
            client: client.into(),
            states: states.into(),
        }
    }

    pub(in crate::store::redis) fn encode(&self) -> String {
        let mut text = format!("{VERSION} {}", self.client);
        for state in &self.states {
            text.push(' ');
            text.push_str(state);
        }
        text
    }

    /// The reset a message tells of; `None` for anything else.
    pub(in crate::store::redis) fn decode(message: &[u8]) -> Option<Self> {
        let mut words = std::str::from_utf8(message).ok()?.split(' ');
        if words.next()? != VERSION {
            return None;
        }
        let client = words.next().filter(|client| !client.is_empty())?;
        let states: Box<[Box<str>]> = words.map(Box::from).collect();
        (!states.is_empty()).then(|| Self {
            client: client.into(),
            states,
        })
    }

    /// Whether what an instance remembers of `key` under a policy whose rules' state names are
    /// `states` counted state this reset deleted: the same client, and a rule of the policy among
    /// the reset ones (a policy that shares one rule with the reset one shares its state).
    pub(in crate::store::redis) fn covers(&self, key: &Key, states: &[Box<str>]) -> bool {
        states.iter().any(|state| self.states.contains(state))
            && StorageKey::names(&self.client, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, Rule};
    use crate::quota::Quota;
    use crate::store::redis::key::names::{Names, names};

    /// The state names of a policy of `rules`.
    fn states(rules: impl IntoIterator<Item = Rule>) -> Names {
        names(&Policy::new(rules).unwrap())
    }

    #[test]
    fn a_message_reads_back_as_the_reset_it_tells_of() {
        let api = Rule::gcra("api", Quota::per_second(10));
        let hour = Rule::sliding_window("hour", Quota::per_hour(1_000), 60);
        let reset = Reset::new("203.0.113.5", &states([api, hour]));
        let text = reset.encode();
        assert_eq!(text, "reset1 203.0.113.5 api:gcra-10/1s hour:sw60-1h");
        assert_eq!(Reset::decode(text.as_bytes()), Some(reset));
        for other in ["", "reset1", "reset1 x", "reset2 x a:b", "hello world"] {
            assert_eq!(Reset::decode(other.as_bytes()), None, "{other:?}");
        }
        assert_eq!(Reset::decode(&[0xff, 0xfe]), None);
    }

    #[test]
    fn a_reset_covers_the_policies_that_share_a_rule_state_with_it_for_its_client() {
        let api = Rule::gcra("api", Quota::per_second(10));
        let key = Key::from("L".repeat(100));
        let client = StorageKey::new(&key);
        let reset = Reset::new(client.as_str(), &states([api.clone()]));
        assert!(reset.covers(&key, &states([api.clone()])));
        // Another policy with the same rule counts in the same state.
        let both = states([Rule::fixed_window("day", Quota::per_day(5)), api.clone()]);
        assert!(reset.covers(&key, &both));
        // Another client, another rule, or the same name with another quota (other state).
        assert!(!reset.covers(&Key::from("other"), &states([api])));
        assert!(!reset.covers(&key, &states([Rule::gcra("web", Quota::per_second(10))])));
        assert!(!reset.covers(&key, &states([Rule::gcra("api", Quota::per_second(20))])));
    }
}
