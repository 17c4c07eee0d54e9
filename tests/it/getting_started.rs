//! The crates the getting-started guide tells a user to add beside this one are those it is built
//! and tested with: each version there matches Cargo.toml's (the same major, or for `0.x` the
//! same minor), and the Prometheus exporter records through the `metrics` this crate records to.

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The first TOML block of the guide, parsed.
fn guide_dependencies() -> toml::Table {
    let guide = read("docs/getting-started.md");
    let block = guide
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a ```toml block in docs/getting-started.md");
    let mut manifest: toml::Table = toml::from_str(block).unwrap();
    match manifest.remove("dependencies") {
        Some(toml::Value::Table(dependencies)) => dependencies,
        other => panic!("no [dependencies] in the guide's block: {other:?}"),
    }
}

/// A dependency's version requirement, written as a string or in a table.
fn version(value: &toml::Value) -> &str {
    match value {
        toml::Value::String(version) => version,
        toml::Value::Table(table) => table["version"].as_str().unwrap(),
        other => panic!("not a dependency: {other}"),
    }
}

/// The part of a version that semver compatibility keeps: the major, or `0.minor`.
fn compatible(version: &str) -> String {
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or_default();
    if major == "0" {
        format!("0.{}", parts.next().unwrap_or_default())
    } else {
        major.to_owned()
    }
}

#[test]
fn the_guides_crates_are_those_the_crate_is_built_and_tested_with() {
    let manifest: toml::Table = toml::from_str(&read("Cargo.toml")).unwrap();
    let table = |name: &str| manifest[name].as_table().unwrap();
    let (dependencies, dev) = (table("dependencies"), table("dev-dependencies"));
    let guide = guide_dependencies();
    let mut named: Vec<&str> = guide.keys().map(String::as_str).collect();
    named.sort_unstable();
    assert_eq!(
        named,
        [
            "axum",
            "metrics-exporter-prometheus",
            "tokio",
            "tower-redis-ratelimit",
            "tracing-subscriber"
        ]
    );
    for (name, requirement) in &guide {
        let ours = if name == "tower-redis-ratelimit" {
            table("package")["version"].as_str().unwrap()
        } else {
            version(&dev[name])
        };
        assert_eq!(
            compatible(version(requirement)),
            compatible(ours),
            "{name}: the guide says {requirement}, Cargo.toml {ours}"
        );
    }
    let features = |name: &str| -> Vec<String> {
        guide[name]
            .get("features")
            .and_then(toml::Value::as_array)
            .map(|features| {
                features
                    .iter()
                    .map(|feature| feature.as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(features("tracing-subscriber").contains(&"env-filter".to_owned()));
    // One `metrics` in the lock file: the exporter's is the crate's.
    let lock = read("Cargo.lock");
    let metrics: Vec<&str> = lock
        .split("[[package]]")
        .filter(|package| package.contains("\nname = \"metrics\"\n"))
        .collect();
    assert_eq!(
        metrics.len(),
        1,
        "several versions of metrics in Cargo.lock"
    );
    assert_eq!(compatible(version(&dependencies["metrics"])), "0.24");
    assert!(metrics[0].contains("\nversion = \"0.24."), "{}", metrics[0]);
}
