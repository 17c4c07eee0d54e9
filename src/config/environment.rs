//! Values from the environment: `${NAME}` and `${NAME:-default}` in any string value of a
//! file, so that a secret (a Redis password in a URL) need not be written in it.
//!
//! Expanded in the parsed values, never in the raw text: a value may then hold anything (a
//! quote, a backslash, a newline) without changing the file's syntax, and a `${` in a comment
//! or a key is left alone. `$${` writes a literal `${`.

use std::borrow::Cow;

/// `text`, its variables replaced; `field` names it in a mistake
/// (`` `stores.shared.url`: the environment variable REDIS_URL is not set ``).
pub(super) fn expand<'a>(text: &'a str, field: &str) -> Result<Cow<'a, str>, String> {
    if !text.contains("${") {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = rest.strip_prefix("${") {
            let end = after.find('}').ok_or_else(|| {
                format!(
                    "`{field}`: `${{` without its `}}` (write `${{NAME}}`, or `$${{` for a `${{`)"
                )
            })?;
            out.push_str(&variable(&after[..end], field)?);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    Ok(Cow::Owned(out))
}

/// The value of `NAME` or `NAME:-default` (the default when the variable is unset or empty,
/// as a shell has it).
fn variable(inside: &str, field: &str) -> Result<String, String> {
    let (name, default) = match inside.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (inside, None),
    };
    let valid = name
        .chars()
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "`{field}`: `${{{inside}}}` names no variable (write `${{NAME}}` or `${{NAME:-default}}`)"
        ));
    }
    match (std::env::var(name), default) {
        (Ok(value), Some(default)) if value.is_empty() => Ok(default.to_owned()),
        (Ok(value), _) => Ok(value),
        (Err(_), Some(default)) => Ok(default.to_owned()),
        (Err(std::env::VarError::NotUnicode(_)), None) => Err(format!(
            "`{field}`: the environment variable {name} is not valid UTF-8"
        )),
        (Err(std::env::VarError::NotPresent), None) => Err(format!(
            "`{field}`: the environment variable {name} is not set (set it, or write \
             `${{{name}:-default}}`)"
        )),
    }
}

/// The path of a field inside `parent`: `parent.key`, or `key` at the top.
pub(super) fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// Every string of a TOML document expanded.
#[cfg(feature = "toml")]
pub(super) fn toml(value: &mut toml::Value, field: &str) -> Result<(), String> {
    match value {
        toml::Value::String(text) => {
            if let Cow::Owned(expanded) = expand(text, field)? {
                *text = expanded;
            }
        }
        toml::Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                self::toml(item, &format!("{field}[{index}]"))?;
            }
        }
        toml::Value::Table(table) => {
            for (key, item) in table.iter_mut() {
                self::toml(item, &child(field, key))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Every string of a JSON document expanded.
#[cfg(feature = "json")]
pub(super) fn json(value: &mut serde_json::Value, field: &str) -> Result<(), String> {
    match value {
        serde_json::Value::String(text) => {
            if let Cow::Owned(expanded) = expand(text, field)? {
                *text = expanded;
            }
        }
        serde_json::Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                self::json(item, &format!("{field}[{index}]"))?;
            }
        }
        serde_json::Value::Object(object) => {
            for (key, item) in object.iter_mut() {
                self::json(item, &child(field, key))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Every string of a YAML document expanded (keys that are not strings are named `?`).
#[cfg(feature = "yaml")]
pub(super) fn yaml(value: &mut serde_yaml_ng::Value, field: &str) -> Result<(), String> {
    use serde_yaml_ng::Value;
    match value {
        Value::String(text) => {
            if let Cow::Owned(expanded) = expand(text, field)? {
                *text = expanded;
            }
        }
        Value::Sequence(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                self::yaml(item, &format!("{field}[{index}]"))?;
            }
        }
        Value::Mapping(mapping) => {
            for (key, item) in mapping.iter_mut() {
                self::yaml(item, &child(field, key.as_str().unwrap_or("?")))?;
            }
        }
        Value::Tagged(tagged) => self::yaml(&mut tagged.value, field)?,
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn variables_defaults_and_escapes() {
        let path = std::env::var("PATH").unwrap();
        assert_eq!(expand("a ${PATH} b", "f").unwrap(), format!("a {path} b"));
        assert_eq!(
            expand("${TRR_SURELY_UNSET:-redis://localhost}", "f").unwrap(),
            "redis://localhost"
        );
        assert_eq!(expand("$${PATH} $x $", "f").unwrap(), "${PATH} $x $");
        assert_eq!(
            expand("${TRR_SURELY_UNSET}", "stores.shared.url").unwrap_err(),
            "`stores.shared.url`: the environment variable TRR_SURELY_UNSET is not set (set it, \
             or write `${TRR_SURELY_UNSET:-default}`)"
        );
        assert!(
            expand("${1X}", "f")
                .unwrap_err()
                .contains("names no variable")
        );
        assert!(expand("${X", "f").unwrap_err().contains("without its"));
    }
}
