//! Change notices for the files of the sessions on disk held in memory: a request learns
//! whether a session is still the version parsed from one read of a notice queue, where it
//! took a `stat` of each of the session's files (five for the sample) or a wait for another
//! request's.
//!
//! Linux's inotify, on a watch of each directory holding a session's files. The kernel
//! queues a notice while the writer's `write` or `rename` runs, before it returns, and a
//! request drains the queue after it arrives: a change made before a request arrived is
//! seen by it, as with the `stat`s. A notice only says that a file may have changed; the
//! store confirms with the files' sizes and modification times.
//!
//! Only on filesystems where every change raises a notice on this machine ([`LOCAL_FS`]):
//! on NFS, SMB, FUSE, 9p or virtiofs a change made elsewhere raises none. There, on other
//! systems, and when a watch cannot be added (the per-user limit, `max_user_watches`),
//! [`Watcher::watch`] answers `None` and the store checks the files' stamps on each
//! request.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::lock;

/// Watches directories for changes to the files of sessions in memory.
#[derive(Debug)]
pub struct Watcher {
    #[cfg(target_os = "linux")]
    queue: std::os::fd::OwnedFd,
    state: Mutex<State>,
    /// Drains asked for so far: each caller of `drain` takes the next number.
    asked: AtomicU64,
    /// Every drain asked for up to this number is answered: a read of the queue that
    /// began after it was asked for found the queue empty, and counted what it read.
    answered: AtomicU64,
}

/// The watched directories, by watch descriptor.
#[derive(Debug, Default)]
struct State {
    dirs: HashMap<i32, WatchedDir>,
    next_id: u64,
}

/// One watched directory and the sessions with files in it.
#[derive(Debug)]
struct WatchedDir {
    path: PathBuf,
    followers: Vec<Follower>,
}

/// One session's files in a watched directory.
#[derive(Debug)]
struct Follower {
    id: u64,
    names: Vec<OsString>,
    notices: Arc<Notices>,
}

/// What the queue said about one session's files.
#[derive(Debug, Default)]
struct Notices {
    /// Notices about its files so far.
    count: AtomicU64,
    /// Set when a directory of its files stopped being watched (deleted, moved, unmounted):
    /// from then on its files are checked on every request.
    blind: AtomicBool,
}

impl Notices {
    fn add(&self) {
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    /// Its files are checked on every request from now on (and once more now).
    fn go_blind(&self) {
        self.blind.store(true, Ordering::Release);
        self.add();
    }
}

/// The watch on one session's files, for as long as the session is held.
#[derive(Debug)]
pub struct FileWatch {
    watcher: Arc<Watcher>,
    id: u64,
    descriptors: Vec<i32>,
    notices: Arc<Notices>,
    /// The notice count up to which a check found the files unchanged.
    confirmed: AtomicU64,
}

impl FileWatch {
    /// Reads the queue's notices, then says whether one may concern these files since the
    /// last [`FileWatch::confirm`]: `None` when none can, else the count to confirm once a
    /// check started after this call finds the files unchanged.
    pub fn unconfirmed_notices(&self) -> Option<u64> {
        self.watcher.drain();
        let count = self.notices.count.load(Ordering::Acquire);
        let blind = self.notices.blind.load(Ordering::Acquire);
        (blind || count != self.confirmed.load(Ordering::Acquire)).then_some(count)
    }

    /// Records that a check, started after [`FileWatch::unconfirmed_notices`] returned
    /// `count`, found the files unchanged: until the next notice there is nothing to check.
    pub fn confirm(&self, count: u64) {
        self.confirmed.fetch_max(count, Ordering::AcqRel);
    }

    /// Counts a change noticed otherwise (the files differed from their stamps right after
    /// the watch was added).
    pub fn note_change(&self) {
        self.notices.add();
    }
}

impl Drop for FileWatch {
    fn drop(&mut self) {
        self.watcher.forget(self.id, &self.descriptors);
    }
}

/// Filesystems (`statfs`'s `f_type`) on which every change to a file raises a notice
/// here: ext2/3/4, XFS, Btrfs, tmpfs, overlayfs (containers), ZFS, F2FS, ramfs, bcachefs.
pub const LOCAL_FS: [u32; 9] = [
    0xEF53,
    0x5846_5342,
    0x9123_683E,
    0x0102_1994,
    0x794C_7630,
    0x2FC1_2FC1,
    0xF2F5_2010,
    0x8584_58F6,
    0xCA45_1A4E,
];

/// The files of one session grouped by directory: (directory, names in it).
fn by_directory(files: &[&Path]) -> Vec<(PathBuf, Vec<OsString>)> {
    let mut dirs: Vec<(PathBuf, Vec<OsString>)> = Vec::new();
    for file in files {
        let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
            continue;
        };
        match dirs.iter_mut().find(|(d, _)| d == dir) {
            Some((_, names)) => names.push(name.to_owned()),
            None => dirs.push((dir.to_owned(), vec![name.to_owned()])),
        }
    }
    dirs
}

