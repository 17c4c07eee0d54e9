//! The YAML files of envoyproxy/ratelimit as they are written: one domain per file, read from a
//! file or from every `.yaml` / `.yml` file of a directory. Only what serde checks happens here
//! (shapes, unknown fields); what the reference validates beyond that is [`super::tree`]'s.
//!
//! The gateway's extensions sit under keys named `extensions`, at the top of a file (the store,
//! the placement) and in a `rate_limit` (algorithm, burst, any period), so a reader sees at once what
//! envoyproxy/ratelimit would not read.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, de};

use super::placement::Placement;
use crate::config::EnvoyFilesError;

/// One file: a domain and its descriptors.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DomainFile {
    /// The domain: Envoy's `domain` of the rate limit filter.
    #[serde(default, deserialize_with = "scalar")]
    pub domain: String,
    /// The descriptors at the first level.
    #[serde(default)]
    pub descriptors: Vec<DescriptorFile>,
    /// Extension: where this domain's limits are counted.
    #[serde(default)]
    pub extensions: DomainExtensions,
}

/// Extension of a domain (`extensions:` at the top of a file).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DomainExtensions {
    /// The store of the gateway's configuration file (`[stores.NAME]`) this domain counts in;
    /// the default store when absent.
    #[serde(default)]
    pub store: Option<String>,
    /// Where its counters live and how a request's descriptors are decided: `all_or_nothing`
    /// (default) or `per_descriptor`.
    #[serde(default)]
    pub placement: Placement,
    /// The quotas Envoy's rate limit quota service assigns this domain's buckets.
    #[serde(default)]
    pub quota_service: Option<super::quota::file::QuotaServiceFile>,
}

/// A descriptor of a descriptor list.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DescriptorFile {
    /// The entry's key (required).
    #[serde(default, deserialize_with = "scalar")]
    pub key: String,
    /// The entry's value: absent matches any value; `*` matches any run of characters.
    #[serde(default, deserialize_with = "scalar")]
    pub value: String,
    /// The limit, when this descriptor has one.
    #[serde(default)]
    pub rate_limit: Option<RateLimitFile>,
    /// The next level.
    #[serde(default)]
    pub descriptors: Vec<DescriptorFile>,
    /// Counted and reported, never refusing.
    #[serde(default)]
    pub shadow_mode: bool,
    /// Metrics per value, rather than rolled up into the key without a value.
    #[serde(default)]
    pub detailed_metric: bool,
    /// Metrics with the request's value of an entry matched without a value.
    #[serde(default)]
    pub value_to_metric: bool,
    /// Every value a wildcard matches counted in one counter.
    #[serde(default)]
    pub share_threshold: bool,
    /// envoyproxy/ratelimit's quota mode: refused by the loader (not supported).
    #[serde(default)]
    pub quota_mode: bool,
    /// Metadata returned by the reference in dynamic metadata: read and not used.
    #[serde(default)]
    pub metadata: Option<serde_yaml_ng::Value>,
}

/// A `rate_limit` block.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RateLimitFile {
    /// `second`, `minute`, `hour`, `day`, `week`, `month` (30 days) or `year` (365 days).
    #[serde(default)]
    pub unit: Option<String>,
    /// Requests per unit; 0 refuses every request.
    #[serde(default)]
    pub requests_per_unit: u32,
    /// No limit: answered without the store.
    #[serde(default)]
    pub unlimited: bool,
    /// The name other limits' `replaces` refer to.
    #[serde(default, deserialize_with = "optional_scalar")]
    pub name: Option<String>,
    /// The limits this one replaces when both match one request.
    #[serde(default)]
    pub replaces: Vec<ReplacesFile>,
    /// Extensions: the algorithm, a burst, any period.
    #[serde(default)]
    pub extensions: LimitExtensions,
}

/// An entry of `replaces`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ReplacesFile {
    /// The replaced limit's `name`.
    #[serde(default, deserialize_with = "scalar")]
    pub name: String,
}

