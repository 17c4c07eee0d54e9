//! [`StateNames`]: each rule's state name, `<rule>:<state code>`, the middle of its Redis keys
//! (`<prefix>:<rule>:<state code>:{<client>}`), made once per policy a store meets rather than
//! formatted for every call.
//!
//! **How a policy's names are found.** A store keeps them in a table of its own, keyed by the
//! policy: its hash is that of the policy's rule ids (integers the policy computed once, when it
//! was built), and an entry is the policy's if [`Policy::same`] says so: the same `Policy` value
//! (a pointer comparison, the common case: a layer's one policy, or a plan's), or one of equal
//! rules, whose names are equal. A policy met before costs a hash of a few integers, a shard's
//! read lock and an `Arc` clone: no allocation, and no lock that waits, since only a policy not
//! met before writes. A batch looks its policy up once for all of its requests.
//!
//! **Bounds.** A process meets a handful of policies (its layers', its plans'), but a program may
//! make one per request; a shard that fills is emptied and filled anew, so the table never holds
//! more than [`MAX_POLICIES`] policies, and such a program pays what it always paid, the names'
//! allocation per request.

use std::hash::BuildHasher;
use std::sync::{Arc, PoisonError, RwLock};

use hashbrown::HashTable;

use crate::policy::Policy;

/// Each rule's state name, in rule order.
pub(in crate::store) type Names = Arc<[Box<str>]>;

/// How many shards the table is split into (each its own lock).
const SHARDS: usize = 8;

/// The most policies a store keeps the names of.
const MAX_POLICIES: usize = 1_024;

/// The state names of the policies a store has met (see the module's docs).
pub(in crate::store) struct StateNames {
    shards: Box<[RwLock<HashTable<Known>>]>,
    hasher: foldhash::fast::RandomState,
}

/// A policy met, and its names.
struct Known {
    hash: u64,
    /// Keeps the policy alive while its entry is here: a pointer comparison may then never meet
    /// another policy at its address.
    policy: Policy,
    names: Names,
}

impl StateNames {
    pub(in crate::store) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| RwLock::default()).collect(),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The state names of `policy`'s rules, in rule order: found, or made and kept.
    pub(in crate::store) fn of(&self, policy: &Policy) -> Names {
        let hash = self.hasher.hash_one(policy.rule_ids());
        let shard = &self.shards[(hash >> 32) as usize % SHARDS];
        let found = shard
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .find(hash, |known| known.policy.same(policy))
            .map(|known| known.names.clone());
        if let Some(names) = found {
            return names;
        }
        let mut table = shard.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(known) = table.find(hash, |known| known.policy.same(policy)) {
            return known.names.clone();
        }
        if table.len() >= MAX_POLICIES / SHARDS {
            table.clear();
        }
        let names = names(policy);
        let known = Known {
            hash,
            policy: policy.clone(),
            names: names.clone(),
        };
        table.insert_unique(hash, known, |known| known.hash);
        names
    }
}

/// The state names of `policy`'s rules, made now.
pub(in crate::store) fn names(policy: &Policy) -> Names {
    policy
        .rules()
        .iter()
        .map(|rule| format!("{}:{}", rule.name(), rule.state_code()).into())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Rule;
    use crate::quota::Quota;

    fn text(names: &Names) -> Vec<&str> {
        names.iter().map(|name| &**name).collect()
    }

    #[test]
    fn a_policy_is_named_once_and_an_equal_one_shares_its_names() {
        let names = StateNames::new();
        let policy = Policy::new([
            Rule::gcra("second", Quota::per_second(10)),
            Rule::sliding_window("hour", Quota::per_hour(1_000), 60),
        ])
        .unwrap();
        let first = names.of(&policy);
        assert_eq!(text(&first), ["second:gcra-10/1s", "hour:sw60-1h"]);
        assert!(Arc::ptr_eq(&first, &names.of(&policy.clone())));
        let equal = Policy::new(policy.rules().to_vec()).unwrap();
        assert!(Arc::ptr_eq(&first, &names.of(&equal)));
        let other = Policy::try_from(Rule::gcra("second", Quota::per_second(20))).unwrap();
        assert_eq!(text(&names.of(&other)), ["second:gcra-20/1s"]);
    }

    #[test]
    fn the_table_stays_bounded_whatever_the_policies() {
        let names = StateNames::new();
        for limit in 1..=5_000 {
            let policy = Policy::try_from(Rule::gcra("api", Quota::per_second(limit))).unwrap();
            assert_eq!(text(&names.of(&policy)), [format!("api:gcra-{limit}/1s")]);
        }
        let kept: usize = names
            .shards
            .iter()
            .map(|shard| shard.read().unwrap().len())
            .sum();
        assert!(kept <= MAX_POLICIES, "{kept}");
    }
}
