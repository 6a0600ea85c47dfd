//! Bringing the index in line with the store, session by session (blocking: these run on
//! the blocking pool, one update at a time): a session whose marker is missing or stale is
//! indexed again, one the store no longer has is removed, one that is current is left.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use tantivy::{IndexWriter, Term};

use super::document::UnitDoc;
use super::error::SearchError;
use super::index::SearchIndex;
use super::markers::{all_markers, encode_stamps, marker_of};
use super::schema::Fields;
use crate::core::pipeline::session::Branch;
use crate::core::views::annotations::annotations;
use crate::store::registry::Source;
use crate::store::{FileStamp, Slot, Store, StoreError};

/// Units added between two commits of a long update: each commit makes the sessions
/// indexed so far searchable.
const COMMIT_EVERY_UNITS: usize = 100_000;

/// The sessions whose index is missing or stale, and the indexed sessions the store no
/// longer has: the store's sessions are checked by their markers (an upload by its id, a
/// session on disk by the stamps of its files), none is parsed.
pub fn stale_sessions(index: &SearchIndex, store: &Store) -> Result<Vec<String>, SearchError> {
    let markers = all_markers(&index.searcher(), &index.fields)?;
    let listed = store.list();
    let known: HashSet<&str> = listed.iter().map(|i| i.slot.id.as_str()).collect();
    let mut stale: Vec<String> = listed
        .iter()
        .filter(|i| !markers.get(&i.slot.id).is_some_and(|m| m.is_current(&i.slot)))
        .map(|i| i.slot.id.clone())
        .collect();
    let mut gone: Vec<String> = markers
        .into_keys()
        .filter(|id| !known.contains(id.as_str()))
        .collect();
    gone.sort();
    stale.extend(gone);
    Ok(stale)
}

/// Brings sessions `ids` in line with the store, committing every `COMMIT_EVERY_UNITS`
/// units and at the end; `committed` is told how many of `ids` each commit made
/// searchable. Stops between two sessions once `stop` is set.
pub fn sync_sessions(
    index: &SearchIndex,
    store: &Store,
    ids: &[String],
    stop: &AtomicBool,
    mut committed: impl FnMut(usize),
) -> Result<(), SearchError> {
    let searcher = index.searcher();
    let fields = &index.fields;
    let mut writer = index.writer();
    let (mut units, mut sessions, mut changed) = (0, 0, false);
    for id in ids {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let marker = marker_of(&searcher, fields, id)?;
        match store.slot(id) {
            Err(_) if marker.is_some() => {
                writer.delete_term(Term::from_field_text(fields.session_id, id));
                changed = true;
            }
            Err(_) => {}
            Ok(slot) if !marker.as_ref().is_some_and(|m| m.is_current(&slot)) => {
                units += write_session(&mut writer, fields, store, &slot)?;
                changed = true;
            }
            Ok(_) => {}
        }
        sessions += 1;
        if units >= COMMIT_EVERY_UNITS {
            commit(index, &mut writer)?;
            committed(std::mem::take(&mut sessions));
            units = 0;
            changed = false;
        }
    }
    if changed {
        commit(index, &mut writer)?;
    }
    committed(sessions);
    Ok(())
}

/// Replaces `slot`'s documents with its units as the store has them now, and its marker;
/// the number of units written. A session that cannot be read is indexed without units,
/// with its main file's stamp: it is tried again once that file changes. One that cannot be
/// read for a reason that may pass (the shared upload store's database or bucket down) is
/// left without a marker: the next check finds it stale and tries again.
fn write_session(
    writer: &mut IndexWriter,
    fields: &Fields,
    store: &Store,
    slot: &Slot,
) -> Result<usize, SearchError> {
    writer.delete_term(Term::from_field_text(fields.session_id, &slot.id));
    let (fingerprint, stamps, units) = match store.snapshot(&slot.id) {
        Ok((_, loaded)) => {
            let body = annotations(&loaded.session, true, Branch::All);
            for (seq, unit) in body.annotations.iter().enumerate() {
                let doc = UnitDoc::of(&slot.id, slot.framework.name(), seq as u64, unit);
                writer.add_document(fields.unit_document(&doc))?;
            }
            (
                loaded.version.clone(),
                encode_stamps(loaded.stamps()),
                body.annotations.len(),
            )
        }
        // Deleted meanwhile: its documents go with the delete above.
        Err(StoreError::NotFound(_)) => return Ok(0),
        Err(e) if e.may_pass() => {
            tracing::debug!(id = %slot.id, error = %e, "a session cannot be read for the search index now: tried again at the next check");
            return Ok(0);
        }
        Err(e) => {
            tracing::warn!(id = %slot.id, error = %e, "a session cannot be read for the search index: indexed without units");
            let stamps = match &slot.source {
                Source::Disk(found) => vec![FileStamp::of(&found.main)],
                Source::Upload(_) => Vec::new(),
            };
            (slot.id.clone(), encode_stamps(&stamps), 0)
        }
    };
    writer.add_document(fields.marker_document(&slot.id, &fingerprint, &stamps))?;
    Ok(units)
}

