//! Issue 16, item 2: every reference a reader meets resolves inside the repository: the
//! design documents the README and the code cite, the CONTRACT sections and the reference's
//! bug labels.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every Rust source file, with their names.
fn texts() -> Vec<(String, String)> {
    let mut out = vec![(
        "README.md".to_owned(),
        std::fs::read_to_string(root().join("README.md")).unwrap(),
    )];
    let mut dirs = vec![root().join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.strip_prefix(root()).unwrap().display().to_string();
                out.push((name, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    out
}

/// The words of `text` that start with `prefix`, up to the first character that cannot be
/// part of a path or label.
fn words_starting<'a>(text: &'a str, prefix: &str) -> BTreeSet<&'a str> {
    text.match_indices(prefix)
        .filter(|(at, _)| {
            text[..*at]
                .chars()
                .last()
                .is_none_or(|c| !c.is_ascii_alphanumeric() && c != '/' && c != '-' && c != '_')
        })
        .map(|(at, _)| {
            let rest = &text[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches('.')
        })
        .collect()
}

#[test]
fn every_cited_document_is_in_the_repository() {
    for (name, text) in texts() {
        for path in words_starting(&text, "docs/") {
            assert!(
                root().join(path).exists(),
                "{name} cites {path}, which is not in the repository"
            );
        }
        assert!(
            words_starting(&text, "spec/").is_empty(),
            "{name} cites spec/ paths: the documents are under docs/spec/"
        );
    }
}

#[test]
fn every_cited_contract_section_and_bug_label_is_defined() {
    let contract = std::fs::read_to_string(root().join("docs/CONTRACT.md")).unwrap();
    let reference = std::fs::read_to_string(root().join("docs/commugraph-reference.md")).unwrap();
    for (name, text) in texts() {
        for at in text.match_indices("CONTRACT 3.").map(|(at, _)| at) {
            let digits: String = text[at + 11..].chars().take_while(char::is_ascii_digit).collect();
            if digits.is_empty() {
                continue;
            }
            let item = format!("\n{digits}. **");
            assert!(
                contract.contains(&item),
                "{name} cites CONTRACT 3.{digits}, which docs/CONTRACT.md does not have"
            );
        }
        for label in words_starting(&text, "D-") {
            let label = label.trim_end_matches(['.', '-', '_']);
            if label.len() <= 2
                || !label[2..]
                    .trim_start_matches('C')
                    .chars()
                    .all(|c| c.is_ascii_digit())
            {
                continue;
            }
            let defined = reference
                .match_indices(label)
                .any(|(at, _)| !reference[at + label.len()..].starts_with(|c: char| c.is_ascii_digit()));
            assert!(
                defined,
                "{name} cites {label}, which docs/commugraph-reference.md does not define"
            );
        }
    }
}