#[cfg(target_os = "linux")]
mod linux {
    use std::mem::MaybeUninit;
    use std::os::unix::ffi::OsStrExt;

    use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
    use rustix::io::Errno;

    use super::*;

    /// What a watched directory reports: its files written, changed, created, removed or
    /// renamed, and itself removed or renamed.
    fn watched_events() -> WatchFlags {
        WatchFlags::MODIFY
            | WatchFlags::ATTRIB
            | WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR
            | WatchFlags::EXCL_UNLINK
    }

    impl Watcher {
        /// A watcher with a queue of its own; `None` when the system gives none.
        pub fn new() -> Option<Arc<Watcher>> {
            match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
                Ok(queue) => Some(Arc::new(Watcher {
                    queue,
                    state: Mutex::new(State::default()),
                    asked: AtomicU64::new(0),
                    answered: AtomicU64::new(0),
                })),
                Err(e) => {
                    tracing::warn!(error = %e, "no file change notices: sessions on disk are checked by stat");
                    None
                }
            }
        }

        /// Watches `files` (their directories); `None` when one of them cannot be watched
        /// reliably or at all. Stamp the files after this returns, or check them again
        /// then: a change before the watch raised no notice.
        pub fn watch(self: &Arc<Self>, files: &[&Path]) -> Option<FileWatch> {
            let dirs = by_directory(files);
            if !dirs.iter().all(|(dir, _)| is_local(dir)) {
                return None;
            }
            let notices = Arc::new(Notices::default());
            let mut state = super::lock(&self.state);
            let id = state.next_id;
            state.next_id += 1;
            let mut descriptors = Vec::with_capacity(dirs.len());
            for (dir, names) in dirs {
                let descriptor = match inotify::add_watch(&self.queue, &dir, watched_events()) {
                    Ok(descriptor) => descriptor,
                    Err(e) => {
                        tracing::debug!(error = %e, dir = %dir.display(), "cannot watch; the session's files are checked by stat");
                        state.forget(&self.queue, id, &descriptors);
                        return None;
                    }
                };
                let watched = state.dirs.entry(descriptor).or_insert_with(|| WatchedDir {
                    path: dir,
                    followers: Vec::new(),
                });
                watched.followers.push(Follower {
                    id,
                    names,
                    notices: notices.clone(),
                });
                descriptors.push(descriptor);
            }
            drop(state);
            Some(FileWatch {
                watcher: self.clone(),
                id,
                descriptors,
                notices,
                confirmed: AtomicU64::new(0),
            })
        }

