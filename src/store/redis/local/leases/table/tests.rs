use std::time::Duration;

use smallvec::SmallVec;

use super::super::script::Pace;
use super::*;
use crate::algorithm::RuleVerdict;
use crate::decision::Outcome;
use crate::policy::Rule;
use crate::quota::Quota;

const MS: u64 = 1_000;

fn policy() -> Policy {
    Policy::try_from(Rule::gcra(
        "api",
        Quota::per_second(1_000).with_burst(1_000),
    ))
    .unwrap()
}

/// Redis's answer to a grant of `units`, from a bucket that held `before`.
fn granted(units: u64, before: u64) -> Granted {
    Granted {
        units,
        verdicts: [RuleVerdict {
            outcome: if units > 0 {
                Outcome::Allowed
            } else {
                Outcome::Denied
            },
            remaining: 1_000 - before - units,
            used: before + units,
            full_after_us: (before + units) * MS,
            retry_after_us: 0,
            delay_us: 0,
        }]
        .into_iter()
        .collect(),
        marks: [[0, 0]].into_iter().collect(),
        paces: SmallVec::new(),
    }
}

fn plan(leases: &Leases, key: &str, now: u64, refunds: &mut Vec<Refund>) -> LeaseStep {
    leases.plan(&Key::from(key), &policy(), 1, now, refunds)
}

#[test]
fn a_key_is_leased_once_it_proves_hot_and_its_lease_follows_its_demand() {
    let leases = Leases::new(&QuotaLeases::default());
    let mut refunds = Vec::new();
    // The first request counts in the heat alone; the second reaches the table, which counts
    // the key's demand from there.
    for now in [0, MS / 2] {
        assert!(matches!(
            plan(&leases, "k", now, &mut refunds),
            LeaseStep::Exact
        ));
    }
    let LeaseStep::Grant { want } = plan(&leases, "k", MS, &mut refunds) else {
        panic!("a third request in a lifetime asks for a lease");
    };
    assert_eq!(want, 2);
    // A grant in flight: the next request waits for it rather than asking Redis.
    assert!(matches!(
        plan(&leases, "k", MS, &mut refunds),
        LeaseStep::Wait(_)
    ));
    let (decision, refund) =
        leases.install(&Key::from("k"), &policy(), 1, (MS, 0), 0, granted(2, 1));
    assert!(refund.is_none());
    assert_eq!((decision.used(), decision.remaining()), (2, 998));
    let LeaseStep::Local { decision, .. } = plan(&leases, "k", 2 * MS, &mut refunds) else {
        panic!("answered from the lease");
    };
    assert_eq!((decision.used(), decision.remaining()), (3, 997));
    // 500 requests in the next lifetime: the lease after it is sized to them, within a tenth
    // of what the rule gives in a lifetime (its burst of 1,000, and 100 draining back).
    for i in 0..500 {
        let _ = plan(&leases, "k", 101 * MS + i, &mut refunds);
        leases.abandon(&Key::from("k"), &policy());
    }
    let LeaseStep::Grant { want } = plan(&leases, "k", 202 * MS, &mut refunds) else {
        panic!("a new lease");
    };
    assert_eq!(want, 110);
    assert!(refunds.is_empty());
}

#[test]
fn expired_units_are_handed_back_and_idle_keys_forgotten() {
    let leases = Leases::new(&QuotaLeases::default().lifetime(Duration::from_millis(100)));
    let key = Key::from("k");
    let mut refunds = Vec::new();
    for _ in 0..3 {
        let _ = plan(&leases, "k", 0, &mut refunds);
    }
    let _ = leases.install(&key, &policy(), 1, (0, 0), 0, granted(50, 1));
    leases.sweep(99 * MS, &mut refunds);
    assert!(refunds.is_empty());
    leases.sweep(100 * MS, &mut refunds);
    assert_eq!(refunds.len(), 1);
    assert_eq!(refunds[0].units, 49);
    assert_eq!(leases.len(), 1);
    leases.sweep(300 * MS, &mut refunds);
    assert_eq!(leases.len(), 0);
}

#[test]
fn the_table_holds_at_most_max_keys() {
    let leases = Leases::new(&QuotaLeases::default().max_keys(100));
    let mut refunds = Vec::new();
    for i in 0..10_000 {
        let _ = plan(&leases, &format!("client-{i}"), 0, &mut refunds);
    }
    assert!(leases.len() <= 100, "{} keys", leases.len());
    assert!(leases.len() >= 50, "{} keys", leases.len());
}

#[test]
fn units_reserved_for_a_forgotten_key_go_back() {
    let leases = Leases::new(&QuotaLeases::default());
    let (decision, refund) =
        leases.install(&Key::from("gone"), &policy(), 1, (0, 0), 0, granted(10, 0));
    assert!(decision.is_allowed());
    assert_eq!(refund.map(|refund| refund.units), Some(9));
}

