//! The quota service's rules, validated: for each domain, the bucket rules of its file's
//! `extensions.quota_service` and what an unmatched bucket gets, each mistake named by its
//! file and field.
//!
//! A bucket id (the map of strings Envoy's `bucket_id_builder` makes) matches a rule that has
//! exactly its keys, each value equal or, for a pattern with `*`, matched as the Envoy files'
//! wildcard values are. Rules without a pattern are looked at first, then those with one in
//! file order: the first that matches gives the bucket its quota. Every bucket id has a quota
//! of its own: `tenant: "*"` with a limit of 20 is 20 for each tenant, across the fleet.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tower_redis_ratelimit::Quota;

use super::file::{BucketQuotaFile, QuotaServiceFile};
use crate::config::{EnvoyFilesError, FieldError};
use crate::envoy::file::DomainFile;
use crate::envoy::matching::wildcard_match;

/// How long Envoy applies an assignment when the file does not say.
pub const DEFAULT_ASSIGNMENT_TTL: Duration = Duration::from_secs(2);

/// What a bucket gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Treatment {
    /// A share of the quota, for the whole fleet.
    Quota(Quota),
    /// Every request.
    AllowAll,
    /// No request.
    DenyAll,
}

/// A bucket's rule, as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// What the bucket gets.
    pub treatment: Treatment,
    /// How long its assignments live at Envoy.
    pub ttl: Duration,
    /// Whether a rule matched (rather than `unmatched`): one that no longer does, after a
    /// reload, is abandoned.
    pub matched: bool,
}

/// Every domain's rules.
#[derive(Debug, Default)]
pub struct Rules {
    domains: HashMap<String, DomainRules>,
}

#[derive(Debug)]
struct DomainRules {
    /// Exact rules first, then those with a pattern, in file order.
    rules: Vec<Rule>,
    unmatched: Treatment,
    ttl: Duration,
    store: Option<String>,
    file: PathBuf,
}

#[derive(Debug)]
struct Rule {
    entries: BTreeMap<String, Value>,
    treatment: Treatment,
}

#[derive(Debug)]
enum Value {
    Exact(String),
    Pattern(Vec<String>),
}

impl Rules {
    /// The rules of every file that has `extensions.quota_service`.
    pub fn build(files: &[(PathBuf, DomainFile)]) -> Result<Self, EnvoyFilesError> {
        let mut domains = HashMap::new();
        for (path, file) in files {
            let Some(quota) = &file.extensions.quota_service else {
                continue;
            };
            let mut rules = domain_rules(path, quota)?;
            rules.store.clone_from(&file.extensions.store);
            domains.insert(file.domain.clone(), rules);
        }
        Ok(Self { domains })
    }

    /// What `bucket` of `domain` gets; `None` when no file has the domain.
    pub fn find(&self, domain: &str, bucket: &HashMap<String, String>) -> Option<Found> {
        let rules = self.domains.get(domain)?;
        let rule = rules.rules.iter().find(|rule| rule.matches(bucket));
        Some(Found {
            treatment: rule.map_or(rules.unmatched, |rule| rule.treatment),
            ttl: rules.ttl,
            matched: rule.is_some(),
        })
    }

    /// Whether a file has `domain`.
    pub fn has(&self, domain: &str) -> bool {
        self.domains.contains_key(domain)
    }

    /// The store `domain`'s shares are kept in (its file's `extensions.store`).
    pub fn store(&self, domain: &str) -> Option<&str> {
        self.domains.get(domain)?.store.as_deref()
    }

    /// Each domain with its file and number of bucket rules, for `check`.
    pub fn describe(&self) -> Vec<(String, PathBuf, usize)> {
        let mut domains: Vec<_> = self
            .domains
            .iter()
            .map(|(name, rules)| (name.clone(), rules.file.clone(), rules.rules.len()))
            .collect();
        domains.sort();
        domains
    }

    /// The domains' stores, named by their files (`None`: the default store).
    pub fn stores(&self) -> impl Iterator<Item = (&str, Option<&str>, &Path)> {
        self.domains
            .iter()
            .map(|(name, rules)| (name.as_str(), rules.store.as_deref(), rules.file.as_path()))
    }
}

impl Rule {
    fn matches(&self, bucket: &HashMap<String, String>) -> bool {
        bucket.len() == self.entries.len()
            && self
                .entries
                .iter()
                .all(|(key, value)| match (bucket.get(key), value) {
                    (Some(actual), Value::Exact(expected)) => actual == expected,
                    (Some(actual), Value::Pattern(parts)) => wildcard_match(parts, actual),
                    (None, _) => false,
                })
    }
}

