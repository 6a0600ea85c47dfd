//! Long texts written once and shared by every body that shows them.
//!
//! A prompt or an answer is shown by the annotations, the workflow, the chat log and the
//! context alike. Rendered for the cache, each body used to hold its own copy of the text:
//! a log made of prose took about six times its size with every view kept (issue 15, D1).
//! Under [`sharing`], a long [`Text`] is escaped once into a JSON string literal kept in a
//! [`SharedLiterals`], and a [`ChunkWriter`](super::views::ChunkWriter) keeps a reference
//! to that literal's bytes in place of a copy. Bodies written any other way (streamed to a
//! file, rendered outside [`sharing`]) are byte for byte the same.
//!
//! The literals are found by their text's hash and length, and a hit is checked against
//! the text before it is used: a literal is only ever shared for the text it was made of.

use std::borrow::Cow;
use std::cell::RefCell;
use std::hash::BuildHasher;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use foldhash::HashMap;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

/// Texts shorter than this are written in place: below it, what a shared literal costs
/// (its entry, its owner, a chunk in each body) outweighs what sharing saves.
pub const MIN_SHARED_TEXT: usize = 256;

/// Bytes a literal costs besides its text: its map entry, its owner and the `Bytes` handle.
const LITERAL_OVERHEAD: usize = 160;

/// A JSON string literal, and its bytes as a chunk bodies can hold.
#[derive(Debug)]
struct Literal {
    raw: Arc<Box<RawValue>>,
    bytes: Bytes,
}

/// Owns a literal's text for the `Bytes` that point into it.
struct LiteralOwner(Arc<Box<RawValue>>);

impl AsRef<[u8]> for LiteralOwner {
    fn as_ref(&self) -> &[u8] {
        self.0.get().as_bytes()
    }
}

/// The literals of one session's long texts. Shared by the threads that render its bodies.
#[derive(Debug, Default)]
pub struct SharedLiterals {
    literals: Mutex<HashMap<(u64, usize), Arc<Literal>>>,
    hasher: foldhash::quality::RandomState,
    bytes: AtomicUsize,
}

impl SharedLiterals {
    /// No literals yet.
    pub fn new() -> SharedLiterals {
        SharedLiterals::default()
    }

    /// The memory the literals hold.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Number of literals.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// True when no text was shared yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, usize), Arc<Literal>>> {
        // A panic while the map was held cannot leave it inconsistent: entries are only
        // ever inserted whole.
        self.literals.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The literal of `text`, made on first use; `None` when the literal found under its
    /// hash is another text's.
    fn literal(&self, text: &str) -> Option<Arc<Literal>> {
        let key = (self.hasher.hash_one(text), text.len());
        if let Some(found) = self.entries().get(&key).cloned() {
            return is_literal_of(found.raw.get(), text).then_some(found);
        }
        // Escaped outside the lock: another thread may make the same literal meanwhile,
        // and the first one kept wins.
        let raw = Arc::new(serde_json::value::to_raw_value(text).ok()?);
        let made = Arc::new(Literal {
            bytes: Bytes::from_owner(LiteralOwner(raw.clone())),
            raw,
        });
        let mut entries = self.entries();
        let kept = entries.entry(key).or_insert_with(|| {
            self.bytes
                .fetch_add(made.bytes.len() + LITERAL_OVERHEAD, Ordering::Relaxed);
            made
        });
        Some(kept.clone())
    }
}

/// True when `literal` is the JSON string literal of `text`: escaping `text` again gives
/// its bytes.
fn is_literal_of(literal: &str, text: &str) -> bool {
    let mut matcher = Matcher {
        expected: literal.as_bytes(),
    };
    serde_json::to_writer(&mut matcher, text).is_ok() && matcher.expected.is_empty()
}

/// A writer that accepts only the bytes it expects, in order.
struct Matcher<'a> {
    expected: &'a [u8],
}

