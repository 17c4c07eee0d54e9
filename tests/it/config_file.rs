//! `config::ConfigFile`: a program's own tables beside the limits, read in one pass, its
//! mistakes placed by line and column in every format as the limits' are.

use serde::Deserialize;
use tower_redis_ratelimit::config::{ConfigFile, Format, LimitsConfig};

/// A program's tables, as the gateway's are.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Tables {
    server: Server,
    #[serde(default)]
    extra: Option<String>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Server {
    listen: String,
}

fn example(name: &str) -> String {
    let path = format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

fn parse(text: &str, format: Format) -> Result<ConfigFile<Tables>, String> {
    ConfigFile::<Tables>::parse(text, format).map_err(|err| err.to_string())
}

/// The example files, which show every setting of the limits, read the same with a table of the
/// program's before or after them: every top-level field of `LimitsConfig` goes to the limits.
#[test]
fn the_limits_read_as_a_config_file_are_the_limits() {
    let server = Tables {
        server: Server {
            listen: "127.0.0.1:8080".to_owned(),
        },
        extra: None,
    };
    let toml = example("limits.toml");
    let alone = LimitsConfig::parse(&toml, Format::Toml).unwrap();
    // Before the limits' first table (their top-level keys, such as `shadow`, come first in
    // TOML), or after everything.
    let first_table = toml.find("\n[").expect("limits.toml has tables") + 1;
    for text in [
        format!(
            "{}[server]\nlisten = \"127.0.0.1:8080\"\n\n{}",
            &toml[..first_table],
            &toml[first_table..]
        ),
        format!("{toml}\n[server]\nlisten = \"127.0.0.1:8080\"\n"),
    ] {
        let file = parse(&text, Format::Toml).unwrap();
        assert_eq!(
            (file.limits, file.tables),
            (alone.clone(), server_like(&server))
        );
    }

    let yaml = example("limits.yaml");
    let file = parse(
        &format!("{yaml}\nserver:\n  listen: 127.0.0.1:8080\n"),
        Format::Yaml,
    )
    .unwrap();
    assert_eq!(
        file.limits,
        LimitsConfig::parse(&yaml, Format::Yaml).unwrap()
    );
    assert_eq!(file.limits, alone);

    let mut json: serde_json::Value = serde_json::from_str(&example("limits.json")).unwrap();
    json["server"] = serde_json::json!({ "listen": "127.0.0.1:8080" });
    let file = parse(&json.to_string(), Format::Json).unwrap();
    assert_eq!(file.limits, alone);
    assert_eq!(file.tables, server_like(&server));
}

fn server_like(tables: &Tables) -> Tables {
    Tables {
        server: Server {
            listen: tables.server.listen.clone(),
        },
        extra: tables.extra.clone(),
    }
}

/// Mistakes in the program's tables and in the limits are placed alike, in each format.
#[test]
fn mistakes_anywhere_carry_their_line_and_column() {
    let cases = [
        (
            Format::Toml,
            "[server]\nlisten = 8080\n",
            "line 2, column 10: server.listen: invalid type: integer `8080`, expected a string",
        ),
        (
            Format::Toml,
            "[sever]\nlisten = \"x\"\n",
            "line 1, column 1: unknown field `sever`, expected `server` or `extra`",
        ),
        (
            Format::Toml,
            "[server]\nlisten = \"x\"\n[policies.api]\nrulez = []\n",
            "line 4, column 1: policies.api: unknown field `rulez`, expected `rules` or `global`",
        ),
        (
            Format::Yaml,
            "server:\n  listen: x\n  port: 1\n",
            "line 3, column 3: server: unknown field `port`, expected `listen`",
        ),
        (
            Format::Yaml,
            "policies:\n  api:\n    rules: 3\nserver:\n  listen: x\n",
            "line 3, column 12: policies.api.rules: invalid type: integer `3`, expected a sequence",
        ),
        (
            Format::Json,
            "{\"server\": {\"listen\": \"x\"},\n \"shadow\": \"yes\"}",
            "line 2, column 16: shadow: invalid type: string \"yes\", expected a boolean",
        ),
        (
            Format::Toml,
            "shadow = true\n",
            "line 1, column 1: missing field `server`",
        ),
        // A bad duration is named by its field in every format.
        (
            Format::Toml,
            "[server]\nlisten = \"x\"\n[policies.api]\nrules = [{ name = \"a\", algorithm = \"gcra\", limit = 1, period = \"soon\" }]\n",
            "line 4, column 64: policies.api.rules[0].period: invalid duration \"soon\": expected number at 0 (write e.g. \"100ms\", \"1s\", \"10min\", \"1h\")",
        ),
        // Something left open is placed where it was left, not at the token that showed it
        // (the table after a blank line).
        (
            Format::Toml,
            "[server]\nlisten = \"x\"\nextra = { a = 1\n\n[policies.api]\n",
            "line 3, column 16: missing key for inline table element, expected `,`",
        ),
    ];
    for (format, text, expected) in cases {
        assert_eq!(parse(text, format).unwrap_err(), expected, "{text}");
    }
}

/// The top-level `shadow` and the program's scalars both find their place.
#[test]
fn scalars_at_the_top_level() {
    let file = parse(
        "shadow = true\nextra = \"x\"\n[server]\nlisten = \"y\"\n",
        Format::Toml,
    )
    .unwrap();
    assert!(file.limits.shadow);
    assert_eq!(file.tables.extra.as_deref(), Some("x"));
    assert_eq!(file.tables.server.listen, "y");
}
