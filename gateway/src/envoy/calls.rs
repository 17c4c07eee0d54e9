//! The store calls that decide a request's counted descriptors, as its domain's
//! [`Placement`] says, and what their answers make of the request (each descriptor's status, the
//! overall refusal, the headers):
//!
//! - **all or nothing**: the descriptors' rules are one [`Policy`] on one key, the domain: the
//!   store decides every rule of a policy in one atomic step and counts them only when all
//!   admit. A store decides one cost per policy and holds a rule once, so descriptors with
//!   different `hits_addend` are decided one cost after another (a cost of 0, a descriptor's
//!   "check only", first: a peek that counts nothing), one counter sent twice in two steps,
//!   and a request with more descriptors than a policy holds ([`MAX_RULES`]) in groups of that
//!   size: a refusal stops the steps after it from counting (they are read), and the steps
//!   before it stay counted. Shadow-mode descriptors come last, counted only when the request
//!   is admitted.
//! - **per descriptor**: each descriptor's rule on a key of its own (its own Cluster slot),
//!   every call of the request sent at once and awaited together, so a request is one round of
//!   calls however many primaries its descriptors live on (the store's connection pipelines the
//!   calls bound for one node). Each is decided on its own: a refused descriptor counts nothing,
//!   the others count what they admit, whatever another said.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use futures_util::future::join_all;
use tower_redis_ratelimit::decision::RuleVerdict;
use tower_redis_ratelimit::policy::{MAX_RULES, Policy};
use tower_redis_ratelimit::respond::PolicyHeaders;
use tower_redis_ratelimit::store::StoreError;
use tower_redis_ratelimit::{Decision, Store};

use super::counted::Counted;
use super::group_headers::GroupHeaders;
use super::matching::Found;
use super::metrics::{Hit, near};
use super::placement::Placement;
use super::status::fill;

/// A step of a request: descriptors decided together, with one cost.
pub(super) struct Step {
    pub(super) cost: u32,
    pub(super) shadow: bool,
    pub(super) group: Vec<Counted>,
}

/// What the store's answers have made of a request so far.
pub(super) struct Answered<'a> {
    found: &'a [Option<Found>],
    groups: &'a GroupHeaders,
    /// Each descriptor's status.
    pub(super) statuses: Vec<DescriptorStatus>,
    /// Whether an enforced limit refused the request.
    pub(super) refused: bool,
    /// The headers of the most restrictive decision: a refusal, else the fewest remaining.
    pub(super) shown: Option<(PolicyHeaders, Decision)>,
}

/// Decides `steps` (enforced ones first, shadow ones after) of a request in `domain`'s
/// `store`, as `placement` says, until the request's deadline. A failed call of an enforced
/// limit stops there with its error (the request is answered by the failure mode); a shadow
/// limit's changes no answer.
pub(super) async fn decide_steps<'a>(
    store: &Arc<dyn Store>,
    placement: Placement,
    domain: &str,
    deadline: Duration,
    steps: Vec<Step>,
    mut answered: Answered<'a>,
) -> Result<Answered<'a>, (StoreError, Vec<DescriptorStatus>)> {
    // One deadline for the whole request: a request decided in several steps still answers
    // within it, as the gateway waiting for it expects.
    let until = Until::after(deadline);
    match placement {
        Placement::AllOrNothing => {
            for step in &steps {
                for chunk in step.group.chunks(MAX_RULES) {
                    let key = placement.key(domain, &chunk[0].rule);
                    let count = !answered.refused;
                    let answer = decide_group(store, &key, until, chunk, step.cost, count).await;
                    answered = answered.take(step, chunk, answer)?;
                }
            }
        }
        Placement::PerDescriptor => {
            let calls: Vec<(&Step, &Counted)> = steps
                .iter()
                .flat_map(|step| step.group.iter().map(move |counted| (step, counted)))
                .collect();
            let answers = join_all(calls.iter().map(|(step, counted)| async move {
                let key = placement.key(domain, &counted.rule);
                let one = std::slice::from_ref(*counted);
                decide_group(store, &key, until, one, step.cost, true).await
            }))
            .await;
            for ((step, counted), answer) in calls.into_iter().zip(answers) {
                answered = answered.take(step, std::slice::from_ref(counted), answer)?;
            }
        }
    }
    Ok(answered)
}

impl<'a> Answered<'a> {
    /// Nothing answered yet: `statuses` as found, `refused` when a limit of nothing refused
    /// the request without the store.
    pub(super) fn new(
        found: &'a [Option<Found>],
        groups: &'a GroupHeaders,
        statuses: Vec<DescriptorStatus>,
        refused: bool,
    ) -> Self {
        Self {
            found,
            groups,
            statuses,
            refused,
            shown: None,
        }
    }

    /// Takes the answer of `group`, a part of `step` decided in one call: each descriptor's
    /// status and metrics and, for enforced limits, the refusal and the headers. A failed call
    /// of enforced limits is the request's error.
    fn take(
        mut self,
        step: &Step,
        group: &[Counted],
        answer: Result<(Decision, Vec<RuleVerdict>), StoreError>,
    ) -> Result<Self, (StoreError, Vec<DescriptorStatus>)> {
        let (decision, each) = match answer {
            Ok(answer) => answer,
            // Shadow limits never refuse: their store failing changes no answer.
            Err(_) if step.shadow => return Ok(self),
            Err(err) => return Err((err, self.statuses)),
        };
        for (position, (counted, own)) in group.iter().zip(&each).enumerate() {
            let over = decision.refused_by().any(|index| index == position);
            let found = &self.found[counted.index];
            fill(
                &mut self.statuses[counted.index],
                found,
                counted.reported,
                own,
                over && !step.shadow,
            );
            record_hit(
                found,
                own,
                counted.rule.capacity(),
                over,
                step.shadow,
                step.cost,
            );
        }
        if step.shadow {
            return Ok(self);
        }
        let more_restrictive = self.shown.as_ref().is_none_or(|(_, before)| {
            before.is_allowed()
                && (!decision.is_allowed() || decision.remaining() < before.remaining())
        });
        self.refused |= !decision.is_allowed();
        if more_restrictive && let Some(headers) = self.groups.of(group, self.found) {
            self.shown = Some((headers, decision));
        }
        Ok(self)
    }
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

/// Checks `group` with `cost` (or, when the request is refused already, only reads it) under
/// `key`, until the request's deadline: the group's decision and each rule's own verdict (its
/// remaining and reset), all from the one store call that decides.
async fn decide_group(
    store: &Arc<dyn Store>,
    key: &tower_redis_ratelimit::key::Key,
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
    found.record(hit, u64::from(cost));
}
