use std::time::Duration;

use super::*;
use crate::decision::RuleVerdict;
use crate::policy::Rule;
use crate::quota::Quota;

fn policy() -> Policy {
    Policy::try_from(Rule::fixed_window("api", Quota::per_minute(5))).unwrap()
}

/// A decision on [`policy`]: its outcome, counts and waits (µs).
fn decision(outcome: Outcome, remaining: u64, used: u64, reset: u64, retry: u64) -> Decision {
    let verdict = RuleVerdict::new(
        outcome,
        remaining,
        used,
        Duration::from_micros(reset),
        Duration::from_micros(retry),
    );
    Decision::from_verdicts(&policy(), &[verdict])
}

/// A denial by the full rule, with these waits (µs): the window resets in `reset`, the
/// request fits in `retry`.
fn denied(reset: u64, retry: u64) -> Decision {
    decision(Outcome::Denied, 0, 5, reset, retry)
}

/// An admission, the rule with room to spare.
fn allowed() -> Decision {
    decision(Outcome::Allowed, 4, 1, 1_000_000, 0)
}

#[test]
fn a_denial_is_answered_until_it_ends_with_its_waits_counting_down() {
    let denials = Denials::new(100);
    let key = Key::from("abuser");
    denials.learn(
        &key,
        &policy(),
        1,
        (1_000, 0),
        &denied(9_000, 6_000),
        Vec::new,
    );
    let later = denials
        .answer(&key, &policy(), 1, 3_500)
        .expect("still denied");
    assert_eq!(later.outcome(), Outcome::Denied);
    assert_eq!(later.retry_after(), Some(Duration::from_micros(3_500)));
    assert_eq!(later.full_after(), Duration::from_micros(6_500));
    assert_eq!((later.remaining(), later.used()), (0, 5));
    assert!(denials.answer(&key, &policy(), 1, 6_999).is_some());
    assert!(denials.answer(&key, &policy(), 1, 7_000).is_none(), "ended");
    assert_eq!(denials.len(), 0, "an ended denial is forgotten when met");
}

#[test]
fn only_the_same_key_policy_and_cost_are_answered() {
    let denials = Denials::new(100);
    let key = Key::from("abuser");
    denials.learn(&key, &policy(), 1, (0, 0), &denied(9_000, 6_000), Vec::new);
    assert!(
        denials
            .answer(&Key::from("other"), &policy(), 1, 1)
            .is_none()
    );
    let other = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(6))).unwrap();
    assert!(
        denials.answer(&key, &other, 1, 1).is_none(),
        "another quota"
    );
    let equal = Policy::try_from(Rule::fixed_window("api", Quota::per_minute(5))).unwrap();
    assert!(
        denials.answer(&key, &equal, 1, 1).is_some(),
        "an equal policy"
    );
    for cost in [0, 2, 5] {
        assert!(
            denials.answer(&key, &policy(), cost, 1).is_none(),
            "cost {cost}"
        );
    }
    // Denials of other costs, and anything but denials, are not remembered.
    let fresh = Key::from("fresh");
    denials.learn(
        &fresh,
        &policy(),
        2,
        (0, 0),
        &denied(9_000, 6_000),
        Vec::new,
    );
    denials.learn(&fresh, &policy(), 1, (0, 0), &allowed(), Vec::new);
    let never = decision(Outcome::Never, 5, 0, 0, 0);
    denials.learn(&fresh, &policy(), 1, (0, 0), &never, Vec::new);
    assert!(denials.answer(&fresh, &policy(), 1, 1).is_none());
    // Nor is a rule over its capacity (a quota lowered under the same name): it drains, and
    // its counts move, while it still denies.
    let over = decision(Outcome::Denied, 0, 7, 9_000_000, 6_000_000);
    denials.learn(&fresh, &policy(), 1, (0, 0), &over, Vec::new);
    assert!(denials.answer(&fresh, &policy(), 1, 1).is_none());
    assert_eq!(denials.len(), 1);
}

