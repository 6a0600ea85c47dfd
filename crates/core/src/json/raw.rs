//! Text kept as the JSON it was read as, sharing the buffer it was read from.
//!
//! A session's bulk is text: tool results, file contents, model output. Decoded into owned
//! `String`s while parsing, every byte of it was copied once into fresh memory (which on a
//! virtual machine costs more than the parse itself), the files and the copies were both
//! alive at the peak, and every body escaped the text again to write it. A [`JsonStr`]
//! instead holds the string literal as it appears in the file (quotes and escapes
//! included), as a slice of the file's buffer: reading a record copies none of its text,
//! a body writes the literal through as it is, and the text is decoded only where a view
//! reads it, and then often only its first characters ([`JsonStr::chars`]).
//!
//! Written through, a literal must give the same bytes as escaping its text would:
//! `serde_json` escapes `"`, `\` and control characters only (as JavaScript's
//! `JSON.stringify` does, which writes the logs). Each literal knows its [`Form`]: one
//! with exactly those escapes is written as it is; one with others (`\u0041`, `\/`) is
//! decoded and escaped again, so bodies never depend on how a writer chose to escape.
//!
//! [`RawJson`] does the same for any JSON value that is passed through untouched (tool
//! inputs, compaction metadata).

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, LazyLock};

use crate::heap::HeapSize;
use bytes::Bytes;
use bytestring::ByteString;
use memchr::memmem;
use serde::{Serialize, Serializer};

/// The name under which `serde_json` passes a raw JSON fragment to a serializer (what
/// [`serde_json::value::RawValue`] serializes as). Fixed by the `serde_json` version in
/// `Cargo.lock`; `tests::raw_fragments_are_written_through` fails if it ever changes.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// Writes `json`, a valid JSON fragment, through a `serde_json` serializer without encoding
/// it again.
pub(crate) fn serialize_raw<S: Serializer>(json: &str, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct(RAW_TOKEN, 1)?;
    st.serialize_field(RAW_TOKEN, json)?;
    st.end()
}

/// How a string literal is escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Form {
    /// No escape at all: the text is the literal's inside.
    Plain,
    /// Only the escapes `serde_json` writes: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t` and
    /// `\u00xx` (lowercase) for the other control characters. Written as it is.
    Canonical,
    /// Other escapes (`\/`, `\u0041`, uppercase hex, surrogate pairs): decoded and escaped
    /// again when written.
    Other,
}

/// A string literal holds a `\uD800`..`\uDFFF` escape that is not half of a pair: it does
/// not decode to a Rust string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoneSurrogate;

/// The four hex digits at the start of `b`, as a number.
fn hex4(b: &[u8]) -> Option<u16> {
    let digits = b.get(..4)?;
    digits.iter().try_fold(0u16, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc << 4 | v as u16)
    })
}

/// The [`Form`] of `inside`, the inside of a valid JSON string literal (escapes already
/// checked by the JSON reader), or [`LoneSurrogate`].
pub fn form_of(inside: &[u8]) -> Result<Form, LoneSurrogate> {
    let Some(first) = memchr::memchr(b'\\', inside) else {
        return Ok(Form::Plain);
    };
    // Every escape but `\u....` and `\/` is canonical (`\n`, `\"`, ...): a literal in which
    // no backslash comes before a `u` or a `/` holds no other. Two vectorised searches
    // settle most texts, where stopping at each escape (a line break on every line of
    // code) took 13% of a one-thread parse's samples.
    let rest = &inside[first..];
    if ESCAPED_U.find(rest).is_none() && ESCAPED_SLASH.find(rest).is_none() {
        return Ok(Form::Canonical);
    }
    form_by_escapes(inside, first)
}

/// [`form_of`], escape by escape from `at` (a position before the first backslash).
fn form_by_escapes(inside: &[u8], mut at: usize) -> Result<Form, LoneSurrogate> {
    let mut form = Form::Plain;
    while let Some(i) = next_backslash(inside, at) {
        match inside.get(i + 1) {
            Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') => {
                form = form.max(Form::Canonical);
                at = i + 2;
            }
            Some(b'u') => {
                let digits = &inside[(i + 2).min(inside.len())..];
                let unit = hex4(digits).unwrap_or(0xFFFF);
                at = i + 6;
                match unit {
                    0xD800..=0xDBFF => {
                        let low = inside.get(i + 6..i + 8) == Some(b"\\u")
                            && hex4(&inside[(i + 8).min(inside.len())..])
                                .is_some_and(|u| (0xDC00..0xE000).contains(&u));
                        if !low {
                            return Err(LoneSurrogate);
                        }
                        form = Form::Other;
                        at = i + 12;
                    }
                    0xDC00..=0xDFFF => return Err(LoneSurrogate),
                    0x00..=0x1F
                        if !matches!(unit, 0x08 | 0x09 | 0x0A | 0x0C | 0x0D)
                            && digits[..4].iter().all(|d| !d.is_ascii_uppercase()) =>
                    {
                        form = form.max(Form::Canonical);
                    }
                    _ => form = Form::Other,
                }
            }
            _ => {
                form = Form::Other;
                at = i + 2;
            }
        }
    }
    Ok(form)
}

/// Finds `\u`: the start of an escape of a UTF-16 code unit (or an escaped backslash
/// followed by a `u`).
static ESCAPED_U: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b"\\u"));

/// Finds `\/`: the escape of a slash (or an escaped backslash followed by one).
static ESCAPED_SLASH: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b"\\/"));

/// The position of the first backslash of `bytes` from `at`. Eight bytes at a time: in
/// text, backslashes come every few dozen bytes (an escaped line break per line of code),
/// where a call to `memchr` per backslash costs more than the scan.
fn next_backslash(bytes: &[u8], mut at: usize) -> Option<usize> {
    while let Some(word) = word_at(bytes, at) {
        let plain = bytes_before_backslash(word);
        if plain < 8 {
            return Some(at + plain);
        }
        at += 8;
    }
    bytes.get(at..)?.iter().position(|&b| b == b'\\').map(|k| at + k)
}