const FIELD: &str = "extensions.quota_service";

fn domain_rules(path: &Path, file: &QuotaServiceFile) -> Result<DomainRules, EnvoyFilesError> {
    let error = |field: String, message: String| EnvoyFilesError::Field {
        path: path.to_owned(),
        error: FieldError::new(field, message),
    };
    let ttl = match &file.assignment_ttl {
        Some(text) => whole_seconds(text)
            .map_err(|message| error(format!("{FIELD}.assignment_ttl"), message))?,
        None => DEFAULT_ASSIGNMENT_TTL,
    };
    let unmatched = match &file.unmatched {
        Some(unmatched) if !unmatched.bucket.is_empty() => {
            return Err(error(
                format!("{FIELD}.unmatched.bucket"),
                "`unmatched` is for the buckets no rule matches: it names none".into(),
            ));
        }
        Some(unmatched) => treatment(unmatched, &format!("{FIELD}.unmatched"))
            .map_err(|(field, message)| error(field, message))?,
        None => Treatment::DenyAll,
    };
    let mut exact = Vec::new();
    let mut patterns = Vec::new();
    for (index, rule) in file.buckets.iter().enumerate() {
        let field = format!("{FIELD}.buckets[{index}]");
        if rule.bucket.is_empty() {
            return Err(error(
                format!("{field}.bucket"),
                "a bucket needs at least one key: Envoy's bucket_id_builder makes none empty"
                    .into(),
            ));
        }
        let mut entries = BTreeMap::new();
        for (key, value) in &rule.bucket {
            let text = scalar(value).ok_or_else(|| {
                error(
                    format!("{field}.bucket.{key}"),
                    "a bucket's value is a string (or a number or a boolean)".into(),
                )
            })?;
            let value = if text.contains('*') {
                Value::Pattern(text.split('*').map(str::to_owned).collect())
            } else {
                Value::Exact(text)
            };
            entries.insert(key.clone(), value);
        }
        let treatment =
            treatment(rule, &field).map_err(|(field, message)| error(field, message))?;
        let has_pattern = entries
            .values()
            .any(|value| matches!(value, Value::Pattern(_)));
        let rule = Rule { entries, treatment };
        if has_pattern {
            patterns.push(rule);
        } else {
            exact.push(rule);
        }
    }
    exact.extend(patterns);
    Ok(DomainRules {
        rules: exact,
        unmatched,
        ttl,
        store: None,
        file: path.to_owned(),
    })
}

/// A quota or a blanket rule, its mistakes named under `field`.
fn treatment(file: &BucketQuotaFile, field: &str) -> Result<Treatment, (String, String)> {
    if let Some(blanket) = &file.blanket {
        if file.limit.is_some() || file.period.is_some() || file.burst.is_some() {
            return Err((
                format!("{field}.blanket"),
                "a blanket rule has no limit, period or burst: give one or the other".into(),
            ));
        }
        return match blanket.as_str() {
            "allow_all" => Ok(Treatment::AllowAll),
            "deny_all" => Ok(Treatment::DenyAll),
            other => Err((
                format!("{field}.blanket"),
                format!("'{other}' is not a blanket rule: `allow_all` or `deny_all`"),
            )),
        };
    }
    let Some(limit) = file.limit else {
        return Err((
            format!("{field}.limit"),
            "a bucket needs a `limit` and a `period`, or a `blanket` rule".into(),
        ));
    };
    let Some(period) = &file.period else {
        return Err((
            format!("{field}.period"),
            "a quota needs a `period` (whole seconds: \"1s\", \"1m\")".into(),
        ));
    };
    let period = whole_seconds(period).map_err(|message| (format!("{field}.period"), message))?;
    if file.burst == Some(0) {
        return Err((
            format!("{field}.burst"),
            "a burst of 0 admits nothing: at least 1, or leave it out (the limit)".into(),
        ));
    }
    if limit == 0 {
        return Ok(Treatment::DenyAll);
    }
    let quota = Quota::new(limit, period);
    Ok(Treatment::Quota(match file.burst {
        Some(burst) => quota.with_burst(burst),
        None => quota,
    }))
}

