//! The lease scripts (`lua/grant.lua`, `lua/refund.lua`): invocations and replies, and when the
//! units of a grant may be spent ([`Pace`]).

use smallvec::SmallVec;

use crate::algorithm::{Algorithm, MAX_EXACT, Params};
use crate::decision::{Decision, RuleVerdict};
use crate::policy::{MAX_RULES, Policy};
use crate::store::StoreError;
use crate::store::redis::script::decide::{StateKey, verdict};
use crate::store::redis::script::{Call, Entry};

/// Integers per rule in a grant's reply, after its first (the units granted).
const GRANT_WIDTH: usize = 9;

/// The state of one rule right after a grant, which a refund names so that it gives back no
/// more than the grant took (see `lua/refund.lua`).
pub(super) type Mark = [i64; 2];

/// What Redis answered a grant.
pub(super) struct Granted {
    /// The units reserved, the asking request's included; 0 when it was denied.
    pub(super) units: u64,
    /// Each rule's verdict on a request of `units` (when denied: on the asking request).
    pub(super) verdicts: SmallVec<[RuleVerdict; MAX_RULES]>,
    /// Each rule's state after the grant.
    pub(super) marks: SmallVec<[Mark; MAX_RULES]>,
    /// When the bucket rules let the units be spent.
    pub(super) paces: SmallVec<[Pace; MAX_RULES]>,
}

/// When a bucket rule (GCRA, token bucket) lets the units of a grant be spent: the grant may
/// reserve a rate, units past the bucket's capacity that conform only as it drains (see
/// `lua/grant.lua`), and the lessee spends each no earlier than it conforms, so that the rule is
/// never exceeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pace {
    /// The bucket's level before the grant less its capacity (level units; negative: room).
    over: i64,
    /// µs from the call to the time the bucket was evaluated at (0 unless a clock went back).
    lead: u64,
    /// The rule's reduced period and limit (see `Params`): a unit is `period` level units, the
    /// bucket drains `limit` a µs.
    period: i64,
    limit: i64,
}

impl Pace {
    /// The pace of a rule of `params` whose bucket held `over` level units past its capacity
    /// (negative: room), evaluated `lead` µs ahead of the call.
    pub(super) fn new(over: i64, lead: u64, params: &Params) -> Self {
        Self {
            over,
            lead,
            period: params.period,
            limit: params.limit,
        }
    }

    /// µs after the grant at which its unit `unit` (1-based) conforms: at once while it fits
    /// below the capacity, else once the bucket has drained enough, as Redis reckons a wait.
    pub(super) fn ready(&self, unit: u64) -> u64 {
        let level =
            i128::from(self.over) + i128::from(unit).saturating_mul(i128::from(self.period));
        if level <= 0 {
            return 0;
        }
        let limit = i128::from(self.limit.max(1));
        let wait = (level + limit - 1) / limit;
        self.lead
            .saturating_add(u64::try_from(wait).unwrap_or(u64::MAX))
    }
}

/// How far past its capacity a bucket rule may be reserved by a grant (level units): what drains
/// back within a lease's `lifetime_us`, at most one capacity, and never so far that a level
/// leaves the integers a script's doubles hold exactly. 0 for a fixed window, whose units are
/// all its window's.
pub(super) fn horizon(params: &Params, lifetime_us: u64) -> i64 {
    if !params.algorithm.uses_burst() {
        return 0;
    }
    let capacity = params.burst.saturating_mul(params.period);
    let drained = i128::from(params.limit) * i128::from(lifetime_us);
    let most = capacity.min(MAX_EXACT - capacity).max(0);
    i64::try_from(drained.min(i128::from(most))).unwrap_or(most)
}

impl Granted {
    /// The policy's decision on a request of the units granted (or, denied, on the asking
    /// request).
    pub(super) fn decision(&self, policy: &Policy) -> Decision {
        Decision::from_verdicts(policy, &self.verdicts)
    }
}

/// Reserves between `need` (the asking request's cost, at least 1) and `want` units of every
/// rule of `policy` for `client`, all or nothing; bucket rules up to their [`horizon`] for a
/// lease of `lifetime_us`.
#[allow(clippy::too_many_arguments)]
pub(super) fn grant(
    prefix: &str,
    client: &str,
    policy: &Policy,
    states: &[Box<str>],
    need: u32,
    want: u64,
    lifetime_us: u64,
    now_micros: Option<u64>,
    min_ttl_ms: u64,
) -> Call {
    let mut call = Call::new(Entry::Grant, 0, states.len());
    keys(&mut call, prefix, client, states);
    time(&mut call, now_micros);
    call.arg(need).arg(min_ttl_ms).arg(want);
    for params in policy.params() {
        rule_args(&mut call, params).arg(horizon(params, lifetime_us));
    }
    call
}

