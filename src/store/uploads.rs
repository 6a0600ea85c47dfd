//! Durable uploads: every accepted upload is on disk before the response says 200.
//!
//! ```text
//! <data-dir>/uploads/<id>/manifest.json     id, framework, creation time, original names
//! <data-dir>/uploads/<id>/files/0, 1, ...   the files' bytes, in upload order
//! <data-dir>/uploads/.tmp-*                 work in progress (removed at start-up)
//! ```
//!
//! An upload is written into a fresh temporary directory, every file and the manifest are
//! fsynced, the directory is renamed into place and the parent directory fsynced. A crash at
//! any point leaves either the complete upload or a temporary directory that the next
//! start removes, never half an upload. Client-supplied file names are kept in the manifest
//! only; on disk the files are numbered, so no path ever comes from a client.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::core::formats::input::{base_name, FileRole};
use crate::core::{SessionInput, SourceFile};

/// The rules [`Counts`] are counted by now: 1 (or none written), CommuGraph's, with no edge
/// for Claude Code and pi; 2, the graph with inferred edges (CONTRACT 3.13). Counts kept by
/// older rules are not shown: the session is counted again.
pub const COUNT_RULES: u32 = 2;

/// Manifest rewrites made by this process, numbering their temporary files.
static REWRITES: AtomicU64 = AtomicU64::new(0);

/// The counts a session had, kept so that listings need no parsing.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Counts {
    /// Workflow nodes (the reference's "messages").
    pub message_count: usize,
    /// Communication-graph nodes (parties).
    pub node_count: usize,
    /// Communication-graph edges (distinct sender -> receiver pairs).
    pub edge_count: usize,
    /// The rules they were counted by ([`COUNT_RULES`]; 1 when not written).
    #[serde(default = "first_rules")]
    pub rules: u32,
}

fn first_rules() -> u32 {
    1
}

impl Counts {
    /// True when counted by today's rules.
    pub fn is_current(&self) -> bool {
        self.rules == COUNT_RULES
    }
}

/// What is stored about an upload besides its files.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    /// The upload's id (content-derived).
    pub id: String,
    /// The framework as the client sent it.
    pub framework: String,
    /// When it was first accepted, in milliseconds since the epoch.
    pub created_at_ms: i64,
    /// The original file names, in upload order (file `i` is stored as `files/i`).
    pub names: Vec<String>,
    /// The session's counts.
    pub counts: Counts,
}

impl Manifest {
    /// The position of the main session file among [`Manifest::names`]: the first file
    /// named as one, else the first file.
    pub fn main_index(&self) -> usize {
        self.names
            .iter()
            .position(|n| FileRole::of(base_name(n)) == FileRole::Main)
            .unwrap_or(0)
    }

    /// The main session file's name, as the client sent it (empty for an upload without files).
    pub fn main_name(&self) -> &str {
        self.names.get(self.main_index()).map_or("", String::as_str)
    }
}

/// What the uploads directory holds.
#[derive(Debug, Default)]
pub struct Stored {
    /// The readable uploads, in id order.
    pub manifests: Vec<Manifest>,
    /// Directories that could not be read, with the reason.
    pub unreadable: Vec<(PathBuf, String)>,
}

/// The uploads directory (a cheap handle: clone it onto the blocking pool).
#[derive(Debug, Clone)]
pub struct UploadDir {
    root: PathBuf,
}

/// True for ids this store generates (hex digits only), so an id can never name a path
/// outside the uploads directory.
pub fn is_upload_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// True when `e` says the storage is full: no space left on the device (`ENOSPC`) or the
/// quota used up (`EDQUOT`).
pub fn is_storage_full(e: &io::Error) -> bool {
    use rustix::io::Errno;
    e.kind() == io::ErrorKind::StorageFull
        || e.raw_os_error()
            .is_some_and(|code| code == Errno::NOSPC.raw_os_error() || code == Errno::DQUOT.raw_os_error())
}

impl UploadDir {
    /// Opens (creating it if needed) `<data_dir>/uploads`, and removes what interrupted
    /// writes and deletes left behind. Returns the directory and how many leftovers it removed.
    pub fn open(data_dir: &Path) -> io::Result<(UploadDir, usize)> {
        let root = data_dir.join("uploads");
        fs::create_dir_all(&root)?;
        let mut removed = 0;
        for entry in fs::read_dir(&root)? {
            let entry = entry?;
            if entry.file_name().to_string_lossy().starts_with(".tmp-") {
                // A directory of an interrupted write or delete, or a spool file.
                if entry.file_type()?.is_dir() {
                    fs::remove_dir_all(entry.path())?;
                } else {
                    fs::remove_file(entry.path())?;
                }
                removed += 1;
            }
        }
        Ok((UploadDir { root }, removed))
    }

