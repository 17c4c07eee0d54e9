//! What Envoy is sent for a bucket: its share of the quota as a token bucket, a blanket rule,
//! or the bucket abandoned; each assignment with its time to live.

use std::collections::HashMap;
use std::time::Duration;

use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::envoy::r#type::v3::{RateLimitStrategy, TokenBucket};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::BucketId;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::BucketAction;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_response::bucket_action::{
    AbandonAction, BucketAction as Action, QuotaAssignmentAction,
};
use envoy_types::pb::google::protobuf::{Duration as ProtoDuration, UInt32Value};
use tower_redis_ratelimit::Quota;

/// What a bucket is assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assigned {
    /// `share` of the quota's limit per period, with the same part of its burst (at least
    /// one token).
    Share {
        /// The bucket's quota, the whole fleet's.
        quota: Quota,
        /// Tokens per period for this Envoy (at least 1: a share of 0 is `DenyAll`).
        share: u64,
    },
    /// Every request.
    AllowAll,
    /// No request.
    DenyAll,
    /// The bucket is no longer in the configuration: Envoy forgets it, and reports it anew
    /// on its next request.
    Abandon,
}

impl Assigned {
    /// A share of `quota`: a token bucket, or `DenyAll` for a share of 0.
    pub fn share(quota: Quota, share: u64) -> Self {
        if share == 0 {
            Assigned::DenyAll
        } else {
            Assigned::Share { quota, share }
        }
    }

    /// The token bucket of a share: `share` tokens per `period` (Envoy fills it evenly) and
    /// a burst of the same part of the quota's (rounded down, at least one token).
    pub fn token_bucket(quota: Quota, share: u64) -> TokenBucket {
        let share = u32::try_from(share).unwrap_or(u32::MAX);
        let burst = u64::from(quota.burst()) * u64::from(share) / u64::from(quota.limit().max(1));
        TokenBucket {
            max_tokens: u32::try_from(burst).unwrap_or(u32::MAX).max(1),
            tokens_per_fill: Some(UInt32Value { value: share }),
            fill_interval: Some(proto_duration(quota.period())),
        }
    }

    /// The action for the bucket `bucket`, living `ttl` at Envoy.
    pub fn action(&self, bucket: &HashMap<String, String>, ttl: Duration) -> BucketAction {
        let strategy = |strategy| {
            Action::QuotaAssignmentAction(QuotaAssignmentAction {
                assignment_time_to_live: Some(proto_duration(ttl)),
                rate_limit_strategy: Some(RateLimitStrategy {
                    strategy: Some(strategy),
                }),
            })
        };
        let action = match *self {
            Assigned::Share { quota, share } => {
                strategy(Strategy::TokenBucket(Self::token_bucket(quota, share)))
            }
            Assigned::AllowAll => strategy(Strategy::BlanketRule(BlanketRule::AllowAll.into())),
            Assigned::DenyAll => strategy(Strategy::BlanketRule(BlanketRule::DenyAll.into())),
            Assigned::Abandon => Action::AbandonAction(AbandonAction {}),
        };
        BucketAction {
            bucket_id: Some(BucketId {
                bucket: bucket.clone(),
            }),
            bucket_action: Some(action),
        }
    }
}

/// As a log line says it: `20 per 1s, burst 4`, `allow_all`, `deny_all`, `abandon`.
impl std::fmt::Display for Assigned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Assigned::Share { quota, share } => write!(
                f,
                "{share} per {}, burst {}",
                humantime::format_duration(quota.period()),
                Self::token_bucket(quota, share).max_tokens
            ),
            Assigned::AllowAll => f.write_str("allow_all"),
            Assigned::DenyAll => f.write_str("deny_all"),
            Assigned::Abandon => f.write_str("abandon"),
        }
    }
}

fn proto_duration(duration: Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_carries_its_part_of_the_burst() {
        let quota = Quota::per_second(20).with_burst(5);
        let bucket = Assigned::token_bucket(quota, 8);
        assert_eq!(bucket.max_tokens, 2);
        assert_eq!(bucket.tokens_per_fill, Some(UInt32Value { value: 8 }));
        assert_eq!(bucket.fill_interval.map(|d| d.seconds), Some(1));
        // A share too small for a whole token of burst still admits one at a time.
        assert_eq!(Assigned::token_bucket(quota, 1).max_tokens, 1);
        assert_eq!(Assigned::share(quota, 0), Assigned::DenyAll);
        assert_eq!(Assigned::share(quota, 8).to_string(), "8 per 1s, burst 2");
    }
}
