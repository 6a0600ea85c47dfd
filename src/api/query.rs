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

    /// A boolean flag: `true`, `1`, `yes` or `on` (any case).
    pub fn flag(&self, key: &str) -> bool {
        self.first(key)
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"))
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
}