impl io::Write for Matcher<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.expected.strip_prefix(buf) {
            Some(rest) => {
                self.expected = rest;
                Ok(buf.len())
            }
            None => Err(io::Error::other("not the text's literal")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

thread_local! {
    /// The literals texts are shared through on this thread, while [`sharing`] runs.
    static SHARING: RefCell<Option<Arc<SharedLiterals>>> = const { RefCell::new(None) };
    /// The text a [`Text`] is writing right now, for the writer to keep by reference.
    static WRITING: RefCell<Option<Writing>> = const { RefCell::new(None) };
}

/// A text being written as one raw write of `len` bytes at `at`, and the pieces those
/// bytes are made of.
#[derive(Debug)]
struct Writing {
    at: usize,
    len: usize,
    pieces: Vec<Piece>,
}

/// A piece of a text being written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    /// These bytes of the write, to copy.
    Own(Range<usize>),
    /// A shared literal (or the inside of one), to keep by reference.
    Shared(Bytes),
}

/// Runs `f` with long [`Text`]s shared through `literals` on this thread (then restores
/// what was there before).
pub fn sharing<T>(literals: Option<Arc<SharedLiterals>>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<SharedLiterals>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            SHARING.with(|s| *s.borrow_mut() = previous);
        }
    }
    let _restore = Restore(SHARING.with(|s| std::mem::replace(&mut *s.borrow_mut(), literals)));
    f()
}

/// The literals texts are shared through on this thread, if any (for work handed to other
/// threads to share them too).
pub fn current() -> Option<Arc<SharedLiterals>> {
    SHARING.with(|s| s.borrow().clone())
}

/// The pieces of `buf` when it is the text a [`Text`] is writing now: a writer that holds
/// chunks copies the `Own` pieces and keeps the `Shared` ones by reference instead of
/// copying `buf`.
pub(crate) fn pieces_of(buf: &[u8]) -> Option<Vec<Piece>> {
    WRITING.with(|w| {
        let mut writing = w.borrow_mut();
        let found = writing
            .as_ref()
            .is_some_and(|t| t.at == buf.as_ptr() as usize && t.len == buf.len());
        found.then(|| writing.take().map(|t| t.pieces)).flatten()
    })
}

/// A text a body shows: serialised as a JSON string, shared between bodies when it is
/// long and [`sharing`] is on. Parts of it that other bodies show on their own (an
/// answer inside a node's `[Response]` text) can be named: they are shared too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text<'a> {
    text: Cow<'a, str>,
    /// Ranges of `text` that are texts of their own, in order, not overlapping.
    parts: Vec<Range<usize>>,
}

impl<'a> Text<'a> {
    /// `text`, of which the ranges `parts` (in order, on char boundaries, not
    /// overlapping) are texts other bodies show on their own.
    pub fn with_parts(text: String, parts: Vec<Range<usize>>) -> Text<'a> {
        debug_assert!(parts.windows(2).all(|w| w[0].end <= w[1].start));
        debug_assert!(parts
            .iter()
            .all(|p| text.is_char_boundary(p.start) && text.is_char_boundary(p.end)));
        Text {
            text: Cow::Owned(text),
            parts,
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What to write for this text under `literals`: the raw JSON string to write and the
    /// pieces it is made of. `None` when nothing in it is shared (short texts, literals
    /// filed under another text).
    fn shared_form(&self, literals: &SharedLiterals) -> Option<(RawText, Vec<Piece>)> {
        if self.parts.iter().all(|p| p.len() < MIN_SHARED_TEXT) {
            let literal = literals.literal(&self.text)?;
            let pieces = vec![Piece::Shared(literal.bytes.clone())];
            return Some((RawText::Kept(literal), pieces));
        }
        let whole = serde_json::value::to_raw_value(self.text.as_ref()).ok()?;
        // The escaped text is its escaped pieces one after the other: JSON escapes each
        // char on its own.
        let mut pieces = PieceList::default();
        pieces.own(1);
        let mut from = 0;
        for part in &self.parts {
            pieces.own(escaped_len(&self.text[from..part.start]));
            let text = &self.text[part.clone()];
            match (text.len() >= MIN_SHARED_TEXT)
                .then(|| literals.literal(text))
                .flatten()
            {
                Some(literal) => pieces.shared(literal.bytes.slice(1..literal.bytes.len() - 1)),
                None => pieces.own(escaped_len(text)),
            }
            from = part.end;
        }
        pieces.own(escaped_len(&self.text[from..]) + 1);
        (pieces.len == whole.get().len()).then_some((RawText::Made(whole), pieces.pieces))
    }
}

/// The pieces of a text's raw write, as they are listed.
#[derive(Default)]
struct PieceList {
    pieces: Vec<Piece>,
    /// Bytes listed so far.
    len: usize,
}

impl PieceList {
    /// The next `len` bytes of the write, to copy.
    fn own(&mut self, len: usize) {
        let at = self.len;
        self.len += len;
        match self.pieces.last_mut() {
            _ if len == 0 => {}
            Some(Piece::Own(r)) if r.end == at => r.end += len,
            _ => self.pieces.push(Piece::Own(at..at + len)),
        }
    }

