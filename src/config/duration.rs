//! Durations in configuration files, written as people write them: `100ms`, `1s`, `10min`, `1h`
//! (humantime's syntax), for the fields of a program's own tables beside the limits
//! ([`ConfigFile`](super::ConfigFile)) too:
//!
//! ```
//! use std::time::Duration;
//! use tower_redis_ratelimit::config::duration;
//!
//! #[derive(serde::Deserialize)]
//! struct Server {
//!     #[serde(deserialize_with = "duration::required")]
//!     timeout: Duration,
//!     #[serde(default, deserialize_with = "duration::optional")]
//!     grace: Option<Duration>,
//! }
//!
//! let server: Server = serde_json::from_str(r#"{ "timeout": "1min" }"#)?;
//! assert_eq!((server.timeout, server.grace), (Duration::from_secs(60), None));
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::fmt;
use std::time::Duration;

use serde::{Deserializer, de};

/// Deserializes a required duration.
pub fn required<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    // A visitor rather than a String read first: the formats place an error the visitor returns
    // at the value.
    deserializer.deserialize_str(Text)
}

struct Text;

impl de::Visitor<'_> for Text {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as \"100ms\" or \"1s\"")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
        humantime::parse_duration(text).map_err(|err| {
            E::custom(format!(
                "invalid duration {text:?}: {err} (write e.g. \"100ms\", \"1s\", \"10min\", \"1h\")"
            ))
        })
    }
}

/// Deserializes an optional duration (absent: `None`, with `#[serde(default)]`).
pub fn optional<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Duration>, D::Error> {
    required(deserializer).map(Some)
}
