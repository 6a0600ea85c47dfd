//! The codebooks a server codes with, by id: the built-in ones and those configured
//! (`--codebook FILE_OR_DIR`, repeatable), one of them the default that a request naming
//! none (`?codebook=` absent) uses.
//!
//! Built in: `delegation` (CommuGraph's delegation schema v0.2) and `speechact`
//! (CommuGraph's speech-act scheme, [`super::speechact`]). A configured codebook with the
//! id of a built-in one replaces it; two configured
//! codebooks with one id are refused. The default is the first configured codebook (a
//! directory's files in name order), else the built-in
//! [`BUILT_IN_ID`](super::codebook::BUILT_IN_ID).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;

use super::codebook::{Codebook, CodebookError};

/// The codebooks, in order: the configured ones as given, then the built-in ones not
/// replaced. The first is the default.
#[derive(Debug, Clone)]
pub struct Codebooks {
    all: Vec<Arc<Codebook>>,
    body: Bytes,
}

/// A request named a codebook the server does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("codebook: '{id}' is not a codebook of this server (known: {})", known.join(", "))]
pub struct UnknownCodebook {
    /// The id asked for.
    pub id: String,
    /// The ids the server has.
    pub known: Vec<String>,
}

/// One entry of `GET /api/codebooks`.
#[derive(Serialize)]
struct Entry<'a> {
    id: &'a str,
    version: &'a str,
    file: &'a str,
    schema_name: Option<&'a str>,
    schema_version: Option<&'a str>,
    unit_types: Option<&'a [String]>,
    labels: usize,
    default: bool,
}

impl Codebooks {
    /// The built-in codebooks alone.
    pub fn built_in() -> Result<Codebooks, CodebookError> {
        Codebooks::with(Vec::new())
    }

    /// The codebooks at `paths` (files, or directories whose `.yaml` and `.yml` files are
    /// read in name order) and the built-in ones they do not replace.
    pub fn load(paths: &[PathBuf]) -> Result<Codebooks, CodebookError> {
        let mut configured = Vec::new();
        for path in paths {
            for file in codebook_files(path)? {
                configured.push(Codebook::read(&file)?);
            }
        }
        Codebooks::with(configured)
    }

    /// `configured`, in order, then the built-in codebooks whose ids they do not take.
    pub fn with(configured: Vec<Codebook>) -> Result<Codebooks, CodebookError> {
        for (i, codebook) in configured.iter().enumerate() {
            if let Some(first) = configured[..i].iter().find(|c| c.id == codebook.id) {
                return Err(CodebookError::RepeatedId {
                    id: codebook.id.clone(),
                    first: first.file.clone(),
                    second: codebook.file.clone(),
                });
            }
        }
        let mut all: Vec<Arc<Codebook>> = configured.into_iter().map(Arc::new).collect();
        for built_in in [Codebook::built_in()?, super::speechact::codebook()?] {
            if !all.iter().any(|c| c.id == built_in.id) {
                all.push(Arc::new(built_in));
            }
        }
        let body = list_body(&all);
        Ok(Codebooks { all, body })
    }

    /// The codebook a request uses: the one `id` names, else the default.
    pub fn get(&self, id: Option<&str>) -> Result<&Arc<Codebook>, UnknownCodebook> {
        let Some(id) = id else {
            return Ok(self.default());
        };
        self.all
            .iter()
            .find(|c| c.id == id)
            .ok_or_else(|| UnknownCodebook {
                id: id.to_owned(),
                known: self.all.iter().map(|c| c.id.clone()).collect(),
            })
    }

    /// The default codebook.
    pub fn default(&self) -> &Arc<Codebook> {
        // Never empty: the built-in codebooks are added to what is configured.
        &self.all[0]
    }

    /// Every codebook, the configured ones first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Codebook>> {
        self.all.iter()
    }

    /// The JSON body of `GET /api/codebooks`: `{"default", "codebooks": [...]}`.
    pub fn list_body(&self) -> Bytes {
        self.body.clone()
    }
}