    /// The next bytes of the write: `literal`, to keep by reference.
    fn shared(&mut self, literal: Bytes) {
        self.len += literal.len();
        self.pieces.push(Piece::Shared(literal));
    }
}

/// The raw JSON string a shared [`Text`] writes.
enum RawText {
    /// A kept literal.
    Kept(Arc<Literal>),
    /// The text escaped for this write.
    Made(Box<RawValue>),
}

impl RawText {
    fn raw(&self) -> &RawValue {
        match self {
            RawText::Kept(literal) => &literal.raw,
            RawText::Made(raw) => raw,
        }
    }
}

/// Length of `text` escaped as inside a JSON string.
fn escaped_len(text: &str) -> usize {
    let mut counter = Counter(0);
    // Counting cannot fail; the two quotes are not inside.
    let _ = serde_json::to_writer(&mut counter, text);
    counter.0 - 2
}

/// A writer that only counts.
struct Counter(usize);

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(s: &'a str) -> Text<'a> {
        Text::from(Cow::Borrowed(s))
    }
}

impl From<String> for Text<'_> {
    fn from(s: String) -> Self {
        Text::from(Cow::Owned(s))
    }
}

impl<'a> From<Cow<'a, str>> for Text<'a> {
    fn from(text: Cow<'a, str>) -> Text<'a> {
        Text {
            text,
            parts: Vec::new(),
        }
    }
}

