//! Text helpers that count like JavaScript: lengths and cuts are in UTF-16 code units, as
//! the reference's `String.prototype.slice` does.

/// The longest prefix of `s` that is at most `units` UTF-16 code units long. A cut that
/// would split a surrogate pair stops before the pair (JavaScript would emit half of it).
pub fn prefix_utf16(s: &str, units: usize) -> &str {
    if s.len() <= units {
        // Every char takes at least as many bytes as UTF-16 units.
        return s;
    }
    let bytes = s.as_bytes();
    if bytes[..units].is_ascii() {
        // One unit per byte up to the cut, and the cut falls on a char boundary.
        return &s[..units];
    }
    // Whole blocks first, counted without decoding: every byte that is not a continuation
    // byte starts a char of one unit, and a 4-byte char takes one more.
    const BLOCK: usize = 64;
    let mut used = 0;
    let mut i = 0;
    while let Some(block) = bytes.get(i..i + BLOCK) {
        let n: usize = block
            .iter()
            .map(|&b| usize::from((b as i8) >= -0x40) + usize::from(b >= 0xF0))
            .sum();
        if used + n > units {
            break;
        }
        used += n;
        i += BLOCK;
    }
    // A char cut by the last block's end was counted whole: step back to its start.
    let counted_to = i;
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    if i != counted_to {
        used -= s[i..].chars().next().map_or(0, char::len_utf16);
    }
    for (k, c) in s[i..].char_indices() {
        used += c.len_utf16();
        if used > units {
            return &s[..i + k];
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
/// `...` (the reference's `truncate`, used for previews). Reads at most `max` units of `s`,
/// however long it is.
pub fn truncate_with_ellipsis(s: &str, max: usize) -> String {
    let head = prefix_utf16(s, max);
    if head.len() == s.len() {
        return s.to_owned();
    }
    let mut out = String::with_capacity(max + 3);
    out.push_str(prefix_utf16(head, max.saturating_sub(3)));
    out.push_str("...");
    out
}

/// The most characters of a value sent by the client that an error message quotes.
pub const ECHO_LIMIT: usize = 200;

/// A value the client sent, as an error message quotes it: whole up to [`ECHO_LIMIT`]
/// characters, else its first [`ECHO_LIMIT`] characters and `…`. Every message quoting
/// client input (ids, query values, file names, the path) goes through here, so that no
/// error sends kilobytes of a request back.
pub fn echo(value: &str) -> std::borrow::Cow<'_, str> {
    match value.char_indices().nth(ECHO_LIMIT) {
        None => std::borrow::Cow::Borrowed(value),
        Some((cut, _)) => std::borrow::Cow::Owned(format!("{}…", &value[..cut])),
    }
}

#[cfg(test)]
mod tests {
    use crate::json::utf16::*;

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

    /// The definition: chars taken while the running count stays within `units`.
    fn prefix_by_chars(s: &str, units: usize) -> &str {
        let mut used = 0;
        for (i, c) in s.char_indices() {
            used += c.len_utf16();
            if used > units {
                return &s[..i];
            }
        }
        s
    }

    #[test]
    fn block_counting_agrees_with_char_by_char_counting() {
        let pieces = ["a", "é", "→", "😀", "\n", "日本", "x😀é"];
        let mut text = String::new();
        for i in 0..400 {
            text.push_str(pieces[(i * 7 + i / 3) % pieces.len()]);
        }
        for units in 0..=len_utf16(&text) + 2 {
            assert_eq!(
                prefix_utf16(&text, units),
                prefix_by_chars(&text, units),
                "{units}"
            );
        }
    }

    #[test]
    fn ascii_prefixes_cut_at_the_unit_count() {
        assert_eq!(prefix_utf16("abcdef😀", 4), "abcd");
        assert_eq!(prefix_utf16("abc😀def", 4), "abc");
        assert_eq!(prefix_utf16("abc😀def", 5), "abc😀");
    }

    #[test]
    fn truncation_counts_pairs_like_javascript() {
        // 99 units then a pair: 101 units, cut to 97 + "...".
        let s = format!("{}😀", "x".repeat(99));
        assert_eq!(truncate_with_ellipsis(&s, 100), format!("{}...", "x".repeat(97)));
        // Exactly 100 units with a pair at the end: kept whole.
        let s = format!("{}😀", "x".repeat(98));
        assert_eq!(truncate_with_ellipsis(&s, 100), s);
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