/// The eight bytes of `bytes` from `at` as one word (little-endian: the first byte lowest),
/// if there are eight.
fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let word: [u8; 8] = bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(word))
}

/// Eight ones, one per byte.
const ONES: u64 = 0x0101_0101_0101_0101;
/// Each byte's high bit.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// How many of the eight bytes of `word` (little-endian: its first byte lowest) come
/// before its first backslash (8 when it has none).
fn bytes_before_backslash(word: u64) -> usize {
    let x = word ^ (u64::from(b'\\') * ONES);
    // The classic zero-byte test: its lowest set bit is in the first zero byte of `x` (a
    // borrow can only mark bytes above a true zero), that is at the first backslash.
    let zero = x.wrapping_sub(ONES) & !x & HIGH;
    (zero.trailing_zeros() / 8) as usize
}

/// The length of the longest prefix of `escaped` (the inside of a literal) whose text is
/// at most `units` UTF-16 code units long (a surrogate pair is never split), and those
/// units.
///
/// Whole blocks of 64 bytes are counted at once ([`counted_blocks`]), and the rest from
/// the last block boundary that splits nothing by [`escaped_prefix_by_words`].
pub(crate) fn escaped_prefix(escaped: &str, units: usize) -> (usize, usize) {
    let (at, used) = counted_blocks(escaped.as_bytes(), units);
    match escaped.get(at..) {
        Some(rest) => {
            let (len, more) = escaped_prefix_by_words(rest, units - used);
            (at + len, used + more)
        }
        // Not reached: the blocks stop where a character starts.
        None => escaped_prefix_by_words(escaped, units),
    }
}

/// Each byte's bit 1, then 3, 5, ...: the odd positions of a 64-byte block.
const ODD_BITS: u64 = 0xAAAA_AAAA_AAAA_AAAA;

/// The bytes of a 64-byte block that matter to its UTF-16 units, one bit per byte (the
/// block's first byte lowest).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct BlockMasks {
    /// `\`.
    backslash: u64,
    /// `u`.
    u: u64,
    /// UTF-8 continuation bytes (`10xxxxxx`).
    continuation: u64,
    /// First bytes of four-byte characters (two units each).
    four_byte_start: u64,
}

/// The masks of `block`, sixteen bytes at a time with SSE2 (part of every x86-64).
#[cfg(target_arch = "x86_64")]
fn block_masks(block: &[u8; 64]) -> BlockMasks {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8,
        _mm_set1_epi8,
    };
    let mut masks = BlockMasks::default();
    for (k, sixteen) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is part of the x86-64 baseline, so every x86-64 processor runs these
        // instructions; `sixteen` holds the 16 bytes `_mm_loadu_si128` reads, at any
        // alignment.
        unsafe {
            let v = _mm_loadu_si128(sixteen.as_ptr().cast::<__m128i>());
            let bits = |m: __m128i| u64::from(_mm_movemask_epi8(m) as u16) << (16 * k);
            masks.backslash |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8)));
            masks.u |= bits(_mm_cmpeq_epi8(v, _mm_set1_epi8(b'u' as i8)));
            let top_two = _mm_and_si128(v, _mm_set1_epi8(0xC0_u8 as i8));
            masks.continuation |= bits(_mm_cmpeq_epi8(top_two, _mm_set1_epi8(0x80_u8 as i8)));
            let at_least_f0 = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0xF0_u8 as i8)), v);
            masks.four_byte_start |= bits(at_least_f0);
        }
    }
    masks
}

/// The masks of `block` (targets without SSE2).
#[cfg(not(target_arch = "x86_64"))]
fn block_masks(block: &[u8; 64]) -> BlockMasks {
    block_masks_bytewise(block)
}

/// The masks of `block`, a byte at a time.
#[cfg(any(test, not(target_arch = "x86_64")))]
fn block_masks_bytewise(block: &[u8; 64]) -> BlockMasks {
    let mut masks = BlockMasks::default();
    for (i, &b) in block.iter().enumerate() {
        let bit = 1u64 << i;
        masks.backslash |= u64::from(b == b'\\') * bit;
        masks.u |= u64::from(b == b'u') * bit;
        masks.continuation |= u64::from(b & 0xC0 == 0x80) * bit;
        masks.four_byte_start |= u64::from(b >= 0xF0) * bit;
    }
    masks
}

/// What a block's escapes carry into the next block.
#[derive(Debug, Default, Clone, Copy)]
struct EscapeCarry {
    /// The next block's first byte is escaped (this block ends with an escaping backslash).
    first_escaped: u64,
    /// The next block's first bytes that are hex digits of a `\u` escape of this block.
    hex_digits: u64,
}

/// The bytes of a block that take no unit of their own: the escaped character of every
/// escape (`n` of `\n`, the second `\` of `\\`), the `u` and four digits of `\uXXXX`, and
/// continuation bytes. Every escape counts one unit at its backslash (a surrogate pair is
/// two escapes), every character one at its first byte. Also returns the `u`s of `\u`
/// escapes.
///
/// Which backslashes escape is simdjson's computation (`json_escape_scanner`): in a run
/// of backslashes every other one escapes the next byte, counting from the run's start.
fn silent_bytes(masks: &BlockMasks, carry: &mut EscapeCarry) -> (u64, u64) {
    let potential = masks.backslash & !carry.first_escaped;
    let maybe_escaped_and_odd = (potential << 1) | ODD_BITS;
    let escape_and_terminal = maybe_escaped_and_odd.wrapping_sub(potential) ^ ODD_BITS;
    let escaped = escape_and_terminal ^ (masks.backslash | carry.first_escaped);
    let escaping = escape_and_terminal & masks.backslash;
    let u_escapes = escaped & masks.u;
    let wide = u128::from(u_escapes);
    let digits = (wide << 1) | (wide << 2) | (wide << 3) | (wide << 4);
    let silent = escaped | digits as u64 | carry.hex_digits | masks.continuation;
    *carry = EscapeCarry {
        first_escaped: escaping >> 63,
        hex_digits: (digits >> 64) as u64,
    };
    (silent, u_escapes)
}

