//! The decision script: composed from `lua/`, invoked with one key per rule, its reply parsed.

use std::sync::OnceLock;

use redis::{Script, ScriptInvocation};

use crate::decision::{Combined, Decision, Outcome, RuleVerdict};
use crate::policy::{Policy, Rule};
use crate::store::StoreError;

/// The shared helpers every script starts with (`lua/common.lua`).
pub(super) const COMMON: &str = include_str!("../../../lua/common.lua");

/// Each algorithm (`lua/<algorithm>.lua`), defining its entry of `ALGORITHMS`.
pub(super) const ALGORITHMS: [&str; 5] = [
    include_str!("../../../lua/fixed_window.lua"),
    include_str!("../../../lua/gcra.lua"),
    include_str!("../../../lua/sliding_log.lua"),
    include_str!("../../../lua/sliding_window.lua"),
    include_str!("../../../lua/token_bucket.lua"),
];

/// A script of the shared helpers, every algorithm, then `entry`, the entry point that holds
/// its KEYS/ARGV/reply contract.
pub(super) fn with_algorithms(entry: &str) -> Script {
    compose(u8::MAX, entry)
}

/// A script of the shared helpers, the algorithms whose bit is set in `algorithms` (bit `id - 1`
/// for script id `id`, see `Params::script_id`), then `entry`.
fn compose(algorithms: u8, entry: &str) -> Script {
    let mut source = String::from(COMMON);
    for (index, algorithm) in ALGORITHMS.iter().enumerate() {
        if algorithms & (1 << index) != 0 {
            source.push('\n');
            source.push_str(algorithm);
        }
    }
    source.push('\n');
    source.push_str(entry);
    Script::new(&source)
}

/// Redis runs a script's whole body on every call, so defining five algorithms where a policy
/// uses one costs it time on every decision (about half a microsecond of Redis's time, measured
/// in `docs/performance.md`): each combination of algorithms has a script of its own, made on
/// first use. Policies hold at most five kinds of rule: 31 combinations at most.
struct Scripts {
    entry: &'static str,
    by_algorithms: [OnceLock<Script>; 32],
}

impl Scripts {
    const fn new(entry: &'static str) -> Self {
        Self {
            entry,
            by_algorithms: [const { OnceLock::new() }; 32],
        }
    }

    /// The script for `policy`'s algorithms.
    fn get(&self, policy: &Policy) -> &Script {
        let algorithms = policy
            .params()
            .iter()
            .fold(0_u8, |set, params| set | 1 << (params.script_id() - 1));
        self.by_algorithms[usize::from(algorithms & 31)]
            .get_or_init(|| compose(algorithms, self.entry))
    }
}

/// The script of one decision (`lua/check.lua`). `redis::Script` sends EVALSHA and loads the
/// script on NOSCRIPT (a restarted or flushed server, a promoted replica).
static CHECK: Scripts = Scripts::new(include_str!("../../../lua/check.lua"));

/// The script of several decisions of one client, in order (`lua/batch.lua`).
static BATCH: Scripts = Scripts::new(include_str!("../../../lua/batch.lua"));

/// Integers per rule in the reply.
const REPLY_WIDTH: usize = 5;

/// The invocation for one decision. `prefix` and `client` are already valid key parts.
pub(super) fn invocation(
    prefix: &str,
    client: &str,
    policy: &Policy,
    cost: u32,
    now_micros: Option<u64>,
    min_ttl_ms: u64,
) -> ScriptInvocation<'static> {
    let mut invocation = CHECK.get(policy).prepare_invoke();
    match now_micros {
        Some(now) => invocation.arg(now),
        None => invocation.arg(""),
    };
    invocation.arg(cost).arg(min_ttl_ms);
    rule_args(&mut invocation, prefix, client, policy);
    invocation
}

/// Every rule's state key, and its five arguments (see `lua/check.lua`).
fn rule_args(invocation: &mut ScriptInvocation<'_>, prefix: &str, client: &str, policy: &Policy) {
    for (rule, params) in policy.rules().iter().zip(policy.params()) {
        invocation.key(state_key(prefix, rule, client));
        // Integer-valued: see Params::new.
        invocation
            .arg(params.script_id())
            .arg(params.limit as u64)
            .arg(params.period as u64)
            .arg(params.burst as u64)
            .arg(params.extra as u64);
    }
}

/// The invocation of several decisions of one client under `policy`, one per cost, in order
/// (see `lua/batch.lua`).
pub(super) fn batch_invocation(
    prefix: &str,
    client: &str,
    policy: &Policy,
    costs: &[u32],
    now_micros: Option<u64>,
    min_ttl_ms: u64,
) -> ScriptInvocation<'static> {
    let mut invocation = BATCH.get(policy).prepare_invoke();
    match now_micros {
        Some(now) => invocation.arg(now),
        None => invocation.arg(""),
    };
    invocation.arg(costs.len()).arg(min_ttl_ms);
    for cost in costs {
        invocation.arg(*cost);
    }
    rule_args(&mut invocation, prefix, client, policy);
    invocation
}