#[test]
fn a_newer_answer_of_the_store_replaces_a_remembered_denial() {
    let denials = Denials::new(100);
    let key = Key::from("abuser");
    denials.learn(&key, &policy(), 1, (0, 0), &denied(9_000, 6_000), Vec::new);
    // The store, asked again (say the caller's clock went back), admitted a request: its
    // state is not what the denial said, so the denial goes.
    denials.learn(&key, &policy(), 2, (100, 0), &allowed(), Vec::new);
    assert!(denials.answer(&key, &policy(), 1, 200).is_none());
    // A newer denial replaces an older one.
    denials.learn(
        &key,
        &policy(),
        1,
        (300, 0),
        &denied(9_000, 2_000),
        Vec::new,
    );
    denials.learn(
        &key,
        &policy(),
        1,
        (400, 0),
        &denied(9_000, 5_000),
        Vec::new,
    );
    let answer = denials.answer(&key, &policy(), 1, 500).unwrap();
    assert_eq!(answer.retry_after(), Some(Duration::from_micros(4_900)));
    assert_eq!(denials.len(), 1);
}

#[test]
fn a_reset_forgets_what_it_covers_and_answers_asked_before_it_are_not_learned() {
    let denials = Denials::new(100);
    let (abuser, other) = (Key::from("abuser"), Key::from("other"));
    denials.learn(
        &abuser,
        &policy(),
        1,
        (0, 0),
        &denied(9_000, 6_000),
        Vec::new,
    );
    denials.learn(
        &other,
        &policy(),
        1,
        (0, 0),
        &denied(9_000, 6_000),
        Vec::new,
    );
    let asked_before = denials.epoch();
    denials.forget(|key, _| *key == abuser);
    assert!(denials.answer(&abuser, &policy(), 1, 1).is_none());
    assert!(denials.answer(&other, &policy(), 1, 1).is_some());
    // Redis may have answered this call before the reset: it is not remembered.
    denials.learn(
        &abuser,
        &policy(),
        1,
        (2, asked_before),
        &denied(9_000, 6_000),
        Vec::new,
    );
    assert!(denials.answer(&abuser, &policy(), 1, 3).is_none());
    let now = denials.epoch();
    denials.learn(
        &abuser,
        &policy(),
        1,
        (2, now),
        &denied(9_000, 6_000),
        Vec::new,
    );
    assert!(denials.answer(&abuser, &policy(), 1, 3).is_some());
}

#[test]
fn a_full_table_forgets_the_denial_that_ends_soonest() {
    // 16 shards of two.
    let denials = Denials::new(32);
    let shards = denials.shards.len() as u64;
    // Three keys of one shard.
    let keys: Vec<Key> = (0..1_000)
        .map(|i| Key::from(format!("k{i}")))
        .filter(|key| (denials.hash(key, &policy()) >> 32) % shards == 0)
        .take(3)
        .collect();
    denials.learn(
        &keys[0],
        &policy(),
        1,
        (0, 0),
        &denied(50_000, 50_000),
        Vec::new,
    );
    denials.learn(
        &keys[1],
        &policy(),
        1,
        (0, 0),
        &denied(20_000, 20_000),
        Vec::new,
    );
    denials.learn(
        &keys[2],
        &policy(),
        1,
        (0, 0),
        &denied(90_000, 90_000),
        Vec::new,
    );
    assert!(
        denials.answer(&keys[1], &policy(), 1, 1).is_none(),
        "ended soonest: forgotten"
    );
    assert!(denials.answer(&keys[0], &policy(), 1, 1).is_some());
    assert!(denials.answer(&keys[2], &policy(), 1, 1).is_some());
}

#[test]
fn a_million_abusive_keys_stay_within_the_bound() {
    let denials = Denials::new(1_000);
    for i in 0..1_000_000u64 {
        let key = Key::from(i.to_le_bytes().to_vec());
        denials.learn(
            &key,
            &policy(),
            1,
            (i, 0),
            &denied(60_000_000, 60_000_000),
            Vec::new,
        );
    }
    assert!(denials.len() <= 1_000, "{}", denials.len());
    let heaps: usize = denials.shards.iter().map(|s| lock(s).ends.len()).sum();
    assert!(heaps <= 3 * 1_000, "{heaps} items in the heaps");
    // The newest are kept: they end last.
    let newest = Key::from(999_999u64.to_le_bytes().to_vec());
    assert!(denials.answer(&newest, &policy(), 1, 1_000_000).is_some());
}
