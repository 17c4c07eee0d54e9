//! What `main` prints when it returns a configuration error with `?`, as a program that reads its
//! limits from a file does (`docs/configuration.md`): Rust prints `Error: ` and the error's
//! `Debug`, which for this crate's errors is their message, never their fields.
//!
//! The binary runs twice: as the test, and (re-executed with `MAIN_ERRORS_FILE` set) as that
//! program, whose `main` returns the error; the test reads what it printed. Without a test
//! harness, since the program's `main` is the point.

use std::process::Command;

use testkit::TempDir;
use tower_redis_ratelimit::config::LimitsConfig;

const FILE_ENV: &str = "MAIN_ERRORS_FILE";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Ok(path) = std::env::var(FILE_ENV) {
        // A user's `main`, as the configuration guide shows it.
        let limits = LimitsConfig::from_file(path)?.build()?;
        drop(limits);
        return Ok(());
    }
    testkit::harness::run(
        "main_errors",
        &[(
            "a_configuration_error_returned_by_main_prints_its_message",
            a_configuration_error_returned_by_main_prints_its_message,
        )],
    );
    Ok(())
}

/// What the program prints on stderr, reading `file`; it must fail.
fn printed(file: &std::path::Path) -> String {
    let output = Command::new(std::env::current_exe().unwrap())
        .env(FILE_ENV, file)
        .output()
        .unwrap();
    assert!(!output.status.success(), "{output:?}");
    String::from_utf8(output.stderr).unwrap()
}

fn a_configuration_error_returned_by_main_prints_its_message() {
    let dir = TempDir::new("main-errors").unwrap();
    let policy = r#"
[policies.api]
rules = [{ name = "api", algorithm = "gcra", limit = 10, period = "1s" }]
"#;
    let cases = [
        // Load errors: syntax and shape, with the file, line and column.
        (
            "syntax.toml",
            "[policies.api]\nrulez = []\n".to_owned(),
            "{path}:2:1: policies.api: unknown field `rulez`, expected `rules` or `global`",
        ),
        (
            "duration.yaml",
            "policies:\n  api:\n    rules:\n      - { name: api, algorithm: gcra, limit: 1, period: soon }\n"
                .to_owned(),
            "{path}:4:57: policies.api.rules[0].period: invalid duration \"soon\": expected \
             number at 0 (write e.g. \"100ms\", \"1s\", \"10min\", \"1h\")",
        ),
        (
            "limits.ini",
            String::new(),
            "{path}: unknown configuration format: name the file *.toml, *.yaml, *.yml or *.json, \
             or read it with `LimitsConfig::parse` and its format",
        ),
        // Build errors: the field's path and what is wrong.
        (
            "policy.toml",
            format!("{policy}[routes.api]\npolicy = \"ap1\"\nkey = {{ global = \"all\" }}\n"),
            "`routes.api.policy`: no policy named \"ap1\" (there are \"api\")",
        ),
        (
            "limit.json",
            r#"{ "policies": { "api": { "rules": [
                { "name": "api", "algorithm": "gcra", "limit": 0, "period": "1s" } ] } } }"#
                .to_owned(),
            "`policies.api.rules[0].limit`: rule \"api\" has a limit of 0: a quota must admit at \
             least one request per period",
        ),
    ];
    for (name, text, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let expected = expected.replace("{path}", &path.display().to_string());
        assert_eq!(printed(&path), format!("Error: {expected}\n"), "{name}");
    }
    let missing = dir.path().join("missing.toml");
    assert_eq!(
        printed(&missing),
        format!(
            "Error: cannot read {}: No such file or directory (os error 2)\n",
            missing.display()
        )
    );
}
