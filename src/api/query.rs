//! Query strings, read as the reference reads them: the first value of a repeated key wins,
//! and `step` is parsed like JavaScript's `parseInt(v, 10)`.

use super::error::{echo, ApiError};
use crate::core::session::Branch;

/// The pairs of a query string, in order.
#[derive(Debug, Default, Clone)]
pub struct QueryPairs(Vec<(String, String)>);

impl QueryPairs {
    /// Reads `query` (the part after `?`); an undecodable query reads as empty.
    pub fn parse(query: Option<&str>) -> QueryPairs {
        QueryPairs(
            query
                .and_then(|q| serde_urlencoded::from_str(q).ok())
                .unwrap_or_default(),
        )
    }

    /// The first value of `key`.
    pub fn first(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// `?step=N`: absent is `None`; a value `parseInt` reads as a non-negative integer is
    /// accepted (`5abc` is 5, `3.9` is 3, `1e3` is 1, `-0` is 0); anything else (`abc`, `-1`,
    /// empty) is 400 `Invalid step parameter`.
    pub fn step(&self) -> Result<Option<u64>, ApiError> {
        match self.first("step") {
            None => Ok(None),
            Some(v) => parse_int(v)
                .filter(|n| *n >= 0)
                .map(|n| Some(u64::try_from(n).unwrap_or(u64::MAX)))
                .ok_or_else(|| ApiError::BadRequest("Invalid step parameter".into())),
        }
    }

    /// `?branch=active|all` (default `all`); anything else is 400.
    pub fn branch(&self) -> Result<Branch, ApiError> {
        self.first("branch").map_or(Ok(Branch::All), |value| {
            value.parse().map_err(|_| {
                ApiError::BadRequest(format!(
                    "unknown branch '{}' (expected active or all)",
                    echo(value)
                ))
            })
        })
    }

    /// A boolean flag: `true`, `1`, `yes` or `on` (any case).
    pub fn flag(&self, key: &str) -> bool {
        self.first(key)
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"))
    }
}

/// JavaScript's `parseInt(s, 10)`: leading whitespace, an optional sign, then as many
/// decimal digits as there are. `None` where JavaScript gives `NaN`. Values beyond `i128`
/// saturate.
pub fn parse_int(s: &str) -> Option<i128> {
    let s = s.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let run: &str = &digits[..digits.bytes().take_while(u8::is_ascii_digit).count()];
    if run.is_empty() {
        return None;
    }
    let value = run.bytes().fold(0i128, |acc, d| {
        acc.saturating_mul(10).saturating_add(i128::from(d - b'0'))
    });
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_int_reads_like_javascript() {
        for (s, want) in [
            ("5abc", Some(5)),
            ("1e3", Some(1)),
            ("0x10", Some(0)),
            ("3.9", Some(3)),
            (" 7", Some(7)),
            ("-0", Some(0)),
            ("-1", Some(-1)),
            ("+4", Some(4)),
            ("abc", None),
            ("", None),
            ("-", None),
        ] {
            assert_eq!(parse_int(s), want, "{s:?}");
        }
    }

    #[test]
    fn step_accepts_what_the_reference_accepts() {
        let step = |q: &str| QueryPairs::parse(Some(q)).step().map_err(|e| e.to_string());
        assert_eq!(step("step=5abc"), Ok(Some(5)));
        assert_eq!(step("step=-0"), Ok(Some(0)));
        assert_eq!(step("step=99999"), Ok(Some(99999)));
        assert_eq!(step("step=5&step=abc"), Ok(Some(5)));
        assert_eq!(step("other=1"), Ok(None));
        assert_eq!(step("step=-1"), Err("Invalid step parameter".to_owned()));
        assert_eq!(step("step="), Err("Invalid step parameter".to_owned()));
        assert_eq!(step("step=%207"), Ok(Some(7)));
    }
}
