//! The texts of a rollout, kept as the JSON literals they were written as: a text that is
//! one string of the file becomes a slice of the file's buffer (no decoding, no escaping
//! again, no copy), as Claude Code's texts do; a text joined from several strings, or one
//! found inside a JSON string (an output's `{"output": …}`), is made once.

use std::borrow::Cow;

use serde::Deserialize;

use super::wire::Raw;
use crate::json::quick::{self, JsonText};
use crate::json::raw::{EscapedChars, JsonStr, RawJson, TextBuffer};

/// Where the literals being read lie: the file's buffer, or none (the file is not valid
/// UTF-8 as a whole, or the literals lie in a string decoded for the purpose), when they
/// are copied.
#[derive(Clone, Copy)]
pub(super) struct Texts<'b> {
    buffer: Option<&'b TextBuffer>,
    /// True when the buffer was made for the texts read from it (a decoded string), whose
    /// memory they then count as theirs; false for the file's buffer, which the session
    /// counts.
    own: bool,
}

impl<'b> Texts<'b> {
    /// Texts that are slices of `buffer`, the file's, when they lie in it.
    pub(super) fn in_buffer(buffer: Option<&'b TextBuffer>) -> Texts<'b> {
        Texts { buffer, own: false }
    }

    /// Texts that are slices of `buffer`, a string decoded to read the JSON it holds.
    pub(super) fn in_decoded(buffer: &'b TextBuffer) -> Texts<'b> {
        Texts {
            buffer: Some(buffer),
            own: true,
        }
    }

    /// Texts that are copies of the literals.
    #[cfg(test)]
    pub(super) fn copies() -> Texts<'static> {
        Texts {
            buffer: None,
            own: false,
        }
    }

    /// The string literal `literal` (quotes included): a slice of the buffer when it lies
    /// in it, else a copy. A literal holding a lone surrogate escape (which a string
    /// cannot hold) is decoded with U+FFFD in its place.
    pub(super) fn literal(&self, literal: &str) -> JsonStr {
        let kept = match (self.buffer, self.own) {
            (Some(buffer), false) => JsonStr::in_buffer(buffer, literal),
            (Some(buffer), true) => JsonStr::in_own_buffer(buffer, literal),
            (None, _) => JsonStr::copy_of(literal),
        };
        kept.unwrap_or_else(|_| JsonStr::new(&decoded(literal)))
    }

    /// The string `raw` holds; `None` for any other value.
    pub(super) fn string(&self, raw: Raw<'_>) -> Option<JsonStr> {
        string_literal(raw).map(|l| self.literal(l))
    }

    /// The JSON text `json`: a slice of the buffer when it lies in it, else a copy.
    pub(super) fn raw_json(&self, json: &str) -> RawJson {
        match (self.buffer, self.own) {
            (Some(buffer), false) => RawJson::in_buffer(buffer, json),
            _ => RawJson::copy_of(json),
        }
    }

    /// `pieces` as one text: the one literal itself when there is one piece, else the
    /// pieces decoded and joined by `separator`.
    pub(super) fn join(&self, pieces: &[Piece<'_>], separator: &str) -> JsonStr {
        match pieces {
            [] => JsonStr::default(),
            [Piece::Literal(l)] => self.literal(l),
            _ => {
                let mut text = String::new();
                for (i, piece) in pieces.iter().enumerate() {
                    if i > 0 {
                        text.push_str(separator);
                    }
                    match piece {
                        Piece::Literal(l) => text.push_str(&decoded(l)),
                        Piece::Own(s) => text.push_str(s),
                    }
                }
                JsonStr::new(&text)
            }
        }
    }
}

/// A piece of a joined text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Piece<'a> {
    /// A string literal of the input (quotes included).
    Literal(&'a str),
    /// Text of our own (`[image]`).
    Own(&'static str),
}

/// The literal of `raw` (quotes included) when it is a string.
pub(super) fn string_literal(raw: Raw<'_>) -> Option<&str> {
    raw.map(|r| r.get()).filter(|json| json.starts_with('"'))
}

/// True when `raw` is absent or `null`.
pub(super) fn is_null(raw: Raw<'_>) -> bool {
    raw.is_none_or(|r| r.get() == "null")
}

/// The text of the string literal `literal` (quotes included): borrowed when it has no
/// escape, decoded otherwise (a lone surrogate escape as U+FFFD).
pub(super) fn decoded(literal: &str) -> Cow<'_, str> {
    let inside = &literal[1..literal.len() - 1];
    match memchr::memchr(b'\\', inside.as_bytes()) {
        None => Cow::Borrowed(inside),
        Some(first) => Cow::Owned(decode_from(inside, first)),
    }
}

/// `inside` (a literal's text between its quotes) decoded, its first escape at `first`.
///
/// The JSON held in a string (a shell output's `{"output": …}`, a call's arguments)
/// escapes every few bytes, so the runs between escapes are short: each is copied
/// [`CHUNK`] bytes at a time into a buffer sized once (the whole chunk written, the bytes
/// past its first backslash then written over), not found with `memchr` and copied with
/// `memcpy`, whose set-up costs more than such a run.
fn decode_from(inside: &str, first: usize) -> String {
    let bytes = inside.as_bytes();
    // The text of a literal is never longer than the literal; room for a chunk written
    // whole and a character more.
    let mut text = vec![0u8; bytes.len() + CHUNK + 4];
    text[..first].copy_from_slice(&bytes[..first]);
    let (mut at, mut len) = (first, first);
    while at < bytes.len() {
        if bytes[at] == b'\\' {
            // A backslash that starts no escape (in a string that is no literal) makes a
            // U+FFFD of its one byte: the text may outgrow what is left to read.
            let room = len + 4 + (bytes.len() - at) + CHUNK;
            if text.len() < room {
                text.resize(room, 0);
            }
            let (c, escape_len) = escape_at(&bytes[at..]);
            len += c.encode_utf8(&mut text[len..len + 4]).len();
            at += escape_len.max(1);
        } else if let Some(chunk) = bytes.get(at..at + CHUNK) {
            text[len..len + CHUNK].copy_from_slice(chunk);
            let plain = backslash_mask(chunk).trailing_zeros().min(CHUNK as u32) as usize;
            (at, len) = (at + plain, len + plain);
        } else {
            text[len] = bytes[at];
            (at, len) = (at + 1, len + 1);
        }
    }
    text.truncate(len);
    // Runs of a `str` copied whole (cut only before a backslash, which is ASCII) and the
    // UTF-8 of a `char` per escape: UTF-8 throughout, checked with SIMD instructions (the
    // standard library's check takes longer than the decoding).
    match simdutf8::basic::from_utf8(&text) {
        // SAFETY: `text` was just checked to be UTF-8.
        Ok(_) => unsafe { String::from_utf8_unchecked(text) },
        Err(_) => String::from_utf8_lossy(&text).into_owned(),
    }
}

/// Bytes [`decode_from`] copies at once.
const CHUNK: usize = 16;

/// A bit per byte of `chunk` ([`CHUNK`] bytes; the first byte the lowest bit), set for a
/// backslash.
#[cfg(target_arch = "x86_64")]
fn backslash_mask(chunk: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    assert!(chunk.len() >= CHUNK);
    // SAFETY: SSE2 is part of every x86_64 target, and the unaligned load reads the first
    // 16 bytes of `chunk`, which has them (asserted above).
    let bits = unsafe {
        let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
        _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'\\' as i8)))
    };
    bits as u32
}

