//! Reading a [`LimitsConfig`] from a file, in the format its extension names.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::LimitsConfig;

/// The formats [`LimitsConfig::from_file`] reads, each behind a cargo feature of the same name
/// (all three in the default set).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// TOML (`.toml`; the `toml` feature).
    Toml,
    /// YAML (`.yaml`, `.yml`; the `yaml` feature).
    Yaml,
    /// JSON (`.json`; the `json` feature).
    Json,
}

impl Format {
    /// The format of a file named `path`, by its extension: `.toml`, `.yaml` or `.yml`, `.json`
    /// (in any case).
    pub fn from_path(path: impl AsRef<Path>) -> Option<Format> {
        let extension = path.as_ref().extension()?.to_str()?.to_ascii_lowercase();
        match extension.as_str() {
            "toml" => Some(Format::Toml),
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            _ => None,
        }
    }

    /// The cargo feature that reads this format.
    fn feature(self) -> &'static str {
        match self {
            Format::Toml => "toml",
            Format::Yaml => "yaml",
            Format::Json => "json",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Toml => "TOML",
            Format::Yaml => "YAML",
            Format::Json => "JSON",
        })
    }
}

/// A configuration file that cannot be read: it is missing, its format is unknown, or it does
/// not parse into a [`LimitsConfig`] or a [`ConfigFile`](super::ConfigFile) (bad syntax, a misspelled field, a wrong type, a bad
/// duration). Printed as `path:line:column: what is wrong`, with `{:?}` too.
///
/// Mistakes found once the file has parsed (a policy that does not exist, a limit of 0) are
/// [`build`](LimitsConfig::build)'s [`ConfigError`](crate::ConfigError)s, named by the path of
/// their field (`` `routes.api.policy` ``) rather than by a line.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file's extension names no format this crate reads.
    #[error(
        "{}: unknown configuration format: name the file *.toml, *.yaml, *.yml or *.json, or \
         read it with `LimitsConfig::parse` and its format",
        path.display()
    )]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// The format's cargo feature is off in this build.
    #[error("{}this build reads no {format} files: turn on the crate's `{}` feature", prefix(path.as_deref(), None), format.feature())]
    FormatDisabled {
        /// The file, if read from one.
        path: Option<PathBuf>,
        /// The format.
        format: Format,
    },
    /// The text does not parse (into a [`LimitsConfig`] or a [`ConfigFile`](super::ConfigFile)).
    #[error("{}{message}", prefix(path.as_deref(), *line_column))]
    Parse {
        /// The file, if read from one.
        path: Option<PathBuf>,
        /// The format it was read as.
        format: Format,
        /// The line and column (from 1) of the mistake, when the format says.
        line_column: Option<(usize, usize)>,
        /// What the format's parser says is wrong, without its position.
        message: String,
    },
}

crate::error::debug_as_display!(LoadError);

/// `path:line:column: `, `path: `, `line 3, column 5: ` or nothing.
fn prefix(path: Option<&Path>, line_column: Option<(usize, usize)>) -> String {
    match (path, line_column) {
        (Some(path), Some((line, column))) => format!("{}:{line}:{column}: ", path.display()),
        (Some(path), None) => format!("{}: ", path.display()),
        (None, Some((line, column))) => format!("line {line}, column {column}: "),
        (None, None) => String::new(),
    }
}

impl LimitsConfig {
    /// Reads the file at `path` in the format its extension names (`.toml`, `.yaml` or `.yml`,
    /// `.json`); the paths it names (a store's `tls` files) are relative to its directory. Its
    /// mistakes of syntax and of shape (a misspelled field, a bad duration) carry
    /// the path, line and column; then [`build`](Self::build) checks the values.
    ///
    /// ```no_run
    /// use tower_redis_ratelimit::config::LimitsConfig;
    ///
    /// let limits = LimitsConfig::from_file("limits.toml")?.build()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_file(path: impl AsRef<Path>) -> Result<LimitsConfig, LoadError> {
        let path = path.as_ref();
        let mut limits: LimitsConfig = read(path)?;
        limits.resolve_paths(path.parent().unwrap_or(Path::new("")));
        Ok(limits)
    }

    /// Parses `text` written in `format`.
    ///
    /// ```
    /// use tower_redis_ratelimit::config::{Format, LimitsConfig};
    ///
    /// let error = LimitsConfig::parse("[policies.api]\nrulez = []\n", Format::Toml).unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "line 2, column 1: policies.api: unknown field `rulez`, expected `rules` or `global`"
    /// );
    /// ```
    pub fn parse(text: &str, format: Format) -> Result<LimitsConfig, LoadError> {
        parse(text, format)
    }
}