/// Extensions of a `rate_limit` block.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitExtensions {
    /// `fixed_window` (default, as the reference counts), `sliding_log`, `sliding_window`,
    /// `token_bucket` or `gcra`.
    #[serde(default)]
    pub algorithm: Option<String>,
    /// For the token bucket and GCRA: how many may come at once (default: the limit).
    #[serde(default)]
    pub burst: Option<u32>,
    /// For the sliding window: sub-intervals per period (default 60).
    #[serde(default)]
    pub sub_intervals: Option<u16>,
    /// Any period (`"90s"`, `"15min"`) instead of `unit`.
    #[serde(default, with = "humantime_serde_option")]
    pub period: Option<std::time::Duration>,
    /// Read only to be refused by name: Envoy's protocol answers at once, `OK` or `OVER_LIMIT`,
    /// and cannot make Envoy hold a request (a route's `max_delay` smooths bursts elsewhere).
    #[serde(default)]
    pub max_delay: Option<serde::de::IgnoredAny>,
}

/// Reads `path`: a YAML file, or a directory whose `.yaml` and `.yml` files are read in name
/// order (as the reference reads its runtime directory), each with its path.
pub fn read(path: &Path) -> Result<Vec<(PathBuf, DomainFile)>, EnvoyFilesError> {
    let read_error = |path: &Path, source| EnvoyFilesError::Read {
        path: path.to_owned(),
        source,
    };
    let paths = if path.is_dir() {
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|err| read_error(path, err))? {
            let entry = entry.map_err(|err| read_error(path, err))?;
            let file = entry.path();
            let yaml = matches!(
                file.extension().and_then(|ext| ext.to_str()),
                Some("yaml" | "yml")
            );
            if yaml && file.is_file() {
                paths.push(file);
            }
        }
        paths.sort();
        paths
    } else {
        vec![path.to_owned()]
    };
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).map_err(|err| read_error(&path, err))?;
            let file = serde_yaml_ng::from_str(&text).map_err(|err| EnvoyFilesError::Parse {
                path: path.clone(),
                message: err.to_string(),
            })?;
            Ok((path, file))
        })
        .collect()
}

/// A scalar read as text, as the reference's YAML reader does for string fields:
/// `value: 200` is the value `"200"`.
fn scalar<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    struct Text;
    impl de::Visitor<'_> for Text {
        type Value = String;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string, a number or a boolean")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<String, E> {
            Ok(text.to_owned())
        }

        fn visit_bool<E: de::Error>(self, value: bool) -> Result<String, E> {
            Ok(value.to_string())
        }

        fn visit_i64<E: de::Error>(self, value: i64) -> Result<String, E> {
            Ok(value.to_string())
        }

        fn visit_u64<E: de::Error>(self, value: u64) -> Result<String, E> {
            Ok(value.to_string())
        }

        fn visit_f64<E: de::Error>(self, value: f64) -> Result<String, E> {
            Ok(value.to_string())
        }

        fn visit_unit<E: de::Error>(self) -> Result<String, E> {
            Ok(String::new())
        }
    }
    deserializer.deserialize_any(Text)
}

fn optional_scalar<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    scalar(deserializer).map(|text| Some(text).filter(|text| !text.is_empty()))
}

/// `period: "90s"` (humantime's syntax, as the gateway's TOML durations).
mod humantime_serde_option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, de};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_duration(&text)
            .map(Some)
            .map_err(|err| de::Error::custom(format!("{text:?} is not a duration: {err}")))
    }
}

/// Where a descriptor list is: its file, its field and its metric key.
pub(super) struct Level<'a> {
    pub(super) path: &'a Path,
    pub(super) field: String,
    pub(super) metric_key: Vec<String>,
    pub(super) keys: Vec<String>,
}

impl Level<'_> {
    pub(super) fn error(&self, field: String, message: impl Into<String>) -> EnvoyFilesError {
        EnvoyFilesError::Field {
            path: self.path.to_owned(),
            error: crate::config::FieldError::new(field, message),
        }
    }
}
