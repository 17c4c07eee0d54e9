//! The decision script: composed from `lua/`, invoked with one key per rule, its reply parsed.

use std::sync::LazyLock;

use redis::{Script, ScriptInvocation};

use crate::decision::{Combined, Decision, Outcome, RuleVerdict};
use crate::policy::{Policy, Rule};
use crate::store::StoreError;

/// The one script every decision runs: shared helpers, each algorithm, then the entry point
/// (`lua/check.lua`, which holds the KEYS/ARGV/reply contract). `redis::Script` sends EVALSHA
/// and loads the script on NOSCRIPT (a restarted or flushed server).
pub(super) static CHECK: LazyLock<Script> = LazyLock::new(|| Script::new(SOURCE));

const SOURCE: &str = concat!(
    include_str!("../../../lua/common.lua"),
    "\n",
    include_str!("../../../lua/fixed_window.lua"),
    "\n",
    include_str!("../../../lua/gcra.lua"),
    "\n",
    include_str!("../../../lua/sliding_log.lua"),
    "\n",
    include_str!("../../../lua/sliding_window.lua"),
    "\n",
    include_str!("../../../lua/token_bucket.lua"),
    "\n",
    include_str!("../../../lua/check.lua"),
);

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
    let mut invocation = CHECK.prepare_invoke();
    match now_micros {
        Some(now) => invocation.arg(now),
        None => invocation.arg(""),
    };
    invocation.arg(cost).arg(min_ttl_ms);
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
    invocation
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
        return Err(StoreError::Protocol(format!(
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

fn verdict(values: &[i64]) -> Result<RuleVerdict, StoreError> {
    let outcome = match values[0] {
        1 => Outcome::Allowed,
        0 => Outcome::Denied,
        -1 => Outcome::Never,
        other => return Err(StoreError::Protocol(format!("unknown verdict {other}"))),
    };
    let unsigned = |value: i64| {
        u64::try_from(value)
            .map_err(|_| StoreError::Protocol(format!("negative value {value} in a verdict")))
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
            Err(StoreError::Protocol(_))
        ));
        assert!(matches!(
            decision(&[7, 0, 1, 0, 0], &policy),
            Err(StoreError::Protocol(_))
        ));
        assert!(matches!(
            decision(&[1, -1, 1, 0, 0], &policy),
            Err(StoreError::Protocol(_))
        ));
        assert!(decision(&[1, 0, 1, 5, 0], &policy).unwrap().is_allowed());
    }
}
