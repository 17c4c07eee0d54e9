//! [`HeaderFamilies`]: which families of rate-limit headers a layer writes.

use std::ops::BitOr;

/// Which families of rate-limit headers a layer writes. Combine with `|`.
///
/// With the `config` feature it (de)serializes as a list of names, as configuration files write
/// it: `["rate_limiting", "ietf", "x_ratelimit"]`, `[]` for none.
///
/// ```
/// use tower_redis_ratelimit::respond::HeaderFamilies;
///
/// let headers = HeaderFamilies::IETF | HeaderFamilies::X_RATELIMIT;
/// assert!(headers.contains(HeaderFamilies::IETF));
/// assert!(!headers.contains(HeaderFamilies::RATE_LIMITING));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeaderFamilies(u8);

impl HeaderFamilies {
    /// No rate-limit headers (`Retry-After` belongs to no family and is still sent where due).
    pub const NONE: HeaderFamilies = HeaderFamilies(0);
    /// The `Rate-Limiting-*` headers: `Total-Requests`, `State`, `Expires-At`.
    pub const RATE_LIMITING: HeaderFamilies = HeaderFamilies(1);
    /// The IETF draft's `RateLimit-Policy` and `RateLimit`.
    pub const IETF: HeaderFamilies = HeaderFamilies(2);
    /// GitHub-style `X-RateLimit-*`.
    pub const X_RATELIMIT: HeaderFamilies = HeaderFamilies(4);
    /// The default: `Rate-Limiting-*` and the IETF headers.
    pub const DEFAULT: HeaderFamilies = HeaderFamilies(1 | 2);
    /// Every family.
    pub const ALL: HeaderFamilies = HeaderFamilies(1 | 2 | 4);

    /// Whether every family of `other` is in this set.
    pub const fn contains(self, other: HeaderFamilies) -> bool {
        self.0 & other.0 == other.0
    }
}

impl Default for HeaderFamilies {
    fn default() -> Self {
        HeaderFamilies::DEFAULT
    }
}

impl BitOr for HeaderFamilies {
    type Output = HeaderFamilies;

    fn bitor(self, rhs: HeaderFamilies) -> HeaderFamilies {
        HeaderFamilies(self.0 | rhs.0)
    }
}

/// A list of the families' names.
#[cfg(feature = "config")]
mod serde_names {
    use std::fmt;

    use serde::de::{self, SeqAccess, Visitor};
    use serde::ser::SerializeSeq;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::HeaderFamilies;

    const FAMILIES: [(&str, HeaderFamilies); 3] = [
        ("rate_limiting", HeaderFamilies::RATE_LIMITING),
        ("ietf", HeaderFamilies::IETF),
        ("x_ratelimit", HeaderFamilies::X_RATELIMIT),
    ];
    const NAMES: [&str; 3] = ["rate_limiting", "ietf", "x_ratelimit"];

    impl Serialize for HeaderFamilies {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            let named = FAMILIES.iter().filter(|(_, family)| self.contains(*family));
            let mut seq = serializer.serialize_seq(Some(named.clone().count()))?;
            for (name, _) in named {
                seq.serialize_element(name)?;
            }
            seq.end()
        }
    }

    impl<'de> Deserialize<'de> for HeaderFamilies {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_seq(Names)
        }
    }

    struct Names;

    impl<'de> Visitor<'de> for Names {
        type Value = HeaderFamilies;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of header families (\"rate_limiting\", \"ietf\", \"x_ratelimit\")")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<HeaderFamilies, A::Error> {
            let mut families = HeaderFamilies::NONE;
            while let Some(name) = seq.next_element::<String>()? {
                let (_, family) = FAMILIES
                    .iter()
                    .find(|(known, _)| *known == name)
                    .ok_or_else(|| de::Error::unknown_variant(&name, &NAMES))?;
                families = families | *family;
            }
            Ok(families)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::HeaderFamilies;

        #[test]
        fn families_are_lists_of_names() {
            let all: HeaderFamilies =
                serde_json::from_str(r#"["rate_limiting", "ietf", "x_ratelimit"]"#).unwrap();
            assert_eq!(all, HeaderFamilies::ALL);
            let none: HeaderFamilies = serde_json::from_str("[]").unwrap();
            assert_eq!(none, HeaderFamilies::NONE);
            assert_eq!(
                serde_json::to_string(&HeaderFamilies::DEFAULT).unwrap(),
                r#"["rate_limiting","ietf"]"#
            );
            let error = serde_json::from_str::<HeaderFamilies>(r#"["ietf", "x"]"#).unwrap_err();
            assert!(error.to_string().contains("unknown variant `x`"), "{error}");
        }
    }
}
