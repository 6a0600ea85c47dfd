//! The texts bodies show, written as the JSON literals they were read as.
//!
//! A prompt, an answer or a tool's output is shown by the annotations, the workflow, the
//! chat log and the context alike, often whole, sometimes cut (an array content at 10,000
//! UTF-16 units) or joined with other texts (a turn's thinking and answer). A [`Text`] is
//! such a text as a list of pieces: strings of the input, kept as their literals
//! ([`JsonStr`]), and text of our own (headings, separators). Written, each piece of the
//! input is its literal's bytes, copied as they are instead of decoded and escaped again;
//! read ([`Text::chars`], [`Text::preview`]), it is decoded only as far as needed.
//!
//! Kept bodies do not even copy those bytes: a [`ChunkWriter`](crate::views::ChunkWriter)
//! keeps a long literal of the input as a reference to the input's buffer, which the
//! session holds anyway. Bodies written any other way (streamed to a file, into a `Vec`)
//! are byte for byte the same.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use serde::{Serialize, Serializer};

use super::raw::{escape_into, escaped_prefix, serialize_raw, EscapedChars, JsonStr};
use super::utf16::{len_utf16, prefix_utf16};

/// Pieces of the input shorter than this are copied into bodies: below it, what a
/// reference costs (a chunk of its own in the body, its handle) outweighs what it saves.
pub const MIN_SHARED_TEXT: usize = 256;

