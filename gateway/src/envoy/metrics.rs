//! The reference's per-descriptor counters, named and labelled as its Prometheus mapping names
//! them, so its dashboards read this service unchanged:
//! `ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}`
//! with the labels `domain`, `key1` (the first level's `key` or `key_value`) and, below the
//! first level, `key2` (the second level's alone). Each counts hits (a request's cost).
//!
//! The reference names a counter in statsd (`ratelimit.service.rate_limit.<domain>.<level>…`)
//! and its mapping (`src/stats/prom/default_mapper.yaml`, and the statsd exporter's example)
//! cuts that name at its dots: `$1` the domain, `$2` `key1`, `$3` `key2`, whatever follows
//! dropped. So the labels are taken from that name the same way, after the reference's
//! sanitising, rather than from the levels: a dot in a domain or a value cuts there too.

use std::sync::Arc;

use metrics::{Key, Label, Level, Metadata, SharedString};

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

/// The labels of a metric key (the domain, then a part per level), as the reference's mapping
/// makes them from its statsd name: `domain`, `key1` and, when the name has a third part,
/// `key2`; the parts after it are dropped, so a limit three levels deep shares its series with
/// the limit at its second level.
pub fn labels(metric_key: &[String]) -> Vec<Label> {
    let shared = |text: &str| SharedString::from(Arc::<str>::from(text));
    let name = sanitize(&metric_key.join("."));
    let mut parts = name.split('.');
    let mut labels = vec![
        Label::new("domain", shared(parts.next().unwrap_or_default())),
        Label::new("key1", shared(parts.next().unwrap_or_default())),
    ];
    if let Some(key2) = parts.next() {
        labels.push(Label::new("key2", shared(key2)));
    }
    labels
}

/// The reference's `SanitizeStatName`: `:` and `|` (statsd's separators) become `_`, and so do
/// the dots of whatever is shaped like an IPv4 address (`\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`, each
/// leftmost match in turn, as Go's regexp finds them), so an address stays one part.
fn sanitize(name: &str) -> String {
    let mut bytes = name.replace([':', '|'], "_").into_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match ipv4_end(&bytes, at) {
            Some(end) => {
                for byte in &mut bytes[at..end] {
                    if *byte == b'.' {
                        *byte = b'_';
                    }
                }
                at = end;
            }
            None => at += 1,
        }
    }
    // Only ASCII dots were replaced (by ASCII): the text is still UTF-8, and nothing is lost.
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Where the regexp above matches when it starts at `at`. A run of digits cannot end in a
/// digit, so backtracking never helps: each of the first three groups is the whole run (one to
/// three digits) and a dot; the last takes at most three digits.
fn ipv4_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    let digits = |from: usize| {
        bytes[from.min(bytes.len())..]
            .iter()
            .take_while(|byte| byte.is_ascii_digit())
            .count()
    };
    for _ in 0..3 {
        let run = digits(at);
        if !(1..=3).contains(&run) || bytes.get(at + run) != Some(&b'.') {
            return None;
        }
        at += run + 1;
    }
    let run = digits(at).min(3);
    (run > 0).then_some(at + run)
}

/// The reference's counters, in the order [`counted`] names them.
const COUNTERS: [&str; 5] = [
    "ratelimit_service_rate_limit_total_hits",
    "ratelimit_service_rate_limit_within_limit",
    "ratelimit_service_rate_limit_near_limit",
    "ratelimit_service_rate_limit_over_limit",
    "ratelimit_service_rate_limit_shadow_mode",
];

/// The counters (by their place in [`COUNTERS`]) that a hit counts in.
fn counted(hit: Hit) -> impl Iterator<Item = usize> {
    let (second, third) = match hit {
        Hit::Within { near } => (1, near.then_some(2)),
        Hit::Over { shadow } => (3, shadow.then_some(4)),
    };
    [Some(0), Some(second), third].into_iter().flatten()
}

/// Counts `hits` of one descriptor under `labels` (see [`labels`]).
pub fn record(labels: &[Label], hit: Hit, hits: u64) {
    for counter in counted(hit) {
        metrics::counter!(COUNTERS[counter], labels.to_vec()).increment(hits);
    }
}

/// The counters of one series of labels (a limit's own), their keys made once: counting a hit
/// then neither copies the labels nor hashes them again, which [`record`] does for every
/// counter of every descriptor.
#[derive(Debug)]
pub struct Series {
    keys: [Key; 5],
}

/// What `metrics::counter!` says of a counter registered here.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

impl Series {
    /// The counters of `labels` (see [`labels`]).
    pub fn new(labels: &[Label]) -> Self {
        Self {
            keys: COUNTERS.map(|name| Key::from_parts(name, labels.to_vec())),
        }
    }

    /// Counts `hits` of one descriptor, as [`record`] counts them under the same labels, in
    /// the recorder installed now.
    pub fn record(&self, hit: Hit, hits: u64) {
        for counter in counted(hit) {
            let key = &self.keys[counter];
            metrics::with_recorder(|recorder| recorder.register_counter(key, &METADATA))
                .increment(hits);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{near, sanitize};

    #[test]
    fn names_are_sanitised_as_the_reference_does() {
        assert_eq!(
            sanitize("d.remote_address_10.0.0.1"),
            "d.remote_address_10_0_0_1"
        );
        assert_eq!(sanitize("d.a:b|c"), "d.a_b_c");
        // Go's leftmost matches: a run of four digits is entered at its second.
        assert_eq!(sanitize("d.k_1234.5.6.7"), "d.k_1234_5_6_7");
        assert_eq!(sanitize("d.k_1.2.3.4567"), "d.k_1_2_3_4567");
        assert_eq!(sanitize("d.k_1.2.3.4.5.6.7.8"), "d.k_1_2_3_4.5_6_7_8");
        assert_eq!(sanitize("d.v1.2.3"), "d.v1.2.3");
        assert_eq!(sanitize("d.k_1.2.3."), "d.k_1.2.3.");
    }

    #[test]
    fn near_means_past_eighty_percent() {
        assert!(!near(8, 10));
        assert!(near(9, 10));
        assert!(!near(3, 5));
        assert!(near(5, 5));
    }
}