/// Reads the file at `path` into a `C` (a [`LimitsConfig`], a
/// [`ConfigFile`](super::ConfigFile)), in the format its extension names.
pub(super) fn read<C: DeserializeOwned>(path: &Path) -> Result<C, LoadError> {
    let format = Format::from_path(path).ok_or_else(|| LoadError::UnknownFormat {
        path: path.to_owned(),
    })?;
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&text, format).map_err(|error| error.in_file(path))
}

/// Parses `text` written in `format` into a `C`.
pub(super) fn parse<C: DeserializeOwned>(text: &str, format: Format) -> Result<C, LoadError> {
    match format {
        Format::Toml => parse_toml(text),
        Format::Yaml => parse_yaml(text),
        Format::Json => parse_json(text),
    }
}

impl LoadError {
    fn in_file(self, file: &Path) -> LoadError {
        match self {
            LoadError::FormatDisabled { format, .. } => LoadError::FormatDisabled {
                path: Some(file.to_owned()),
                format,
            },
            LoadError::Parse {
                format,
                line_column,
                message,
                ..
            } => LoadError::Parse {
                path: Some(file.to_owned()),
                format,
                line_column,
                message,
            },
            other => other,
        }
    }
}

#[cfg(not(all(feature = "toml", feature = "yaml", feature = "json")))]
fn disabled(format: Format) -> LoadError {
    LoadError::FormatDisabled { path: None, format }
}

#[cfg(any(feature = "toml", feature = "yaml", feature = "json"))]
fn parse_error(format: Format, line_column: Option<(usize, usize)>, message: String) -> LoadError {
    LoadError::Parse {
        path: None,
        format,
        line_column,
        message,
    }
}

#[cfg(feature = "toml")]
fn parse_toml<C: DeserializeOwned>(text: &str) -> Result<C, LoadError> {
    let syntax = |error: toml::de::Error| {
        let place = error
            .span()
            .map(|span| toml_syntax_line_column(text, span, error.message()));
        parse_error(Format::Toml, place, error.message().to_owned())
    };
    if text.contains("${") {
        // Expanded in the parsed values; a later mistake has its field but no line.
        let mut value: toml::Value = toml::from_str(text).map_err(syntax)?;
        super::environment::toml(&mut value, "")
            .map_err(|message| parse_error(Format::Toml, None, message))?;
        return serde_path_to_error::deserialize(value).map_err(|error| {
            let message = with_field(error.path(), error.inner().message());
            parse_error(Format::Toml, None, message)
        });
    }
    let document = toml::Deserializer::parse(text).map_err(syntax)?;
    serde_path_to_error::deserialize(document).map_err(|error| {
        let message = with_field(error.path(), error.inner().message());
        let place = error
            .inner()
            .span()
            .map(|span| line_column(text, span.start));
        parse_error(Format::Toml, place, message)
    })
}

#[cfg(not(feature = "toml"))]
fn parse_toml<C>(_: &str) -> Result<C, LoadError> {
    Err(disabled(Format::Toml))
}

#[cfg(feature = "yaml")]
fn parse_yaml<C: DeserializeOwned>(text: &str) -> Result<C, LoadError> {
    let error = |error: serde_yaml_ng::Error| {
        let line_column = error
            .location()
            .map(|location| (location.line(), location.column()));
        parse_error(
            Format::Yaml,
            line_column,
            without_position(&error, line_column),
        )
    };
    if text.contains("${") {
        // Expanded in the parsed values; a later mistake has its field but no line.
        let mut value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(error)?;
        super::environment::yaml(&mut value, "")
            .map_err(|message| parse_error(Format::Yaml, None, message))?;
        return serde_yaml_ng::from_value(value).map_err(error);
    }
    // serde_yaml_ng names the field of a mistake itself.
    serde_yaml_ng::from_str(text).map_err(error)
}

