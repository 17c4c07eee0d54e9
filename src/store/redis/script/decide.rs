//! Rate-limit decisions (`lua/decide.lua`): the state keys, the call for k requests of one
//! policy, and its reply, turned into decisions.

use std::io::Write;

use redis::{RedisWrite, ToRedisArgs};

use super::{Call, Entry};
use crate::decision::{Combined, Decision, Outcome, RuleVerdict};
use crate::policy::{Policy, Rule};
use crate::store::StoreError;

/// Integers per rule in the reply.
const REPLY_WIDTH: usize = 5;

/// The Redis key of one rule's state for one client. The client key is the hash tag: every rule's
/// key for a client lands in one cluster slot, and different clients spread over the cluster. The
/// state code names the time base the state is counted in, so a rule whose quota changed that
/// base never reads the old state (which expires by its TTL).
pub(in crate::store::redis) fn state_key(prefix: &str, rule: &Rule, client: &str) -> String {
    format!(
        "{prefix}:{}:{}:{{{client}}}",
        rule.name(),
        rule.state_code()
    )
}

/// [`state_key`] written straight into a command, from a rule's state name (`<name>:<state
/// code>`, see `StateNames`), without a `String` of its own.
pub(in crate::store::redis) struct StateKey<'a> {
    pub(in crate::store::redis) prefix: &'a str,
    pub(in crate::store::redis) state: &'a str,
    pub(in crate::store::redis) client: &'a str,
}

impl ToRedisArgs for StateKey<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        for part in [self.prefix, ":", self.state, ":{", self.client, "}"] {
            // Writing to a command's buffer cannot fail.
            let _ = arg.write_all(part.as_bytes());
        }
    }
}

/// The algorithm set of `policy`'s rules (bit `id - 1` per algorithm).
pub(in crate::store::redis) fn algorithms(policy: &Policy) -> u8 {
    policy
        .params()
        .iter()
        .fold(0_u8, |set, params| set | 1 << (params.script_id() - 1))
}

/// The call deciding `requests` (each a client's storage key and a cost) under `policy`, whose
/// rules' state names are `states`, in order. `prefix` and the clients are valid key parts.
pub(in crate::store::redis) fn call<'a>(
    prefix: &str,
    policy: &Policy,
    states: &[Box<str>],
    requests: impl ExactSizeIterator<Item = (&'a str, u32)> + Clone,
    now_micros: Option<u64>,
    min_ttl_ms: u64,
) -> Call {
    let mut call = Call::new(
        Entry::Decide,
        algorithms(policy),
        requests.len() * states.len(),
    );
    for (client, _) in requests.clone() {
        for state in states {
            call.key(StateKey {
                prefix,
                state,
                client,
            });
        }
    }
    match now_micros {
        Some(now) => call.arg(now),
        None => call.arg(""),
    };
    call.arg(requests.len()).arg(min_ttl_ms);
    for (_, cost) in requests {
        call.arg(cost);
    }
    rule_args(&mut call, policy);
    call
}

/// Every rule's five arguments (see `lua/decide.lua`).
pub(in crate::store::redis) fn rule_args(call: &mut Call, policy: &Policy) {
    for params in policy.params() {
        // Integer-valued: see Params::new.
        call.arg(params.script_id())
            .arg(params.limit as u64)
            .arg(params.period as u64)
            .arg(params.burst as u64)
            .arg(params.extra as u64);
    }
}

/// The integers of a reply to a call of `requests` decisions under `policy`: 5 per rule per
/// request, in order.
pub(in crate::store::redis) fn values(
    reply: &[u8],
    policy: &Policy,
    requests: usize,
) -> Result<Vec<i64>, StoreError> {
    let expected = policy.rules().len() * REPLY_WIDTH * requests;
    let mut values = Vec::with_capacity(expected);
    for word in reply.split(|&byte| byte == b' ') {
        values.push(integer(word).ok_or_else(|| {
            StoreError::bad_reply(format!(
                "{:?} is not an integer",
                String::from_utf8_lossy(word)
            ))
        })?);
    }
    if values.len() != expected {
        return Err(StoreError::bad_reply(format!(
            "expected {expected} integers for {requests} decisions, got {}",
            values.len()
        )));
    }
    Ok(values)
}