/// Commits and makes the commit searchable; a failed commit is rolled back (the sessions
/// it held are found stale again at the next check).
fn commit(index: &SearchIndex, writer: &mut IndexWriter) -> Result<(), SearchError> {
    if let Err(e) = writer.commit() {
        if let Err(rollback) = writer.rollback() {
            tracing::warn!(error = %rollback, "rolling the search index back failed");
        }
        return Err(e.into());
    }
    index.reload()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::core::{LoadOptions, SessionInput, SourceFile};
    use crate::search::query::SearchQuery;
    use crate::store::{Framework, StoreConfig};

    const MAIN: &str = "11111111-2222-4333-8444-555555555555.jsonl";

    fn prompt(uuid: &str, parent: Option<&str>, text: &str) -> String {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"user","uuid":"{uuid}","parentUuid":{parent},"sessionId":"S","message":{{"role":"user","content":"{text}"}}}}"#
        )
    }

    fn total(index: &SearchIndex, text: &str) -> usize {
        let query = SearchQuery {
            text: Some(text.into()),
            ..SearchQuery::default()
        };
        index.search(&query, 0, 10).unwrap().total
    }

    fn sync_all(index: &SearchIndex, store: &Store) -> Vec<String> {
        let stale = stale_sessions(index, store).unwrap();
        sync_sessions(index, store, &stale, &AtomicBool::new(false), |_| {}).unwrap();
        stale
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sessions_are_indexed_once_then_again_when_changed_or_removed_when_gone() {
        let sessions = tempfile::tempdir().unwrap();
        let project = sessions.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join(MAIN), prompt("d0", None, "ostrich on disk")).unwrap();
        let store = Arc::new(
            Store::new(StoreConfig {
                sessions_dirs: vec![sessions.path().to_owned()],
                cache_bytes: 1 << 30,
                ..StoreConfig::default()
            })
            .unwrap(),
        );
        store.restore().unwrap();
        let upload = SessionInput {
            files: vec![SourceFile::new(
                MAIN,
                prompt("u0", None, "penguin uploaded").into_bytes(),
            )],
        };
        let (slot, ..) = store
            .add_upload(Framework::ClaudeCode, upload, LoadOptions::default())
            .await
            .unwrap();
        let index = SearchIndex::in_memory(15_000_000);

        let store_for = store.clone();
        let index = tokio::task::spawn_blocking(move || {
            assert_eq!(sync_all(&index, &store_for).len(), 2, "both are missing");
            assert_eq!((total(&index, "ostrich"), total(&index, "penguin")), (1, 1));
            assert!(sync_all(&index, &store_for).is_empty(), "and then current");

            // The log grows: stale by its stamps, indexed again (a different size).
            let grown = format!(
                "{}\n{}",
                prompt("d0", None, "ostrich on disk"),
                prompt("d1", Some("d0"), "ostrich again, with a llama")
            );
            std::fs::write(project.join(MAIN), grown).unwrap();
            assert_eq!(sync_all(&index, &store_for).len(), 1);
            assert_eq!((total(&index, "ostrich"), total(&index, "llama")), (2, 1));
            index
        })
        .await
        .unwrap();

        store.delete(&slot.id).await.unwrap();
        tokio::task::spawn_blocking(move || {
            assert_eq!(
                sync_all(&index, &store),
                std::slice::from_ref(&slot.id),
                "gone from the store"
            );
            assert_eq!(total(&index, "penguin"), 0);
            assert_eq!(total(&index, "ostrich"), 2, "the other session stays");
        })
        .await
        .unwrap();
    }
}
