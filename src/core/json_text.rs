//! Text kept as the JSON it was read as, shared with the buffer it was read from.
//!
//! A session's bulk is text: tool results, file contents, model output. Decoded into owned
//! `String`s at parse time, every byte of it is copied once into fresh memory (which on a
//! virtual machine costs more than the parse) and the file's buffer and the copies are both
//! alive at the peak. [`JsonStr`] and [`RawJson`] instead hold a slice of the file's
//! [`Bytes`]: reading a record costs no copy of its text, a body writes the text through as
//! the escaped JSON it already is, and text is decoded only where a view reads it.
//!
//! Both types are immutable and cheap to clone (a reference count). Their bytes are
//! always valid UTF-8: they are only made from `&str` slices that the JSON reader
//! validated, or by encoding a `&str`.

use std::borrow::Cow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;
use serde::{Serialize, Serializer};

/// The name under which `serde_json` passes a raw JSON fragment to its serializer (what
/// [`serde_json::value::RawValue`] serializes as). Fixed by the `serde_json` version in
/// `Cargo.lock`; `tests::raw_text_is_written_through` fails if it ever changes.
const RAW_TOKEN: &str = "$serde_json::private::RawValue";

/// Writes `json` (valid JSON) through a `serde_json` serializer without re-encoding it.
fn serialize_raw<S: Serializer>(json: &str, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct(RAW_TOKEN, 1)?;
    st.serialize_field(RAW_TOKEN, json)?;
    st.end()
}

/// Where a text's bytes are.
#[derive(Clone)]
enum Text {
    /// A slice of an input buffer, shared with it.
    Shared(Bytes),
    /// A copy of its own (text that was decoded, repaired or built).
    Owned(Arc<str>),
}

impl Text {
    /// `slice` as a shared slice of `buffer`, or a copy when it does not lie inside it.
    fn share(buffer: &Bytes, slice: &str) -> Text {
        let range = buffer.as_ptr_range();
        let inside = range.start <= slice.as_ptr() && slice.as_bytes().as_ptr_range().end <= range.end;
        if inside && !slice.is_empty() {
            Text::Shared(buffer.slice_ref(slice.as_bytes()))
        } else {
            Text::Owned(Arc::from(slice))
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // SAFETY: shared bytes are valid UTF-8. `Text::share` slices them out of a
            // `&str`, `JsonStr::from_unescaped` out of a `&str` and the two ASCII quotes
            // around it, and the empty literal is ASCII; `Bytes` never changes its bytes.
            // Validating here instead would scan every text at every read (a tenth of a
            // workflow render, measured).
            Text::Shared(b) => unsafe { std::str::from_utf8_unchecked(b) },
            Text::Owned(s) => s,
        }
    }

    /// Bytes allocated for this text alone: none for a shared slice (its buffer is
    /// counted once, by the session that keeps it), the copy and its counts otherwise.
    fn own_heap_size(&self) -> usize {
        match self {
            Text::Shared(_) => 0,
            Text::Owned(s) => s.len() + 2 * std::mem::size_of::<usize>(),
        }
    }
}

/// True when the JSON string literal `literal` holds a `\\uD800`..`\\uDFFF` escape that is
/// not half of a surrogate pair: the reader refuses such a string (it does not decode), so
/// that its line goes through the repair that replaces them.
pub(crate) fn has_lone_surrogate(literal: &[u8]) -> bool {
    fn unit(b: &[u8]) -> Option<u16> {
        let hex = std::str::from_utf8(b.get(..4)?).ok()?;
        u16::from_str_radix(hex, 16).ok()
    }
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'\\', literal.get(at..).unwrap_or_default()) {
        let i = at + found;
        if literal.get(i + 1) != Some(&b'u') {
            at = i + 2;
            continue;
        }
        at = i + 6;
        match unit(&literal[(i + 2).min(literal.len())..]) {
            Some(0xD800..=0xDBFF) => {
                let low = literal.get(i + 6..i + 8) == Some(b"\\u")
                    && unit(&literal[(i + 8).min(literal.len())..])
                        .is_some_and(|u| (0xDC00..0xE000).contains(&u));
                if !low {
                    return true;
                }
                at = i + 12;
            }
            Some(0xDC00..=0xDFFF) => return true,
            _ => {}
        }
    }
    false
}