/// Counts whole 64-byte blocks of `bytes` (the inside of a literal) while their units fit
/// in `units`; returns the last block boundary reached where the rest can be counted on
/// its own, and the units before it. Such a boundary splits no character, no escape and
/// no `\u` escape from one just before it (which may be half of a pair).
fn counted_blocks(bytes: &[u8], units: usize) -> (usize, usize) {
    let (mut at, mut used) = (0, 0);
    let mut boundary = (0, 0);
    let mut carry = EscapeCarry::default();
    while let Some(block) = bytes.get(at..).and_then(<[u8]>::first_chunk::<64>) {
        let masks = block_masks(block);
        let (silent, u_escapes) = silent_bytes(&masks, &mut carry);
        let block_units = 64 - silent.count_ones() as usize + masks.four_byte_start.count_ones() as usize;
        if used + block_units > units {
            break;
        }
        used += block_units;
        at += 64;
        let splits = carry.first_escaped != 0
            || carry.hex_digits != 0
            || u_escapes >> 52 != 0
            || bytes.get(at).is_some_and(|&b| b & 0xC0 == 0x80);
        if !splits {
            boundary = (at, used);
        }
    }
    boundary
}

/// [`escaped_prefix`], eight bytes at a time up to the next backslash (a character's units
/// are counted at its first byte, so a word may end inside a character), decoding only the
/// escapes and the last characters before the cut one at a time.
fn escaped_prefix_by_words(escaped: &str, units: usize) -> (usize, usize) {
    let bytes = escaped.as_bytes();
    let (mut at, mut used) = (0, 0);
    while let Some(word) = word_at(bytes, at) {
        let plain = bytes_before_backslash(word);
        let plain_units = units_in(word, plain);
        if used + plain_units > units {
            break;
        }
        used += plain_units;
        at += plain;
        if plain == 8 {
            continue;
        }
        let (len, escape_units) = escape_at(&escaped[at..]);
        if used + escape_units > units {
            return (at, used);
        }
        used += escape_units;
        at += len;
    }
    // The rest of a character whose first byte was counted is part of it.
    while bytes.get(at).is_some_and(|&b| (b as i8) < -0x40) {
        at += 1;
    }
    while at < bytes.len() {
        let (len, char_units) = match bytes[at] {
            b'\\' => escape_at(&escaped[at..]),
            b if b < 0x80 => (1, 1),
            b if b >= 0xF0 => (4, 2),
            b if b >= 0xE0 => (3, 1),
            _ => (2, 1),
        };
        if used + char_units > units {
            break;
        }
        at += len;
        used += char_units;
    }
    (at, used)
}

/// The length in bytes, and in UTF-16 units of its character, of the escape that starts
/// `escaped`. Only a `\\u` escape needs decoding: the others are two bytes for one unit.
fn escape_at(escaped: &str) -> (usize, usize) {
    if escaped
        .as_bytes()
        .get(1)
        .is_some_and(|&b| b.is_ascii() && b != b'u')
    {
        return (2, 1);
    }
    let mut one = EscapedChars::new(escaped);
    let c = one.next().unwrap_or('\u{FFFD}');
    (escaped.len() - one.rest().len(), c.len_utf16())
}

/// The UTF-16 units of the characters that start in the first `n` bytes of `word`: one
/// per byte that is not a continuation byte, one more per first byte of a four-byte
/// character.
fn units_in(word: u64, n: usize) -> usize {
    if word & HIGH == 0 {
        // ASCII, as most of a log's text is: a unit per byte.
        return n;
    }
    let kept = if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
    // In each byte, bit 7 of `word << k` is the byte's bit 7 - k.
    let continuations = high_bits(word & !(word << 1) & kept);
    let four_byte_starts = high_bits(word & (word << 1) & (word << 2) & (word << 3) & kept);
    n - continuations + four_byte_starts
}

/// How many bytes of `x` have their high bit set: the bits moved to each byte's lowest
/// bit and summed by one multiplication (the baseline x86-64 has no popcount
/// instruction).
fn high_bits(x: u64) -> usize {
    ((((x & HIGH) >> 7).wrapping_mul(ONES)) >> 56) as usize
}

/// A buffer of UTF-8 text that strings are kept as slices of: a part of an input file, or
/// a copy made for one string.
pub type TextBuffer = Arc<ByteString>;

/// A slice of a [`TextBuffer`]. 16 bytes: strings are many (a few per record), and a
/// `Bytes` of each would take twice that.
#[derive(Clone)]
struct Span {
    /// `None` for the empty literal `""`, which needs no buffer.
    buffer: Option<TextBuffer>,
    start: u32,
    len: u32,
}

impl Span {
    /// `part`, which lies in `buffer`, as a slice of it (`None` when it does not lie in it,
    /// or past what the offsets count).
    fn within(buffer: &TextBuffer, part: &str) -> Option<Span> {
        let start = (part.as_ptr() as usize).checked_sub(buffer.as_ptr() as usize)?;
        let end = start.checked_add(part.len())?;
        (end <= buffer.len()).then_some(())?;
        Some(Span {
            buffer: Some(buffer.clone()),
            start: u32::try_from(start).ok()?,
            len: u32::try_from(part.len()).ok()?,
        })
    }

