//! Every layer's page lists every setting its builder has: the table in the layer's rustdoc names
//! each method of the builder, those written in the builder's file and those its shared-settings
//! macros add, and no method the builder lacks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn source(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The public, not deprecated, methods that take the builder by value in `text`: its settings.
fn settings_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("pub fn ") {
        let signature = text[at + "pub fn ".len()..].split('{').next().unwrap_or("");
        let name: String = signature
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let by_value = signature.contains("mut self") || signature.contains("(self");
        let attributes = text[..at].rsplit("\n\n").next().unwrap_or("");
        let deprecated = attributes
            .lines()
            .rev()
            .take(3)
            .any(|line| line.contains("#[deprecated"));
        if by_value && !deprecated && name != "build" {
            names.insert(name);
        }
    }
    names
}

/// The settings each shared-settings macro adds, by macro name, from the files that define them.
fn macro_settings() -> BTreeMap<String, BTreeSet<String>> {
    let mut macros = BTreeMap::new();
    for file in ["src/admission/settings.rs", "src/concurrency/settings.rs"] {
        let text = source(file);
        for body in text.split("macro_rules! ").skip(1) {
            let name: String = body
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            macros.insert(name, settings_in(body));
        }
    }
    macros
}

/// The methods of `builder` that the table in `layer_doc` links to.
fn listed(layer_doc: &str, builder: &str) -> BTreeSet<String> {
    let marker = format!("({builder}::");
    layer_doc
        .match_indices(&marker)
        .map(|(at, _)| {
            layer_doc[at + marker.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn every_layer_page_lists_every_setting_of_its_builder() {
    let macros = macro_settings();
    let layers = [
        (
            "src/rate/mod.rs",
            "src/rate/builder.rs",
            "RateLimitLayerBuilder",
        ),
        (
            "src/concurrency/mod.rs",
            "src/concurrency/builder.rs",
            "ConcurrencyLimitLayerBuilder",
        ),
        (
            "src/shed/fleet/mod.rs",
            "src/shed/fleet/builder.rs",
            "FleetShedLayerBuilder",
        ),
        (
            "src/shed/utilization/mod.rs",
            "src/shed/utilization/builder.rs",
            "UtilizationShedLayerBuilder",
        ),
    ];
    for (layer_file, builder_file, builder) in layers {
        let builder_text = source(builder_file);
        let mut settings = settings_in(&builder_text);
        let compact: String = builder_text.split_whitespace().collect();
        for (name, added) in &macros {
            if compact.contains(&format!("{name}!({builder}")) {
                settings.extend(added.iter().cloned());
            }
        }
        assert!(settings.len() > 3, "{builder}: found only {settings:?}");
        let listed = listed(&source(layer_file), builder);
        assert_eq!(
            listed, settings,
            "{layer_file}'s table of {builder}'s settings (left) against the builder's methods"
        );
    }
}

/// `docs/performance.md` opens with the table that says which options to turn on for which
/// traffic, before its measurements, and names every option of the Redis store that trades
/// exactness or memory for fewer calls.
#[test]
fn performance_opens_with_which_options_for_which_traffic() {
    let page = source("docs/performance.md");
    let (top, _) = page
        .split_once("\n## How these were measured\n")
        .expect("the measurements under their own heading");
    let mut sections = top.split("\n## ").skip(1);
    let first = sections.next().expect("a first section");
    assert!(
        first.starts_with("Which options for which traffic\n"),
        "{first}"
    );
    assert!(first.contains("| your traffic | turn on |"), "{first}");
    for option in [
        "MemoryStore",
        ".denial_cache(",
        ".batch(",
        ".quota_leases(",
        ".fallback(",
        "Costs above 1 always ask Redis",
        "Key-rotating abusers bypass any per-key cache",
    ] {
        assert!(
            first.contains(option),
            "{option} is not in the table: {first}"
        );
    }
    let builder = source("src/store/redis/builder.rs");
    for option in ["denial_cache", "batch", "quota_leases", "fallback"] {
        assert!(builder.contains(&format!("pub fn {option}(")), "{option}");
    }
}