thread_local! {
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
    /// Bytes of an input buffer, to keep by reference.
    Shared(Bytes),
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

/// A piece of a [`Text`].
#[derive(Clone)]
enum TextPiece<'a> {
    /// Text of our own.
    Str(Cow<'a, str>),
    /// A string of the input, up to `end` bytes of its literal's inside (a char and
    /// escape boundary).
    Json(&'a JsonStr, usize),
}

impl TextPiece<'_> {
    /// Bytes of text or of escaped text.
    fn len(&self) -> usize {
        match self {
            TextPiece::Str(s) => s.len(),
            TextPiece::Json(_, end) => *end,
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            TextPiece::Str(s) => s.is_empty(),
            TextPiece::Json(_, end) => *end == 0,
        }
    }

    /// The escaped bytes of a string of the input that can be written as they are.
    fn canonical_escaped(&self) -> Option<&str> {
        match self {
            TextPiece::Json(j, end) if j.is_canonical() => Some(j.escaped_upto(*end)),
            _ => None,
        }
    }
}

/// The pieces of a [`Text`]: one is kept inline (most texts are one string of the input,
/// and the annotations hold a text per unit at once).
#[derive(Clone, Default)]
enum Pieces<'a> {
    #[default]
    None,
    One(TextPiece<'a>),
    Many(Vec<TextPiece<'a>>),
}

impl<'a> Pieces<'a> {
    fn as_slice(&self) -> &[TextPiece<'a>] {
        match self {
            Pieces::None => &[],
            Pieces::One(p) => std::slice::from_ref(p),
            Pieces::Many(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [TextPiece<'a>] {
        match self {
            Pieces::None => &mut [],
            Pieces::One(p) => std::slice::from_mut(p),
            Pieces::Many(v) => v,
        }
    }

    fn push(&mut self, piece: TextPiece<'a>) {
        *self = match std::mem::take(self) {
            Pieces::None => Pieces::One(piece),
            Pieces::One(first) => Pieces::Many(vec![first, piece]),
            Pieces::Many(mut v) => {
                v.push(piece);
                Pieces::Many(v)
            }
        };
    }

    fn truncate(&mut self, len: usize) {
        match self {
            Pieces::Many(v) => v.truncate(len),
            Pieces::One(_) if len == 0 => *self = Pieces::None,
            _ => {}
        }
    }

    fn into_vec(self) -> Vec<TextPiece<'a>> {
        match self {
            Pieces::None => Vec::new(),
            Pieces::One(p) => vec![p],
            Pieces::Many(v) => v,
        }
    }
}

/// A text a body shows: pieces of the input and text of our own, written as one JSON
/// string.
#[derive(Clone, Default)]
pub struct Text<'a> {
    pieces: Pieces<'a>,
    /// A cut at this many UTF-16 units not made yet ([`Text::cut_utf16`]): where it falls
    /// is only counted when the text is written, read whole or extended; a preview shorter
    /// than it reads as far as it needs.
    limit: Option<usize>,
}

impl<'a> Text<'a> {
    /// The empty text.
    pub fn new() -> Text<'a> {
        Text::default()
    }

    /// The text of a string of the input.
    pub fn json(text: &'a JsonStr) -> Text<'a> {
        let mut t = Text::new();
        t.push_json(text);
        t
    }

    /// Appends text of our own.
    pub fn push_str(&mut self, text: impl Into<Cow<'a, str>>) {
        self.settle();
        let text = text.into();
        if !text.is_empty() {
            self.pieces.push(TextPiece::Str(text));
        }
    }

    /// Appends a string of the input.
    pub fn push_json(&mut self, text: &'a JsonStr) {
        self.settle();
        if !text.is_empty() {
            self.pieces.push(TextPiece::Json(text, text.escaped_len()));
        }
    }

    /// Appends `other`.
    pub fn push_text(&mut self, mut other: Text<'a>) {
        self.settle();
        other.settle();
        for piece in other.pieces.into_vec() {
            self.pieces.push(piece);
        }
    }

    /// `parts` joined with `separator` between them.
    pub fn join(parts: impl IntoIterator<Item = Text<'a>>, separator: &'static str) -> Text<'a> {
        let mut joined = Text::new();
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                joined.push_str(separator);
            }
            joined.push_text(part);
        }
        joined
    }

    /// True for the empty text.
    pub fn is_empty(&self) -> bool {
        match self.limit {
            // Its first character (at most two units) is within a cut at two units or more.
            Some(units) if units < 2 => self.chars().next().is_none(),
            _ => self.pieces.as_slice().iter().all(TextPiece::is_empty),
        }
    }

    /// The characters, decoded as they are read.
    pub fn chars(&self) -> impl Iterator<Item = char> + '_ {
        let mut left = self.limit.unwrap_or(usize::MAX);
        self.pieces
            .as_slice()
            .iter()
            .flat_map(|p| -> Box<dyn Iterator<Item = char> + '_> {
                match p {
                    TextPiece::Str(s) => Box::new(s.chars()),
                    TextPiece::Json(j, end) => Box::new(EscapedChars::new(j.escaped_upto(*end))),
                }
            })
            .take_while(move |c| match left.checked_sub(c.len_utf16()) {
                Some(rest) => {
                    left = rest;
                    true
                }
                None => false,
            })
    }

    /// The whole text, decoded (borrowed when it is one piece that needs no decoding).
    pub fn to_text(&self) -> Cow<'a, str> {
        if self.limit.is_some() {
            return Cow::Owned(self.chars().collect());
        }
        match self.pieces.as_slice() {
            [] => Cow::Borrowed(""),
            [TextPiece::Str(Cow::Borrowed(s))] => Cow::Borrowed(*s),
            [TextPiece::Json(j, end)] if j.form() == super::raw::Form::Plain => {
                let j: &'a JsonStr = j;
                Cow::Borrowed(j.escaped_upto(*end))
            }
            _ => Cow::Owned(self.chars().collect()),
        }
    }

    /// Keeps the longest prefix of at most `units` UTF-16 code units; a cut that would
    /// split a surrogate pair stops before the pair (as [`prefix_utf16`]). The cut is
    /// counted when it is needed (see [`Text::limit`](Text)).
    pub fn cut_utf16(&mut self, units: usize) {
        // A text takes at least one byte per unit, written or escaped: one no longer than
        // `units` bytes needs no cut.
        if self.pieces.as_slice().iter().map(TextPiece::len).sum::<usize>() <= units {
            return;
        }
        self.limit = Some(self.limit.map_or(units, |l| l.min(units)));
    }

    /// Makes the pending cut, if any.
    fn settle(&mut self) {
        let Some(units) = self.limit.take() else {
            return;
        };
        let mut left = units;
        for i in 0..self.pieces.as_slice().len() {
            let (kept, used, whole) = match &self.pieces.as_slice()[i] {
                TextPiece::Str(s) => {
                    let kept = prefix_utf16(s, left);
                    (kept.len(), len_utf16(kept), kept.len() == s.len())
                }
                TextPiece::Json(j, end) => {
                    let (kept, used) = if *end == j.escaped_len() {
                        j.escaped_prefix(left)
                    } else {
                        escaped_prefix(j.escaped_upto(*end), left)
                    };
                    (kept, used, kept == *end)
                }
            };
            if whole {
                left -= used;
                continue;
            }
            match &mut self.pieces.as_mut_slice()[i] {
                TextPiece::Str(s) => s.to_mut().truncate(kept),
                TextPiece::Json(_, end) => *end = kept,
            }
            self.pieces.truncate(i + 1);
            return;
        }
    }

    /// The text cut for a preview: whole when it is at most `max` UTF-16 units long, else
    /// its first `max - 3` units and `...` (the reference's `truncate`). Reads at most
    /// `max + 1` characters of the text, however long it is, and copies the input's
    /// escapes as they are.
    pub fn preview(&self, max: usize) -> Preview {
        if self.limit.is_some_and(|l| l <= max + 1) {
            let mut cut = self.clone();
            cut.settle();
            return cut.preview(max);
        }
        let mut literal = String::from("\"");
        if !self.escaped_prefix_into(max, &mut literal) {
            literal.truncate(1);
            self.escaped_prefix_into(max.saturating_sub(3), &mut literal);
            literal.push_str("...");
        }
        literal.push('"');
        Preview(literal.into_boxed_str())
    }

    /// Appends the longest prefix of at most `units` UTF-16 units, escaped (as the inside of
    /// a JSON string), to `out`; true when that is the whole text.
    fn escaped_prefix_into(&self, units: usize, out: &mut String) -> bool {
        let mut left = units;
        for piece in self.pieces.as_slice() {
            // No unit takes more than twelve bytes escaped (a pair of `\\u` escapes for
            // two): a head of this many bytes holds the prefix and one unit more.
            let head_bytes = left.saturating_add(1).saturating_mul(12);
            let whole = match piece {
                TextPiece::Json(j, end) if j.is_canonical() => {
                    let head = j.escaped_head((*end).min(head_bytes));
                    let (kept, used) = escaped_prefix(head, left);
                    out.push_str(&head[..kept]);
                    left -= used;
                    kept == *end
                }
                TextPiece::Str(s) => {
                    let kept = prefix_utf16(s, left);
                    escape_into(kept, out);
                    left -= len_utf16(kept);
                    kept.len() == s.len()
                }
                TextPiece::Json(j, end) => {
                    let mut chars = EscapedChars::new(j.escaped_head((*end).min(head_bytes)));
                    let mut kept = String::new();
                    let mut whole = true;
                    for c in chars.by_ref() {
                        if c.len_utf16() > left {
                            whole = false;
                            break;
                        }
                        left -= c.len_utf16();
                        kept.push(c);
                    }
                    escape_into(&kept, out);
                    whole
                }
            };
            if !whole {
                return false;
            }
        }
        true
    }

    /// The raw JSON string of this text and, when some of it can be kept by reference,
    /// its pieces. The text's pending cut must have been made.
    fn raw(&self) -> (Cow<'_, str>, Option<Vec<Piece>>) {
        debug_assert!(self.limit.is_none());
        if let [TextPiece::Json(j, end)] = self.pieces.as_slice() {
            if j.is_canonical() && *end == j.escaped_len() {
                let shared =
                    (j.literal().len() >= MIN_SHARED_TEXT).then(|| vec![Piece::Shared(j.shared_literal())]);
                return (Cow::Borrowed(j.literal()), shared);
            }
        }
        let mut raw = String::with_capacity(2 + self.pieces.as_slice().iter().map(piece_len).sum::<usize>());
        let mut pieces = Vec::new();
        let mut own_from = 0;
        raw.push('"');
        for piece in self.pieces.as_slice() {
            match (piece, piece.canonical_escaped()) {
                (TextPiece::Json(j, _), Some(escaped)) => {
                    if escaped.len() >= MIN_SHARED_TEXT {
                        if raw.len() > own_from {
                            pieces.push(Piece::Own(own_from..raw.len()));
                        }
                        pieces.push(Piece::Shared(j.shared_escaped().slice(..escaped.len())));
                        raw.push_str(escaped);
                        own_from = raw.len();
                    } else {
                        raw.push_str(escaped);
                    }
                }
                (TextPiece::Json(j, end), None) => {
                    let decoded: String = EscapedChars::new(j.escaped_upto(*end)).collect();
                    escape_into(&decoded, &mut raw);
                }
                (TextPiece::Str(s), _) => escape_into(s, &mut raw),
            }
        }
        raw.push('"');
        if pieces.is_empty() {
            return (Cow::Owned(raw), None);
        }
        pieces.push(Piece::Own(own_from..raw.len()));
        (Cow::Owned(raw), Some(pieces))
    }
}