    /// A buffer of its own holding `text`.
    fn owned(text: String) -> Span {
        let len = u32::try_from(text.len()).unwrap_or(u32::MAX);
        Span {
            buffer: Some(Arc::new(ByteString::from(text))),
            start: 0,
            len,
        }
    }

    fn range(&self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }

    fn as_str(&self) -> &str {
        match &self.buffer {
            Some(b) => &b[self.range()],
            None => "\"\"",
        }
    }

    /// `len` bytes of the span from `offset`, when both ends are character boundaries.
    fn sub_str(&self, offset: usize, len: usize) -> Option<&str> {
        let start = self.start as usize + offset.min(self.len as usize);
        let end = start + len.min((self.len as usize).saturating_sub(offset));
        match &self.buffer {
            Some(b) => b.get(start..end),
            None => "\"\"".get(offset.min(2)..(offset + len).min(2)),
        }
    }

    /// The bytes, shared with the buffer.
    fn bytes(&self) -> Bytes {
        match &self.buffer {
            Some(b) => b.as_bytes().slice(self.range()),
            None => Bytes::from_static(b"\"\""),
        }
    }
}

/// Where a literal's bytes are, and how it is escaped.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Flags {
    form: Form,
    /// True when the bytes are a slice of a buffer the session holds (counted there), false
    /// when they were allocated for this literal alone.
    shared: bool,
}

/// Bytes a copy's buffer costs besides its text: the `Arc`'s counts and the `ByteString`.
const COPY_OVERHEAD: usize = 16 + std::mem::size_of::<ByteString>();

/// A JSON string as it was read: its literal, quotes and escapes included, valid UTF-8 and
/// free of lone surrogate escapes.
pub struct JsonStr {
    literal: Span,
    flags: Flags,
    /// Where the cut at [`CUT_UNITS`] falls in the literal's inside, once a body needed it:
    /// its end in bytes (`u32::MAX` until then) and its UTF-16 units. Two fields rather
    /// than a struct, so that they fit in the room the span and flags leave: they take no
    /// memory.
    cut_end: AtomicU32,
    cut_units: AtomicU16,
}

/// Texts are cut at this many UTF-16 units (the text of an array content, as CommuGraph
/// cuts it). Every view that shows a tool result cuts it there, reading the first 10 KB or
/// so of a text long out of the cache: a long literal remembers where its cut falls, so
/// that the bodies after the first do not count again.
pub const CUT_UNITS: usize = 10_000;

/// `cut_end` before the cut is known.
const CUT_UNKNOWN: u32 = u32::MAX;

impl JsonStr {
    /// The string of these parts.
    fn of_parts(literal: Span, flags: Flags) -> JsonStr {
        JsonStr {
            literal,
            flags,
            cut_end: AtomicU32::new(CUT_UNKNOWN),
            cut_units: AtomicU16::new(0),
        }
    }

    /// The string literal `literal` (quotes included), which lies inside `buffer`, as a
    /// slice of it (a copy when it does not). Fails when it holds a lone surrogate escape.
    pub fn in_buffer(buffer: &TextBuffer, literal: &str) -> Result<JsonStr, LoneSurrogate> {
        debug_assert!(literal.len() >= 2 && literal.starts_with('"') && literal.ends_with('"'));
        let form = form_of(&literal.as_bytes()[1..literal.len() - 1])?;
        let span = Span::within(buffer, literal);
        let shared = span.is_some();
        let span = span.unwrap_or_else(|| Span::owned(literal.to_owned()));
        Ok(JsonStr::of_parts(span, Flags { form, shared }))
    }

    /// The string literal `literal` (quotes included), which lies inside `buffer`, a buffer
    /// made for the texts of one record (a string decoded to read the JSON it holds): kept
    /// as a slice of it, and counted as this literal's own memory, the whole buffer's size
    /// (a copy when it does not lie in it). Fails when it holds a lone surrogate escape.
    pub fn in_own_buffer(buffer: &TextBuffer, literal: &str) -> Result<JsonStr, LoneSurrogate> {
        let form = form_of(&literal.as_bytes()[1..literal.len() - 1])?;
        let span = Span::within(buffer, literal).unwrap_or_else(|| Span::owned(literal.to_owned()));
        Ok(JsonStr::of_parts(span, Flags { form, shared: false }))
    }

    /// A copy of the string literal `literal` (quotes included). Fails when it holds a lone
    /// surrogate escape.
    pub fn copy_of(literal: &str) -> Result<JsonStr, LoneSurrogate> {
        let form = form_of(&literal.as_bytes()[1..literal.len() - 1])?;
        let flags = Flags { form, shared: false };
        Ok(JsonStr::of_parts(Span::owned(literal.to_owned()), flags))
    }

    /// `text`, encoded as a JSON string.
    pub fn new(text: &str) -> JsonStr {
        if text.is_empty() {
            return JsonStr::default();
        }
        let mut literal = String::with_capacity(text.len() + 2);
        literal.push('"');
        escape_into(text, &mut literal);
        literal.push('"');
        let form = if literal.len() == text.len() + 2 {
            Form::Plain
        } else {
            Form::Canonical
        };
        let flags = Flags { form, shared: false };
        JsonStr::of_parts(Span::owned(literal), flags)
    }

    /// The literal, quotes and escapes included.
    pub fn literal(&self) -> &str {
        self.literal.as_str()
    }

    /// The literal without its quotes (still escaped).
    pub fn escaped(&self) -> &str {
        let literal = self.literal();
        &literal[1..literal.len() - 1]
    }

    /// The length of the literal without its quotes (its bytes are not read: a text's
    /// last bytes may be far from its first).
    pub fn escaped_len(&self) -> usize {
        self.literal.len as usize - 2
    }

    /// The first `end` bytes of the literal without its quotes, `end` being a character
    /// boundary of it (empty otherwise). Reads only the bytes around either end.
    pub fn escaped_upto(&self, end: usize) -> &str {
        self.literal
            .sub_str(1, end.min(self.escaped_len()))
            .unwrap_or_default()
    }

