//! The end of a JSON string literal, found 16 or 32 bytes at a time and checked as
//! serde_json checks a string it skips.

/// Where the string literal whose text starts at `start` of `b` (just after its opening
/// quote) ends: the index of its closing quote, and whether the text holds an escape.
/// `None` when the literal is not one that serde_json accepts: it holds a control
/// character or an escape JSON has not, or has no closing quote.
///
/// The text is looked at 32 bytes at a time (16 on a processor without AVX2), and every
/// escape in those bytes is checked from the one look: a text that escapes every few
/// bytes costs little more than one that does not.
pub fn string_end(b: &[u8], start: usize) -> Option<(usize, bool)> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (just checked).
        return unsafe { string_end_avx2(b, start) };
    }
    string_end_in_chunks::<16>(b, start, special_mask)
}

/// [`string_end`] 32 bytes at a time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn string_end_avx2(b: &[u8], start: usize) -> Option<(usize, bool)> {
    // SAFETY: this function runs only where AVX2 is (its caller checks).
    string_end_in_chunks::<32>(b, start, |chunk| unsafe { special_mask_avx2(chunk) })
}

/// [`string_end`], `N` bytes at a time: `mask` sets a bit per quote, backslash or control
/// character among the first `N` bytes of a chunk (`N` at most 32).
#[inline(always)]
fn string_end_in_chunks<const N: usize>(
    b: &[u8],
    start: usize,
    mask_of: impl Fn(&[u8]) -> u32,
) -> Option<(usize, bool)> {
    let mut at = start;
    let mut escaped = false;
    while let Some(chunk) = b.get(at..at + N) {
        let mut mask = mask_of(chunk);
        let mut next = at + N;
        while mask != 0 {
            let i = at + mask.trailing_zeros() as usize;
            match b[i] {
                b'"' => return Some((i, escaped)),
                b'\\' => {
                    escaped = true;
                    let after = after_escape(b, i)?;
                    if after > next {
                        next = after;
                        break;
                    }
                    // The bits of the bytes the escape took are cleared (all of them when
                    // it ends the chunk).
                    mask &= u32::MAX.checked_shl((after - at) as u32).unwrap_or(0);
                }
                _ => return None,
            }
        }
        at = next;
    }
    while let Some(&c) = b.get(at) {
        match c {
            b'"' => return Some((at, escaped)),
            b'\\' => {
                escaped = true;
                at = after_escape(b, at)?;
            }
            0..0x20 => return None,
            _ => at += 1,
        }
    }
    None
}

/// The index just after the escape that starts at `at` (a backslash), when it is one of
/// JSON's.
#[inline]
fn after_escape(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(at + 2),
        b'u' => {
            let hex = b.get(at + 2..at + 6)?;
            hex.iter().all(u8::is_ascii_hexdigit).then_some(at + 6)
        }
        _ => None,
    }
}

/// A bit per byte of `chunk` (16 bytes; the first byte the lowest bit), set for a quote, a
/// backslash or a control character.
#[cfg(target_arch = "x86_64")]
#[inline]
fn special_mask(chunk: &[u8]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    assert!(chunk.len() >= 16);
    // SAFETY: SSE2 is part of every x86_64 target, and the unaligned load reads the first
    // 16 bytes of `chunk`, which has them (asserted above).
    let bits = unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // A byte below 0x20 is its own minimum with 0x1F.
        let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
    };
    bits as u32
}

/// A bit per byte of `chunk` (32 bytes; the first byte the lowest bit), set for a quote, a
/// backslash or a control character.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn special_mask_avx2(chunk: &[u8]) -> u32 {
    use std::arch::x86_64::{
        _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8, _mm256_or_si256,
        _mm256_set1_epi8,
    };
    assert!(chunk.len() >= 32);
    // SAFETY: the caller runs where AVX2 is, and the unaligned load reads the first 32
    // bytes of `chunk`, which has them (asserted above).
    let bits = unsafe {
        let v = _mm256_loadu_si256(chunk.as_ptr().cast());
        let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
        let backslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
        // A byte below 0x20 is its own minimum with 0x1F.
        let control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1F)), v);
        _mm256_movemask_epi8(_mm256_or_si256(_mm256_or_si256(quote, backslash), control))
    };
    bits as u32
}

