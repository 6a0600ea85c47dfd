//! A serde reader of JSON text that reads what serde_json reads, on the lines where that
//! is certain, with less work per string.
//!
//! A Codex rollout holds long strings a reader keeps as written or skips (a shell
//! output, a call's arguments, a reasoning item's encrypted content) and escapes them
//! every few bytes. serde_json checks such a string byte by byte between its escapes
//! ([`crate::json::scan`] looks at 16 or 32 bytes at a time), and a string it keeps whole
//! ([`JsonText`]) is checked the same way. [`from_str`] reads objects, arrays and strings
//! itself and hands each number and `true`/`false`/`null` to serde_json. It refuses
//! (with an error) whatever it is not certain to read as serde_json would: a string with
//! an escape read as text, a key with an escape, nesting deeper than [`MAX_DEPTH`]. Such
//! a text is then read by serde_json: [`from_str`] always has serde_json's result (or
//! error).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::scan::string_end;

/// The JSON text of a value as written (a string literal with its quotes), borrowed from
/// the text read: read from serde_json through its `RawValue`, from [`from_str`] at no
/// cost beyond checking it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonText<'a>(&'a str);

impl<'a> JsonText<'a> {
    /// The JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }
}

/// The name [`JsonText`] asks a deserializer for it by: [`from_str`]'s reader answers with
/// the value's text; any other reads it as a serde_json `RawValue`.
const JSON_TEXT: &str = "$sessiongraph::JsonText";

impl<'de: 'a, 'a> Deserialize<'de> for JsonText<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_newtype_struct(JSON_TEXT, JsonTextVisitor(std::marker::PhantomData))
    }
}

/// Reads a [`JsonText`].
struct JsonTextVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for JsonTextVisitor<'a> {
    type Value = JsonText<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<JsonText<'a>, D::Error> {
        <&'de RawValue>::deserialize(d).map(|raw| JsonText(raw.get()))
    }
    fn visit_borrowed_str<E>(self, text: &'de str) -> Result<JsonText<'a>, E> {
        Ok(JsonText(text))
    }
}

/// The deepest nesting of objects and arrays this reader reads (serde_json's own limit is
/// deeper: a text nested deeper is read by serde_json).
pub const MAX_DEPTH: usize = 64;

/// Reads `text` as a `T`: the result (or error) of serde_json's `from_str`, read by this
/// reader where it is certain to read it so.
pub fn from_str<'a, T: Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    quick_from_str(text).or_else(|_| serde_json::from_str(text))
}

/// Reads `text` as a `T` with this reader alone: an error when the text is not one it is
/// certain of (see the module's documentation).
fn quick_from_str<'a, T: Deserialize<'a>>(text: &'a str) -> serde_json::Result<T> {
    let mut reader = Reader {
        text,
        at: 0,
        depth: 0,
    };
    let value = T::deserialize(&mut reader)?;
    reader.skip_space();
    if reader.at != text.len() {
        return Err(refused());
    }
    Ok(value)
}

/// The error of a text this reader does not read (never shown: [`from_str`] reads the
/// text again with serde_json).
fn refused() -> serde_json::Error {
    de::Error::custom("not read by the quick reader")
}

/// The reader: the text and where it is in it.
struct Reader<'a> {
    text: &'a str,
    at: usize,
    depth: usize,
}