    /// The length in bytes of the longest prefix of the literal's inside whose text is at
    /// most `units` UTF-16 units long, and those units (see `escaped_prefix`). A cut at
    /// [`CUT_UNITS`] of a literal longer than that is counted once and remembered.
    pub fn escaped_prefix(&self, units: usize) -> (usize, usize) {
        if units != CUT_UNITS || self.escaped_len() <= CUT_UNITS {
            return escaped_prefix(self.escaped(), units);
        }
        if let Some(known) = self.known_cut() {
            return known;
        }
        let (end, used) = escaped_prefix(self.escaped(), CUT_UNITS);
        if let (Ok(end), Ok(used)) = (u32::try_from(end), u16::try_from(used)) {
            if end != CUT_UNKNOWN {
                // Units first: a reader that sees the end sees them too. Threads that count
                // at once store the same pair.
                self.cut_units.store(used, Ordering::Relaxed);
                self.cut_end.store(end, Ordering::Release);
            }
        }
        (end, used)
    }

    /// Where the cut at [`CUT_UNITS`] falls, when a body counted it already.
    fn known_cut(&self) -> Option<(usize, usize)> {
        let end = self.cut_end.load(Ordering::Acquire);
        (end != CUT_UNKNOWN).then(|| (end as usize, usize::from(self.cut_units.load(Ordering::Relaxed))))
    }

    /// The longest prefix of at most `max` bytes of the literal without its quotes that
    /// ends on a character boundary: what a reader of its first characters needs, without
    /// touching the rest.
    pub fn escaped_head(&self, max: usize) -> &str {
        let max = max.min(self.escaped_len());
        // A character takes at most four bytes: one of the four cuts below is a boundary.
        (0..4)
            .filter_map(|back| self.literal.sub_str(1, max.saturating_sub(back)))
            .next()
            .unwrap_or_default()
    }

    /// The literal's bytes, shared with the buffer they are in.
    pub fn shared_literal(&self) -> Bytes {
        self.literal.bytes()
    }

    /// The literal's bytes without its quotes, shared with the buffer they are in.
    pub fn shared_escaped(&self) -> Bytes {
        let literal = self.literal.bytes();
        literal.slice(1..literal.len() - 1)
    }

    /// How the literal is escaped.
    pub fn form(&self) -> Form {
        self.flags.form
    }

    /// True when the literal is written as it is: escaping the text gives it back.
    pub fn is_canonical(&self) -> bool {
        self.flags.form != Form::Other
    }

    /// True for `""`.
    pub fn is_empty(&self) -> bool {
        self.literal.len == 2 || self.literal.buffer.is_none()
    }

    /// The text: borrowed when the literal has no escape, decoded otherwise.
    pub fn text(&self) -> Cow<'_, str> {
        match self.flags.form {
            Form::Plain => Cow::Borrowed(self.escaped()),
            _ => Cow::Owned(self.chars().collect()),
        }
    }

    /// The text's characters, decoded one by one from the literal.
    pub fn chars(&self) -> EscapedChars<'_> {
        EscapedChars::new(self.escaped())
    }

    /// True when the text contains `needle`. Searched in the literal itself when that
    /// cannot differ from searching the text (see [`is_literal_safe`]).
    pub fn contains(&self, needle: &Needle) -> bool {
        if self.flags.form == Form::Plain || (self.is_canonical() && needle.literal_safe) {
            return needle.finder.find(self.escaped().as_bytes()).is_some();
        }
        needle.finder.find(self.text().as_bytes()).is_some()
    }

    /// True when the text starts with `prefix`.
    pub fn starts_with(&self, prefix: &str) -> bool {
        let mut chars = self.chars();
        prefix.chars().all(|c| chars.next() == Some(c))
    }

    /// Bytes allocated for this literal alone (none when it is a slice of an input buffer,
    /// which its session counts once).
    pub fn own_heap_size(&self) -> usize {
        match (&self.literal.buffer, self.flags.shared) {
            (Some(b), false) => b.len() + COPY_OVERHEAD,
            _ => 0,
        }
    }
}

/// A text searched for in many strings ([`JsonStr::contains`]): its searcher is built once.
#[derive(Debug)]
pub struct Needle {
    finder: memchr::memmem::Finder<'static>,
    literal_safe: bool,
}

impl Needle {
    /// A searcher for `text`.
    pub fn new(text: &'static str) -> Needle {
        Needle {
            finder: memchr::memmem::Finder::new(text),
            literal_safe: is_literal_safe(text),
        }
    }
}

/// True when searching `needle` in a canonical literal finds exactly what searching it in
/// the text would: it holds no character a canonical literal escapes (`"`, `\`, control
/// characters), so each occurrence in the text is written as it is, and it starts with a
/// character that cannot be the second byte of an escape or a hex digit of one, so no
/// occurrence in the literal starts inside an escape (it cannot start before one and run
/// into it either: it holds no `\`).
pub fn is_literal_safe(needle: &str) -> bool {
    let Some(&first) = needle.as_bytes().first() else {
        return true;
    };
    !first.is_ascii_alphanumeric()
        && !matches!(first, b'/')
        && needle.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
}

impl Clone for JsonStr {
    fn clone(&self) -> Self {
        let (end, units) = self.known_cut().unwrap_or((CUT_UNKNOWN as usize, 0));
        JsonStr {
            literal: self.literal.clone(),
            flags: self.flags,
            cut_end: AtomicU32::new(end as u32),
            cut_units: AtomicU16::new(units as u16),
        }
    }
}

impl Default for JsonStr {
    fn default() -> Self {
        JsonStr {
            literal: Span {
                buffer: None,
                start: 0,
                len: 2,
            },
            flags: Flags {
                form: Form::Plain,
                shared: true,
            },
            cut_end: AtomicU32::new(CUT_UNKNOWN),
            cut_units: AtomicU16::new(0),
        }
    }
}