/// A bit per byte of `chunk` ([`CHUNK`] bytes; the first byte the lowest bit), set for a
/// backslash.
#[cfg(not(target_arch = "x86_64"))]
fn backslash_mask(chunk: &[u8]) -> u32 {
    chunk[..CHUNK]
        .iter()
        .enumerate()
        .fold(0, |mask, (i, &b)| mask | (u32::from(b == b'\\') << i))
}

/// The character of the escape `escape` starts with (`\n`, `\u00e9`, a surrogate pair),
/// and the escape's length. A lone surrogate reads as U+FFFD.
fn escape_at(escape: &[u8]) -> (char, usize) {
    let c = match escape.get(1) {
        Some(b'u') => return unicode_escape_at(escape),
        Some(b'n') => '\n',
        Some(b't') => '\t',
        Some(b'r') => '\r',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(&other) if other.is_ascii() => other as char,
        _ => return ('\u{FFFD}', 1),
    };
    (c, 2)
}

/// The character of the `\uXXXX` escape `escape` starts with (two for a surrogate pair).
fn unicode_escape_at(escape: &[u8]) -> (char, usize) {
    let hex = |at: usize| {
        let digits = std::str::from_utf8(escape.get(at..at + 4)?).ok()?;
        u32::from_str_radix(digits, 16).ok()
    };
    let Some(unit) = hex(2) else {
        return ('\u{FFFD}', 2);
    };
    if (0xD800..0xDC00).contains(&unit) {
        let low = (escape.get(6..8) == Some(b"\\u".as_slice()))
            .then(|| hex(8))
            .flatten()
            .filter(|low| (0xDC00..0xE000).contains(low));
        if let Some(low) = low {
            let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            return (char::from_u32(c).unwrap_or('\u{FFFD}'), 12);
        }
    }
    (char::from_u32(unit).unwrap_or('\u{FFFD}'), 6)
}