impl Serialize for Text<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.text.len() < MIN_SHARED_TEXT {
            return s.serialize_str(&self.text);
        }
        let shared = SHARING.with(|l| l.borrow().as_ref().and_then(|l| self.shared_form(l)));
        let Some((raw, pieces)) = shared else {
            return s.serialize_str(&self.text);
        };
        struct Done;
        impl Drop for Done {
            fn drop(&mut self) {
                WRITING.with(|w| w.borrow_mut().take());
            }
        }
        let raw = raw.raw();
        let bytes = raw.get().as_bytes();
        WRITING.with(|w| {
            *w.borrow_mut() = Some(Writing {
                at: bytes.as_ptr() as usize,
                len: bytes.len(),
                pieces,
            })
        });
        let _done = Done;
        // serde_json writes a raw value with one write of its bytes: the writer sees them
        // and can keep the shared pieces by reference.
        raw.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(prefix: &str) -> String {
        format!("{prefix} \"quoted\"\n\ttabbed \u{1} {}", "prose ".repeat(60))
    }

    #[test]
    fn a_text_serialises_the_same_with_and_without_sharing() {
        let literals = Arc::new(SharedLiterals::new());
        for text in [String::new(), "short".to_owned(), long("a"), long("é ✓ 𝄞")] {
            let plain = serde_json::to_string(&Text::from(text.as_str())).unwrap();
            let shared = sharing(Some(literals.clone()), || {
                serde_json::to_string(&Text::from(text.as_str())).unwrap()
            });
            assert_eq!(plain, serde_json::to_string(&text).unwrap());
            assert_eq!(shared, plain);
        }
        assert_eq!(literals.len(), 2, "only the long texts were shared");
    }

    #[test]
    fn a_text_is_escaped_once_however_often_it_is_shown() {
        let literals = Arc::new(SharedLiterals::new());
        let text = long("b");
        sharing(Some(literals.clone()), || {
            for _ in 0..3 {
                serde_json::to_string(&Text::from(text.clone())).unwrap();
            }
        });
        assert_eq!(literals.len(), 1);
        let literal_len = serde_json::to_string(&text).unwrap().len();
        assert_eq!(literals.bytes(), literal_len + LITERAL_OVERHEAD);
    }

    #[test]
    fn a_literal_is_only_used_for_its_own_text() {
        let literals = SharedLiterals::new();
        let text = long("c");
        let found = literals.literal(&text).expect("a literal");
        assert!(is_literal_of(found.raw.get(), &text));
        assert!(!is_literal_of(found.raw.get(), &long("d")));
        assert!(!is_literal_of(found.raw.get(), &text[..text.len() - 1]));
        // A literal filed under another text's key is refused, not used.
        let other = long("e");
        let key = (literals.hasher.hash_one(other.as_str()), other.len());
        literals.entries().insert(key, found);
        assert!(literals.literal(&other).is_none());
    }

    /// Writes `text` into chunks under `literals`, as a kept body is written.
    fn written(text: &Text<'_>, literals: &Arc<SharedLiterals>) -> crate::core::views::Body {
        let mut out = crate::core::views::ChunkWriter::new();
        sharing(Some(literals.clone()), || serde_json::to_writer(&mut out, text)).unwrap();
        out.finish()
    }

    #[test]
    fn a_body_keeps_a_shared_literal_by_reference() {
        let literals = Arc::new(SharedLiterals::new());
        let text = Text::from(long("f"));
        let body = written(&text, &literals);
        assert_eq!(body.to_bytes(), serde_json::to_vec(&text).unwrap());
        assert_eq!(body.shared_len(), body.len());
        let again = written(&text, &literals);
        assert_eq!(again.chunks()[0].as_ptr(), body.chunks()[0].as_ptr());
    }

    #[test]
    fn the_parts_of_a_text_are_shared_with_the_texts_they_are() {
        let literals = Arc::new(SharedLiterals::new());
        let (thinking, answer) = (long("g"), long("a longer answer"));
        let content = format!("[Thinking]\n{thinking}\n\n[Response]\n{answer}");
        let start = content.len() - answer.len();
        let parts = vec![11..11 + thinking.len(), start..content.len()];
        let text = Text::with_parts(content.clone(), parts);
        let body = written(&text, &literals);
        assert_eq!(body.to_bytes(), serde_json::to_vec(&content).unwrap());
        assert_eq!(literals.len(), 2, "one literal per part, none for the whole");
        let inside = |t: &str| serde_json::to_string(t).unwrap().len() - 2;
        assert_eq!(body.shared_len(), inside(&thinking) + inside(&answer));
        // The answer on its own is the literal the content shares the inside of.
        let alone = written(&Text::from(answer.as_str()), &literals);
        assert_eq!(literals.len(), 2);
        let shared_inside = body.chunks().iter().find(|c| c.len() == inside(&answer)).unwrap();
        assert_eq!(shared_inside.as_ptr(), alone.chunks()[0][1..].as_ptr());
    }

    #[test]
    fn short_parts_leave_the_whole_text_shared() {
        let literals = Arc::new(SharedLiterals::new());
        let long_content = format!("[Response]\nshort {}", long("i"));
        let text = Text::with_parts(long_content.clone(), std::iter::once(11..16).collect());
        let body = written(&text, &literals);
        assert_eq!(body.to_bytes(), serde_json::to_vec(&long_content).unwrap());
        assert_eq!(body.shared_len(), body.len());
        assert_eq!(literals.len(), 1);
    }

    #[test]
    fn sharing_is_restored_after_it_ends() {
        let literals = Arc::new(SharedLiterals::new());
        assert!(current().is_none());
        sharing(Some(literals.clone()), || {
            assert!(current().is_some());
            sharing(None, || assert!(current().is_none()));
            assert!(current().is_some());
        });
        assert!(current().is_none());
    }
}
