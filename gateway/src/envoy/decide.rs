//! One `ShouldRateLimit` request decided: each descriptor's limit found, the counted ones decided
//! together in the domain's store (all or nothing: a request refused by one limit consumes
//! none of the others), then one status per descriptor, the overall code, the metrics and the
//! headers for the client.
//!
//! The descriptors' rules are one [`Policy`] on one key, the domain: the store decides every
//! rule of a policy in one atomic step and counts them only when all admit. On Redis their
//! state keys share the domain as hash tag, one slot on a Cluster (`gateway/docs/envoy.md` says what
//! that means for a domain's load). A store decides one cost per policy and holds a rule once,
//! so descriptors with different `hits_addend` are decided one cost after another (a cost of 0,
//! a descriptor's "check only", first: a peek that counts nothing), one counter sent twice in two
//! steps, and a request with more descriptors than a policy holds
//! ([`MAX_RULES`]) in groups of that size: a refusal stops the groups after it from counting,
//! and the groups before it stay counted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http::HeaderMap;
use sha2::{Digest, Sha256};
use tower_redis_ratelimit::Quota;
use tower_redis_ratelimit::decision::RuleVerdict;
use tower_redis_ratelimit::key::Key;
use tower_redis_ratelimit::policy::{Algorithm, MAX_RULES, Policy, Rule};
use tower_redis_ratelimit::respond::PolicyHeaders;
use tower_redis_ratelimit::store::StoreError;
use tower_redis_ratelimit::{Decision, Store};

use super::limit::{LimitKind, Reported, unit_period};
use super::loaded::Loaded;
use super::matching::{Found, apply_replaces};
use super::metrics::{Hit, near, record};
use super::status::{current_limit, failed, fill, header_values, proto, response};
use crate::config::EnvoySettings;

/// The most descriptors one request may carry. Envoy sends one per `rate_limits` action of a
/// route (a handful); without a bound, one message of the 4 MiB tonic accepts could carry
/// hundreds of thousands, each found, named and counted.
pub const MAX_DESCRIPTORS: usize = 256;

/// A descriptor's limit to count, and what it is reported as.
struct Counted {
    index: usize,
    rule: Rule,
    reported: Reported,
}