/// Two texts are equal when they are: canonical literals compare as bytes, others are
/// decoded first.
impl PartialEq for JsonStr {
    fn eq(&self, other: &Self) -> bool {
        if self.is_canonical() && other.is_canonical() {
            return self.literal() == other.literal();
        }
        self.text() == other.text()
    }
}

impl Eq for JsonStr {}

/// Hashes the canonical literal, consistently with `PartialEq`.
impl Hash for JsonStr {
    fn hash<H: Hasher>(&self, h: &mut H) {
        if self.is_canonical() {
            self.escaped().hash(h);
        } else {
            let mut canonical = String::new();
            escape_into(&self.text(), &mut canonical);
            canonical.as_str().hash(h);
        }
    }
}

/// Compares the text.
impl PartialEq<str> for JsonStr {
    fn eq(&self, other: &str) -> bool {
        match self.flags.form {
            Form::Plain => self.escaped() == other,
            _ => self.chars().eq(other.chars()),
        }
    }
}

impl PartialEq<&str> for JsonStr {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl fmt::Debug for JsonStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.literal())
    }
}

impl From<&str> for JsonStr {
    fn from(text: &str) -> JsonStr {
        JsonStr::new(text)
    }
}

/// Written as the text's JSON string: the literal itself when it is canonical.
impl Serialize for JsonStr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.is_canonical() {
            serialize_raw(self.literal(), s)
        } else {
            s.serialize_str(&self.text())
        }
    }
}

/// Appends `text` escaped as `serde_json` escapes the inside of a string.
pub fn escape_into(text: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = text.as_bytes();
    let mut from = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0C => "\\f",
            0x00..=0x1F => "",
            _ => continue,
        };
        out.push_str(&text[from..i]);
        if short.is_empty() {
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xF) as usize] as char);
        } else {
            out.push_str(short);
        }
        from = i + 1;
    }
    out.push_str(&text[from..]);
}

/// The characters of an escaped string (the inside of a valid literal without lone
/// surrogates), decoded one at a time.
#[derive(Debug, Clone)]
pub struct EscapedChars<'a> {
    rest: &'a str,
}

impl<'a> EscapedChars<'a> {
    /// The characters of `escaped`.
    pub fn new(escaped: &'a str) -> EscapedChars<'a> {
        EscapedChars { rest: escaped }
    }

    /// What is left to decode (escaped).
    pub fn rest(&self) -> &'a str {
        self.rest
    }
}

impl Iterator for EscapedChars<'_> {
    type Item = char;

    #[inline]
    fn next(&mut self) -> Option<char> {
        let bytes = self.rest.as_bytes();
        match *bytes.first()? {
            b'\\' => {
                let (c, len) = decode_escape(bytes);
                self.rest = self.rest.get(len..).unwrap_or_default();
                Some(c)
            }
            b if b < 0x80 => {
                self.rest = &self.rest[1..];
                Some(b as char)
            }
            _ => {
                let c = self.rest.chars().next()?;
                self.rest = &self.rest[c.len_utf8()..];
                Some(c)
            }
        }
    }
}

/// The character of the escape at the start of `b`, and the bytes it takes.
fn decode_escape(b: &[u8]) -> (char, usize) {
    let c = match b.get(1) {
        Some(b'n') => '\n',
        Some(b't') => '\t',
        Some(b'r') => '\r',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'u') => {
            let unit = hex4(&b[2.min(b.len())..]).unwrap_or(0xFFFD);
            if (0xD800..0xDC00).contains(&unit) {
                // A second half cut off by a prefix reads as the first low surrogate.
                let low = hex4(b.get(8..).unwrap_or_default()).unwrap_or(0xDC00);
                if !(0xDC00..0xE000).contains(&low) {
                    // Never in a literal the reader checked (`form_of`); a lone first half.
                    return ('\u{FFFD}', 6);
                }
                let c = 0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                return (char::from_u32(c).unwrap_or('\u{FFFD}'), 12);
            }
            return (char::from_u32(u32::from(unit)).unwrap_or('\u{FFFD}'), 6);
        }
        Some(&other) => other as char,
        None => '\\',
    };
    (c, 2)
}

/// Any JSON value as it was read (a tool's input, compaction metadata), passed through to
/// the views untouched.
#[derive(Clone)]
pub struct RawJson {
    json: Span,
    shared: bool,
}

impl RawJson {
    /// The JSON text `json`, which lies inside `buffer`, as a slice of it (a copy when it
    /// does not).
    pub fn in_buffer(buffer: &TextBuffer, json: &str) -> RawJson {
        match Span::within(buffer, json) {
            Some(span) => RawJson {
                json: span,
                shared: true,
            },
            None => RawJson::copy_of(json),
        }
    }

    /// The JSON text `json` (valid JSON), kept without a copy.
    pub fn owned(json: String) -> RawJson {
        RawJson {
            json: Span::owned(json),
            shared: false,
        }
    }

    /// A copy of the JSON text `json` (valid JSON).
    pub fn copy_of(json: &str) -> RawJson {
        RawJson {
            json: Span::owned(json.to_owned()),
            shared: false,
        }
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.json.as_str()
    }

    /// The value parsed (`null` when it does not parse, which a value read by the JSON
    /// reader always does).
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(self.get()).unwrap_or(serde_json::Value::Null)
    }

    /// Bytes allocated for this value alone (none when it is a slice of an input buffer).
    pub fn own_heap_size(&self) -> usize {
        if self.shared {
            0
        } else {
            self.json.len as usize + COPY_OVERHEAD
        }
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

/// Written through as it was read.
impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_raw(self.get(), s)
    }
}

