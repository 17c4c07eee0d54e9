//! [`ConfigFile`]: one file holding the limits and tables of the program that runs them.

use std::fmt;
use std::marker::PhantomData;
use std::path::Path;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::LimitsConfig;
use super::load::{Format, LoadError, read};

/// A configuration file that holds a program's own top-level tables beside the limits: the
/// limits' tables (`stores`, `policies`, `routes`, `concurrency`, `shadow`) go to
/// [`limits`](Self::limits), every other one to `T`, both read in one pass, so mistakes in
/// either carry the file's path, line and column.
///
/// `T` is a struct of the program's tables; give it `#[serde(deny_unknown_fields)]` so that a
/// misspelled table is an error rather than ignored.
///
/// ```
/// use serde::Deserialize;
/// use tower_redis_ratelimit::config::{ConfigFile, Format};
///
/// #[derive(Debug, Deserialize)]
/// #[serde(deny_unknown_fields)]
/// struct Tables {
///     server: Server,
/// }
///
/// #[derive(Debug, Deserialize)]
/// #[serde(deny_unknown_fields)]
/// struct Server {
///     listen: String,
/// }
///
/// let file: ConfigFile<Tables> = ConfigFile::parse(
///     r#"
///     [server]
///     listen = "127.0.0.1:8080"
///
///     [policies.api]
///     rules = [{ name = "api", algorithm = "gcra", limit = 10, period = "1s" }]
///     "#,
///     Format::Toml,
/// )?;
/// assert_eq!(file.tables.server.listen, "127.0.0.1:8080");
/// assert!(file.limits.policies.contains_key("api"));
///
/// // A mistake in the program's tables is placed like one in the limits'.
/// let error = ConfigFile::<Tables>::parse("[server]\nlisten = 8080\n", Format::Toml).unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "line 2, column 10: server.listen: invalid type: integer `8080`, expected a string"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ConfigFile<T> {
    /// The limits' tables.
    pub limits: LimitsConfig,
    /// The program's own tables.
    pub tables: T,
}

impl<T: DeserializeOwned> ConfigFile<T> {
    /// Reads the file at `path` in the format its extension names, as
    /// [`LimitsConfig::from_file`] does (the limits' paths relative to its directory; the
    /// program's tables are the program's to resolve).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, LoadError> {
        let path = path.as_ref();
        let mut file: Self = read(path)?;
        file.limits
            .resolve_paths(path.parent().unwrap_or(Path::new("")));
        Ok(file)
    }

    /// Parses `text` written in `format`.
    pub fn parse(text: &str, format: Format) -> Result<Self, LoadError> {
        super::load::parse(text, format)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ConfigFile<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FileVisitor(PhantomData))
    }
}

struct FileVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for FileVisitor<T> {
    type Value = ConfigFile<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table of limits and the program's own tables")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        // `T` reads the file's map itself, through `Others`, which takes the limits' tables as
        // it meets them: each value is deserialized from the file's own deserializer, never
        // from a buffered copy, which is what keeps the formats' line numbers.
        let mut others = Others {
            map,
            limits: LimitsConfig::default(),
        };
        let tables = T::deserialize(de::value::MapAccessDeserializer::new(&mut others))?;
        // `T` may stop before the end of the map (it has read all its fields): what remains may
        // still hold limits.
        while others
            .next_key_seed(PhantomData::<de::IgnoredAny>)?
            .is_some()
        {
            others.map.next_value::<de::IgnoredAny>()?;
        }
        Ok(ConfigFile {
            limits: others.limits,
            tables,
        })
    }
}

/// The file's map without the limits' tables, which it deserializes into `limits` on the way.
struct Others<A> {
    map: A,
    limits: LimitsConfig,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Others<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.map.next_key::<String>()? {
            if !self.limits.read_table(&key, &mut self.map)? {
                return seed
                    .deserialize(IntoDeserializer::<A::Error>::into_deserializer(key))
                    .map(Some);
            }
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

impl LimitsConfig {
    /// Reads the value of the top-level table `key` into this configuration if it is one of the
    /// limits' tables; answers whether it was. Every field of [`LimitsConfig`] is listed here:
    /// `tests/it/config.rs` reads the example files both ways and compares them.
    fn read_table<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        match key {
            "stores" => self.stores = map.next_value()?,
            "policies" => self.policies = map.next_value()?,
            "routes" => self.routes = map.next_value()?,
            "concurrency" => self.concurrency = map.next_value()?,
            "shadow" => self.shadow = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