/// Decides `request` with `loaded`'s domains and stores.
pub(super) async fn decide(
    loaded: &Loaded,
    settings: &EnvoySettings,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, tonic::Status> {
    if request.domain.is_empty() {
        return Err(tonic::Status::unknown(
            "rate limit domain must not be empty",
        ));
    }
    if request.descriptors.is_empty() {
        return Err(tonic::Status::unknown(
            "rate limit descriptor list must not be empty",
        ));
    }
    if request.descriptors.len() > MAX_DESCRIPTORS {
        return Err(tonic::Status::invalid_argument(format!(
            "at most {MAX_DESCRIPTORS} descriptors per request, not {}",
            request.descriptors.len()
        )));
    }
    // A domain the files do not have limits nothing, its descriptors' own limits included, as
    // the reference answers.
    let (Some(domain), Some(store)) = (
        loaded.domains.get(&request.domain),
        loaded.store(&request.domain),
    ) else {
        loaded
            .unknown
            .note(&request.domain, loaded.domains.iter().count());
        let ok = DescriptorStatus {
            code: Code::Ok.into(),
            ..DescriptorStatus::default()
        };
        return Ok(response(
            vec![ok; request.descriptors.len()],
            false,
            Vec::new(),
        ));
    };
    let mut found: Vec<Option<Found>> = request
        .descriptors
        .iter()
        .map(|descriptor| match &descriptor.limit {
            Some(over) => Some(Found::overridden(&request.domain, descriptor, over)),
            None => domain.find(&request.domain, &descriptor.entries),
        })
        .collect();
    apply_replaces(&mut found);
    // A descriptor's own `hits_addend` is its cost as sent, 0 a check that counts nothing (the
    // store's peek: the reference's "check only", on which its `/tokenquota` example rests).
    // The request's is a plain `uint32` whose 0 is "unset": one hit.
    let cost = |index: usize| {
        let cost = match &request.descriptors[index].hits_addend {
            Some(own) => own.value,
            None => u64::from(request.hits_addend.max(1)),
        };
        u32::try_from(cost).unwrap_or(u32::MAX)
    };

    let mut statuses: Vec<DescriptorStatus> = found
        .iter()
        .map(
            |found| match found.as_ref().map(|found| &found.limit.kind) {
                Some(LimitKind::Unlimited) => DescriptorStatus {
                    code: Code::Ok.into(),
                    limit_remaining: u32::MAX,
                    ..DescriptorStatus::default()
                },
                _ => DescriptorStatus {
                    code: Code::Ok.into(),
                    ..DescriptorStatus::default()
                },
            },
        )
        .collect();
    let mut refused = false;
    // Enforced and shadow limits by cost, then step: one counter twice in a request (Envoy
    // sends what its actions make, duplicates too) is counted twice, in two steps, as a policy
    // holds a rule once. A limit of nothing refuses without the store.
    let mut enforced: BTreeMap<(u32, usize), Vec<Counted>> = BTreeMap::new();
    let mut shadow: BTreeMap<(u32, usize), Vec<Counted>> = BTreeMap::new();
    for (index, found) in found.iter().enumerate() {
        let Some(found) = found else { continue };
        match &found.limit.kind {
            LimitKind::Unlimited => {}
            LimitKind::Nothing(reported) => {
                let status = &mut statuses[index];
                status.current_limit = Some(current_limit(found, *reported));
                status.duration_until_reset = Some(proto(unit_period(reported.unit)));
                if !found.limit.shadow {
                    status.code = Code::OverLimit.into();
                    refused = true;
                }
                let hit = Hit::Over {
                    shadow: found.limit.shadow,
                };
                record(&labels(found), hit, u64::from(cost(index)));
            }
            LimitKind::Counted {
                algorithm,
                quota,
                reported,
            } => {
                let counted = Counted {
                    index,
                    rule: counter_rule(found, *algorithm, *quota),
                    reported: *reported,
                };
                let groups = if found.limit.shadow {
                    &mut shadow
                } else {
                    &mut enforced
                };
                let cost = cost(index);
                let step = (0..)
                    .find(|step| {
                        groups.get(&(cost, *step)).is_none_or(|group| {
                            group
                                .iter()
                                .all(|other| other.rule.name() != counted.rule.name())
                        })
                    })
                    .unwrap_or(0);
                groups.entry((cost, step)).or_default().push(counted);
            }
        }
    }
    let key = Key::from(request.domain.as_str());
    // One deadline for the whole request: a request decided in several steps still answers
    // within it, as the gateway waiting for it expects.
    let until = Until::after(settings.deadline);
    let mut shown: Option<(PolicyHeaders, Decision)> = None;
    for (groups, shadow) in [(enforced, false), (shadow, true)] {
        for ((cost, _), group) in groups {
            for chunk in group.chunks(MAX_RULES) {
                let answer = decide_group(store, &key, until, chunk, cost, !refused).await;
                let (decision, each) = match answer {
                    Ok(answer) => answer,
                    // Shadow limits never refuse: their store failing changes no answer.
                    Err(_) if shadow => continue,
                    Err(err) => return Ok(failed(settings, &found, statuses, &err)),
                };
                for (position, (counted, own)) in chunk.iter().zip(&each).enumerate() {
                    let over = decision.refused_by().any(|index| index == position);
                    let found = &found[counted.index];
                    fill(
                        &mut statuses[counted.index],
                        found,
                        counted.reported,
                        own,
                        over && !shadow,
                    );
                    record_hit(found, own, counted.rule.capacity(), over, shadow, cost);
                }
                if shadow {
                    continue;
                }
                // The headers tell the most restrictive decision: a refusal, else the fewest
                // remaining.
                let more_restrictive = shown.as_ref().is_none_or(|(_, before)| {
                    before.is_allowed()
                        && (!decision.is_allowed() || decision.remaining() < before.remaining())
                });
                refused |= !decision.is_allowed();
                if more_restrictive && let Some(headers) = headers_of(chunk, &found) {
                    shown = Some((headers, decision));
                }
            }
        }
    }
    let mut headers = HeaderMap::new();
    if let Some((policy, decision)) = shown {
        policy.write(&mut headers, settings.headers, decision);
    }
    Ok(response(statuses, refused, header_values(&headers)))
}

/// When the request's store calls must have answered, and the deadline that instant comes from
/// (for the error).
#[derive(Clone, Copy)]
struct Until {
    instant: tokio::time::Instant,
    deadline: Duration,
}

impl Until {
    fn after(deadline: Duration) -> Self {
        let now = tokio::time::Instant::now();
        // A deadline of years (a file may say so) is a deadline of a year, not an overflow.
        let instant = now
            .checked_add(deadline)
            .unwrap_or(now + Duration::from_secs(365 * 24 * 3600));
        Self { instant, deadline }
    }
}

/// Checks `group` with `cost` (or, when the request is refused already, only reads it), until
/// the request's deadline: the group's decision and each rule's own verdict (its remaining and
/// reset), all from the one store call that decides.
async fn decide_group(
    store: &Arc<dyn Store>,
    key: &Key,
    until: Until,
    group: &[Counted],
    cost: u32,
    count: bool,
) -> Result<(Decision, Vec<RuleVerdict>), StoreError> {
    let rules = group.iter().map(|counted| counted.rule.clone());
    let policy = Policy::new(rules).map_err(|err| StoreError::error_reply(err.to_string()))?;
    let cost = if count { cost } else { 0 };
    let check = Arc::clone(store).check_verdicts(key, &policy, cost);
    let verdicts = match tokio::time::timeout_at(until.instant, check).await {
        Ok(answer) => answer?,
        Err(_) => return Err(StoreError::timeout(until.deadline)),
    };
    let each = verdicts.rules().to_vec();
    Ok((verdicts.into_decision(), each))
}

fn record_hit(
    found: &Option<Found>,
    own: &RuleVerdict,
    capacity: u32,
    over: bool,
    shadow: bool,
    cost: u32,
) {
    let Some(found) = found else { return };
    let hit = if over {
        Hit::Over { shadow }
    } else {
        Hit::Within {
            near: near(own.used(), u64::from(capacity)),
        }
    };
    record(&labels(found), hit, u64::from(cost));
}

/// The rule a descriptor's counted limit is decided by, in its domain's key: what a reset of
/// the descriptor must name to reach the same state.
pub(super) fn counter_rule(found: &Found, algorithm: Algorithm, quota: Quota) -> Rule {
    Rule::new(counter_name(&found.counter), algorithm, quota)
}

/// What names a descriptor's counter among its domain's: a digest of its entries, each length
/// prefixed so that no two lists of entries run together into one text. A digest because values
/// come from requests (any bytes, any length) and a rule's name is short and plain; the prefix
/// `e.` keeps these names apart from any a file gives its policies.
fn counter_name(counter: &[(String, String)]) -> String {
    let mut digest = Sha256::new();
    for (key, value) in counter {
        for part in [key, value] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part.as_bytes());
        }
    }
    let digest = digest.finalize();
    let hex: String = digest[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("e.{hex}")
}

