//! Timestamps: Claude Code writes ISO 8601 strings (`2025-12-10T22:19:50.290Z`).
//!
//! Ordering and durations compare instants, not strings, so every timestamp is read once
//! into milliseconds since the Unix epoch. Views still print the raw string.

use chrono::{DateTime, SecondsFormat, Utc};

/// Milliseconds since the Unix epoch for an RFC 3339 timestamp, or `None` when `s` is not
/// one. Sub-millisecond digits are truncated, as JavaScript's `Date` does.
pub fn parse_millis(s: &str) -> Option<i64> {
    DateTime::parse_from_rfc3339(s).ok().map(|t| t.timestamp_millis())
}

/// `ms` as JavaScript's `Date#toISOString()` prints it: `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn iso_millis(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use crate::json::time::*;

    #[test]
    fn reads_claude_code_timestamps() {
        assert_eq!(parse_millis("1970-01-01T00:00:01.500Z"), Some(1500));
        assert_eq!(parse_millis("2025-12-10T22:19:50.290Z"), Some(1_765_405_190_290));
        assert_eq!(
            parse_millis("2025-12-10T23:19:50.290+01:00"),
            Some(1_765_405_190_290)
        );
        assert_eq!(parse_millis("yesterday"), None);
        assert_eq!(parse_millis(""), None);
    }

    #[test]
    fn prints_like_javascript() {
        assert_eq!(iso_millis(1_765_405_190_290), "2025-12-10T22:19:50.290Z");
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
    }
}
