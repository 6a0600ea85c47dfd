//! Text helpers that count like JavaScript: lengths and cuts are in UTF-16 code units, as
//! the reference's `String.prototype.slice` does.

/// The longest prefix of `s` that is at most `units` UTF-16 code units long. A cut that
/// would split a surrogate pair stops before the pair (JavaScript would emit half of it).
pub fn prefix_utf16(s: &str, units: usize) -> &str {
    if s.len() <= units {
        // Every char takes at least as many bytes as UTF-16 units.
        return s;
    }
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += c.len_utf16();
        if used > units {
            return &s[..i];
        }
    }
    s
}

/// Length of `s` in UTF-16 code units.
pub fn len_utf16(s: &str) -> usize {
    if s.is_ascii() {
        return s.len();
    }
    s.chars().map(char::len_utf16).sum()
}

/// `s` cut to `max` UTF-16 units with `...` when longer: the first `max - 3` units plus
/// `...` (the reference's `truncate`, used for previews).
pub fn truncate_with_ellipsis(s: &str, max: usize) -> String {
    if len_utf16(s) <= max {
        return s.to_owned();
    }
    let mut out = String::with_capacity(max + 3);
    out.push_str(prefix_utf16(s, max.saturating_sub(3)));
    out.push_str("...");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_count_utf16_units() {
        assert_eq!(prefix_utf16("hello", 3), "hel");
        assert_eq!(prefix_utf16("hello", 10), "hello");
        assert_eq!(prefix_utf16("héllo", 2), "hé");
        // "😀" is two units: a cut at 1 unit stops before it.
        assert_eq!(prefix_utf16("a😀b", 2), "a");
        assert_eq!(prefix_utf16("a😀b", 3), "a😀");
    }

    #[test]
    fn lengths_count_utf16_units() {
        assert_eq!(len_utf16("abc"), 3);
        assert_eq!(len_utf16("é"), 1);
        assert_eq!(len_utf16("😀"), 2);
    }

    #[test]
    fn truncation_adds_an_ellipsis_only_when_cutting() {
        assert_eq!(truncate_with_ellipsis("short", 100), "short");
        let long = "x".repeat(101);
        let cut = truncate_with_ellipsis(&long, 100);
        assert_eq!(cut.len(), 100);
        assert!(cut.ends_with("..."));
        assert_eq!(truncate_with_ellipsis(&"x".repeat(100), 100).len(), 100);
    }
}
