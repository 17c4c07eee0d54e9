//! The lease scripts (`lua/grant.lua`, `lua/refund.lua`): invocations and replies.

use smallvec::SmallVec;

use super::super::script::decide::{StateKey, verdict};
use super::super::script::{Call, Entry};
use crate::algorithm::Params;
use crate::decision::{Decision, RuleVerdict};
use crate::policy::{MAX_RULES, Policy};
use crate::store::StoreError;

/// Integers per rule in a grant's reply, after its first (the units granted).
const GRANT_WIDTH: usize = 7;

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
}

impl Granted {
    /// The policy's decision on a request of the units granted (or, denied, on the asking
    /// request).
    pub(super) fn decision(&self, policy: &Policy) -> Decision {
        Decision::from_verdicts(policy, &self.verdicts)
    }
}

/// Reserves between `need` (the asking request's cost, at least 1) and `want` units of every
/// rule of `policy` for `client`, all or nothing.
pub(super) fn grant(
    prefix: &str,
    client: &str,
    policy: &Policy,
    need: u32,
    want: u64,
    now_micros: Option<u64>,
    min_ttl_ms: u64,
) -> Call {
    let mut call = Call::new(Entry::Grant, 0);
    time(&mut call, now_micros);
    call.arg(need).arg(min_ttl_ms).arg(want);
    for (state, params) in policy.state_names().iter().zip(policy.params()) {
        rule_args(&mut call, prefix, client, state, params).arg(params.extra);
    }
    call
}

/// Gives back `units` reserved by a grant whose rule states were `marks`.
pub(super) fn refund(
    prefix: &str,
    client: &str,
    policy: &Policy,
    units: u64,
    marks: &[Mark],
    now_micros: Option<u64>,
    min_ttl_ms: u64,
) -> Call {
    let mut call = Call::new(Entry::Refund, 0);
    time(&mut call, now_micros);
    call.arg(units).arg(min_ttl_ms);
    for ((state, params), mark) in policy.state_names().iter().zip(policy.params()).zip(marks) {
        rule_args(&mut call, prefix, client, state, params)
            .arg(mark[0])
            .arg(mark[1]);
    }
    call
}

/// A rule's key and the arguments both scripts share (see `lua/decide.lua`).
fn rule_args<'c>(
    call: &'c mut Call,
    prefix: &str,
    client: &str,
    state: &str,
    params: &Params,
) -> &'c mut Call {
    call.key(StateKey {
        prefix,
        state,
        client,
    });
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
    };
    for values in per_rule.chunks_exact(GRANT_WIDTH) {
        granted.verdicts.push(verdict(&values[..5])?);
        granted.marks.push([values[5], values[6]]);
    }
    Ok(granted)
}