/// A JSON string as it was read: its literal, quotes and escapes included.
#[derive(Clone)]
pub struct JsonStr(Text);

impl JsonStr {
    /// The string literal `literal` (quotes included), shared with `buffer` when it lies
    /// inside it.
    pub fn from_literal(buffer: &Bytes, literal: &str) -> JsonStr {
        debug_assert!(literal.len() >= 2 && literal.starts_with('"') && literal.ends_with('"'));
        JsonStr(Text::share(buffer, literal))
    }

    /// The literal of `text`, a string's text without escapes that the reader borrowed
    /// from `buffer`: the text with the quotes around it, shared, when they are there, and
    /// `text` encoded otherwise.
    pub fn from_unescaped(buffer: &Bytes, text: &str) -> JsonStr {
        let start = (text.as_ptr() as usize).wrapping_sub(buffer.as_ptr() as usize);
        let end = start.wrapping_add(text.len());
        let quoted = start >= 1
            && end < buffer.len()
            && buffer[start - 1] == b'"'
            && buffer[end] == b'"'
            && memchr::memchr(b'\\', text.as_bytes()).is_none();
        if quoted {
            JsonStr(Text::Shared(buffer.slice(start - 1..end + 1)))
        } else {
            JsonStr::new(text)
        }
    }

    /// `text`, encoded as a JSON string.
    pub fn new(text: &str) -> JsonStr {
        // Encoding a `&str` cannot fail.
        JsonStr(Text::Owned(Arc::from(
            serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned()),
        )))
    }

    /// The literal, quotes and escapes included: what a body writes.
    pub fn literal(&self) -> &str {
        self.0.as_str()
    }

    /// The literal without its quotes (still escaped).
    fn escaped(&self) -> &str {
        let l = self.literal();
        l.get(1..l.len().saturating_sub(1)).unwrap_or_default()
    }

    /// The text: borrowed when the literal has no escape, decoded otherwise.
    pub fn get(&self) -> Cow<'_, str> {
        let inner = self.escaped();
        if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
            return Cow::Borrowed(inner);
        }
        // Cannot fail: the reader refused literals that do not decode (lone surrogates
        // included), and `new` writes only decodable ones.
        Cow::Owned(serde_json::from_str(self.literal()).unwrap_or_default())
    }

    /// True for `""`.
    pub fn is_empty(&self) -> bool {
        self.literal().len() <= 2
    }

    /// Bytes allocated for this text alone (none when it is shared with an input buffer).
    pub fn own_heap_size(&self) -> usize {
        self.0.own_heap_size()
    }
}

impl Default for JsonStr {
    fn default() -> Self {
        JsonStr(Text::Shared(Bytes::from_static(b"\"\"")))
    }
}

/// Two texts are equal when their literals are: a writer escapes the same text the same
/// way, so the duplicates a log holds compare equal without being decoded. A text written
/// with different escapes (`"\u0041"` and `"A"`) compares unequal.
impl PartialEq for JsonStr {
    fn eq(&self, other: &Self) -> bool {
        self.literal() == other.literal()
    }
}

impl Eq for JsonStr {}

/// Hashes the literal, consistently with `PartialEq`.
impl Hash for JsonStr {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.literal().hash(h);
    }
}

/// Compares the decoded text.
impl PartialEq<str> for JsonStr {
    fn eq(&self, other: &str) -> bool {
        self.get() == other
    }
}

impl PartialEq<&str> for JsonStr {
    fn eq(&self, other: &&str) -> bool {
        self.get() == *other
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

impl From<String> for JsonStr {
    fn from(text: String) -> JsonStr {
        JsonStr::new(&text)
    }
}

/// Written through as the literal it was read as (with `serde_json`; other serializers get
/// the decoded text).
impl Serialize for JsonStr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_raw(self.literal(), s)
    }
}