    /// `<data_dir>/uploads` as it is, to read: nothing is created or removed; `None` when
    /// the directory does not exist (no upload was ever stored there).
    pub fn existing(data_dir: &Path) -> Option<UploadDir> {
        let root = data_dir.join("uploads");
        root.is_dir().then_some(UploadDir { root })
    }

    fn dir_of(&self, id: &str) -> io::Result<PathBuf> {
        if !is_upload_id(id) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not an upload id"));
        }
        Ok(self.root.join(id))
    }

    /// A fresh temporary directory name.
    fn temp_dir(&self, what: &str) -> PathBuf {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        self.root.join(format!(".tmp-{what}-{}-{n}", std::process::id()))
    }

    /// Writes an upload durably. Saving an id that is already stored does nothing: ids are
    /// content-derived, so the stored files are the same. On failure (a full disk among
    /// others) the temporary directory is removed: nothing of the upload is left.
    pub fn save(&self, manifest: &Manifest, input: &SessionInput) -> io::Result<()> {
        let target = self.dir_of(&manifest.id)?;
        if target.join("manifest.json").exists() {
            return Ok(());
        }
        let tmp = self.temp_dir(&manifest.id);
        let written = (|| {
            fs::create_dir_all(tmp.join("files"))?;
            for (i, file) in input.files.iter().enumerate() {
                write_synced(&tmp.join("files").join(i.to_string()), &file.bytes)?;
            }
            sync_dir(&tmp.join("files"))?;
            let json = serde_json::to_vec_pretty(manifest).map_err(io::Error::other)?;
            write_synced(&tmp.join("manifest.json"), &json)?;
            sync_dir(&tmp)?;
            fs::rename(&tmp, &target)
        })();
        match written {
            Ok(()) => sync_dir(&self.root),
            // Another request stored the same content meanwhile.
            Err(_) if target.join("manifest.json").exists() => {
                let _ = fs::remove_dir_all(&tmp);
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&tmp);
                Err(e)
            }
        }
    }

    /// Replaces a stored upload's manifest with `manifest` (a new file, synced, renamed
    /// over the old one): an interrupted rewrite leaves the old manifest or the new one.
    pub fn rewrite_manifest(&self, manifest: &Manifest) -> io::Result<()> {
        let dir = self.dir_of(&manifest.id)?;
        let json = serde_json::to_vec_pretty(manifest).map_err(io::Error::other)?;
        // A name of its own: two rewrites at once never write into one file.
        let n = REWRITES.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!("manifest.json.{}-{n}.tmp", std::process::id()));
        write_synced(&tmp, &json)?;
        fs::rename(&tmp, dir.join("manifest.json"))?;
        sync_dir(&dir)
    }

    /// The bytes of a stored upload's files.
    pub fn stored_bytes(&self, manifest: &Manifest) -> io::Result<u64> {
        let dir = self.dir_of(&manifest.id)?.join("files");
        (0..manifest.names.len()).try_fold(0u64, |sum, i| {
            Ok(sum + fs::metadata(dir.join(i.to_string()))?.len())
        })
    }

    /// Every stored upload's manifest, plus the directories that could not be read.
    pub fn manifests(&self) -> io::Result<Stored> {
        let mut good = Vec::new();
        let mut bad = Vec::new();
        let mut entries: Vec<PathBuf> = fs::read_dir(&self.root)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_dir()
                    && !p
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            })
            .collect();
        entries.sort();
        for dir in entries {
            let read = fs::read(dir.join("manifest.json"))
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Manifest>(&b).map_err(|e| e.to_string()));
            match read {
                Ok(m) if dir.file_name().is_some_and(|n| *n == *m.id) => good.push(m),
                Ok(_) => bad.push((dir, "manifest id does not match its directory".to_owned())),
                Err(e) => bad.push((dir, e)),
            }
        }
        Ok(Stored {
            manifests: good,
            unreadable: bad,
        })
    }

    /// The files of a stored upload, with their original names. They are mapped, not read
    /// ([`super::mapped`]): a stored file is never rewritten (a new upload of the same id
    /// replaces its directory by a rename, and a deleted one stays readable while mapped).
    pub fn read(&self, manifest: &Manifest) -> io::Result<SessionInput> {
        let dir = self.dir_of(&manifest.id)?.join("files");
        let files = manifest
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let file = File::open(dir.join(i.to_string()))?;
                Ok(SourceFile::new(name.clone(), super::mapped::map_file(&file)?))
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(SessionInput::new(files))
    }

    /// Opens the stored upload's main session file (the first file named as one, else the
    /// first file) with its original name: a handle that stays readable even if the upload
    /// is deleted meanwhile.
    pub fn open_main(&self, manifest: &Manifest) -> io::Result<(String, File)> {
        let main = manifest.main_index();
        let name = manifest.names.get(main).cloned().unwrap_or_default();
        let path = self.dir_of(&manifest.id)?.join("files").join(main.to_string());
        Ok((name, File::open(path)?))
    }

    /// A new file, open to write and then read back, with no name in the uploads
    /// directory: it goes when its handle is closed (a crash between its creation and the
    /// removal of its name leaves a `.tmp-` file, removed at the next start). For an
    /// upload kept elsewhere, brought here to be streamed.
    pub fn spool_file(&self) -> io::Result<File> {
        let path = self.temp_dir("spool");
        let file = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        fs::remove_file(&path)?;
        Ok(file)
    }

    /// Removes a stored upload. The directory is first renamed to a temporary name, so an
    /// interrupted delete never leaves a half-deleted upload that would load at start-up.
    pub fn delete(&self, id: &str) -> io::Result<()> {
        let target = self.dir_of(id)?;
        if !target.exists() {
            return Ok(());
        }
        let tmp = self.temp_dir("deleted");
        fs::rename(&target, &tmp)?;
        sync_dir(&self.root)?;
        fs::remove_dir_all(&tmp)
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = File::create(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(id: &str) -> Manifest {
        Manifest {
            id: id.to_owned(),
            framework: "claudecode".to_owned(),
            created_at_ms: 1,
            names: vec!["main.jsonl".to_owned(), "agent-a.jsonl".to_owned()],
            counts: Counts {
                message_count: 1,
                node_count: 1,
                edge_count: 0,
                rules: COUNT_RULES,
            },
        }
    }

    fn input() -> SessionInput {
        SessionInput::new(vec![
            SourceFile::new("main.jsonl", "{}\n"),
            SourceFile::new("agent-a.jsonl", ""),
        ])
    }

    #[test]
    fn saves_reads_and_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let (uploads, removed) = UploadDir::open(dir.path()).unwrap();
        assert_eq!(removed, 0);
        uploads.save(&manifest("abc123"), &input()).unwrap();
        uploads.save(&manifest("abc123"), &input()).unwrap();
        let stored = uploads.manifests().unwrap();
        assert_eq!(stored.manifests, vec![manifest("abc123")]);
        assert!(stored.unreadable.is_empty());
        let back = uploads.read(&stored.manifests[0]).unwrap();
        assert_eq!(back.files[0].name, "main.jsonl");
        assert_eq!(back.files[0].bytes, &b"{}\n"[..]);
        uploads.delete("abc123").unwrap();
        assert!(uploads.manifests().unwrap().manifests.is_empty());
    }

    #[test]
    fn leftovers_of_interrupted_writes_are_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("uploads/.tmp-abc-1-0/files")).unwrap();
        fs::write(dir.path().join("uploads/.tmp-spool-1-1"), b"half an export").unwrap();
        let (uploads, removed) = UploadDir::open(dir.path()).unwrap();
        assert_eq!(removed, 2);
        assert!(uploads.manifests().unwrap().manifests.is_empty());
    }

    #[test]
    fn a_spool_file_reads_back_and_leaves_no_name() {
        use std::io::{Read, Seek};
        let dir = tempfile::tempdir().unwrap();
        let (uploads, _) = UploadDir::open(dir.path()).unwrap();
        let mut spool = uploads.spool_file().unwrap();
        spool.write_all(b"{}\n").unwrap();
        spool.rewind().unwrap();
        let mut back = String::new();
        spool.read_to_string(&mut back).unwrap();
        assert_eq!(back, "{}\n");
        assert_eq!(fs::read_dir(dir.path().join("uploads")).unwrap().count(), 0);
    }

    #[test]
    fn a_full_disk_or_quota_is_told_apart() {
        assert!(is_storage_full(&io::Error::from_raw_os_error(28)));
        assert!(is_storage_full(&io::Error::from_raw_os_error(
            rustix::io::Errno::DQUOT.raw_os_error()
        )));
        assert!(is_storage_full(&io::Error::from(io::ErrorKind::StorageFull)));
        assert!(!is_storage_full(&io::Error::from_raw_os_error(2)));
        assert!(!is_storage_full(&io::Error::other("no space left")));
    }

    #[test]
    fn ids_are_never_paths() {
        assert!(is_upload_id("0123abcdef"));
        assert!(!is_upload_id("../etc"));
        assert!(!is_upload_id(""));
        let dir = tempfile::tempdir().unwrap();
        let (uploads, _) = UploadDir::open(dir.path()).unwrap();
        assert!(uploads.delete("../../x").is_err());
    }
}
