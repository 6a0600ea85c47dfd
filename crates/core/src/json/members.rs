//! The members of a JSON object found without reading their values.
//!
//! A tool call's one-line description ([`crate::pipeline::classify::tool_description`]) needs
//! one or two fields of the call's input: `file_path`, `command`, `pattern`. The input of
//! a `Write` or an `Edit` also holds the file's text, often tens of kilobytes, and every
//! view that shows the call describes it again. A JSON reader, even one that skips the
//! values, looks at every byte of that text for the characters a string may not hold;
//! the input was checked when the log was read, so [`object_members`] only looks for the
//! quote that ends each string (with `memchr`) and reads nothing else of it.

use memchr::memchr;

/// The members of `json`, a valid JSON object: each key and its value's JSON text, in
/// the order written (a repeated key appears each time). `None` when `json` is not an
/// object, when a key holds an escape (its text is not its bytes), or when `json` turns
/// out not to be valid after all.
pub fn object_members(json: &str) -> Option<Vec<(&str, &str)>> {
    let b = json.as_bytes();
    let mut at = skip_space(b, 0);
    if b.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(b, at + 1);
    let mut members = Vec::new();
    if b.get(at) == Some(&b'}') {
        return Some(members);
    }
    loop {
        if b.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(b, at)?;
        let key = json.get(at + 1..key_end - 1)?;
        if key.contains('\\') {
            return None;
        }
        at = skip_space(b, key_end);
        if b.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(b, at + 1);
        let value_end = value_end(b, at)?;
        members.push((key, json.get(at..value_end)?));
        at = skip_space(b, value_end);
        match b.get(at) {
            Some(b',') => at = skip_space(b, at + 1),
            Some(b'}') => return Some(members),
            _ => return None,
        }
    }
}

/// The first position from `at` that is not JSON white space.
fn skip_space(b: &[u8], mut at: usize) -> usize {
    while b
        .get(at)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// The position just past the string whose opening quote is at `open`: the next quote
/// preceded by an even number of backslashes (an odd number escapes it).
fn string_end(b: &[u8], open: usize) -> Option<usize> {
    let mut from = open + 1;
    loop {
        let quote = from + memchr(b'"', b.get(from..)?)?;
        // The opening quote stops the run: it is no backslash.
        let backslashes = b[..quote].iter().rev().take_while(|&&c| c == b'\\').count();
        if backslashes % 2 == 0 {
            return Some(quote + 1);
        }
        from = quote + 1;
    }
}

/// The position just past the value that starts at `start`.
fn value_end(b: &[u8], start: usize) -> Option<usize> {
    match b.get(start)? {
        b'"' => string_end(b, start),
        b'{' | b'[' => container_end(b, start),
        _ => {
            let len = b[start..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(b.len() - start);
            (len > 0).then_some(start + len)
        }
    }
}

/// The position just past the object or array that opens at `open`, its strings skipped
/// quote to quote.
fn container_end(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = open;
    while let Some(&c) = b.get(at) {
        match c {
            b'"' => {
                at = string_end(b, at)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
        at += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::json::members::*;
    use proptest::prelude::*;

    #[test]
    fn members_are_keys_and_value_texts() {
        let json = r#" { "file_path" : "/a \"b\" c\\" , "n":-1.5e3,"t":true,
            "o":{"x":[1,{"y":"]}"}]},"a":[ ],"e":{}, "s":"\\\\\"" } "#;
        assert_eq!(
            object_members(json).unwrap(),
            vec![
                ("file_path", r#""/a \"b\" c\\""#),
                ("n", "-1.5e3"),
                ("t", "true"),
                ("o", r#"{"x":[1,{"y":"]}"}]}"#),
                ("a", "[ ]"),
                ("e", "{}"),
                ("s", r#""\\\\\"""#),
            ]
        );
    }

    #[test]
    fn repeated_keys_appear_each_time() {
        let members = object_members(r#"{"k":1,"k":2}"#).unwrap();
        assert_eq!(members, vec![("k", "1"), ("k", "2")]);
    }

    #[test]
    fn what_is_not_an_object_with_plain_keys_has_no_members() {
        for json in [
            "[1]",
            "\"x\"",
            "3",
            "",
            r#"{"a\u0062":1}"#,
            r#"{"a":1"#,
            r#"{"a" 1}"#,
            r#"{"a":"1}"#,
            r#"{"a":[1}"#,
        ] {
            assert_eq!(object_members(json), None, "{json}");
        }
        assert_eq!(object_members(" {} "), Some(Vec::new()));
    }

    fn any_json() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z\"\\\\/\n\u{1}é😀 ]{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The members are those `serde_json` reads, value for value.
        #[test]
        fn members_agree_with_serde_json(
            fields in prop::collection::vec(("[a-z_]{1,8}", any_json()), 0..6),
            pretty in any::<bool>(),
        ) {
            let object = serde_json::Value::Object(fields.into_iter().collect());
            let json = if pretty {
                serde_json::to_string_pretty(&object).unwrap()
            } else {
                serde_json::to_string(&object).unwrap()
            };
            let members = object_members(&json).expect("an object with plain keys");
            let read: Vec<(String, serde_json::Value)> = members
                .iter()
                .map(|(k, v)| ((*k).to_owned(), serde_json::from_str(v).unwrap()))
                .collect();
            let expected: Vec<(String, serde_json::Value)> =
                object.as_object().unwrap().clone().into_iter().collect();
            prop_assert_eq!(read, expected);
        }
    }
}