/// The first character of a literal's text that is not white space.
pub(super) fn first_visible(literal: &str) -> Option<char> {
    EscapedChars::new(&literal[1..literal.len() - 1]).find(|c| !c.is_whitespace())
}

/// The fields of a content item that give its text.
#[derive(Deserialize, Default)]
#[serde(default)]
struct PartFields<'a> {
    #[serde(borrow)]
    text: Raw<'a>,
    #[serde(borrow)]
    image_url: Raw<'a>,
}

/// One item of a list of content items, as far as its text goes.
pub(super) struct Part<'a> {
    /// Its text: the item itself when it is a string, else its `text` string.
    pub(super) text: Option<&'a str>,
    /// True when it has an `image_url`.
    pub(super) image: bool,
}

/// The items of `raw` when it is a list (an item that is neither a string nor an object
/// has neither text nor image).
pub(super) fn parts(raw: JsonText<'_>) -> Option<Vec<Part<'_>>> {
    let items: Vec<JsonText<'_>> = quick::from_str(raw.get()).ok()?;
    Some(items.into_iter().map(part_of).collect())
}

/// One content item's text and image.
fn part_of(item: JsonText<'_>) -> Part<'_> {
    match item.get().as_bytes().first() {
        Some(b'"') => Part {
            text: Some(item.get()),
            image: false,
        },
        Some(b'{') => {
            let fields: PartFields<'_> = quick::from_str(item.get()).unwrap_or_default();
            Part {
                text: string_literal(fields.text),
                image: fields.image_url.is_some(),
            }
        }
        _ => Part {
            text: None,
            image: false,
        },
    }
}

/// The text parts of content items (`input_text`, `output_text`, `text`, or a string),
/// joined by newlines; an image part shows as `[image]`.
pub(super) fn items_text(texts: &Texts<'_>, raw: JsonText<'_>) -> JsonStr {
    let pieces: Vec<Piece<'_>> = parts(raw)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match (p.text, p.image) {
            (Some(l), _) => Some(Piece::Literal(l)),
            (None, true) => Some(Piece::Own("[image]")),
            (None, false) => None,
        })
        .collect();
    texts.join(&pieces, "\n")
}

/// The text of message content: a string, or its text parts (images left out) joined by
/// newlines; `None` when the content is neither.
pub(super) fn content_text(texts: &Texts<'_>, content: Raw<'_>) -> Option<JsonStr> {
    let raw = content?;
    if let Some(l) = string_literal(content) {
        return Some(texts.literal(l));
    }
    let pieces: Vec<Piece<'_>> = parts(raw)?
        .into_iter()
        .filter(|p| !p.image)
        .filter_map(|p| p.text.map(Piece::Literal))
        .collect();
    Some(texts.join(&pieces, "\n"))
}

