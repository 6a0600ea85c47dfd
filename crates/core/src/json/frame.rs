//! Framing: split a JSONL file into physical lines before any parsing.
//!
//! A bad line must never stop the lines after it, so lines are found first (with memchr)
//! and parsed one by one afterwards.

/// One non-blank line of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based physical line number (blank lines count).
    pub number: u32,
    /// The line without its terminator and without surrounding ASCII whitespace.
    pub bytes: &'a [u8],
    /// False for the last line of a file that does not end in `\n`: a writer may still be
    /// appending to it, so a parse failure there means "truncated", not "corrupt".
    pub terminated: bool,
}

/// Splits `data` into its non-blank lines. Tolerates `\r\n`, blank lines, whitespace-only
/// lines and a UTF-8 byte order mark at the start.
pub fn lines(data: &[u8]) -> Lines<'_> {
    let data = data.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(data);
    Lines {
        data,
        offset: 0,
        number: 0,
    }
}

/// Splits `data`, a part of a file that starts right after a newline, into its non-blank
/// lines, numbered from the part's start. Unlike [`lines`], a byte order mark is not
/// stripped: only a file's first bytes may hold one.
pub fn continued_lines(data: &[u8]) -> Lines<'_> {
    Lines {
        data,
        offset: 0,
        number: 0,
    }
}

/// Iterator returned by [`lines`].
#[derive(Debug, Clone)]
pub struct Lines<'a> {
    data: &'a [u8],
    offset: usize,
    number: u32,
}

impl Lines<'_> {
    /// Physical lines passed so far, blank ones included: once the iterator is done, the
    /// number of lines the data spans.
    pub fn physical_lines(&self) -> u32 {
        self.number
    }

    /// How many bytes of the data (after a byte order mark [`lines`] strips) the lines
    /// passed so far span, their terminators included.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        while self.offset < self.data.len() {
            let rest = &self.data[self.offset..];
            self.number = self.number.saturating_add(1);
            let (raw, terminated) = match memchr::memchr(b'\n', rest) {
                Some(end) => {
                    self.offset += end + 1;
                    (&rest[..end], true)
                }
                None => {
                    self.offset = self.data.len();
                    (rest, false)
                }
            };
            let bytes = raw.trim_ascii();
            if !bytes.is_empty() {
                return Some(Line {
                    number: self.number,
                    bytes,
                    terminated,
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::json::frame::*;

    fn collect(data: &str) -> Vec<(u32, &str, bool)> {
        lines(data.as_bytes())
            .map(|l| (l.number, std::str::from_utf8(l.bytes).unwrap(), l.terminated))
            .collect()
    }

    #[test]
    fn keeps_physical_line_numbers_across_blank_lines() {
        assert_eq!(
            collect("a\n\n  \nb\r\nc"),
            vec![(1, "a", true), (4, "b", true), (5, "c", false)]
        );
    }

    #[test]
    fn empty_and_whitespace_only_inputs_have_no_lines() {
        assert!(collect("").is_empty());
        assert!(collect("\n\n  \n\r\n").is_empty());
    }

    #[test]
    fn strips_a_byte_order_mark() {
        let data = b"\xEF\xBB\xBF{}\n";
        let got: Vec<_> = lines(data).map(|l| l.bytes).collect();
        assert_eq!(got, vec![b"{}".as_slice()]);
    }
}