/// A text cut for a preview ([`Text::preview`]), kept as the JSON string it is written
/// as. Boxed to its length: the graph holds one per interaction.
#[derive(Clone, PartialEq, Eq)]
pub struct Preview(Box<str>);

impl Preview {
    /// The preview `text` (already cut).
    pub fn of_str(text: &str) -> Preview {
        let mut literal = String::with_capacity(text.len() + 2);
        literal.push('"');
        escape_into(text, &mut literal);
        literal.push('"');
        Preview(literal.into_boxed_str())
    }

    /// The text, decoded.
    pub fn text(&self) -> String {
        EscapedChars::new(&self.0[1..self.0.len() - 1]).collect()
    }
}

impl fmt::Debug for Preview {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text(), f)
    }
}

impl Serialize for Preview {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_raw(&self.0, s)
    }
}

/// About the bytes a piece takes written.
fn piece_len(piece: &TextPiece<'_>) -> usize {
    match piece {
        TextPiece::Str(s) => s.len() + 8,
        TextPiece::Json(_, end) => *end,
    }
}

impl fmt::Debug for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_text(), f)
    }
}

impl PartialEq for Text<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.chars().eq(other.chars())
    }
}

impl Eq for Text<'_> {}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.chars().eq(other.chars())
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(s: &'a str) -> Text<'a> {
        let mut t = Text::new();
        t.push_str(s);
        t
    }
}