impl<'a> Reader<'a> {
    /// The next byte that is not JSON whitespace (the reader left on it).
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.as_bytes().get(self.at).copied()
    }

    /// Moves past JSON whitespace.
    fn skip_space(&mut self) {
        let b = self.text.as_bytes();
        while matches!(b.get(self.at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    /// Moves past `byte`, which must come next.
    fn expect(&mut self, byte: u8) -> serde_json::Result<()> {
        if self.peek() != Some(byte) {
            return Err(refused());
        }
        self.at += 1;
        Ok(())
    }

    /// The string literal that starts here (at its quote), quotes included, and whether it
    /// holds an escape; the reader moved past it.
    fn literal(&mut self) -> serde_json::Result<(&'a str, bool)> {
        let start = self.at;
        let (end, escaped) = string_end(self.text.as_bytes(), start + 1).ok_or_else(refused)?;
        self.at = end + 1;
        Ok((&self.text[start..end + 1], escaped))
    }

    /// The text of the number or `true`, `false`, `null` that starts here; the reader
    /// moved past it.
    fn scalar(&mut self) -> &'a str {
        let start = self.at;
        let b = self.text.as_bytes();
        while b
            .get(self.at)
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.'))
        {
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    /// Reads the scalar that starts here with serde_json, as `read` asks of it.
    fn read_scalar<T>(
        &mut self,
        read: impl FnOnce(&mut serde_json::Deserializer<serde_json::de::StrRead<'a>>) -> serde_json::Result<T>,
    ) -> serde_json::Result<T> {
        let scalar = self.scalar();
        if scalar.is_empty() {
            return Err(refused());
        }
        let mut json = serde_json::Deserializer::from_str(scalar);
        let value = read(&mut json)?;
        json.end()?;
        Ok(value)
    }

    /// Goes one level deeper, refusing past [`MAX_DEPTH`].
    fn descend(&mut self) -> serde_json::Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(refused());
        }
        Ok(())
    }

    /// Reads the object that starts here for `visitor`, which must read all of it.
    fn object<V: Visitor<'a>>(&mut self, visitor: V) -> serde_json::Result<V::Value> {
        self.nested(b'}', |entries| visitor.visit_map(entries))
    }

    /// Reads the array that starts here for `visitor`, which must read all of it.
    fn array<V: Visitor<'a>>(&mut self, visitor: V) -> serde_json::Result<V::Value> {
        self.nested(b']', |entries| visitor.visit_seq(entries))
    }

    /// Reads the object or array that starts here (its closing bracket `close`) with
    /// `visit`, which must read all of its entries.
    fn nested<T>(
        &mut self,
        close: u8,
        visit: impl FnOnce(&mut Entries<'_, 'a>) -> serde_json::Result<T>,
    ) -> serde_json::Result<T> {
        self.descend()?;
        self.at += 1;
        let mut entries = Entries {
            reader: self,
            close,
            first: true,
            done: false,
        };
        let value = visit(&mut entries)?;
        if !entries.done {
            return Err(refused());
        }
        self.depth -= 1;
        Ok(value)
    }

    /// Moves past the value that starts here, checking it as serde_json checks a value it
    /// skips.
    fn skip_value(&mut self) -> serde_json::Result<()> {
        match self.peek() {
            Some(b'"') => self.literal().map(drop),
            Some(b'{') => self.object(de::IgnoredAny).map(drop),
            Some(b'[') => self.array(de::IgnoredAny).map(drop),
            _ => self
                .read_scalar(|json| de::IgnoredAny::deserialize(json))
                .map(drop),
        }
    }
}

/// Reads a string for a visitor that wants its text: borrowed when it has no escape; one
/// with an escape is refused (serde_json decodes it, and refuses some escapes this reader
/// would have to decode the same way).
fn visit_text<'a, V: Visitor<'a>>(
    literal: &'a str,
    escaped: bool,
    visitor: V,
) -> serde_json::Result<V::Value> {
    if escaped {
        return Err(refused());
    }
    visitor.visit_borrowed_str(&literal[1..literal.len() - 1])
}

/// What a deserializer method reads: serde_json's method of the same name refuses a value
/// of any other kind (without showing it to the visitor), and so does this reader.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Any value.
    Any,
    /// A number, `true`, `false` or `null`.
    Scalar,
    /// A string.
    Str,
    /// An object.
    Object,
    /// An object or an array.
    Struct,
    /// An array.
    Array,
}

/// A deserializer method that reads an object, an array or a string itself when it is of
/// the kind the method reads, and hands a scalar to serde_json's method of the same name.
macro_rules! read_as {
    ($($method:ident($kind:expr $(, $arg:ident: $ty:ty)*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'a>>(self, $($arg: $ty,)* visitor: V) -> serde_json::Result<V::Value> {
                let kind: Kind = $kind;
                match self.peek() {
                    Some(b'{') if matches!(kind, Kind::Any | Kind::Object | Kind::Struct) => self.object(visitor),
                    Some(b'[') if matches!(kind, Kind::Any | Kind::Array | Kind::Struct) => self.array(visitor),
                    Some(b'"') if matches!(kind, Kind::Any | Kind::Str) => {
                        let (literal, escaped) = self.literal()?;
                        visit_text(literal, escaped, visitor)
                    }
                    Some(b'{' | b'[' | b'"') | None => Err(refused()),
                    Some(_) => self.read_scalar(|json| json.$method($($arg,)* visitor)),
                }
            }
        )*
    };
}

