//! Sizes in bytes, written as a number or with a unit: `1048576`, `"512KiB"`, `"10MiB"`, `"1GB"`.

use std::fmt;

use serde::{Deserializer, de};

/// Deserializes an optional size in bytes.
pub(crate) fn optional<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    deserializer.deserialize_any(Size).map(Some)
}

struct Size;

impl de::Visitor<'_> for Size {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size in bytes, such as 1048576 or \"10MiB\"")
    }

    fn visit_u64<E: de::Error>(self, bytes: u64) -> Result<u64, E> {
        Ok(bytes)
    }

    fn visit_i64<E: de::Error>(self, bytes: i64) -> Result<u64, E> {
        u64::try_from(bytes).map_err(|_| E::custom(format!("a size cannot be negative: {bytes}")))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<u64, E> {
        parse(text).ok_or_else(|| {
            E::custom(format!(
                "invalid size {text:?} (write e.g. 1048576, \"512KiB\", \"10MiB\", \"1GB\")"
            ))
        })
    }
}

fn parse(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let unit: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn sizes() {
        assert_eq!(parse("1048576"), Some(1_048_576));
        assert_eq!(parse("512KiB"), Some(512 * 1024));
        assert_eq!(parse("10 MiB"), Some(10 << 20));
        assert_eq!(parse("1GB"), Some(1_000_000_000));
        assert_eq!(parse("1.5MiB"), None);
        assert_eq!(parse("10 parsecs"), None);
        assert_eq!(parse("99999999999999GiB"), None);
    }
}