#[test]
fn sliding_algorithms_and_delaying_rules_are_not_leased() {
    let leases = Leases::new(&QuotaLeases::default());
    let delaying = Rule::gcra("gcra", Quota::per_second(10)).with_max_delay(Duration::from_secs(1));
    for rule in [Rule::sliding_log("log", Quota::per_second(10)), delaying] {
        let policy = Policy::try_from(rule).unwrap();
        let mut refunds = Vec::new();
        for _ in 0..10 {
            assert!(matches!(
                leases.plan(&Key::from("k"), &policy, 1, 0, &mut refunds),
                LeaseStep::Exact
            ));
        }
    }
}

/// A grant of `units` of a bucket with no room (full to its capacity), reserving a rate: unit j
/// conforms j ms after the grant (1,000/s: a unit is 1,000 level units, draining one a µs).
fn granted_ahead(units: u64) -> Granted {
    let policy = policy();
    let params = policy.params()[0];
    Granted {
        units,
        verdicts: [RuleVerdict {
            outcome: Outcome::Allowed,
            remaining: 0,
            used: 1_000 + units,
            full_after_us: (1_000 + units) * MS,
            retry_after_us: 0,
            delay_us: 0,
        }]
        .into_iter()
        .collect(),
        marks: [[0, 0]].into_iter().collect(),
        paces: [Pace::new(0, 0, &params)].into_iter().collect(),
    }
}

#[test]
fn a_rate_lease_spends_its_units_as_they_conform_and_refuses_in_between() {
    let leases = Leases::new(&QuotaLeases::default());
    let key = Key::from("saturated");
    let mut refunds = Vec::new();
    for _ in 0..3 {
        let _ = plan(&leases, "saturated", 0, &mut refunds);
    }
    // The asking request's unit conforms 1 ms after the grant: refused until then, here.
    let (decision, refund) = leases.install(&key, &policy(), 1, (0, 0), 0, granted_ahead(10));
    assert!(refund.is_none());
    assert_eq!(decision.outcome(), Outcome::Denied);
    assert_eq!(decision.retry_after(), Some(Duration::from_millis(1)));
    assert_eq!((decision.remaining(), decision.used()), (0, 1_000));
    let answer =
        |now: u64, refunds: &mut Vec<Refund>| match plan(&leases, "saturated", now, refunds) {
            LeaseStep::Local { decision, .. } => decision,
            _ => panic!("answered here at {now} µs"),
        };
    // Each unit at its time, not before; a unit not spent waits for a later request.
    assert!(answer(MS, &mut refunds).is_allowed());
    let early = answer(MS + 400, &mut refunds);
    assert_eq!(early.retry_after(), Some(Duration::from_micros(600)));
    assert!(answer(2 * MS, &mut refunds).is_allowed());
    // Units 3 to 7 conformed by 7 ms, unspent: spent then (7 in 7 ms, the rule's rate), and the
    // eighth waits for its own time.
    for _ in 3..=7 {
        assert!(answer(7 * MS, &mut refunds).is_allowed());
    }
    let early = answer(7 * MS, &mut refunds);
    assert_eq!(early.retry_after(), Some(Duration::from_millis(1)));
    assert!(refunds.is_empty());
}

#[test]
fn a_refused_grant_is_answered_here_until_its_wait_ends() {
    let leases = Leases::new(&QuotaLeases::default());
    let key = Key::from("refused");
    let mut refunds = Vec::new();
    let _ = plan(&leases, "refused", 0, &mut refunds);
    let _ = plan(&leases, "refused", 0, &mut refunds);
    let LeaseStep::Grant { .. } = plan(&leases, "refused", 0, &mut refunds) else {
        panic!("a lease is asked for");
    };
    let mut refused = granted(0, 1_000);
    refused.verdicts[0].retry_after_us = 5 * MS;
    refused.verdicts[0].remaining = 0;
    let (decision, _) = leases.install(&key, &policy(), 1, (0, 0), 0, refused);
    assert_eq!(decision.retry_after(), Some(Duration::from_millis(5)));
    // Redis is not asked again while its refusal lasts, and the wait counts down.
    let LeaseStep::Local { decision, .. } = plan(&leases, "refused", 2 * MS, &mut refunds) else {
        panic!("answered here");
    };
    assert_eq!(decision.retry_after(), Some(Duration::from_millis(3)));
    assert!(matches!(
        plan(&leases, "refused", 5 * MS, &mut refunds),
        LeaseStep::Grant { .. }
    ));
}

#[test]
fn keys_asked_once_a_lifetime_take_no_lease_and_rarely_reach_the_table() {
    let leases = Leases::new(&QuotaLeases::default());
    let mut refunds = Vec::new();
    // 1,000 keys in turn, each asked once every 200 ms: longer than a lifetime (100 ms).
    for round in 0..5 {
        for i in 0..1_000 {
            let now = round * 200 * MS + i;
            let step = plan(&leases, &format!("client-{i}"), now, &mut refunds);
            assert!(matches!(step, LeaseStep::Exact));
        }
    }
    // Only keys that share a counter with another asked in the same window reach it.
    assert!(leases.len() < 50, "{} keys in the table", leases.len());
}