/// The image URLs of message content (`input_image` parts), decoded.
pub(super) fn image_urls(content: Raw<'_>) -> Vec<String> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct ImagePart<'a> {
        #[serde(borrow)]
        image_url: Raw<'a>,
    }
    let Some(raw) = content.filter(|r| r.get().starts_with('[')) else {
        return Vec::new();
    };
    let items: Vec<JsonText<'_>> = quick::from_str(raw.get()).unwrap_or_default();
    items
        .iter()
        .filter(|i| i.get().starts_with('{'))
        .filter_map(|i| quick::from_str::<ImagePart<'_>>(i.get()).ok())
        .filter_map(|p| string_literal(p.image_url).map(|l| decoded(l).into_owned()))
        .collect()
}

/// The strings of a list (`images` of a `user_message` event), decoded.
pub(super) fn strings(raw: Raw<'_>) -> Vec<String> {
    let Some(raw) = raw.filter(|r| r.get().starts_with('[')) else {
        return Vec::new();
    };
    let items: Vec<JsonText<'_>> = quick::from_str(raw.get()).unwrap_or_default();
    items
        .iter()
        .filter_map(|i| string_literal(Some(*i)).map(|l| decoded(l).into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytestring::ByteString;
    use std::sync::Arc;

    fn raw(json: &str) -> JsonText<'_> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn one_string_stays_a_slice_of_the_buffer() {
        let buffer: TextBuffer = Arc::new(ByteString::from(r#"{"text":"a\nb"}"#));
        let literal = &buffer[8..14];
        let text = Texts::in_buffer(Some(&buffer)).literal(literal);
        assert_eq!(text.literal(), r#""a\nb""#);
        assert_eq!(text.own_heap_size(), 0);
        assert_eq!(text.text(), "a\nb");
    }

    #[test]
    fn parts_join_and_images_show_or_hide() {
        let content =
            raw(r#"[{"type":"input_text","text":"a"},"b",{"type":"input_image","image_url":"data:x"},7]"#);
        let texts = Texts::copies();
        assert_eq!(items_text(&texts, content).text(), "a\nb\n[image]");
        assert_eq!(content_text(&texts, Some(content)).unwrap().text(), "a\nb");
        assert_eq!(image_urls(Some(content)), ["data:x"]);
        assert_eq!(content_text(&texts, Some(raw("3"))), None);
    }

    #[test]
    fn lone_surrogates_read_as_replacement_characters() {
        let text = Texts::copies().literal(r#""a\ud800b""#);
        assert_eq!(text.text(), "a\u{FFFD}b");
        assert_eq!(decoded(r#""\u00e9\t""#), "é\t");
        assert_eq!(decoded(r#""\ud83d\ude00 \udc00\"\\\/""#), "😀 \u{FFFD}\"\\/");
        assert_eq!(first_visible(r#""\n  {x""#), Some('{'));
    }

    #[test]
    fn backslashes_that_start_no_escape_decode_without_a_panic() {
        let literal = format!("\"{}\"", "\\é".repeat(40));
        let text = decoded(&literal);
        assert_eq!(text, "\u{FFFD}é".repeat(40));
        assert_eq!(decoded("\"abc\\\""), "abc\u{FFFD}");
    }

    proptest::proptest! {
        /// Every literal decodes as serde_json decodes it (lone surrogates aside, which
        /// serde_json refuses).
        #[test]
        fn literals_decode_as_serde_json_decodes_them(text in "(?s).{0,80}") {
            let literal = serde_json::to_string(&text).unwrap();
            proptest::prop_assert_eq!(decoded(&literal), text.as_str());
            let escaped_more = literal.replace('/', "\\/");
            let expected: String = serde_json::from_str(&escaped_more).unwrap();
            proptest::prop_assert_eq!(decoded(&escaped_more), expected);
        }
    }
}