/// Any JSON value as it was read (tool inputs, compaction metadata), passed through to the
/// views untouched.
#[derive(Clone)]
pub struct RawJson(Text);

impl RawJson {
    /// The JSON text `json`, shared with `buffer` when it lies inside it.
    pub fn from_json(buffer: &Bytes, json: &str) -> RawJson {
        RawJson(Text::share(buffer, json))
    }

    /// A copy of `raw`.
    pub fn from_raw_value(raw: &serde_json::value::RawValue) -> RawJson {
        RawJson(Text::Owned(Arc::from(raw.get())))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.as_str()
    }

    /// The value parsed (`null` when it does not parse, which a value read by the JSON
    /// reader always does).
    pub fn value(&self) -> serde_json::Value {
        serde_json::from_str(self.get()).unwrap_or(serde_json::Value::Null)
    }

    /// Bytes allocated for this value alone (none when it is shared with an input buffer).
    pub fn own_heap_size(&self) -> usize {
        self.0.own_heap_size()
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

/// Written through as it was read (with `serde_json`).
impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_raw(self.get(), s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_text_is_written_through() {
        let buffer = Bytes::from_static(br#"{"a":"x\u0041\n","b":{"k": [1, 2]}}"#);
        let all = std::str::from_utf8(&buffer).unwrap();
        let s = JsonStr::from_literal(&buffer, &all[5..16]);
        let r = RawJson::from_json(&buffer, &all[21..34]);
        assert_eq!(s.literal(), r#""x\u0041\n""#);
        assert_eq!(s.get(), "xA\n");
        assert_eq!(
            serde_json::to_string(&(&s, &r)).unwrap(),
            r#"["x\u0041\n",{"k": [1, 2]}]"#
        );
        assert_eq!(serde_json::to_value(&s).unwrap(), serde_json::json!("xA\n"));
    }

    #[test]
    fn a_slice_of_the_buffer_shares_it_and_another_is_copied() {
        let buffer = Bytes::from_static(br#""shared""#);
        let shared = JsonStr::from_literal(&buffer, std::str::from_utf8(&buffer).unwrap());
        assert_eq!(shared.literal().as_ptr(), buffer.as_ptr());
        assert_eq!(shared.own_heap_size(), 0);
        let elsewhere = String::from("\"copied\"");
        let copied = JsonStr::from_literal(&buffer, &elsewhere);
        assert_ne!(copied.literal().as_ptr(), elsewhere.as_ptr());
        assert_eq!(copied.get(), "copied");
        assert!(copied.own_heap_size() >= elsewhere.len());
    }

    #[test]
    fn lone_surrogates_are_told_from_pairs() {
        assert!(!has_lone_surrogate(br#""a\ud83d\ude00b \n \\u d800""#));
        assert!(has_lone_surrogate(br#""a\ud83d b""#));
        assert!(has_lone_surrogate(br#""\ude00""#));
        assert!(has_lone_surrogate(br#""x\uD800""#));
        assert!(!has_lone_surrogate(br#""\u00e9\\""#));
    }

    #[test]
    fn an_unescaped_text_borrowed_from_the_buffer_keeps_its_quotes() {
        let buffer = Bytes::from_static(br#"{"a":"plain"}"#);
        let text = &std::str::from_utf8(&buffer).unwrap()[6..11];
        let s = JsonStr::from_unescaped(&buffer, text);
        assert_eq!(s.literal(), "\"plain\"");
        assert_eq!(s.literal().as_ptr(), buffer[5..].as_ptr());
        assert_eq!(JsonStr::from_unescaped(&buffer, "elsewhere").get(), "elsewhere");
    }

    #[test]
    fn text_without_escapes_is_borrowed_and_encoded_text_decodes_back() {
        for text in ["", "plain", "quote \" and \\ and \n and é and \u{1F600}", "\u{0}"] {
            let s = JsonStr::new(text);
            assert_eq!(s.get(), text);
            assert_eq!(s.is_empty(), text.is_empty());
        }
        assert!(matches!(JsonStr::new("plain").get(), Cow::Borrowed("plain")));
        assert_eq!(JsonStr::default().get(), "");
    }
}
