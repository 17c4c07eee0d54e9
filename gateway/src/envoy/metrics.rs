//! The reference's per-descriptor counters, named and labelled as its Prometheus mapping names
//! them, so its dashboards read this service unchanged:
//! `ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}`
//! with the labels `domain`, `key1` (the first level's `key` or `key_value`) and, below the
//! first level, `key2` (the deeper levels joined by `.`). Each counts hits (a request's cost).

use std::sync::Arc;

use metrics::{Label, SharedString};

/// What one descriptor's limit said about one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    /// Within the limit; `near` when past 80% of it (the reference's default ratio).
    Within {
        /// Past the near-limit ratio.
        near: bool,
    },
    /// Over the limit; `shadow` when shadow mode let it pass.
    Over {
        /// A shadow limit (counted under `shadow_mode` too).
        shadow: bool,
    },
}

/// The reference's near-limit ratio: a hit past 80% of the limit is near it.
pub const NEAR_LIMIT_RATIO: f64 = 0.8;

/// Whether `used` of `limit` is past the near-limit ratio.
pub fn near(used: u64, limit: u64) -> bool {
    // The reference compares against floor(limit * ratio).
    used > (limit as f64 * NEAR_LIMIT_RATIO).floor() as u64
}

/// The labels of a metric key (the domain, then a part per level): `domain`, `key1` and,
/// below the first level, `key2`.
pub fn labels(metric_key: &[String]) -> Vec<Label> {
    let shared = |text: String| SharedString::from(Arc::<str>::from(text));
    let mut labels = vec![
        Label::new(
            "domain",
            shared(metric_key.first().cloned().unwrap_or_default()),
        ),
        Label::new(
            "key1",
            shared(metric_key.get(1).cloned().unwrap_or_default()),
        ),
    ];
    if metric_key.len() > 2 {
        labels.push(Label::new("key2", shared(metric_key[2..].join("."))));
    }
    labels
}

/// Counts `hits` of one descriptor under `labels` (see [`labels`]).
pub fn record(labels: &[Label], hit: Hit, hits: u64) {
    let count = |name: &'static str| metrics::counter!(name, labels.to_vec()).increment(hits);
    count("ratelimit_service_rate_limit_total_hits");
    match hit {
        Hit::Within { near } => {
            count("ratelimit_service_rate_limit_within_limit");
            if near {
                count("ratelimit_service_rate_limit_near_limit");
            }
        }
        Hit::Over { shadow } => {
            count("ratelimit_service_rate_limit_over_limit");
            if shadow {
                count("ratelimit_service_rate_limit_shadow_mode");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::near;

    #[test]
    fn near_means_past_eighty_percent() {
        assert!(!near(8, 10));
        assert!(near(9, 10));
        assert!(!near(3, 5));
        assert!(near(5, 5));
    }
}
