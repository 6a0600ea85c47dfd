//! Query strings, read as the reference reads them (the first value of a repeated key
//! wins), except `step`, which is read strictly: digits only (the reference's `parseInt`
//! read `1e99` as 1 and `5abc` as 5).

use super::error::{echo, ApiError};
use crate::core::pipeline::session::Branch;
use crate::core::views::graph::GraphMode;

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

    /// Pairs given as they are (a JSON object's members, say).
    pub fn of_pairs(pairs: Vec<(String, String)>) -> QueryPairs {
        QueryPairs(pairs)
    }

    /// The first value of `key`.
    pub fn first(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Every value of `key` that is not empty, in order (`?tool=Bash&tool=Edit`).
    pub fn all<'s>(&'s self, key: &'s str) -> impl Iterator<Item = &'s str> + 's {
        self.0
            .iter()
            .filter(move |(k, v)| k == key && !v.is_empty())
            .map(|(_, v)| v.as_str())
    }

    /// `?step=N`: absent is `None`; a value made of ASCII digits only, at most
    /// [`MAX_STEP`], is accepted (`0`, `7`, `007`); anything else (`1e3`, `5abc`, `-0`,
    /// ` 7`, `3.9`, empty, 40 digits) is 400 `Invalid step parameter`, saying what is
    /// expected.
    pub fn step(&self) -> Result<Option<u64>, ApiError> {
        self.first("step").map(parse_step).transpose()
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

    /// `?edges=none` (CommuGraph's edgeless graph) or `?edges=inferred` (the default);
    /// anything else is 400.
    pub fn graph_mode(&self) -> Result<GraphMode, ApiError> {
        match self.first("edges") {
            None | Some("inferred") => Ok(GraphMode::Edges),
            Some("none") => Ok(GraphMode::Reference),
            Some(other) => Err(ApiError::BadRequest(format!(
                "unknown edges '{}' (expected none or inferred)",
                echo(other)
            ))),
        }
    }

    /// A boolean flag, off when absent: see [`QueryPairs::boolean`].
    pub fn flag(&self, key: &str) -> Result<bool, ApiError> {
        Ok(self.boolean(key)?.unwrap_or(false))
    }

    /// A boolean parameter: `None` when absent or empty, else [`parse_boolean`]'s reading;
    /// any other value is 400, naming the parameter.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.first(key) {
            None | Some("") => Ok(None),
            Some(value) => parse_boolean(key, value).map(Some),
        }
    }
}

/// A boolean value of parameter (or form field) `key`: `true`, `1`, `yes`, `on` or
/// `false`, `0`, `no`, `off`, in any case, around blanks; anything else is 400 naming
/// `key` (a typo such as `?include_sidechains=ture` would otherwise read as false).
pub fn parse_boolean(key: &str, value: &str) -> Result<bool, ApiError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(ApiError::Invalid {
            message: format!(
                "{key}: expected true or false (or 1/0, yes/no, on/off), got '{}'",
                echo(value)
            ),
            details: serde_json::json!({ "field": key }),
        }),
    }
}

/// The largest step accepted: JavaScript's `Number.MAX_SAFE_INTEGER`. The step comes back
/// in the body (`currentStep`), and a JavaScript client reads larger integers inexactly.
pub const MAX_STEP: u64 = (1 << 53) - 1;

/// A step value: digits only, at most [`MAX_STEP`].
fn parse_step(value: &str) -> Result<u64, ApiError> {
    let digits_only = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    digits_only
        .then(|| value.parse::<u64>().ok())
        .flatten()
        .filter(|step| *step <= MAX_STEP)
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "Invalid step parameter: expected a whole number from 0 to {MAX_STEP}, in digits only; got '{}'",
                echo(value)
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_gives_every_value_but_empty_ones() {
        let q = QueryPairs::parse(Some("tool=Bash&q=x&tool=&tool=Edit%20File"));
        assert_eq!(q.all("tool").collect::<Vec<_>>(), ["Bash", "Edit File"]);
        assert_eq!(q.all("none").count(), 0);
        assert_eq!(q.first("tool"), Some("Bash"));
    }

    #[test]
    fn steps_are_digits_only() {
        let step = |q: &str| QueryPairs::parse(Some(q)).step().map_err(|e| e.to_string());
        assert_eq!(step("step=0"), Ok(Some(0)));
        assert_eq!(step("step=99999"), Ok(Some(99999)));
        assert_eq!(step("step=007"), Ok(Some(7)));
        assert_eq!(step("step=9007199254740991"), Ok(Some(MAX_STEP)));
        assert_eq!(step("step=5&step=abc"), Ok(Some(5)));
        assert_eq!(step("other=1"), Ok(None));
        for bad in [
            "5abc",
            "1e3",
            "1e99",
            "0x10",
            "3.9",
            "-0",
            "-1",
            "+4",
            "%207",
            "7%20",
            "",
            "abc",
            "9007199254740992",
            "1234567890123456789012345678901234567890",
        ] {
            let got = step(&format!("step={bad}")).unwrap_err();
            assert!(
                got.starts_with("Invalid step parameter: expected a whole number"),
                "{bad}: {got}"
            );
        }
        assert_eq!(
            step("step=1e99").unwrap_err(),
            "Invalid step parameter: expected a whole number from 0 to 9007199254740991, in digits only; got '1e99'"
        );
    }

    /// Item 11 of the labeling team's report: `?include_sidechains=maybe` read as false.
    #[test]
    fn item11_a_boolean_parameter_refuses_values_it_does_not_know() {
        let flag = |q: &str| QueryPairs::parse(Some(q)).flag("include_sidechains");
        for (query, expected) in [
            ("", false),
            ("include_sidechains=", false),
            ("include_sidechains=true", true),
            ("include_sidechains=TRUE", true),
            ("include_sidechains=1", true),
            ("include_sidechains=on", true),
            ("include_sidechains=false", false),
            ("include_sidechains=No", false),
            ("include_sidechains=0", false),
        ] {
            assert_eq!(flag(query).unwrap(), expected, "{query}");
        }
        for bad in ["maybe", "ture", "2", "yes please"] {
            let e = flag(&format!("include_sidechains={bad}")).unwrap_err();
            assert_eq!(e.status(), axum::http::StatusCode::BAD_REQUEST);
            let message = e.to_string();
            assert!(
                message.starts_with("include_sidechains: expected true or false"),
                "{message}"
            );
            assert!(message.contains(&format!("got '{bad}'")), "{message}");
        }
    }
}
