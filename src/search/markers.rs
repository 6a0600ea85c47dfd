//! What the index says it was built from: one marker per indexed session, holding the
//! session's content version and the stamps of its files, so that a restart (or a
//! periodic check) finds the sessions whose index is missing or stale without parsing any.

use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tantivy::collector::DocSetCollector;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{Searcher, TantivyDocument, Term};

use super::error::SearchError;
use super::schema::{Fields, KIND_SESSION};
use crate::store::{FileStamp, Slot};

/// A session as the index last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The session's content version then (an upload's id; a digest of the stamps of a
    /// session on disk).
    pub fingerprint: String,
    /// The stamps of the files it was read from (none for an upload).
    pub stamps: Vec<FileStamp>,
}

impl Marker {
    /// True when the index holds `slot` as it is: an upload's content never changes once
    /// indexed; a session on disk is current while every file keeps its stamp.
    pub fn is_current(&self, slot: &Slot) -> bool {
        if slot.is_upload() {
            return self.fingerprint == slot.id;
        }
        !self.stamps.is_empty() && self.stamps.iter().all(FileStamp::holds)
    }
}

/// One file's stamp as stored: the path's bytes in hex (a path need not be UTF-8), its
/// length and modification time.
#[derive(Debug, Serialize, Deserialize)]
struct StoredStamp {
    path: String,
    len: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    modified: Option<(u64, u32)>,
}

/// `stamps` as a marker stores them (JSON).
pub fn encode_stamps(stamps: &[FileStamp]) -> String {
    let stored: Vec<StoredStamp> = stamps
        .iter()
        .map(|s| StoredStamp {
            path: hex::encode(s.path.as_os_str().as_bytes()),
            len: s.len,
            modified: s
                .modified
                .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                .map(|d| (d.as_secs(), d.subsec_nanos())),
        })
        .collect();
    serde_json::to_string(&stored).unwrap_or_else(|_| "[]".to_owned())
}

/// The stamps a marker stored ([`encode_stamps`]).
pub fn decode_stamps(json: &str) -> Result<Vec<FileStamp>, SearchError> {
    let stored: Vec<StoredStamp> =
        serde_json::from_str(json).map_err(|e| SearchError::Corrupt(format!("stamps: {e}")))?;
    stored
        .into_iter()
        .map(|s| {
            let bytes = hex::decode(&s.path).map_err(|e| SearchError::Corrupt(format!("stamp path: {e}")))?;
            Ok(FileStamp {
                path: PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)),
                len: s.len,
                modified: s
                    .modified
                    .map(|(secs, nanos)| UNIX_EPOCH + Duration::new(secs, nanos)),
            })
        })
        .collect()
}

/// The marker of session `id`, if it is indexed.
pub fn marker_of(searcher: &Searcher, fields: &Fields, id: &str) -> Result<Option<Marker>, SearchError> {
    let query = BooleanQuery::new(vec![
        (Occur::Must, kind_session(fields)),
        (
            Occur::Must,
            Box::new(TermQuery::new(
                Term::from_field_text(fields.session_id, id),
                IndexRecordOption::Basic,
            )),
        ),
    ]);
    Ok(read_markers(searcher, fields, &query)?.remove(id))
}

/// Every indexed session's marker, by session id.
pub fn all_markers(searcher: &Searcher, fields: &Fields) -> Result<HashMap<String, Marker>, SearchError> {
    read_markers(searcher, fields, &*kind_session(fields))
}

fn kind_session(fields: &Fields) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_text(fields.kind, KIND_SESSION),
        IndexRecordOption::Basic,
    ))
}

/// The markers `query` matches.
fn read_markers(
    searcher: &Searcher,
    fields: &Fields,
    query: &dyn Query,
) -> Result<HashMap<String, Marker>, SearchError> {
    let mut markers = HashMap::new();
    for address in searcher.search(query, &DocSetCollector)? {
        let doc: TantivyDocument = searcher.doc(address)?;
        let text = |field| {
            doc.get_first(field)
                .and_then(|v| v.as_str())
                .map(str::to_owned)
                .ok_or_else(|| SearchError::Corrupt("a marker lacks a field".into()))
        };
        let marker = Marker {
            fingerprint: text(fields.fingerprint)?,
            stamps: decode_stamps(&text(fields.stamps)?)?,
        };
        markers.insert(text(fields.session_id)?, marker);
    }
    Ok(markers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_back_as_written_whatever_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.jsonl");
        let file = dir.path().join(odd);
        std::fs::write(&file, b"12345").unwrap();
        let stamps = vec![FileStamp::of(&file), FileStamp::of(&dir.path().join("gone"))];
        let back = decode_stamps(&encode_stamps(&stamps)).unwrap();
        assert_eq!(back, stamps);
        assert!(back[0].holds(), "the file did not change");
        std::fs::write(&file, b"123456").unwrap();
        assert!(!back[0].holds(), "it grew");
    }
}
