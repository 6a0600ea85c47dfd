//! Lenient field deserializers for third-party log input.
//!
//! Claude Code adds and changes fields with every release. A field of an unexpected type
//! must not make its whole record unreadable, so scalar fields are read through these
//! functions: a value of the expected type is kept, anything else (including objects and
//! arrays, which are skipped without being built) reads as absent.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

/// A JSON value reduced to the scalars the pipeline reads.
enum Scalar {
    Str(String),
    Bool(bool),
    Num(Number),
    Null,
    Other,
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::Num(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::Num(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Number::from_f64(v).map_or(Scalar::Other, Scalar::Num))
    }
    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar::Str(v))
    }
    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }
    fn visit_none<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
}

fn scalar<'de, D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
    d.deserialize_any(ScalarVisitor)
}

/// A string, or `None` for any other value.
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match scalar(d)? {
        Scalar::Str(s) => Some(s),
        _ => None,
    })
}

/// A string that keeps "present but null" apart from "absent" (with `#[serde(default)]`):
/// `None` when the key is missing, `Some(None)` for `null` or a non-string value.
pub fn nullable_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(string(d)?))
}

/// A boolean, or `None` for any other value.
pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    Ok(match scalar(d)? {
        Scalar::Bool(b) => Some(b),
        _ => None,
    })
}

/// JavaScript truthiness of a flag such as `isMeta`: `true`, a non-empty string or a
/// non-zero number.
pub fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match scalar(d)? {
        Scalar::Bool(b) => b,
        Scalar::Str(s) => !s.is_empty(),
        Scalar::Num(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Scalar::Null => false,
        Scalar::Other => true,
    })
}

/// A JSON number kept exactly as written (integers stay integers), or `None`.
pub fn number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Number>, D::Error> {
    Ok(match scalar(d)? {
        Scalar::Num(n) => Some(n),
        _ => None,
    })
}

/// A non-negative integer (token counts), or `None`.
pub fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(match scalar(d)? {
        Scalar::Num(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|x| *x >= 0.0).map(|x| x as u64)),
        _ => None,
    })
}

/// `T` read from a JSON object; any other JSON value reads as `None` (and is skipped).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectOr<T>(pub Option<T>);

impl<T> Default for ObjectOr<T> {
    fn default() -> Self {
        ObjectOr(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectOr<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = ObjectOr<T>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| ObjectOr(Some(t)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(ObjectOr(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(ObjectOr(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
        }

        d.deserialize_any(ObjectVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use crate::json::lenient::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, Default)]
    #[serde(default)]
    struct Probe {
        #[serde(deserialize_with = "string")]
        s: Option<String>,
        #[serde(deserialize_with = "nullable_string")]
        p: Option<Option<String>>,
        #[serde(deserialize_with = "flag")]
        f: bool,
        #[serde(deserialize_with = "count")]
        c: Option<u64>,
        o: ObjectOr<Inner>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Inner {
        a: u8,
    }

    fn probe(json: &str) -> Probe {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn wrong_types_read_as_absent() {
        let p = probe(r#"{"s":{"x":[1,2]},"p":5,"f":null,"c":"7","o":[1]}"#);
        assert_eq!(p.s, None);
        assert_eq!(p.p, Some(None));
        assert!(!p.f);
        assert_eq!(p.c, None);
        assert_eq!(p.o, ObjectOr(None));
    }

    #[test]
    fn right_types_are_kept() {
        let p = probe(r#"{"s":"x","p":"y","f":true,"c":12,"o":{"a":3}}"#);
        assert_eq!(p.s.as_deref(), Some("x"));
        assert_eq!(p.p, Some(Some("y".into())));
        assert!(p.f);
        assert_eq!(p.c, Some(12));
        assert_eq!(p.o, ObjectOr(Some(Inner { a: 3 })));
    }

    #[test]
    fn absent_and_null_parents_differ() {
        assert_eq!(probe("{}").p, None);
        assert_eq!(probe(r#"{"p":null}"#).p, Some(None));
    }
}