impl<'a> Deserializer<'a> for &mut Reader<'a> {
    type Error = serde_json::Error;

    read_as! {
        deserialize_any(Kind::Any),
        deserialize_bool(Kind::Scalar),
        deserialize_i8(Kind::Scalar),
        deserialize_i16(Kind::Scalar),
        deserialize_i32(Kind::Scalar),
        deserialize_i64(Kind::Scalar),
        deserialize_u8(Kind::Scalar),
        deserialize_u16(Kind::Scalar),
        deserialize_u32(Kind::Scalar),
        deserialize_u64(Kind::Scalar),
        deserialize_f32(Kind::Scalar),
        deserialize_f64(Kind::Scalar),
        deserialize_unit(Kind::Scalar),
        deserialize_unit_struct(Kind::Scalar, name: &'static str),
        deserialize_char(Kind::Str),
        deserialize_str(Kind::Str),
        deserialize_string(Kind::Str),
        deserialize_identifier(Kind::Str),
        deserialize_map(Kind::Object),
        deserialize_struct(Kind::Struct, name: &'static str, fields: &'static [&'static str]),
        deserialize_seq(Kind::Array),
        deserialize_tuple(Kind::Array, len: usize),
        deserialize_tuple_struct(Kind::Array, name: &'static str, len: usize),
        deserialize_enum(Kind::Scalar, name: &'static str, variants: &'static [&'static str]),
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, _: V) -> serde_json::Result<V::Value> {
        Err(refused())
    }
    fn deserialize_byte_buf<V: Visitor<'a>>(self, _: V) -> serde_json::Result<V::Value> {
        Err(refused())
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> serde_json::Result<V::Value> {
        match self.peek() {
            Some(b'n') => self.read_scalar(|json| json.deserialize_option(visitor)),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> serde_json::Result<V::Value> {
        if name != JSON_TEXT {
            return visitor.visit_newtype_struct(self);
        }
        self.skip_space();
        let start = self.at;
        self.skip_value()?;
        visitor.visit_borrowed_str(&self.text[start..self.at])
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> serde_json::Result<V::Value> {
        self.skip_value()?;
        visitor.visit_unit()
    }
}

/// The members of an object or the elements of an array being read.
struct Entries<'r, 'a> {
    reader: &'r mut Reader<'a>,
    /// The closing bracket.
    close: u8,
    first: bool,
    done: bool,
}

impl Entries<'_, '_> {
    /// Moves to the next entry (past the comma before it): false, past the closing
    /// bracket, when there is none.
    fn advance(&mut self) -> serde_json::Result<bool> {
        let reader = &mut *self.reader;
        match reader.peek() {
            Some(c) if c == self.close => {
                reader.at += 1;
                self.done = true;
                return Ok(false);
            }
            Some(b',') if !self.first => reader.at += 1,
            Some(_) if self.first => {}
            _ => return Err(refused()),
        }
        self.first = false;
        Ok(true)
    }
}

impl<'a> MapAccess<'a> for &mut Entries<'_, 'a> {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'a>>(&mut self, seed: K) -> serde_json::Result<Option<K::Value>> {
        if !self.advance()? {
            return Ok(None);
        }
        let reader = &mut *self.reader;
        if reader.peek() != Some(b'"') {
            return Err(refused());
        }
        let (literal, escaped) = reader.literal()?;
        if escaped {
            return Err(refused());
        }
        reader.expect(b':')?;
        seed.deserialize(Key(&literal[1..literal.len() - 1])).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> serde_json::Result<V::Value> {
        seed.deserialize(&mut *self.reader)
    }
}

/// A key (without an escape) read for a visitor: as serde_json reads a key, but that a
/// [`JsonText`] of a key is refused (serde_json's has the key's quotes).
struct Key<'a>(&'a str);

impl<'a> Deserializer<'a> for Key<'a> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> serde_json::Result<V::Value> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> serde_json::Result<V::Value> {
        if name == JSON_TEXT {
            return Err(refused());
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> serde_json::Result<V::Value> {
        de::value::BorrowedStrDeserializer::new(self.0).deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        <W: Visitor<'a>>
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl<'a> SeqAccess<'a> for &mut Entries<'_, 'a> {
    type Error = serde_json::Error;

    fn next_element_seed<T: DeserializeSeed<'a>>(&mut self, seed: T) -> serde_json::Result<Option<T::Value>> {
        if !self.advance()? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.reader).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::{from_str, quick_from_str, JsonText, MAX_DEPTH};
    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::Value;

    /// A struct of the shapes a rollout's payload has: names, texts kept as written,
    /// numbers, nested objects.
    #[derive(Deserialize, Debug, PartialEq, Default)]
    #[serde(default)]
    struct Item<'a> {
        #[serde(rename = "type")]
        kind: Option<&'a str>,
        #[serde(borrow)]
        output: Option<JsonText<'a>>,
        #[serde(borrow)]
        content: Option<JsonText<'a>>,
        count: Option<u64>,
        nested: Option<Box<Item<'a>>>,
    }

    #[test]
    fn texts_are_kept_as_written() {
        let line = r#"{"type":"function_call_output","output":"a\nb \"c\"","content":[1, {"x":null}],"count":3,"other":{"deep":[true,false,"\u00e9"]}}"#;
        let item: Item<'_> = quick_from_str(line).unwrap();
        assert_eq!(item.kind, Some("function_call_output"));
        assert_eq!(item.output.unwrap().get(), r#""a\nb \"c\"""#);
        assert_eq!(item.content.unwrap().get(), r#"[1, {"x":null}]"#);
        assert_eq!(item.count, Some(3));
        assert_eq!(item, serde_json::from_str(line).unwrap());
    }

    #[test]
    fn what_the_quick_reader_is_not_sure_of_is_read_by_serde_json() {
        // An escaped text read as text, an escaped key, nesting deeper than the quick
        // reader goes: refused by it, read by serde_json.
        for text in [r#"{"type":"a\u0062"}"#, r#"{"ty\u0070e":"ab"}"#] {
            assert!(quick_from_str::<Value>(text).is_err(), "{text}");
            assert_eq!(
                from_str::<Value>(text).unwrap(),
                serde_json::json!({"type": "ab"})
            );
        }
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert!(quick_from_str::<Value>(&deep).is_err());
        assert_eq!(
            from_str::<Value>(&deep).unwrap(),
            serde_json::from_str::<Value>(&deep).unwrap()
        );
    }

    #[test]
    fn errors_are_serde_json_s() {
        for bad in [
            r#"{"a":1,}"#,
            r#"{"a" 1}"#,
            "[1 2]",
            r#"{"a":tru}"#,
            r#"{"a":1}x"#,
            "",
            r#""open"#,
        ] {
            let ours = from_str::<Value>(bad).unwrap_err().to_string();
            let theirs = serde_json::from_str::<Value>(bad).unwrap_err().to_string();
            assert_eq!(ours, theirs, "{bad}");
        }
    }

    /// JSON values whose strings hold what escapes are made of.
    fn json_value() -> impl Strategy<Value = Value> {
        let text = "[a-z\"\\\\\n\u{1}é\u{1F600}]{0,12}";
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            text.prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 40, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                proptest::collection::vec(("[a-z_]{1,8}", inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn a_text_read_quickly_reads_as_serde_json_reads_it(value in json_value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            let expected: Value = serde_json::from_str(&text).unwrap();
            if let Ok(read) = quick_from_str::<Value>(&text) {
                prop_assert_eq!(&read, &expected);
            }
            prop_assert_eq!(from_str::<Value>(&text).unwrap(), expected);
            let texts: Option<Vec<JsonText<'_>>> = quick_from_str(&text).ok();
            let expected_texts: Option<Vec<JsonText<'_>>> = serde_json::from_str(&text).ok();
            prop_assert_eq!(texts, expected_texts);
        }

        #[test]
        fn a_broken_text_is_read_quickly_only_when_serde_json_reads_it(
            value in json_value(),
            cut in any::<prop::sample::Index>(),
            insert in prop_oneof![Just(""), Just(","), Just("\""), Just("\\"), Just("}"), Just("]"), Just("\u{1}"), Just(" ")],
        ) {
            let text = serde_json::to_string(&value).unwrap();
            let mut at = cut.index(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            // An empty insert takes the character at `at` out instead.
            let rest_from = match insert {
                "" => text[at..].chars().next().map_or(at, |c| at + c.len_utf8()),
                _ => at,
            };
            let broken = format!("{}{}{}", &text[..at], insert, &text[rest_from..]);
            let theirs = serde_json::from_str::<Value>(&broken);
            if let Ok(ours) = quick_from_str::<Value>(&broken) {
                prop_assert_eq!(Some(ours), theirs.ok());
            }
            let ignored = quick_from_str::<serde::de::IgnoredAny>(&broken).is_ok();
            prop_assert!(!ignored || serde_json::from_str::<serde::de::IgnoredAny>(&broken).is_ok());
        }
    }
}