/// A duration of whole seconds, at least one: Envoy reads a token bucket's fill interval and
/// an assignment's time to live in whole seconds, dropping the rest.
fn whole_seconds(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text)
        .map_err(|err| format!("{text:?} is not a duration: {err}"))?;
    if duration.subsec_nanos() != 0 || duration.is_zero() {
        return Err(format!(
            "{text:?}: Envoy reads it in whole seconds, dropping the rest: give whole seconds, \
             at least \"1s\""
        ));
    }
    Ok(duration)
}

/// A YAML scalar as text, as the Envoy files read a descriptor's value: `tenant: 200` is
/// `"200"`.
fn scalar(value: &serde_yaml_ng::Value) -> Option<String> {
    match value {
        serde_yaml_ng::Value::String(text) => Some(text.clone()),
        serde_yaml_ng::Value::Number(number) => Some(number.to_string()),
        serde_yaml_ng::Value::Bool(value) => Some(value.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(yaml: &str) -> Result<Rules, EnvoyFilesError> {
        let file: DomainFile = serde_yaml_ng::from_str(yaml).expect("YAML of the right shape");
        Rules::build(&[(PathBuf::from("edge.yaml"), file)])
    }

    fn bucket(entries: &[(&str, &str)]) -> HashMap<String, String> {
        entries
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect()
    }

    const FILE: &str = r#"
domain: edge
extensions:
  quota_service:
    buckets:
      - bucket: { name: tenant, tenant: "*" }
        limit: 20
        period: 1s
        burst: 5
      - bucket: { name: tenant, tenant: acme }
        limit: 100
        period: 1m
      - bucket: { name: internal }
        blanket: allow_all
    unmatched: { limit: 3, period: 10s }
"#;

    #[test]
    fn exact_values_win_over_patterns_and_keys_must_all_match() {
        let rules = rules(FILE).unwrap();
        let find = |entries: &[(&str, &str)]| rules.find("edge", &bucket(entries)).unwrap();
        let acme = find(&[("name", "tenant"), ("tenant", "acme")]);
        assert_eq!(
            acme.treatment,
            Treatment::Quota(Quota::new(100, Duration::from_secs(60)))
        );
        assert!(acme.matched);
        let other = find(&[("name", "tenant"), ("tenant", "globex")]);
        assert_eq!(
            other.treatment,
            Treatment::Quota(Quota::per_second(20).with_burst(5))
        );
        assert_eq!(find(&[("name", "internal")]).treatment, Treatment::AllowAll);
        let extra_key = find(&[("name", "internal"), ("env", "prod")]);
        assert!(!extra_key.matched);
        assert_eq!(
            extra_key.treatment,
            Treatment::Quota(Quota::new(3, Duration::from_secs(10)))
        );
        assert_eq!(acme.ttl, DEFAULT_ASSIGNMENT_TTL);
        assert!(rules.find("other", &bucket(&[("name", "x")])).is_none());
    }

    #[test]
    fn mistakes_are_named_by_file_and_field() {
        let cases = [
            (
                "period: 1500ms",
                "edge.yaml: `extensions.quota_service.buckets[0].period`: \"1500ms\": Envoy reads it in whole seconds",
            ),
            (
                "period: soon",
                "edge.yaml: `extensions.quota_service.buckets[0].period`: \"soon\" is not a duration",
            ),
            (
                "burst: 0\n        period: 1s",
                "edge.yaml: `extensions.quota_service.buckets[0].burst`: a burst of 0",
            ),
            (
                "blanket: allow_some",
                "edge.yaml: `extensions.quota_service.buckets[0].blanket`: 'allow_some' is not a blanket rule",
            ),
        ];
        for (fields, message) in cases {
            let yaml = format!(
                "domain: edge\nextensions:\n  quota_service:\n    buckets:\n      - bucket: {{ name: a }}\n        limit: 5\n        {fields}\n"
            )
            .replace("limit: 5\n        blanket", "blanket");
            let error = rules(&yaml).unwrap_err().to_string();
            assert!(error.starts_with(message), "{error}\nexpected: {message}");
        }
        let no_limit = "domain: edge\nextensions:\n  quota_service:\n    buckets:\n      - bucket: { name: a }\n";
        let error = rules(no_limit).unwrap_err().to_string();
        assert!(
            error.contains("`extensions.quota_service.buckets[0].limit`: a bucket needs"),
            "{error}"
        );
        let unknown = "domain: edge\nextensions:\n  quota_service:\n    bucket: []\n";
        let error = serde_yaml_ng::from_str::<DomainFile>(unknown).unwrap_err();
        assert!(
            error.to_string().contains("unknown field `bucket`"),
            "{error}"
        );
    }
}
