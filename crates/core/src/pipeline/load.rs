//! How a session is loaded ([`LoadOptions`]) and why loading fails ([`SessionError`]).

use crate::formats::autogen::cost::MESSAGE_COST;
use crate::formats::claude_code::cost::RECORD_COST;
use crate::formats::input::Format;
use crate::memory_bound::MemoryBound;

/// How to load a session.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoadOptions {
    /// Fail on the first line that holds no readable record, instead of recording it.
    pub strict: bool,
    /// The format; `None` tells it from the main file's first line.
    pub format: Option<Format>,
    /// Refuse the session when its records' fixed costs would take it past this bound
    /// ([`SessionError::TooManyRecords`]); `None` loads whatever it costs.
    pub memory_bound: Option<MemoryBound>,
    /// Leave the workflow DAG out, for a caller that shows only views that do not read it
    /// ([`View::reads_workflow`](crate::views::View::reads_workflow)): building it is
    /// the build's longest serial stage. The session's `workflow` is then empty and its
    /// `workflow_built` false.
    pub without_workflow: bool,
}

/// Why a session could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// Every file is a sub-agent log or meta file.
    #[error("no main session file found (expected a file not named agent-*)")]
    NoMainFile,
    /// Strict loading met a bad line.
    #[error("invalid JSON in {file} on line {line}: {reason}")]
    InvalidLine {
        /// The file's name.
        file: String,
        /// 1-based physical line number.
        line: u32,
        /// What was wrong.
        reason: String,
    },
    /// An AutoGen log cannot be read (CommuGraph's messages).
    #[error(transparent)]
    Autogen(#[from] crate::formats::autogen::AutogenError),
    /// The records are too many for the input's size: loading them would pass the memory
    /// bound. Reading stopped when the bound was reached. (An AutoGen log's
    /// records are its messages.)
    #[error(
        "too many records for the session's size: the {records} records read from its \
         {input} of input already cost more than the {room} its memory bound leaves them \
         (a record costs about {record_cost} bytes beyond its text, an AutoGen message \
         {message_cost})",
        input = mebibytes(*input_bytes),
        room = mebibytes(*room),
        record_cost = RECORD_COST,
        message_cost = MESSAGE_COST
    )]
    TooManyRecords {
        /// Records (or AutoGen messages) kept when reading stopped.
        records: usize,
        /// Bytes of input (all files).
        input_bytes: usize,
        /// The bytes the bound leaves the records' fixed costs.
        room: usize,
    },
    /// A file is compressed or an archive, not JSON lines.
    #[error("{file} is {kind}, not JSON lines: decompress it first")]
    Compressed {
        /// The file's name.
        file: String,
        /// What it is (`gzip-compressed`, `a zip archive`, ...).
        kind: &'static str,
    },
}

/// `bytes` in MiB, for messages.
fn mebibytes(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// What a file's first bytes say it is when it is a compressed file or an archive.
pub fn compressed_kind(bytes: &[u8]) -> Option<&'static str> {
    const KINDS: [(&[u8], &str); 5] = [
        (&[0x1f, 0x8b], "gzip-compressed"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd-compressed"),
        (b"BZh", "bzip2-compressed"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz-compressed"),
        (b"PK\x03\x04", "a zip archive"),
    ];
    KINDS
        .iter()
        .find(|(magic, _)| bytes.starts_with(magic))
        .map(|&(_, kind)| kind)
}