/// Gives back `units` reserved by a grant whose rule states were `marks`.
#[allow(clippy::too_many_arguments)]
pub(super) fn refund(
    prefix: &str,
    client: &str,
    policy: &Policy,
    states: &[Box<str>],
    units: u64,
    marks: &[Mark],
    now_micros: Option<u64>,
    min_ttl_ms: u64,
) -> Call {
    let mut call = Call::new(Entry::Refund, 0, states.len());
    keys(&mut call, prefix, client, states);
    time(&mut call, now_micros);
    call.arg(units).arg(min_ttl_ms);
    for (params, mark) in policy.params().iter().zip(marks) {
        rule_args(&mut call, params).arg(mark[0]).arg(mark[1]);
    }
    call
}

/// Every rule's state key for `client`.
fn keys(call: &mut Call, prefix: &str, client: &str, states: &[Box<str>]) {
    for state in states {
        call.key(StateKey {
            prefix,
            state,
            client,
        });
    }
}

/// The arguments of a rule both scripts share (see `lua/decide.lua`).
fn rule_args<'c>(call: &'c mut Call, params: &Params) -> &'c mut Call {
    call.arg(params.script_id())
        .arg(params.limit)
        .arg(params.period)
        .arg(params.burst)
}

fn time(call: &mut Call, now_micros: Option<u64>) {
    match now_micros {
        Some(now) => call.arg(now),
        None => call.arg(""),
    };
}

/// Parses a grant's reply for `policy`.
pub(super) fn granted(reply: &[i64], policy: &Policy) -> Result<Granted, StoreError> {
    let rules = policy.rules().len();
    let Some((&units, per_rule)) = reply.split_first() else {
        return Err(StoreError::bad_reply(
            "an empty reply to a grant".to_owned(),
        ));
    };
    if per_rule.len() != rules * GRANT_WIDTH {
        return Err(StoreError::bad_reply(format!(
            "expected {} integers for a grant over {rules} rules, got {}",
            1 + rules * GRANT_WIDTH,
            reply.len()
        )));
    }
    let units = u64::try_from(units)
        .map_err(|_| StoreError::bad_reply(format!("a grant of {units} units")))?;
    let mut granted = Granted {
        units,
        verdicts: SmallVec::new(),
        marks: SmallVec::new(),
        paces: SmallVec::new(),
    };
    for (values, params) in per_rule.chunks_exact(GRANT_WIDTH).zip(policy.params()) {
        granted.verdicts.push(verdict(&values[..5])?);
        granted.marks.push([values[5], values[6]]);
        if params.algorithm != Algorithm::FixedWindow {
            let lead = u64::try_from(values[8]).unwrap_or(0);
            granted.paces.push(Pace::new(values[7], lead, params));
        }
    }
    Ok(granted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Rule;
    use crate::quota::Quota;

    #[test]
    fn a_unit_conforms_once_the_bucket_has_drained_below_the_capacity_for_it() {
        // 1,000/s: a unit is 1,000 level units, the bucket drains 1 a µs. Full to 500 units
        // past its capacity: unit 1 conforms when those 500 and its own 1,000 have drained.
        let pace = Pace {
            over: 500,
            lead: 0,
            period: 1_000,
            limit: 1,
        };
        assert_eq!(pace.ready(1), 1_500);
        assert_eq!(pace.ready(10), 10_500);
        // Room for two: the first two at once, the third a unit's time later.
        let room = Pace {
            over: -2_000,
            lead: 7,
            period: 1_000,
            limit: 1,
        };
        assert_eq!((room.ready(1), room.ready(2), room.ready(3)), (0, 0, 1_007));
    }

    #[test]
    fn a_horizon_is_what_drains_in_a_lifetime_within_a_capacity_and_exact_integers() {
        let params = |rule: Rule| Policy::try_from(rule).unwrap().params()[0];
        let gcra = params(Rule::gcra("g", Quota::per_second(1_000)));
        // 1,000/s reduces to a limit of 1 per 1,000 µs: 100 ms drain 100,000 level units.
        assert_eq!(horizon(&gcra, 100_000), 100_000);
        // Never past one capacity (1,000 units of 1,000).
        assert_eq!(horizon(&gcra, 60_000_000), 1_000_000);
        let fixed = params(Rule::fixed_window("f", Quota::per_second(1_000)));
        assert_eq!(horizon(&fixed, 100_000), 0);
    }
}
