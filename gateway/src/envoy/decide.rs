//! One `ShouldRateLimit` request decided: each descriptor's limit found, the counted ones decided
//! in the domain's store as its [`Placement`](super::placement::Placement) says (all or
//! nothing: a request refused by one limit consumes none of the others; or each descriptor on
//! its own, as the reference decides), then one status per descriptor, the overall code, the
//! metrics and the headers for the client.
//!
//! Here the counted descriptors become steps (by cost, one counter once per step, enforced
//! before shadow); `calls` makes the store calls of the placement.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http::HeaderMap;
use sha2::{Digest, Sha256};
use tower_redis_ratelimit::Quota;
use tower_redis_ratelimit::policy::{Algorithm, Rule};

use super::calls::{Answered, Step, decide_steps};
use super::counted::Counted;
use super::limit::{LimitKind, unit_period};
use super::loaded::Loaded;
use super::matching::{Found, apply_replaces};
use super::metrics::Hit;
use super::status::{current_limit, failed, header_values, proto, response};
use crate::config::EnvoySettings;

/// The most descriptors one request may carry. Envoy sends one per `rate_limits` action of a
/// route (a handful); without a bound, one message of the 4 MiB tonic accepts could carry
/// hundreds of thousands, each found, named and counted.
pub const MAX_DESCRIPTORS: usize = 256;

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
                found.record(hit, u64::from(cost(index)));
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
    let steps = [(enforced, false), (shadow, true)]
        .into_iter()
        .flat_map(|(groups, shadow)| {
            groups.into_iter().map(move |((cost, _), group)| Step {
                cost,
                shadow,
                group,
            })
        })
        .collect();
    let answered = Answered::new(&found, &loaded.group_headers, statuses, refused);
    let placement = domain.placement;
    let decided = decide_steps(
        store,
        placement,
        &request.domain,
        settings.deadline,
        steps,
        answered,
    )
    .await;
    let answered = match decided {
        Ok(answered) => answered,
        Err((err, statuses)) => return Ok(failed(settings, &found, statuses, &err)),
    };
    let mut headers = HeaderMap::new();
    if let Some((policy, decision)) = answered.shown {
        policy.write(&mut headers, settings.headers, decision);
    }
    Ok(response(
        answered.statuses,
        answered.refused,
        header_values(&headers),
    ))
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
    let mut name = String::with_capacity(2 + 32);
    name.push_str("e.");
    crate::hex::push_lower(&mut name, &digest[..16]);
    name
}

#[cfg(test)]
mod tests {
    use super::counter_name;

    /// The names of counters already in Redis: a deployment's counts go on across versions
    /// only while these stay as they are (computed apart, with Python's `hashlib`).
    #[test]
    fn counters_keep_their_names() {
        let one = [("user".to_owned(), "user-42".to_owned())];
        assert_eq!(counter_name(&one), "e.80c89edab4b699092929f0e1959ae778");
        let two = [
            ("route".to_owned(), "/route/1".to_owned()),
            ("tenant".to_owned(), "tenant-7".to_owned()),
        ];
        assert_eq!(counter_name(&two), "e.95642ea3d042b8bde517852fdd8a7014");
    }
}
