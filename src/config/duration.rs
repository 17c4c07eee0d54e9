//! Durations in configuration files, written as people write them: `100ms`, `1s`, `10min`, `1h`
//! (humantime's syntax).

use std::time::Duration;

use serde::{Deserialize, Deserializer, de};

/// Deserializes a required duration.
pub(super) fn required<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(deserializer)?;
    humantime::parse_duration(&text).map_err(|err| {
        de::Error::custom(format!(
            "invalid duration {text:?}: {err} (write e.g. \"100ms\", \"1s\", \"10min\", \"1h\")"
        ))
    })
}

/// Deserializes an optional duration (absent: `None`).
pub(super) fn optional<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Duration>, D::Error> {
    required(deserializer).map(Some)
}
