//! Reading the files of a sessions directory: the one place where it is done, under one rule.
//!
//! A sessions directory belongs to its owner, and whoever can write into it could plant a
//! symbolic link to `/etc/passwd` or a FIFO that blocks a reader forever. So every file is
//! opened below the configured directory one path component at a time (`openat`), each with
//! `O_NOFOLLOW`: a symbolic link anywhere below the root, pointing outside or inside, is
//! refused, and a directory swapped for a link between two reads cannot lead elsewhere. The
//! file itself is opened with `O_NONBLOCK` (opening a FIFO then returns at once instead of
//! waiting for a writer), and the opened handle is checked (`fstat`, not a `stat` before
//! opening, which a swap could outrun): anything but a regular file is refused. The
//! configured directory itself is the operator's choice and may be a link.
//!
//! Errors name files relative to the root, so they can be shown to a client without saying
//! where the sessions directory is.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use bytes::Bytes;
use rustix::fs::{FileType, Mode, OFlags};

/// Why a file of a sessions directory was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file, or a directory on the way to it, is a symbolic link.
    #[error("{} {}", .file.display(), self.reason())]
    SymbolicLink {
        /// The link, relative to the sessions directory.
        file: PathBuf,
    },
    /// The file is a FIFO, a socket, a device or a directory.
    #[error("{} {}", .file.display(), self.reason())]
    NotRegular {
        /// The file, relative to the sessions directory.
        file: PathBuf,
        /// What it is instead (`a FIFO`, `a directory`, ...).
        kind: &'static str,
    },
    /// A path that does not stay below the sessions directory (`..`, an absolute path).
    #[error("{} {}", .file.display(), self.reason())]
    Outside {
        /// The path as given.
        file: PathBuf,
    },
    /// The file or a directory on the way could not be opened or read.
    #[error("{} {}", .file.display(), self.reason())]
    Io {
        /// The file, relative to the sessions directory.
        file: PathBuf,
        /// The cause (it names no path).
        #[source]
        source: io::Error,
    },
}

impl ReadError {
    /// The file concerned, relative to the sessions directory.
    pub fn file(&self) -> &Path {
        match self {
            ReadError::SymbolicLink { file }
            | ReadError::NotRegular { file, .. }
            | ReadError::Outside { file }
            | ReadError::Io { file, .. } => file,
        }
    }

    /// What is wrong with the file, without its name: `is a FIFO, not a regular file`.
    pub fn reason(&self) -> String {
        match self {
            ReadError::SymbolicLink { .. } => {
                "is a symbolic link (symbolic links in a sessions directory are not followed)".to_owned()
            }
            ReadError::NotRegular { kind, .. } => format!("is {kind}, not a regular file"),
            ReadError::Outside { .. } => "is not a path below the sessions directory".to_owned(),
            ReadError::Io { source, .. } => format!("could not be read: {source}"),
        }
    }

    /// True when the file exists but the rule refuses it (a link, not a regular file), as
    /// opposed to a failure to read it.
    pub fn is_refusal(&self) -> bool {
        !matches!(self, ReadError::Io { .. })
    }

    /// True when the file, or a directory on the way, does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What a directory entry is, as the directory says (without following links).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link.
    SymbolicLink,
    /// A FIFO, socket or device.
    Other,
}

/// An entry of a directory below the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its name.
    pub name: OsString,
    /// What it is.
    pub kind: EntryKind,
}

/// A configured sessions directory: the only way its files are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionsRoot {
    path: PathBuf,
}