/// A decimal integer, optionally negative; `None` for anything else (or an overflow).
fn integer(word: &[u8]) -> Option<i64> {
    let (negative, digits) = match word.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, word),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        value = value
            .checked_mul(10)?
            .checked_add(i64::from(digit - b'0'))?;
    }
    Some(if negative { -value } else { value })
}

/// The integers of one request's decision, out of a reply's `values`: request `index`'s.
pub(in crate::store::redis) fn request<'a>(
    values: &'a [i64],
    policy: &Policy,
    index: usize,
) -> &'a [i64] {
    let width = policy.rules().len() * REPLY_WIDTH;
    &values[index * width..(index + 1) * width]
}

/// One request's decision, from its integers (see [`request`]).
pub(in crate::store::redis) fn decision(
    values: &[i64],
    policy: &Policy,
) -> Result<Decision, StoreError> {
    let mut combined = Combined::new();
    for rule in values.chunks_exact(REPLY_WIDTH) {
        combined.add(verdict(rule)?);
    }
    Ok(combined.decision(policy))
}

/// Each rule's verdict, in rule order, from one request's integers (see [`request`]).
pub(in crate::store::redis) fn verdicts(values: &[i64]) -> Result<Vec<RuleVerdict>, StoreError> {
    values.chunks_exact(REPLY_WIDTH).map(verdict).collect()
}

/// Each rule's wait in µs, by rule index, in one request's integers (0 for a rule that admitted
/// it, whose wait is a delay): what the denial cache keeps of a refusal by several rules.
pub(in crate::store::redis) fn rule_waits(values: &[i64]) -> impl Iterator<Item = u64> + '_ {
    values.chunks_exact(REPLY_WIDTH).map(|rule| match rule[0] {
        0 => u64::try_from(rule[4]).unwrap_or(0),
        _ => 0,
    })
}

/// One rule's verdict, from its five integers (the last a refusal's retry-after or an admitted
/// request's delay).
pub(in crate::store::redis) fn verdict(values: &[i64]) -> Result<RuleVerdict, StoreError> {
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
    Ok(RuleVerdict::from_wait(
        outcome,
        unsigned(values[1])?,
        unsigned(values[2])?,
        unsigned(values[3])?,
        unsigned(values[4])?,
    ))
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
            let policy = Policy::try_from(rule).unwrap();
            let written = StateKey {
                prefix: "rl",
                state: &crate::store::redis::key::names::names(&policy)[0],
                client,
            }
            .to_redis_args();
            assert_eq!(written, [key.as_bytes().to_vec()]);
        }
    }

    #[test]
    fn malformed_replies_are_bad_replies() {
        let policy = Policy::try_from(Rule::gcra("a", Quota::per_second(1))).unwrap();
        let bad = |reply: &str, requests| {
            values(reply.as_bytes(), &policy, requests)
                .and_then(|values| decision(request(&values, &policy, 0), &policy))
                .is_err_and(|e| e.kind() == StoreErrorKind::BadReply)
        };
        assert!(bad("1 0 1", 1));
        assert!(bad("1 0 1 5 0 1 0 1 5 0", 1));
        assert!(bad("7 0 1 0 0", 1));
        assert!(bad("1 -1 1 0 0", 1));
        assert!(bad("1 0 x 0 0", 1));
        assert!(bad("1 0 1  0", 1));
        assert!(bad("1 0 99999999999999999999 0 0", 1));
        let values = values(b"1 0 1 5 0 0 0 1 5 7", &policy, 2).unwrap();
        assert!(
            decision(request(&values, &policy, 0), &policy)
                .unwrap()
                .is_allowed()
        );
        let denied = decision(request(&values, &policy, 1), &policy).unwrap();
        assert_eq!(
            denied.retry_after(),
            Some(std::time::Duration::from_micros(7))
        );
        assert_eq!(integer(b"-1"), Some(-1));
        assert_eq!(integer(b"-"), None);
    }
}