        /// Counts every notice queued before this call for the sessions it concerns:
        /// reads the queue, or waits for a read that began after this call to end.
        ///
        /// The reads take turns (a read that found the queue empty must know that no
        /// other read is still counting what it took), but callers do not sleep on a lock
        /// for it: requests on two threads did, a third of the drain's cost. One that
        /// finds another reading spins, and returns as soon as a read that began after it
        /// asked has ended, so that the reads of requests arriving together are shared.
        pub(super) fn drain(&self) {
            let ticket = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
            let mut spins = 0u32;
            loop {
                if self.answered.load(Ordering::Acquire) >= ticket {
                    return;
                }
                let state = match self.state.try_lock() {
                    Ok(state) => Some(state),
                    Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                    Err(std::sync::TryLockError::WouldBlock) => None,
                };
                if let Some(mut state) = state {
                    // Every drain asked for until now is answered by this read.
                    let covered = self.asked.load(Ordering::SeqCst);
                    self.read_queue(&mut state);
                    self.answered.fetch_max(covered, Ordering::Release);
                    return;
                }
                spins += 1;
                if spins.is_multiple_of(64) {
                    // The reader may have been preempted: let it run.
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }

        /// Reads the queue until it is empty, counting each notice.
        fn read_queue(&self, state: &mut State) {
            // Room for at least one notice with the longest name (16 + 256 bytes).
            let mut buffer = [MaybeUninit::<u8>::uninit(); 4096];
            let mut reader = inotify::Reader::new(&self.queue, &mut buffer);
            loop {
                match reader.next() {
                    Ok(event) => state.count(
                        event.wd(),
                        event.events(),
                        event.file_name().map(|n| n.to_bytes()),
                    ),
                    Err(Errno::AGAIN) => break,
                    Err(Errno::INTR) => continue,
                    Err(e) => {
                        // Unexpected: trust no watch from now on.
                        tracing::warn!(error = %e, "reading file change notices failed; checking files by stat");
                        state.blind_all();
                        break;
                    }
                }
            }
        }

        pub(super) fn forget(&self, id: u64, descriptors: &[i32]) {
            super::lock(&self.state).forget(&self.queue, id, descriptors);
        }
    }

    impl State {
        /// Counts one notice.
        fn count(&mut self, descriptor: i32, events: ReadFlags, name: Option<&[u8]>) {
            if events.contains(ReadFlags::QUEUE_OVERFLOW) {
                // Notices were lost: any session may have changed.
                for follower in self.dirs.values().flat_map(|d| &d.followers) {
                    follower.notices.add();
                }
                return;
            }
            let Some(dir) = self.dirs.get(&descriptor) else {
                return;
            };
            if events.intersects(
                ReadFlags::IGNORED | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::UNMOUNT,
            ) {
                tracing::debug!(dir = %dir.path.display(), "a watched directory went away");
                for follower in &dir.followers {
                    follower.notices.go_blind();
                }
                if events.contains(ReadFlags::IGNORED) {
                    self.dirs.remove(&descriptor);
                }
                return;
            }
            let Some(name) = name else { return };
            for follower in &dir.followers {
                if follower.names.iter().any(|n| n.as_bytes() == name) {
                    follower.notices.add();
                }
            }
        }

        /// Makes every session's files checked by stat from now on.
        fn blind_all(&mut self) {
            for follower in self.dirs.values().flat_map(|d| &d.followers) {
                follower.notices.go_blind();
            }
        }

        /// Drops watch `id`'s files from `descriptors`, and the watch of a directory no
        /// session follows any more.
        fn forget(&mut self, queue: &std::os::fd::OwnedFd, id: u64, descriptors: &[i32]) {
            for descriptor in descriptors {
                let Some(dir) = self.dirs.get_mut(descriptor) else {
                    continue;
                };
                dir.followers.retain(|f| f.id != id);
                if dir.followers.is_empty() {
                    self.dirs.remove(descriptor);
                    // Fails only if the kernel dropped the watch already (directory gone).
                    let _ = inotify::remove_watch(queue, *descriptor);
                }
            }
        }
    }

    /// Whether `dir` is on a filesystem of [`LOCAL_FS`].
    fn is_local(dir: &Path) -> bool {
        // `f_type` is a C `long` or `int` holding a 32-bit magic number.
        rustix::fs::statfs(dir).is_ok_and(|s| LOCAL_FS.contains(&(s.f_type as u32)))
    }
}

#[cfg(not(target_os = "linux"))]
impl Watcher {
    /// No change notices here: sessions on disk are checked by stat.
    pub fn new() -> Option<Arc<Watcher>> {
        None
    }

    /// Never called: there is no watcher.
    pub fn watch(self: &Arc<Self>, _files: &[&Path]) -> Option<FileWatch> {
        None
    }

    fn drain(&self) {}

    fn forget(&self, _id: u64, _descriptors: &[i32]) {}
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A directory on a filesystem the watcher trusts, or `None` (the test is skipped).
    fn local_dir() -> Option<tempfile::TempDir> {
        let dir = tempfile::tempdir().ok()?;
        let watched = Watcher::new()?.watch(&[&dir.path().join("probe")]).is_some();
        if !watched {
            eprintln!(
                "SKIPPED: {} is not on a filesystem of LOCAL_FS",
                dir.path().display()
            );
        }
        watched.then_some(dir)
    }

    #[test]
    fn a_write_to_a_watched_file_is_noticed_until_confirmed() {
        let Some(dir) = local_dir() else { return };
        let (main, agent, other) = (
            dir.path().join("s.jsonl"),
            dir.path().join("agent-a.jsonl"),
            dir.path().join("t.jsonl"),
        );
        for file in [&main, &agent, &other] {
            std::fs::write(file, "{}\n").unwrap();
        }
        let watcher = Watcher::new().unwrap();
        let watch = watcher.watch(&[&main, &agent]).unwrap();
        assert_eq!(watch.unconfirmed_notices(), None, "nothing changed yet");

        std::fs::write(&other, "{}\n{}\n").unwrap();
        assert_eq!(watch.unconfirmed_notices(), None, "another session's file");

        let mut file = std::fs::OpenOptions::new().append(true).open(&agent).unwrap();
        std::io::Write::write_all(&mut file, b"{}\n").unwrap();
        let seen = watch.unconfirmed_notices().expect("an appended line is noticed");
        assert_eq!(watch.unconfirmed_notices(), Some(seen), "noticed until confirmed");
        watch.confirm(seen);
        assert_eq!(watch.unconfirmed_notices(), None);

        // Replaced by a rename, as editors and atomic writers do.
        std::fs::write(&other, "{}\n").unwrap();
        std::fs::rename(&other, &main).unwrap();
        assert!(watch.unconfirmed_notices().is_some_and(|n| n > seen));
    }