impl SessionsRoot {
    /// The sessions directory at `path`.
    pub fn new(path: impl Into<PathBuf>) -> SessionsRoot {
        SessionsRoot { path: path.into() }
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `file` (relative to the root) for reading: a regular file reached without
    /// following any symbolic link, opened without blocking.
    pub fn open(&self, file: &Path) -> Result<File, ReadError> {
        let (parent, name) = split(file)?;
        let dir = self.open_dir(parent)?;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir, name, flags, Mode::empty()).map_err(|e| refusal(file, e))?;
        let kind = rustix::fs::fstat(&fd)
            .map(|st| FileType::from_raw_mode(st.st_mode))
            .map_err(|e| io_error(file, e))?;
        if kind != FileType::RegularFile {
            return Err(ReadError::NotRegular {
                file: file.to_owned(),
                kind: describe(kind),
            });
        }
        // Regular files ignore O_NONBLOCK; cleared all the same, so that no file system
        // answers a read with "would block".
        rustix::fs::fcntl_getfl(&fd)
            .and_then(|flags| rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK))
            .map_err(|e| io_error(file, e))?;
        Ok(File::from(fd))
    }

    /// The whole of `file` (see [`SessionsRoot::open`]).
    pub fn read(&self, file: &Path) -> Result<Vec<u8>, ReadError> {
        let mut f = self.open(file)?;
        let size = f.metadata().map_or(0, |m| m.len());
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        f.read_to_end(&mut bytes).map_err(|e| ReadError::Io {
            file: file.to_owned(),
            source: e,
        })?;
        Ok(bytes)
    }

    /// The whole of `file`, mapped into memory (see [`super::mapped`]: for files nothing
    /// rewrites).
    pub fn map(&self, file: &Path) -> Result<Bytes, ReadError> {
        let f = self.open(file)?;
        super::mapped::map_file(&f).map_err(|e| ReadError::Io {
            file: file.to_owned(),
            source: e,
        })
    }

    /// At most the first `limit` bytes of `file` (see [`SessionsRoot::open`]).
    pub fn read_head(&self, file: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
        let mut head = Vec::new();
        self.open(file)?
            .take(limit)
            .read_to_end(&mut head)
            .map_err(|e| ReadError::Io {
                file: file.to_owned(),
                source: e,
            })?;
        Ok(head)
    }

    /// The entries of the directory `dir` (relative to the root; empty: the root itself),
    /// sorted by name. The directory is reached without following links.
    pub fn list(&self, dir: &Path) -> Result<Vec<Entry>, ReadError> {
        let fd = self.open_dir(dir)?;
        let listing = rustix::fs::Dir::read_from(&fd).map_err(|e| io_error(dir, e))?;
        let mut entries = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|e| io_error(dir, e))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Unknown => rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                    .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode)),
                known => known,
            };
            entries.push(Entry {
                name: name.to_owned(),
                kind: match kind {
                    FileType::RegularFile => EntryKind::File,
                    FileType::Directory => EntryKind::Directory,
                    FileType::Symlink => EntryKind::SymbolicLink,
                    _ => EntryKind::Other,
                },
            });
        }
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(entries)
    }

    /// The directory `dir` below the root, opened one component at a time, none followed
    /// if it is a link.
    fn open_dir(&self, dir: &Path) -> Result<OwnedFd, ReadError> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let mut fd = rustix::fs::open(self.path.as_path(), flags, Mode::empty())
            .map_err(|e| io_error(Path::new(""), e))?;
        let mut reached = PathBuf::new();
        for component in dir.components() {
            let name = match component {
                Component::Normal(name) => name,
                Component::CurDir => continue,
                _ => return Err(ReadError::Outside { file: dir.to_owned() }),
            };
            reached.push(name);
            fd = match rustix::fs::openat(&fd, name, flags | OFlags::NOFOLLOW, Mode::empty()) {
                Ok(next) => next,
                // With O_DIRECTORY, Linux says ENOTDIR rather than ELOOP for a link.
                Err(rustix::io::Errno::NOTDIR) if is_link(&fd, name) => {
                    return Err(ReadError::SymbolicLink { file: reached });
                }
                Err(e) => return Err(refusal(&reached, e)),
            };
        }
        Ok(fd)
    }
}

/// `file` as its directory and its name, both below the root.
fn split(file: &Path) -> Result<(&Path, &OsStr), ReadError> {
    let outside = || ReadError::Outside {
        file: file.to_owned(),
    };
    let name = match file.components().next_back() {
        Some(Component::Normal(name)) => name,
        _ => return Err(outside()),
    };
    Ok((file.parent().ok_or_else(outside)?, name))
}

/// True when `name` in the directory `dir` is a symbolic link.
fn is_link(dir: &OwnedFd, name: &OsStr) -> bool {
    rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
}

/// The error of opening `file` with `O_NOFOLLOW`: `ELOOP` says it is a symbolic link.
fn refusal(file: &Path, errno: rustix::io::Errno) -> ReadError {
    if errno == rustix::io::Errno::LOOP {
        ReadError::SymbolicLink {
            file: file.to_owned(),
        }
    } else {
        io_error(file, errno)
    }
}