/// The codebook files `path` names: itself, or a directory's YAML files in name order.
fn codebook_files(path: &Path) -> Result<Vec<PathBuf>, CodebookError> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let read = |source| CodebookError::Read {
        file: path.display().to_string(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(read)? {
        let file = entry.map_err(read)?.path();
        let yaml = file
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
        if yaml && file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(CodebookError::EmptyDirectory {
            dir: path.display().to_string(),
        });
    }
    Ok(files)
}

/// The body of `GET /api/codebooks` for `all` (the first is the default).
fn list_body(all: &[Arc<Codebook>]) -> Bytes {
    let entries: Vec<Entry> = all
        .iter()
        .enumerate()
        .map(|(i, c)| Entry {
            id: &c.id,
            version: &c.version,
            file: &c.file,
            schema_name: c.schema_name.as_deref(),
            schema_version: c.schema_version.as_deref(),
            unit_types: c.unit_types.as_deref(),
            labels: c.labels.len(),
            default: i == 0,
        })
        .collect();
    let body = serde_json::json!({ "default": all[0].id, "codebooks": entries });
    Bytes::from(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::codebook::BUILT_IN_ID;

    fn codebook(file: &str, text: &str) -> Codebook {
        Codebook::parse(file, text).unwrap()
    }

    #[test]
    fn the_built_in_codebook_is_the_default_when_none_is_configured() {
        let books = Codebooks::built_in().unwrap();
        assert_eq!(books.default().id, BUILT_IN_ID);
        assert_eq!(books.get(None).unwrap().id, BUILT_IN_ID);
        assert_eq!(books.get(Some(BUILT_IN_ID)).unwrap().id, BUILT_IN_ID);
        let unknown = books.get(Some("nope")).unwrap_err();
        assert_eq!(unknown.id, "nope");
        assert!(unknown.to_string().contains(BUILT_IN_ID));
    }

    #[test]
    fn a_configured_codebook_is_the_default_and_the_built_ins_stay() {
        let mine = codebook("/x/mine.yaml", "labels:\n  - id: A\n");
        let books = Codebooks::with(vec![mine]).unwrap();
        assert_eq!(books.default().id, "mine");
        assert!(books.get(Some(BUILT_IN_ID)).is_ok());
        let body: serde_json::Value = serde_json::from_slice(&books.list_body()).unwrap();
        assert_eq!(body["default"], "mine");
        assert_eq!(body["codebooks"][0]["default"], true);
        assert_eq!(body["codebooks"][1]["id"], BUILT_IN_ID);
    }

    #[test]
    fn a_configured_codebook_replaces_the_built_in_of_its_id() {
        let mine = codebook("/x/mine.yaml", "id: delegation\nlabels:\n  - id: A\n");
        let books = Codebooks::with(vec![mine]).unwrap();
        let ids: Vec<&str> = books.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["delegation", "speechact"]);
        assert_eq!(books.default().labels.len(), 1);
    }

    #[test]
    fn two_configured_codebooks_with_one_id_are_refused() {
        let a = codebook("/x/a.yaml", "id: same\nlabels:\n  - id: A\n");
        let b = codebook("/y/b.yaml", "id: same\nlabels:\n  - id: B\n");
        let refused = Codebooks::with(vec![a, b]).unwrap_err().to_string();
        assert_eq!(
            refused,
            "two codebooks have the id same (/x/a.yaml and /y/b.yaml)"
        );
    }

    #[test]
    fn a_directory_is_read_in_name_order_and_an_empty_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.yml"), "labels:\n  - id: B\n").unwrap();
        std::fs::write(dir.path().join("a.yaml"), "labels:\n  - id: A\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a codebook").unwrap();
        let books = Codebooks::load(&[dir.path().to_owned()]).unwrap();
        let ids: Vec<&str> = books.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", BUILT_IN_ID, "speechact"]);
        assert_eq!(books.default().id, "a");
        let empty = tempfile::tempdir().unwrap();
        let refused = Codebooks::load(&[empty.path().to_owned()]).unwrap_err();
        assert!(matches!(refused, CodebookError::EmptyDirectory { .. }));
    }
}
