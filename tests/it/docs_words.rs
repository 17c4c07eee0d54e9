//! The maps of the code stay true: every file `docs/architecture.md` names exists, and the
//! glossary (`docs/glossary.md`) holds the code to one word per idea: each word is defined
//! once, each name it gives for the code is in the code, and the words it retires appear in
//! neither the code nor the guides.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|err| panic!("{path}: {err}"))
}

/// The text of every file under `dirs` (relative to the repository) ending in one of
/// `extensions`, with its path.
fn files(dirs: &[&str], extensions: &[&str]) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let mut pending: Vec<PathBuf> = dirs.iter().map(|dir| root().join(dir)).collect();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                pending.push(entry.unwrap().path());
            }
        } else if path
            .extension()
            .is_some_and(|ext| extensions.iter().any(|wanted| ext == *wanted))
        {
            let text = std::fs::read_to_string(&path).unwrap();
            found.push((path, text));
        }
    }
    found
}

/// The `code` spans of `text`.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_file_the_architecture_names_exists() {
    let page = read("docs/architecture.md");
    let mut named = 0;
    for span in code_spans(&page) {
        let prefixed = ["src/", "gateway/", "lua/", "tests/", "docs/"];
        if prefixed.iter().any(|prefix| span.starts_with(prefix)) {
            named += 1;
            assert!(
                root().join(span).exists(),
                "docs/architecture.md names {span}, which does not exist"
            );
        }
    }
    assert!(named > 20, "only {named} paths in docs/architecture.md");
}

/// The glossary's tables: each row's word and its "in the code" cell.
fn glossary() -> Vec<(String, String)> {
    read("docs/glossary.md")
        .lines()
        .filter(|line| line.starts_with("| ") && !line.starts_with("| word |"))
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            (cells.len() == 3).then(|| (cells[0].trim().to_owned(), cells[2].trim().to_owned()))
        })
        .collect()
}

#[test]
fn the_glossary_defines_each_word_once() {
    let rows = glossary();
    assert!(rows.len() > 40, "only {} words", rows.len());
    let mut words: Vec<&str> = rows.iter().map(|(word, _)| word.as_str()).collect();
    words.sort_unstable();
    for pair in words.windows(2) {
        assert_ne!(pair[0], pair[1], "{} is defined twice", pair[0]);
    }
}

#[test]
fn every_name_the_glossary_gives_for_the_code_is_in_the_code() {
    // Header names are written in either case.
    let sources: Vec<String> = files(&["src", "gateway/src", "lua"], &["rs", "lua"])
        .into_iter()
        .map(|(_, text)| text.to_lowercase())
        .collect();
    let modules: Vec<String> = files(&["src", "gateway/src"], &["rs"])
        .into_iter()
        .flat_map(|(path, _)| {
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let parent = path.parent().unwrap().file_name().unwrap();
            [stem, parent.to_string_lossy().into_owned()]
        })
        .collect();
    let in_the_code = |name: &str| {
        let name = name.to_lowercase();
        sources.iter().any(|text| text.contains(&name))
    };
    for (word, cell) in glossary() {
        for span in code_spans(&cell) {
            // A file or folder is named by its path; anything else by its last segment
            // (`store::QuotaLeases`, `.permit_ttl(...)`, `[serve] gateways`, a label).
            if span.ends_with(".rs") || span.ends_with(".lua") || span.ends_with('/') {
                assert!(root().join(span).exists(), "{word}: no file {span}");
                continue;
            }
            let name = span
                .trim_start_matches('.')
                .split("(")
                .next()
                .unwrap()
                .rsplit([':', ' ', '.'])
                .next()
                .unwrap()
                .trim_matches(|c: char| !c.is_alphanumeric() && c != '_' && c != '-');
            if name.is_empty() || span.contains('=') || span.starts_with('[') && !span.contains(']')
            {
                continue;
            }
            assert!(
                in_the_code(name),
                "{word}: {span} ({name}) is not in the code"
            );
            // A path's modules are modules of a crate (`store::region::Ledger`: a module
            // `store` and a module `region`); a type's associated item is not a module.
            let path = span.split('(').next().unwrap();
            let segments: Vec<&str> = path.split("::").collect();
            for module in &segments[..segments.len().saturating_sub(1)] {
                let is_module = module.chars().next().is_some_and(char::is_uppercase)
                    || modules.iter().any(|known| known == module);
                assert!(is_module, "{word}: {span} names no module {module}");
            }
        }
    }
}

/// Words the glossary retired, each for the word that replaced it: neither the code nor the
/// guides use them in that sense again.
const RETIRED: &[(&str, &str)] = &[
    (
        "policy over one admission core",
        "limiter over one admission core",
    ),
    (
        "policy over the admission core",
        "limiter over the admission core",
    ),
    ("Each is a policy (", "Each is a limiter ("),
    ("coalesce", "batch"),
    ("StoreErrorKind::Refused", "StoreErrorKind::ErrorReply"),
    (".lease(", ".permit_ttl("),
    ("LeaseStore", "PermitStore"),
    ("crate::server::", "crate::runtime::"),
    ("FilesError", "EnvoyFilesError"),
    ("reset_after", "full_after"),
];

#[test]
fn retired_words_are_used_nowhere() {
    let mut places = files(
        &["src", "gateway/src", "docs", "examples", "tests"],
        &["rs", "md"],
    );
    places.push((root().join("README.md"), read("README.md")));
    for (retired, instead) in RETIRED {
        for (path, text) in &places {
            // This file lists them, and an `EnvoyFilesError` contains `FilesError`.
            if path.ends_with("docs_words.rs") {
                continue;
            }
            let uses = text.replace(instead, "");
            assert!(
                !uses.contains(retired),
                "{} says {retired:?}: the glossary's word is {instead:?}",
                path.display()
            );
        }
    }
}