impl From<String> for Text<'_> {
    fn from(s: String) -> Self {
        let mut t = Text::new();
        t.push_str(s);
        t
    }
}

impl<'a> From<Cow<'a, str>> for Text<'a> {
    fn from(s: Cow<'a, str>) -> Text<'a> {
        let mut t = Text::new();
        t.push_str(s);
        t
    }
}

impl<'a> From<&'a JsonStr> for Text<'a> {
    fn from(s: &'a JsonStr) -> Text<'a> {
        Text::json(s)
    }
}

/// Runs `write`, which writes `raw` with one write of its bytes, telling the writer (a
/// [`ChunkWriter`](crate::views::ChunkWriter)) which `pieces` of it it may keep by
/// reference.
fn with_pieces<T>(raw: &str, pieces: Vec<Piece>, write: impl FnOnce() -> T) -> T {
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            WRITING.with(|w| w.borrow_mut().take());
        }
    }
    WRITING.with(|w| {
        *w.borrow_mut() = Some(Writing {
            at: raw.as_ptr() as usize,
            len: raw.len(),
            pieces,
        })
    });
    let _done = Done;
    write()
}

impl Serialize for Text<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.limit.is_some() {
            let mut cut = self.clone();
            cut.settle();
            return cut.serialize(s);
        }
        if let [TextPiece::Str(text)] = self.pieces.as_slice() {
            return s.serialize_str(text);
        }
        let (raw, pieces) = self.raw();
        match pieces {
            None => serialize_raw(&raw, s),
            // serde_json writes a raw value with one write of its bytes: the writer sees
            // them and can keep the shared pieces by reference.
            Some(pieces) => with_pieces(&raw, pieces, || serialize_raw(&raw, s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::json::literals::*;
    use bytestring::ByteString;

    fn long(prefix: &str) -> String {
        format!(
            "{prefix} \"quoted\"\n\ttabbed \u{1} é ✓ 𝄞 {}",
            "prose ".repeat(60)
        )
    }

    /// A string of the input: `text` as the literal a writer puts in a file.
    fn input(text: &str) -> JsonStr {
        let file = std::sync::Arc::new(ByteString::from(format!(
            "{{\"a\":{}}}",
            serde_json::to_string(text).unwrap()
        )));
        JsonStr::in_buffer(&file, &file[5..file.len() - 1]).unwrap()
    }

    /// Writes `text` into chunks, as a kept body is written.
    fn written(text: &Text<'_>) -> crate::views::Body {
        let mut out = crate::views::ChunkWriter::new();
        serde_json::to_writer(&mut out, text).unwrap();
        out.finish()
    }

    #[test]
    fn a_text_is_written_as_its_decoded_string_is() {
        let (a, b) = (input(&long("a")), input("short\n"));
        let odd = {
            let file = std::sync::Arc::new(ByteString::from(r#"{"a":"x\u0041\/y"}"#));
            JsonStr::in_buffer(&file, &file[5..file.len() - 1]).unwrap()
        };
        let mut joined = Text::from("[Thinking]\n");
        joined.push_json(&a);
        joined.push_str("\n\n");
        joined.push_json(&b);
        joined.push_json(&odd);
        let want = format!("[Thinking]\n{}\n\nshort\nxA/y", long("a"));
        for text in [
            Text::json(&a),
            Text::json(&b),
            Text::from("plain \"q\""),
            joined.clone(),
            Text::new(),
        ] {
            let decoded = text.to_text().into_owned();
            let expected = serde_json::to_vec(&decoded).unwrap();
            assert_eq!(serde_json::to_vec(&text).unwrap(), expected);
            assert_eq!(written(&text).to_bytes(), expected);
        }
        assert_eq!(joined.to_text(), want);
    }

    #[test]
    fn a_body_keeps_long_pieces_of_the_input_by_reference() {
        let a = input(&long("b"));
        let body = written(&Text::json(&a));
        assert_eq!(body.shared_len(), body.len(), "the whole literal is the input's");
        assert_eq!(body.chunks()[0].as_ptr(), a.literal().as_ptr());
        let mut joined = Text::from("[Response]\n");
        joined.push_json(&a);
        let body = written(&joined);
        assert_eq!(body.shared_len(), a.escaped().len());
        assert!(body.chunks().iter().any(|c| c.as_ptr() == a.escaped().as_ptr()));
    }

    #[test]
    fn cuts_count_utf16_units_across_pieces_and_escapes() {
        let a = input("ab\n😀c");
        let mut text = Text::from("é");
        text.push_json(&a);
        for (units, want) in [
            (0, ""),
            (1, "é"),
            (3, "éab"),
            (4, "éab\n"),
            (5, "éab\n"),
            (6, "éab\n😀"),
            (9, "éab\n😀c"),
        ] {
            let mut cut = text.clone();
            cut.cut_utf16(units);
            assert_eq!(cut.to_text(), want, "{units}");
            assert_eq!(cut.to_text(), prefix_utf16(&text.to_text(), units), "{units}");
            assert_eq!(cut.is_empty(), want.is_empty(), "{units}");
            let written = serde_json::to_string(&cut).unwrap();
            assert_eq!(
                written,
                serde_json::to_string(want).unwrap(),
                "{units}: the cut made"
            );
            let mut extended = cut.clone();
            extended.push_str("!");
            assert_eq!(
                extended.to_text(),
                format!("{want}!"),
                "{units}: extended after the cut"
            );
        }
    }

    /// `text` written with every character escaped as `\\uXXXX` (pairs for the rest).
    fn all_escaped(text: &str) -> String {
        let mut literal = String::from("\"");
        for unit in text.encode_utf16() {
            literal.push_str(&format!("\\u{unit:04X}"));
        }
        literal.push('"');
        literal
    }

    proptest::proptest! {
        /// A cut counted in the literal (at write) or while decoding (when read) is the cut
        /// of the decoded text, whatever the escapes.
        #[test]
        fn cuts_in_literals_are_cuts_of_the_text(
            text in proptest::string::string_regex("[a\\n\"\\\\é✓😀\\t\\x01]{0,40}").unwrap(),
            units in 0usize..50,
        ) {
            let want = prefix_utf16(&text, units);
            for literal in [serde_json::to_string(&text).unwrap(), all_escaped(&text)] {
                let file = std::sync::Arc::new(ByteString::from(literal));
                let s = JsonStr::in_buffer(&file, &file).unwrap();
                let mut cut = Text::from("");
                cut.push_json(&s);
                cut.cut_utf16(units);
                proptest::prop_assert_eq!(cut.to_text(), want);
                proptest::prop_assert_eq!(serde_json::to_string(&cut).unwrap(), serde_json::to_string(want).unwrap());
                let mut mixed = Text::from("é ");
                mixed.push_json(&s);
                for max in [units, 3, 10] {
                    let expected = crate::json::utf16::truncate_with_ellipsis(&mixed.to_text(), max);
                    proptest::prop_assert_eq!(
                        serde_json::to_string(&mixed.preview(max)).unwrap(),
                        serde_json::to_string(&expected).unwrap()
                    );
                    proptest::prop_assert_eq!(mixed.preview(max).text(), expected);
                }
            }
        }
    }

    /// Long plain runs are counted eight bytes at a time: every cut of a text of code
    /// lines, quotes, tabs and wide characters is the cut of its decoded text.
    #[test]
    fn cuts_of_long_texts_are_cuts_of_the_text() {
        let text: String = (0..40)
            .map(|i| format!("    let line_{i} = \"value\";\t// é {}\n", "😀".repeat(i % 3)))
            .collect();
        let literal = input(&text);
        for units in 0..=crate::json::utf16::len_utf16(&text) + 1 {
            let mut cut = Text::json(&literal);
            cut.cut_utf16(units);
            let want = prefix_utf16(&text, units);
            assert_eq!(
                serde_json::to_string(&cut).unwrap(),
                serde_json::to_string(want).unwrap(),
                "{units}"
            );
        }
    }

    #[test]
    fn previews_follow_the_reference_truncate() {
        let a = input(&"x".repeat(150));
        assert_eq!(
            Text::json(&a).preview(100).text(),
            format!("{}...", "x".repeat(97))
        );
        let exact = input(&format!("{}😀", "x".repeat(98)));
        assert_eq!(
            Text::json(&exact).preview(100).text(),
            format!("{}😀", "x".repeat(98))
        );
        assert_eq!(Text::from("short").preview(100).text(), "short");
    }
}