fn io_error(file: &Path, errno: rustix::io::Errno) -> ReadError {
    ReadError::Io {
        file: file.to_owned(),
        source: errno.into(),
    }
}

fn describe(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "a regular file",
        FileType::Directory => "a directory",
        FileType::Symlink => "a symbolic link",
        FileType::Fifo => "a FIFO",
        FileType::Socket => "a socket",
        FileType::CharacterDevice => "a character device",
        FileType::BlockDevice => "a block device",
        FileType::Unknown => "of an unknown kind",
    }
}

/// Reads a file a client names (`path`, absolute or relative), only if it lies below one
/// of `roots` and is read by their rule ([`SessionsRoot::open`]: no symbolic link on the
/// way, no `..`, a regular file), and holds at most `limit` bytes. An absolute path is
/// taken below the root it starts with (as configured or resolved); a relative one below
/// each root in turn, the first that has it. A path below no root is
/// [`ReadError::Outside`]; one below a root but absent, a not-found [`ReadError::Io`].
pub fn read_client_path(roots: &[SessionsRoot], path: &Path, limit: u64) -> Result<ClientFile, ReadError> {
    let outside = || ReadError::Outside {
        file: path.to_owned(),
    };
    if path.is_absolute() {
        let (root, relative) = roots
            .iter()
            .find_map(|root| {
                let resolved = std::fs::canonicalize(root.path()).ok();
                [Some(root.path().to_owned()), resolved]
                    .into_iter()
                    .flatten()
                    .find_map(|base| path.strip_prefix(&base).ok().map(Path::to_owned))
                    .map(|relative| (root, relative))
            })
            .ok_or_else(outside)?;
        return read_limited(root, &relative, limit);
    }
    let mut missing = None;
    for root in roots {
        match read_limited(root, path, limit) {
            Err(e) if e.is_not_found() => missing = Some(e),
            read => return read,
        }
    }
    Err(missing.unwrap_or_else(outside))
}

/// A file read for a client, or how large it is when that is past the limit.
#[derive(Debug)]
pub enum ClientFile {
    /// Its bytes.
    Read(Vec<u8>),
    /// It holds this many bytes, more than the limit: not read.
    TooLarge(u64),
}