/// A bit per byte of `chunk` (16 bytes; the first byte the lowest bit), set for a quote, a
/// backslash or a control character.
#[cfg(not(target_arch = "x86_64"))]
fn special_mask(chunk: &[u8]) -> u32 {
    chunk[..16].iter().enumerate().fold(0, |mask, (i, &c)| {
        mask | (u32::from(c == b'"' || c == b'\\' || c < 0x20) << i)
    })
}

#[cfg(test)]
mod tests {
    use super::string_end;
    use proptest::prelude::*;

    /// `string_end` of the literal `literal` (its opening quote at 0).
    fn end_of(literal: &str) -> Option<(usize, bool)> {
        string_end(literal.as_bytes(), 1)
    }

    #[test]
    fn a_literal_ends_at_its_first_unescaped_quote() {
        assert_eq!(end_of(r#""plain" tail"#), Some((6, false)));
        assert_eq!(end_of(r#""say \"hi\"" tail"#), Some((11, true)));
        assert_eq!(end_of(r#""a\\" tail"#), Some((4, true)));
        assert_eq!(end_of(r#""""#), Some((1, false)));
    }

    #[test]
    fn escapes_that_cross_a_chunk_are_read_whole() {
        for pad in 0..40 {
            let text = format!("\"{}\\u00e9\\n\\\"{}\"", "x".repeat(pad), "y".repeat(pad));
            let expected = text.len() - 1;
            assert_eq!(end_of(&text), Some((expected, true)), "pad {pad}");
        }
    }

    #[test]
    fn literals_serde_json_refuses_have_no_end() {
        assert_eq!(end_of("\"tab\there\""), None);
        assert_eq!(end_of(r#""bad \x escape""#), None);
        assert_eq!(end_of(r#""short \u12 escape""#), None);
        assert_eq!(end_of(r#""no end"#), None);
        assert_eq!(end_of(r#""ends in a backslash\"#), None);
        assert_eq!(end_of(&format!("\"{}\u{1}\"", "z".repeat(30))), None);
    }

    /// Text made mostly of the bytes that matter to a string's end.
    fn tricky_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("\""),
                Just("\\"),
                Just("u"),
                Just("0"),
                Just("e9"),
                Just("n"),
                Just("\u{1}"),
                Just("\u{7f}"),
                Just("é"),
                Just("plain text "),
            ],
            0..60,
        )
        .prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn every_string_serde_json_writes_ends_where_it_ends(text in any::<String>()) {
            let literal = serde_json::to_string(&text).unwrap();
            let tail = format!("{literal},\"next\"");
            prop_assert_eq!(end_of(&tail), Some((literal.len() - 1, literal.contains('\\'))));
        }

        #[test]
        fn sixteen_bytes_at_a_time_find_the_end_thirty_two_find(text in tricky_text(), pad in 0usize..40) {
            let literal = format!("\"{}{text}\"", "p".repeat(pad));
            let by_16 = super::string_end_in_chunks::<16>(literal.as_bytes(), 1, super::special_mask);
            prop_assert_eq!(by_16, end_of(&literal));
        }

        #[test]
        fn an_end_is_found_exactly_when_serde_json_reads_the_string(text in tricky_text()) {
            let literal = format!("\"{text}");
            let serde_end = literal
                .char_indices()
                .skip(1)
                .filter(|&(_, c)| c == '"')
                .map(|(i, _)| i)
                .find(|&i| serde_json::from_str::<serde::de::IgnoredAny>(&literal[..=i]).is_ok());
            let found = end_of(&literal);
            prop_assert_eq!(found.map(|f| f.0), serde_end);
            if let Some((end, escaped)) = found {
                prop_assert_eq!(escaped, literal[..end].contains('\\'));
            }
        }
    }
}
