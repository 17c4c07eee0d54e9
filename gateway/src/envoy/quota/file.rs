//! The quota service's part of an Envoy file, as written: `extensions.quota_service` beside
//! the domain's descriptors. Only shapes are checked here; [`super::rules`] validates.
//!
//! ```yaml
//! domain: edge
//! extensions:
//!   quota_service:
//!     buckets:
//!       - bucket: { name: tenant, tenant: "*" }   # every key of Envoy's bucket id, each value
//!         limit: 20                             # an exact value or a pattern with `*`
//!         period: 1s
//!         burst: 5
//!     unmatched: { blanket: deny_all }
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

/// `extensions.quota_service` of a domain's file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QuotaServiceFile {
    /// The buckets' quotas, each for the bucket ids it matches.
    #[serde(default)]
    pub buckets: Vec<BucketQuotaFile>,
    /// What a bucket that no rule matches gets (default `{ blanket: deny_all }`): a rule
    /// without `bucket`.
    #[serde(default)]
    pub unmatched: Option<BucketQuotaFile>,
    /// How long Envoy applies an assignment that is not renewed, in whole seconds (default
    /// `"2s"`).
    #[serde(default)]
    pub assignment_ttl: Option<String>,
}

/// A rule: the bucket ids it matches (none for `unmatched`) and what they get, a quota or a
/// blanket rule.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BucketQuotaFile {
    /// The bucket id's keys, each with its value: exact, or a pattern whose `*` matches any
    /// run of characters. A bucket id matches when it has exactly these keys.
    #[serde(default)]
    pub bucket: BTreeMap<String, serde_yaml_ng::Value>,
    /// Requests per period, the whole fleet's, for each bucket id; 0 denies every request.
    #[serde(default)]
    pub limit: Option<u32>,
    /// The period, in whole seconds (`"1s"`, `"1m"`).
    #[serde(default)]
    pub period: Option<String>,
    /// How many requests may come at once, the whole fleet's (default: the limit).
    #[serde(default)]
    pub burst: Option<u32>,
    /// `allow_all` or `deny_all`, in place of a quota.
    #[serde(default)]
    pub blanket: Option<String>,
}
