//! Every name of this crate that README and the guides write in prose resolves as written: a type
//! named bare (`` `QuotaLeases` ``) is exported at the crate root; any other is written with its
//! module path (`` `store::QuotaLeases` ``), so a reader finds it without searching the source.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The public types, traits and aliases the crate defines, by name (from its source files).
fn public_types() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut dirs = vec![root().join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for line in text.lines() {
                    let line = line.trim_start();
                    for item in ["pub struct ", "pub enum ", "pub trait ", "pub type "] {
                        if let Some(rest) = line.strip_prefix(item) {
                            names.insert(identifier(rest));
                        }
                    }
                }
            }
        }
    }
    names
}

/// The names `src/lib.rs` exports at the crate root (`pub use a::{B, C};`, `pub use d::E;`).
fn root_exports() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let mut names = BTreeSet::new();
    for statement in lib.split("pub use ").skip(1) {
        let statement = statement.split(';').next().unwrap_or("");
        let names_part = match statement.split_once('{') {
            Some((_, inner)) => inner.trim_end_matches('}').to_owned(),
            None => statement.rsplit("::").next().unwrap_or("").to_owned(),
        };
        for name in names_part.split(',') {
            let name = name.rsplit(" as ").next().unwrap_or("").trim();
            names.insert(name.rsplit("::").next().unwrap_or("").to_owned());
        }
    }
    names
}

fn identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The inline code spans of a markdown text, fenced blocks and links' texts left out.
fn code_spans(markdown: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let parts: Vec<&str> = line.split('`').collect();
            for at in (1..parts.len()).step_by(2) {
                // A link's text (`` [`Algorithm`](policy::Algorithm) ``) resolves by its target.
                let link = parts[at - 1].ends_with('[')
                    && parts.get(at + 1).is_some_and(|next| next.starts_with(']'));
                if !link {
                    spans.push(parts[at].to_owned());
                }
            }
        }
    }
    spans
}

#[test]
fn every_name_in_readme_and_the_guides_is_at_the_root_or_written_with_its_path() {
    let types = public_types();
    let exported = root_exports();
    let mut documents = vec![root().join("README.md")];
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "md") {
            documents.push(path);
        }
    }
    let mut unresolved = Vec::new();
    for document in &documents {
        let text = std::fs::read_to_string(document).unwrap();
        for span in code_spans(&text) {
            // A bare name starts the span (`QuotaLeases`, `QuotaLeases::default()`); a span that
            // starts with a module path (`store::QuotaLeases`) or a crate's name is fine.
            let first = identifier(&span);
            // `RateLimit` and `RateLimit-Policy: ...` in prose are the IETF header fields.
            let header = first == "RateLimit"
                || span[first.len()..].starts_with(['-', ':'])
                    && !span[first.len()..].starts_with("::");
            if !header
                && first.starts_with(|c: char| c.is_ascii_uppercase())
                && types.contains(&first)
                && !exported.contains(&first)
            {
                unresolved.push(format!(
                    "{}: `{span}`",
                    document.strip_prefix(root()).unwrap().display()
                ));
            }
        }
    }
    assert!(
        unresolved.is_empty(),
        "names of this crate written bare but not exported at the root (write their module path, \
         e.g. `store::QuotaLeases`):\n{}",
        unresolved.join("\n")
    );
}
