//! A result's snippet: the part of the unit's text that best matches the query (tantivy's
//! `SnippetGenerator`), its matched words as ranges and as HTML.

use serde::Serialize;
use tantivy::snippet::{collapse_overlapped_ranges, SnippetGenerator};

/// The longest snippet, in characters (about).
pub const SNIPPET_CHARS: usize = 200;

/// A snippet as answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snippet {
    /// A fragment of the unit's text.
    pub text: String,
    /// The matched words: `[start, end)` offsets into `text` in UTF-16 code units (what
    /// JavaScript's `String.prototype.slice` takes).
    pub highlights: Vec<[usize; 2]>,
    /// `text`, HTML-escaped, each matched word in `<b>` ... `</b>`.
    pub html: String,
}

/// The snippet of a unit whose text starts with `excerpt`: the best fragment for the
/// query's words (`generator`: none for a search without text), else the text's start.
pub fn snippet(generator: Option<&SnippetGenerator>, excerpt: &str) -> Snippet {
    if let Some(found) = generator.map(|g| g.snippet(excerpt)) {
        if !found.is_empty() {
            let text = found.fragment();
            let highlights = collapse_overlapped_ranges(found.highlighted())
                .into_iter()
                .map(|r| [utf16_len(&text[..r.start]), utf16_len(&text[..r.end])])
                .collect();
            return Snippet {
                text: text.to_owned(),
                highlights,
                html: found.to_html(),
            };
        }
    }
    let start = match excerpt.char_indices().nth(SNIPPET_CHARS) {
        Some((end, _)) => &excerpt[..end],
        None => excerpt,
    };
    Snippet {
        text: start.to_owned(),
        highlights: Vec::new(),
        html: escape_html(start),
    }
}

fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, as tantivy escapes a snippet's text.
fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tantivy::schema::{Schema, TEXT};
    use tantivy::tokenizer::TextAnalyzer;

    fn generator(words: &[&str]) -> SnippetGenerator {
        let mut b = Schema::builder();
        let field = b.add_text_field("text", TEXT);
        let terms: BTreeMap<String, f32> = words.iter().map(|w| (w.to_string(), 1.0)).collect();
        let tokenizer: TextAnalyzer =
            tantivy::tokenizer::TextAnalyzer::builder(tantivy::tokenizer::SimpleTokenizer::default())
                .filter(tantivy::tokenizer::LowerCaser)
                .build();
        SnippetGenerator::new(terms, tokenizer, field, SNIPPET_CHARS)
    }

    #[test]
    fn matched_words_are_ranges_in_utf16_and_bold_in_html() {
        let s = snippet(Some(&generator(&["tests"])), "Les tests échouent <ici>: tests");
        assert_eq!(s.text, "Les tests échouent <ici>: tests");
        assert_eq!(s.highlights, [[4, 9], [26, 31]], "é is one UTF-16 unit");
        assert_eq!(s.html, "Les <b>tests</b> échouent &lt;ici&gt;: <b>tests</b>");
        let emoji = snippet(Some(&generator(&["ok"])), "🙂 ok");
        assert_eq!(emoji.highlights, [[3, 5]], "the emoji is two UTF-16 units");
    }

    #[test]
    fn without_a_match_the_text_starts_the_snippet() {
        let long = format!("<{}>", "a".repeat(500));
        for s in [snippet(None, &long), snippet(Some(&generator(&["zzz"])), &long)] {
            assert_eq!(s.text.chars().count(), SNIPPET_CHARS);
            assert!(s.highlights.is_empty());
            assert!(s.html.starts_with("&lt;aaa"));
        }
        assert_eq!(snippet(None, "").text, "");
    }
}