/// Turns a batch's reply into one decision per request.
pub(super) fn decisions(
    reply: &[i64],
    policy: &Policy,
    requests: usize,
) -> Result<Vec<Decision>, StoreError> {
    let width = policy.rules().len() * REPLY_WIDTH;
    if reply.len() != width * requests {
        return Err(StoreError::bad_reply(format!(
            "expected {} integers for {requests} decisions, got {}",
            width * requests,
            reply.len()
        )));
    }
    reply
        .chunks_exact(width)
        .map(|decision_reply| decision(decision_reply, policy))
        .collect()
}

/// The Redis key of one rule's state for one client. The client key is the hash tag: every rule's
/// key for a client lands in one cluster slot, and different clients spread over the cluster. The
/// state code names the time base the state is counted in, so a rule whose quota changed that
/// base never reads the old state (which expires by its TTL).
pub(super) fn state_key(prefix: &str, rule: &Rule, client: &str) -> String {
    format!(
        "{prefix}:{}:{}:{{{client}}}",
        rule.name(),
        rule.state_code()
    )
}

/// Turns the script's reply into a decision.
pub(super) fn decision(reply: &[i64], policy: &Policy) -> Result<Decision, StoreError> {
    let rules = policy.rules().len();
    if reply.len() != rules * REPLY_WIDTH {
        return Err(StoreError::bad_reply(format!(
            "expected {} integers for {rules} rules, got {}",
            rules * REPLY_WIDTH,
            reply.len()
        )));
    }
    let mut combined = Combined::new();
    for values in reply.chunks_exact(REPLY_WIDTH) {
        combined.add(verdict(values)?);
    }
    Ok(combined.decision(policy))
}

/// Each rule's wait in µs, by rule index, in the reply of one decision (0 for a rule that
/// admitted the request); what the denial cache keeps of a refusal by several rules.
pub(super) fn rule_waits(reply: &[i64]) -> impl Iterator<Item = u64> + '_ {
    reply
        .chunks_exact(REPLY_WIDTH)
        .map(|values| u64::try_from(values[4]).unwrap_or(0))
}

pub(super) fn verdict(values: &[i64]) -> Result<RuleVerdict, StoreError> {
    let outcome = match values[0] {
        1 => Outcome::Allowed,
        0 => Outcome::Denied,
        -1 => Outcome::Never,
        other => return Err(StoreError::bad_reply(format!("unknown verdict {other}"))),
    };
    let unsigned = |value: i64| {
        u64::try_from(value)
            .map_err(|_| StoreError::bad_reply(format!("negative value {value} in a verdict")))
    };
    Ok(RuleVerdict {
        outcome,
        remaining: unsigned(values[1])?,
        used: unsigned(values[2])?,
        reset_after_us: unsigned(values[3])?,
        retry_after_us: unsigned(values[4])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quota::Quota;
    use crate::store::StoreErrorKind;

    #[test]
    fn every_rule_key_shares_the_client_hash_tag() {
        let client = "203.0.113.5";
        for (rule, key) in [
            (
                Rule::gcra("a", Quota::per_second(1)),
                "rl:a:gcra-1/1s:{203.0.113.5}",
            ),
            (
                Rule::fixed_window("b", Quota::per_hour(5)),
                "rl:b:fw-1h:{203.0.113.5}",
            ),
            (
                Rule::sliding_log("c", Quota::per_hour(5)),
                "rl:c:log-1h:{203.0.113.5}",
            ),
            (
                Rule::sliding_window("d", Quota::per_hour(5), 60),
                "rl:d:sw60-1h:{203.0.113.5}",
            ),
            (
                Rule::token_bucket("e", Quota::per_hour(5).with_burst(2)),
                "rl:e:tb2-5/1h:{203.0.113.5}",
            ),
        ] {
            assert_eq!(state_key("rl", &rule, client), key);
        }
    }

    #[test]
    fn malformed_replies_are_protocol_errors() {
        let policy = Policy::try_from(Rule::gcra("a", Quota::per_second(1))).unwrap();
        assert!(matches!(
            decision(&[1, 0, 1], &policy),
            Err(e) if e.kind() == StoreErrorKind::BadReply
        ));
        assert!(matches!(
            decision(&[7, 0, 1, 0, 0], &policy),
            Err(e) if e.kind() == StoreErrorKind::BadReply
        ));
        assert!(matches!(
            decision(&[1, -1, 1, 0, 0], &policy),
            Err(e) if e.kind() == StoreErrorKind::BadReply
        ));
        assert!(decision(&[1, 0, 1, 5, 0], &policy).unwrap().is_allowed());
    }
}
