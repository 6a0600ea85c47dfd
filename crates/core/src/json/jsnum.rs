//! Numbers as JavaScript prints them.
//!
//! The reference serialises with `JSON.stringify`, which prints integral doubles without a
//! fraction (`1`, not `1.0`) and other doubles in the shortest round-trip form. serde_json
//! would print `1.0`, so rates and densities go through [`JsNumber`].

use serde::{Serialize, Serializer};

/// A double that serialises like JavaScript's `Number#toString` (`NaN` and infinities as
/// `null`, as `JSON.stringify` does).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JsNumber(pub f64);

impl Serialize for JsNumber {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let x = self.0;
        if !x.is_finite() {
            return s.serialize_none();
        }
        if x.fract() == 0.0 && x.abs() < 9_007_199_254_740_992.0 {
            return s.serialize_i64(x as i64);
        }
        let mut buf = ryu_js::Buffer::new();
        let text = buf.format_finite(x);
        match serde_json::value::RawValue::from_string(text.to_owned()) {
            Ok(raw) => raw.serialize(s),
            Err(_) => s.serialize_f64(x),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::json::jsnum::*;

    fn json(x: f64) -> String {
        serde_json::to_string(&JsNumber(x)).unwrap()
    }

    #[test]
    fn prints_like_javascript() {
        assert_eq!(json(1.0), "1");
        assert_eq!(json(0.0), "0");
        assert_eq!(json(-0.0), "0");
        assert_eq!(json(0.5), "0.5");
        assert_eq!(json(0.9718875502008032), "0.9718875502008032");
        assert_eq!(json(0.000001), "0.000001");
        assert_eq!(json(1e-7), "1e-7");
        assert_eq!(json(f64::NAN), "null");
    }
}
