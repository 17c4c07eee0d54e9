//! Every key of one call is in one cluster slot, whatever the client key.

use super::StorageKey;
use crate::key::Key;
use crate::policy::Rule;
use crate::quota::Quota;
#[cfg(feature = "concurrency")]
use crate::store::redis::permits;
use crate::store::redis::script;

/// The hash tag of a Redis key as a cluster computes it: the bytes between the first `{` and
/// the next `}`, if that is not empty; else the whole key.
fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{') {
        if let Some(close) = key[open + 1..].find('}') {
            if close > 0 {
                return &key[open + 1..open + 1 + close];
            }
        }
    }
    key
}

fn random_key(rng: &mut fastrand::Rng) -> Key {
    let len = rng.usize(1..200);
    let bytes: Vec<u8> = (0..len)
        .map(|_| match rng.u8(0..4) {
            0 => b'{',
            1 => b'}',
            _ => rng.u8(..),
        })
        .collect();
    Key::from(bytes)
}

/// Every key a script call touches carries the client's storage key as its one hash tag:
/// the rule keys of a decision, a grant or a refund (all from `state_key`), and a
/// concurrency slot's key (the fleet shedder's is a slot with a fixed client key). So each
/// call touches one cluster slot, whatever bytes a client sends as its key.
#[test]
fn every_key_of_a_call_shares_one_hash_tag_whatever_the_client_key() {
    let quota = Quota::per_minute(10).with_burst(10);
    let rules = [
        Rule::fixed_window("fw", quota),
        Rule::gcra("gcra", quota),
        Rule::sliding_log("log", quota),
        Rule::sliding_window("sw", quota, 6),
        Rule::token_bucket("tb", quota),
    ];
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2_000 {
        let key = random_key(&mut rng);
        let client = StorageKey::new(&key);
        let tag = client.as_str();
        assert!(!tag.is_empty() && !tag.contains(['{', '}']), "{tag:?}");
        for rule in &rules {
            let state = script::state_key("app", rule, tag);
            assert_eq!(hash_tag(&state), tag, "{state}");
            assert_eq!(state.matches('{').count(), 1, "{state}");
        }
        #[cfg(feature = "concurrency")]
        {
            let slot = crate::store::permits::Slot::new("ws", key.clone()).unwrap();
            let slot_key = permits::slot_key("app", &slot);
            assert_eq!(hash_tag(&slot_key), tag, "{slot_key}");
            assert_eq!(slot_key.matches('{').count(), 1, "{slot_key}");
        }
    }
}