/// A string of the input owns nothing: its bytes are the input's, counted once by the
/// session that keeps them ([`Session::input`](crate::Session::input)). A copy owns its literal.
impl HeapSize for JsonStr {
    fn heap_size(&self) -> usize {
        self.own_heap_size()
    }
}

impl HeapSize for RawJson {
    fn heap_size(&self) -> usize {
        self.own_heap_size()
    }
}

#[cfg(test)]
mod tests {
    use crate::json::raw::*;

    fn literal_of(json: &str) -> JsonStr {
        let buffer = Arc::new(ByteString::from(json));
        JsonStr::in_buffer(&buffer, &buffer).unwrap()
    }

    #[test]
    fn raw_fragments_are_written_through() {
        let s = literal_of(r#""a\nb""#);
        let other = literal_of(r#""x\u0041\/""#);
        let raw = RawJson::copy_of(r#"{"k": [1, 2]}"#);
        assert_eq!(
            serde_json::to_string(&(&s, &other, &raw)).unwrap(),
            r#"["a\nb","xA/",{"k": [1, 2]}]"#
        );
        assert_eq!(serde_json::to_value(&s).unwrap(), serde_json::json!("a\nb"));
    }

    /// Found by fuzzing: a first half followed by an escape that is no second half took
    /// 0xDC00 from it, overflowing (a panic in a debug build). It reads as a lone half,
    /// and the escape after it as itself; a pair and a pair cut by a prefix read as before.
    #[test]
    fn a_first_half_before_another_escape_decodes_as_a_lone_half() {
        assert_eq!(decode_escape(br"\ud83d\u0041"), ('\u{FFFD}', 6));
        assert_eq!(decode_escape(br"\u0041"), ('A', 6));
        assert_eq!(decode_escape(br"\ud83d\ude00"), ('\u{1F600}', 12));
        assert_eq!(decode_escape(br"\ud83d\ude"), ('\u{1F400}', 12));
    }

    #[test]
    fn forms_are_told_apart() {
        let form = |inside: &str| form_of(inside.as_bytes());
        assert_eq!(form("plain é"), Ok(Form::Plain));
        assert_eq!(form(r#"a\"b\\c\n\r\t\b\f\u0000\u001f"#), Ok(Form::Canonical));
        for other in [r"\/", r"\u0041", r"\u001F", r"\u000a", r"\u00e9", r"\ud83d\ude00"] {
            assert_eq!(form(other), Ok(Form::Other), "{other}");
        }
        for lone in [r"a\ud83d b", r"\ude00", r"x\uD800", r"\ud83d\u0041"] {
            assert_eq!(form(lone), Err(LoneSurrogate), "{lone}");
        }
    }

    /// Escapes are found eight bytes at a time: wherever they fall in a long text.
    #[test]
    fn forms_of_long_texts_are_told_wherever_the_escapes_fall() {
        for before in 0..20 {
            let pad = "a".repeat(before);
            let form = |escape: &str| form_of(format!("{pad}{escape}{pad}é{pad}").as_bytes());
            assert_eq!(form(""), Ok(Form::Plain), "{before}");
            assert_eq!(form(r"\n"), Ok(Form::Canonical), "{before}");
            assert_eq!(form(r"\\x\/"), Ok(Form::Other), "{before}");
            assert_eq!(form(r"\\\\"), Ok(Form::Canonical), "{before}");
            assert_eq!(form(r"\ud800"), Err(LoneSurrogate), "{before}");
        }
    }

    proptest::proptest! {
        /// The vectorised searches for `\u` and `\/` tell every literal's form as the scan
        /// of each escape does: escaped backslashes before a `u` or a `/`, pairs, lone
        /// halves, uppercase digits and wide characters, anywhere in the literal.
        #[test]
        fn the_quick_form_is_the_form_escape_by_escape(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "u", "/", "é", "😀", " ", r"\n", r#"\""#, r"\\", r"\\u", r"\\/", r"\/",
                    r"\t", r"\b", r"\u0041", r"\u001f", r"\u001F", r"\u000a", r"\ud83d\ude00",
                    r"\ud83d", r"\ude00",
                ]),
                0..24,
            ),
        ) {
            let inside = pieces.concat();
            proptest::prop_assert_eq!(form_of(inside.as_bytes()), form_by_escapes(inside.as_bytes(), 0), "{}", inside);
        }
    }

    /// A character, an escape or a surrogate pair of escapes across a block boundary,
    /// wherever it falls, with every number of units around it: the blocks stop before it
    /// and the words count it.
    #[test]
    fn prefixes_counted_by_blocks_do_not_split_what_straddles_a_block() {
        for straddler in [
            "😀",
            "é",
            "✓",
            r"\ud83d\ude00",
            r"\u0041",
            r"\n",
            r"\\",
            r"\\\\\n",
        ] {
            for start in 40..80 {
                let escaped = format!("{}{straddler}{}", "a".repeat(start), "b".repeat(70));
                let (_, total) = escaped_prefix_by_words(&escaped, usize::MAX);
                for units in 0..=total + 1 {
                    assert_eq!(
                        escaped_prefix(&escaped, units),
                        escaped_prefix_by_words(&escaped, units),
                        "{straddler} at {start}, {units} units"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        /// Counting whole 64-byte blocks first cuts every text where counting it word by
        /// word does: texts of several blocks with escapes of every kind (runs of escaped
        /// backslashes, `\u` escapes and pairs) and wide characters falling across block
        /// boundaries, cut at any number of units.
        #[test]
        fn prefixes_counted_by_blocks_are_those_counted_by_words(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "ab", "abcdefgh", "u", "é", "✓", "😀", r"\n", r#"\""#, r"\\", r"\\u", r"\\\\",
                    r"\/", r"\u0041", r"\u00e9", r"\ud83d\ude00", r"\u001f",
                ]),
                0..160,
            ),
            units in 0usize..700,
        ) {
            let escaped = pieces.concat();
            proptest::prop_assert_eq!(
                escaped_prefix(&escaped, units),
                escaped_prefix_by_words(&escaped, units),
                "{}", escaped
            );
        }

        /// The block masks read with SSE2 are those read a byte at a time.
        #[test]
        fn block_masks_are_those_read_a_byte_at_a_time(block in proptest::array::uniform32(proptest::num::u8::ANY), other in proptest::array::uniform32(proptest::num::u8::ANY)) {
            let mut bytes = [0u8; 64];
            bytes[..32].copy_from_slice(&block);
            bytes[32..].copy_from_slice(&other);
            proptest::prop_assert_eq!(block_masks(&bytes), block_masks_bytewise(&bytes));
        }
    }

    #[test]
    fn a_slice_of_the_buffer_shares_it_and_a_copy_does_not() {
        let buffer = Arc::new(ByteString::from(r#"{"a":"shared"}"#));
        let literal = &buffer[5..13];
        let shared = JsonStr::in_buffer(&buffer, literal).unwrap();
        assert_eq!(shared.literal().as_ptr(), literal.as_ptr());
        assert_eq!(shared.own_heap_size(), 0);
        let copied = JsonStr::copy_of(literal).unwrap();
        assert_ne!(copied.literal().as_ptr(), literal.as_ptr());
        assert_eq!(copied.text(), "shared");
        assert_eq!(copied.own_heap_size(), 8 + COPY_OVERHEAD);
        let elsewhere = JsonStr::in_buffer(&buffer, "\"elsewhere\"").unwrap();
        assert_eq!(elsewhere.text(), "elsewhere");
        assert!(
            elsewhere.own_heap_size() > 0,
            "a literal outside the buffer is copied"
        );
        assert_eq!(std::mem::size_of::<JsonStr>(), 24);
    }

    /// The cut a long literal remembers is the one counting gives, whether it falls inside
    /// the text or past its end, and its clones remember it too.
    #[test]
    fn a_long_literal_remembers_where_its_cut_falls() {
        let line = r#"let x = \"é\";\tf(😀) \\ \u00e9\ud83d\ude00 done\n"#;
        let texts = [
            line.repeat(CUT_UNITS / 20),
            "é".repeat(CUT_UNITS - 1),
            "😀".repeat(CUT_UNITS / 2 + 1),
            format!("{}😀", "a".repeat(CUT_UNITS - 1)),
        ];
        for inside in texts {
            let literal = literal_of(&format!("\"{inside}\""));
            assert!(inside.len() > CUT_UNITS);
            let counted = escaped_prefix(&inside, CUT_UNITS);
            assert_eq!(literal.known_cut(), None);
            assert_eq!(literal.escaped_prefix(CUT_UNITS), counted);
            assert_eq!(literal.known_cut(), Some(counted));
            assert_eq!(literal.escaped_prefix(CUT_UNITS), counted);
            assert_eq!(literal.clone().known_cut(), Some(counted));
            assert_eq!(
                literal.escaped_prefix(CUT_UNITS - 7),
                escaped_prefix(&inside, CUT_UNITS - 7)
            );
        }
        let short = literal_of(&format!("\"{}\"", "a".repeat(CUT_UNITS)));
        assert_eq!(short.escaped_prefix(CUT_UNITS), (CUT_UNITS, CUT_UNITS));
        assert_eq!(
            short.known_cut(),
            None,
            "a literal no longer than the cut needs none"
        );
    }

    /// Every string `serde_json` writes decodes back, is canonical, and is what
    /// [`escape_into`] writes.
    #[test]
    fn escaping_and_decoding_agree_with_serde_json() {
        let all_controls: String = (0u8..0x20).map(char::from).collect();
        for text in [
            "",
            "plain",
            "quote \" back \\ nl \n tab \t é ✓ 𝄞 \u{7f} \u{2028}",
            &all_controls,
        ] {
            let literal = serde_json::to_string(text).unwrap();
            let mut ours = String::new();
            escape_into(text, &mut ours);
            assert_eq!(format!("\"{ours}\""), literal);
            let s = JsonStr::copy_of(&literal).unwrap();
            assert!(s.is_canonical());
            assert_eq!(s.text(), text);
            assert_eq!(JsonStr::new(text).literal(), literal);
            assert_eq!(s.is_empty(), text.is_empty());
        }
    }

    #[test]
    fn other_escapes_decode() {
        let s = literal_of(r#""\u0041\/\ud83d\ude00\u00E9""#);
        assert_eq!(s.text(), "A/😀é");
        assert_eq!(s, "A/😀é");
        assert_eq!(serde_json::to_string(&s).unwrap(), r#""A/😀é""#);
    }

    #[test]
    fn equal_texts_are_equal_and_hash_alike_whatever_their_escapes() {
        use std::hash::BuildHasher;
        let h = foldhash::fast::FixedState::default();
        let a = literal_of(r#""A\n""#);
        let b = literal_of(r#""\u0041\n""#);
        assert_eq!(a, b);
        assert_eq!(h.hash_one(&a), h.hash_one(&b));
        assert_ne!(a, literal_of(r#""A""#));
    }

    #[test]
    fn searches_in_the_literal_find_what_the_text_holds() {
        let s = literal_of(r#""x\n<local-command-stdout>\"ok\"\u00e9""#);
        assert!(s.contains(&Needle::new("<local-command-")));
        assert!(
            s.contains(&Needle::new("\"ok\"")),
            "a needle with a quote is searched in the text"
        );
        assert!(!s.contains(&Needle::new("u00e9")));
        assert!(s.starts_with("x\n<local"));
        assert!(!s.starts_with("y"));
        assert!(is_literal_safe("<command-name>"));
        assert!(!is_literal_safe("e9"));
        assert!(!is_literal_safe("a\"b"));
    }
}