/// `file` of `root` whole, unless it holds more than `limit` bytes.
fn read_limited(root: &SessionsRoot, file: &Path, limit: u64) -> Result<ClientFile, ReadError> {
    let f = root.open(file)?;
    let size = f.metadata().map_or(0, |m| m.len());
    if size > limit {
        return Ok(ClientFile::TooLarge(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| ReadError::Io {
            file: file.to_owned(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Ok(ClientFile::TooLarge(bytes.len() as u64));
    }
    Ok(ClientFile::Read(bytes))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn root_with_files() -> (tempfile::TempDir, SessionsRoot) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("p/s/subagents")).unwrap();
        std::fs::write(dir.path().join("p/s.jsonl"), "main\n").unwrap();
        std::fs::write(dir.path().join("p/s/subagents/agent-a.jsonl"), "agent\n").unwrap();
        let root = SessionsRoot::new(dir.path());
        (dir, root)
    }

    #[test]
    fn reads_regular_files_below_the_root() {
        let (_dir, root) = root_with_files();
        assert_eq!(root.read(Path::new("p/s.jsonl")).unwrap(), b"main\n");
        assert_eq!(
            root.read(Path::new("./p/s/subagents/agent-a.jsonl")).unwrap(),
            b"agent\n"
        );
        assert_eq!(root.read_head(Path::new("p/s.jsonl"), 2).unwrap(), b"ma");
        let listed = root.list(Path::new("p")).unwrap();
        assert_eq!(
            listed,
            [
                Entry {
                    name: "s".into(),
                    kind: EntryKind::Directory
                },
                Entry {
                    name: "s.jsonl".into(),
                    kind: EntryKind::File
                }
            ]
        );
        assert!(root.read(Path::new("p/none.jsonl")).unwrap_err().is_not_found());
    }

    #[test]
    fn links_are_refused_wherever_they_are() {
        let (dir, root) = root_with_files();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "secret").unwrap();
        let d = dir.path();
        symlink(outside.path().join("secret"), d.join("p/out.jsonl")).unwrap();
        symlink("s.jsonl", d.join("p/in.jsonl")).unwrap();
        symlink(outside.path(), d.join("p/linked-dir")).unwrap();
        symlink("s", d.join("p/inner-dir")).unwrap();
        for (path, link) in [
            ("p/out.jsonl", "p/out.jsonl"),
            ("p/in.jsonl", "p/in.jsonl"),
            ("p/linked-dir/secret", "p/linked-dir"),
            ("p/inner-dir/subagents/agent-a.jsonl", "p/inner-dir"),
        ] {
            let refused = root.read(Path::new(path)).unwrap_err();
            assert!(
                matches!(&refused, ReadError::SymbolicLink { file } if file == Path::new(link)),
                "{path}: {refused:?}"
            );
            assert!(refused.is_refusal());
        }
        assert!(matches!(
            root.list(Path::new("p/linked-dir")),
            Err(ReadError::SymbolicLink { .. })
        ));
        let kinds: Vec<EntryKind> = root
            .list(Path::new("p"))
            .unwrap()
            .iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(kinds.iter().filter(|k| **k == EntryKind::SymbolicLink).count(), 4);
        for escape in ["../x", "/etc/passwd", "p/../../x", ""] {
            assert!(
                matches!(root.read(Path::new(escape)), Err(ReadError::Outside { .. })),
                "{escape}"
            );
        }
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let (dir, root) = root_with_files();
        let fifo = dir.path().join("p/fifo.jsonl");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
        let refused = root.read(Path::new("p/fifo.jsonl")).unwrap_err();
        assert!(
            matches!(refused, ReadError::NotRegular { kind: "a FIFO", .. }),
            "{refused:?}"
        );
        assert_eq!(refused.to_string(), "p/fifo.jsonl is a FIFO, not a regular file");
        assert!(matches!(
            root.read(Path::new("p/s")),
            Err(ReadError::NotRegular {
                kind: "a directory",
                ..
            })
        ));
        assert_eq!(
            root.list(Path::new("p")).unwrap()[0],
            Entry {
                name: "fifo.jsonl".into(),
                kind: EntryKind::Other
            }
        );
    }

    fn client_read(roots: &[SessionsRoot], path: &Path) -> Result<Vec<u8>, ReadError> {
        match read_client_path(roots, path, 1 << 20)? {
            ClientFile::Read(bytes) => Ok(bytes),
            ClientFile::TooLarge(n) => panic!("{n} bytes"),
        }
    }

    #[test]
    fn a_client_path_is_read_only_below_a_root() {
        let (dir, root) = root_with_files();
        let roots = [root];
        let absolute = dir.path().join("p/s.jsonl");
        assert_eq!(client_read(&roots, &absolute).unwrap(), b"main\n");
        assert_eq!(client_read(&roots, Path::new("p/s.jsonl")).unwrap(), b"main\n");
        let outside = tempfile::NamedTempFile::new().unwrap();
        assert!(matches!(
            client_read(&roots, outside.path()),
            Err(ReadError::Outside { .. })
        ));
        assert!(matches!(
            client_read(&roots, Path::new("/etc/passwd")),
            Err(ReadError::Outside { .. })
        ));
        let climbing = dir.path().join("p/../../../etc/passwd");
        assert!(matches!(
            client_read(&roots, &climbing),
            Err(ReadError::Outside { .. })
        ));
        assert!(matches!(
            client_read(&roots, Path::new("../etc/passwd")),
            Err(ReadError::Outside { .. })
        ));
        symlink("/etc/passwd", dir.path().join("p/link.jsonl")).unwrap();
        assert!(matches!(
            client_read(&roots, &dir.path().join("p/link.jsonl")),
            Err(ReadError::SymbolicLink { .. })
        ));
        assert!(client_read(&roots, Path::new("p/none.jsonl"))
            .unwrap_err()
            .is_not_found());
        assert!(matches!(
            client_read(&[], Path::new("p/s.jsonl")),
            Err(ReadError::Outside { .. })
        ));
        assert!(matches!(
            read_client_path(&roots, Path::new("p/s.jsonl"), 2).unwrap(),
            ClientFile::TooLarge(5)
        ));
    }
}