    /// Drains on several threads at once (sharing reads, spinning for one another) each
    /// count a write that ended before they began.
    #[test]
    fn racing_drains_all_see_a_write_made_before_them() {
        let Some(dir) = local_dir() else { return };
        let file = dir.path().join("s.jsonl");
        std::fs::write(&file, "").unwrap();
        let watcher = Watcher::new().unwrap();
        let watch = watcher.watch(&[&file]).unwrap();
        let (threads, rounds) = (4, 200);
        let start = std::sync::Barrier::new(threads + 1);
        let done = std::sync::Barrier::new(threads + 1);
        let before = AtomicU64::new(0);
        // Asserted after the rounds: a thread that panicked would leave the others
        // waiting at the barrier for ever.
        let missed = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    for round in 0..rounds {
                        start.wait();
                        let seen = watch.unconfirmed_notices().unwrap_or(0);
                        if seen <= before.load(Ordering::SeqCst) {
                            lock(&missed).push(round);
                        }
                        done.wait();
                    }
                });
            }
            for _ in 0..rounds {
                before.store(watch.notices.count.load(Ordering::SeqCst), Ordering::SeqCst);
                let mut out = std::fs::OpenOptions::new().append(true).open(&file).unwrap();
                std::io::Write::write_all(&mut out, b"{}\n").unwrap();
                drop(out);
                start.wait();
                done.wait();
            }
        });
        assert_eq!(
            lock(&missed).as_slice(),
            &[] as &[usize],
            "rounds where a drain missed the write"
        );
    }

    /// The kernel drops notices past `max_queued_events` and says so once: every session
    /// then counts a notice, its own included or not.
    #[test]
    fn a_queue_overflow_counts_as_a_notice_for_every_session() {
        let Some(dir) = local_dir() else { return };
        let Some(limit) = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|&n| n <= 1 << 20)
        else {
            eprintln!("SKIPPED: no max_queued_events small enough to overflow");
            return;
        };
        let (mine, others) = (
            dir.path().join("s.jsonl"),
            [dir.path().join("t.jsonl"), dir.path().join("u.jsonl")],
        );
        for file in [&mine, &others[0], &others[1]] {
            std::fs::write(file, "").unwrap();
        }
        let watcher = Watcher::new().unwrap();
        let watch = watcher.watch(&[&mine]).unwrap();
        // Two files written in turn: no two notices in a row are alike, none merge.
        let mut handles = others.map(|f| std::fs::OpenOptions::new().append(true).open(f).unwrap());
        for i in 0..limit + 16 {
            std::io::Write::write_all(&mut handles[i % 2], b" ").unwrap();
        }
        std::fs::write(&mine, "{}\n").unwrap();
        assert!(
            watch.unconfirmed_notices().is_some(),
            "the overflow stands for the lost notice"
        );
    }

    #[test]
    fn a_vanished_directory_leaves_the_watch_blind() {
        let Some(dir) = local_dir() else { return };
        let sub = dir.path().join("subagents");
        std::fs::create_dir(&sub).unwrap();
        let agent = sub.join("agent-a.jsonl");
        std::fs::write(&agent, "{}\n").unwrap();
        let watcher = Watcher::new().unwrap();
        let watch = watcher.watch(&[&agent]).unwrap();
        std::fs::remove_dir_all(&sub).unwrap();
        let seen = watch.unconfirmed_notices().expect("noticed");
        watch.confirm(seen);
        assert!(
            watch.unconfirmed_notices().is_some(),
            "checked on every request from now on"
        );
    }

    #[test]
    fn a_directory_is_watched_once_while_a_session_follows_it() {
        let Some(dir) = local_dir() else { return };
        let (a, b) = (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"));
        let watcher = Watcher::new().unwrap();
        let first = watcher.watch(&[&a]).unwrap();
        let second = watcher.watch(&[&b]).unwrap();
        assert_eq!(
            first.descriptors, second.descriptors,
            "one watch for the directory"
        );
        drop(first);
        assert_eq!(lock(&watcher.state).dirs.len(), 1);
        std::fs::write(&b, "{}\n").unwrap();
        assert!(
            second.unconfirmed_notices().is_some(),
            "still watched for the other session"
        );
        drop(second);
        assert!(
            lock(&watcher.state).dirs.is_empty(),
            "no session follows it: unwatched"
        );
    }
}
