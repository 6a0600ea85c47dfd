//! Issue 16, item 2: every reference a reader meets resolves inside the repository: the
//! documents the README, the user docs and the code cite, the relative links of the README
//! and the user docs, the CONTRACT sections and the reference's bug labels.

use std::collections::BTreeSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README and the Markdown files at the top of `docs/` (the user docs and the design
/// documents' index; not `docs/spec/` or `docs/commugraph-frontend/`), with their names
/// relative to the repository.
fn markdown_docs() -> Vec<(String, String)> {
    let mut out = vec![(
        "README.md".to_owned(),
        std::fs::read_to_string(root().join("README.md")).unwrap(),
    )];
    let mut docs: Vec<_> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    for path in docs {
        let name = path.strip_prefix(root()).unwrap().display().to_string();
        out.push((name, std::fs::read_to_string(&path).unwrap()));
    }
    out
}

/// The README, the Markdown files at the top of `docs/` and every Rust source file, with
/// their names.
fn texts() -> Vec<(String, String)> {
    let mut out = markdown_docs();
    let mut dirs = vec![root().join("src"), root().join("crates/core/src")];
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

/// The targets of the inline Markdown links and images in `text` (`[text](target)`,
/// `![alt](target)`), without a title.
fn link_targets(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let end = rest.find(')')?;
            let target = rest[..end].split_whitespace().next()?;
            Some(target.trim_start_matches('<').trim_end_matches('>'))
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
        // In docs/, `spec/...` is a link relative to docs/, checked below.
        if !name.starts_with("docs/") {
            assert!(
                words_starting(&text, "spec/").is_empty(),
                "{name} cites spec/ paths: the documents are under docs/spec/"
            );
        }
    }
    for (name, text) in markdown_docs() {
        assert!(
            !text.contains("../shared"),
            "{name} cites ../shared, which is outside the repository"
        );
    }
}

/// A source path the docs or the code name (`crates/core/src/json/raw.rs`, `tests/reference/`)
/// is in the repository: files move, and their citations with them.
#[test]
fn every_cited_source_path_is_in_the_repository() {
    let mut checked = 0;
    // CommuGraph's own sources, which the reference's description cites, are not ours.
    let ours = texts()
        .into_iter()
        .filter(|(name, _)| name != "docs/commugraph-reference.md");
    for (name, text) in ours {
        for prefix in [
            "src/",
            "crates/",
            "tests/",
            "examples/",
            "benches/",
            "fixtures/",
            "migrations/",
        ] {
            for path in words_starting(&text, prefix) {
                assert!(
                    root().join(path).exists(),
                    "{name} cites {path}, which is not in the repository"
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} source paths found: is words_starting reading them?"
    );
}

#[test]
fn every_relative_link_in_the_readme_and_the_docs_resolves() {
    let mut checked = 0;
    for (name, text) in markdown_docs() {
        let dir = root().join(&name).parent().unwrap().to_path_buf();
        for target in link_targets(&text) {
            if target.starts_with("http://") || target.starts_with("https://") || target.starts_with('#') {
                continue;
            }
            let path = dir.join(target.split('#').next().unwrap());
            assert!(
                path.exists(),
                "{name} links to {target}, which does not resolve to a file of the repository"
            );
            assert!(
                path.canonicalize()
                    .unwrap()
                    .starts_with(root().canonicalize().unwrap()),
                "{name} links to {target}, which is outside the repository"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 20,
        "only {checked} relative links found: is link_targets reading them?"
    );
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