/// The headers of a group's decisions: its rules under the names the client sees (each
/// limit's [`shown`](super::limit::Limit) name, made unique with the descriptor's position), made
/// once per limit for a group of one. `None` would be a bug (names made plain, quotas checked
/// when the file loaded), answered without headers.
fn headers_of(group: &[Counted], found: &[Option<Found>]) -> Option<PolicyHeaders> {
    let limit = |counted: &Counted| found[counted.index].as_ref().map(|found| &found.limit);
    if let [one] = group {
        return limit(one)?.headers().cloned();
    }
    let mut names: Vec<String> = Vec::with_capacity(group.len());
    for counted in group {
        let mut name = limit(counted)?.shown.clone();
        if name.is_empty() || names.contains(&name) {
            name = format!("{name}.{}", counted.index);
        }
        names.push(name);
    }
    let rules = group
        .iter()
        .zip(names)
        .map(|(counted, name)| Rule::new(name, counted.rule.algorithm(), counted.rule.quota()));
    Policy::new(rules).ok().map(PolicyHeaders::new)
}

/// The labels of a descriptor's metrics: its limit's, unless the request's values are in them.
fn labels(found: &Found) -> std::borrow::Cow<'_, [metrics::Label]> {
    match &found.metric_key {
        Some(key) => std::borrow::Cow::Owned(super::metrics::labels(key)),
        None => std::borrow::Cow::Borrowed(&found.limit.labels),
    }
}