#[cfg(not(feature = "yaml"))]
fn parse_yaml<C>(_: &str) -> Result<C, LoadError> {
    Err(disabled(Format::Yaml))
}

#[cfg(feature = "json")]
fn parse_json<C: DeserializeOwned>(text: &str) -> Result<C, LoadError> {
    let error = |error: &serde_json::Error, field: Option<&serde_path_to_error::Path>| {
        // serde_json says line 0 when it knows no position.
        let line_column = (error.line() > 0).then(|| (error.line(), error.column()));
        let message = without_position(error, line_column);
        let message = match field {
            Some(field) => with_field(field, &message),
            None => message,
        };
        parse_error(Format::Json, line_column, message)
    };
    if text.contains("${") {
        // Expanded in the parsed values; a later mistake has its field but no line.
        let mut value: serde_json::Value =
            serde_json::from_str(text).map_err(|err| error(&err, None))?;
        super::environment::json(&mut value, "")
            .map_err(|message| parse_error(Format::Json, None, message))?;
        return serde_path_to_error::deserialize(value)
            .map_err(|err| error(err.inner(), Some(err.path())));
    }
    let mut document = serde_json::Deserializer::from_str(text);
    let parsed = serde_path_to_error::deserialize(&mut document)
        .map_err(|err| error(err.inner(), Some(err.path())))?;
    document.end().map_err(|err| error(&err, None))?;
    Ok(parsed)
}

/// `message` of the mistake in `field` (`proxy.upstream_timeout: invalid duration ...`), as
/// serde_yaml_ng writes its own; a mistake of the whole file has no field.
#[cfg(any(feature = "toml", feature = "json"))]
fn with_field(field: &serde_path_to_error::Path, message: &str) -> String {
    let mut field = field.to_string();
    // An unknown field is named by the message: the path is of the table it is in.
    if let Some(name) = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
    {
        if field == name {
            field.clear();
        } else if let Some(parent) = field.strip_suffix(&format!(".{name}")) {
            field = parent.to_owned();
        }
    }
    if field == "." || field.is_empty() {
        message.to_owned()
    } else {
        format!("{field}: {message}")
    }
}

#[cfg(not(feature = "json"))]
fn parse_json<C>(_: &str) -> Result<C, LoadError> {
    Err(disabled(Format::Json))
}

/// Where the TOML syntax mistake `message` at `span` is. Something left open (a `]`, `}`,
/// `,` or `"` missing) is noticed by the toml crate only at the next token, which may be lines
/// later (`[serve]` after a blank line); the mistake is at the end of the last line before that
/// token that holds anything.
#[cfg(feature = "toml")]
fn toml_syntax_line_column(
    text: &str,
    span: std::ops::Range<usize>,
    message: &str,
) -> (usize, usize) {
    let start = span.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |at| at + 1);
    let left_open = [
        "expected `]`",
        "expected `}`",
        "expected `,`",
        "expected `\"`",
    ]
    .iter()
    .any(|expected| message.contains(expected));
    if left_open && text[line_start..start].trim().is_empty() {
        let previous = text[..line_start].trim_end().len();
        if previous > 0 {
            return line_column(text, previous);
        }
    }
    line_column(text, start)
}

/// The line and column (from 1, the column in characters) of the byte at `offset`.
#[cfg(feature = "toml")]
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// The error's message without the " at line L column C" that serde_json and serde_yaml_ng
/// append, since [`LoadError`] puts the position first.
#[cfg(any(feature = "yaml", feature = "json"))]
fn without_position(error: &impl fmt::Display, line_column: Option<(usize, usize)>) -> String {
    let message = error.to_string();
    match line_column {
        Some((line, column)) => message
            .strip_suffix(&format!(" at line {line} column {column}"))
            .map_or_else(|| message.clone(), str::to_owned),
        None => message,
    }
}
