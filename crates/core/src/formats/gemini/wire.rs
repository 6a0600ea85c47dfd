//! The JSON of a Gemini CLI chat recording, read leniently: a field of an unexpected type
//! reads as absent, a list that is not an array as empty, and a list element that is not
//! an object is skipped, so that one odd field never costs a message.

use serde::de::{DeserializeOwned, Deserializer};
use serde::Deserialize;
use serde_json::Value;

use crate::json::lenient::{self, ObjectOr};

/// One message record (`MessageRecord`): `user`, `gemini`, `info`, `warning`, `error`.
#[derive(Deserialize, Default, Debug, Clone)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct WireMessage {
    #[serde(deserialize_with = "lenient::string")]
    pub(super) id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    pub(super) timestamp: Option<String>,
    #[serde(rename = "type", deserialize_with = "lenient::string")]
    pub(super) kind: Option<String>,
    pub(super) content: Parts,
    #[serde(deserialize_with = "present_parts")]
    pub(super) display_content: Option<Parts>,
    pub(super) thoughts: List<WireThought>,
    pub(super) tokens: ObjectOr<WireTokens>,
    #[serde(deserialize_with = "lenient::string")]
    pub(super) model: Option<String>,
    pub(super) tool_calls: List<WireToolCall>,
}

/// A thought summary of a `gemini` message.
#[derive(Deserialize, Default, Debug, Clone)]
#[serde(default)]
pub(super) struct WireThought {
    #[serde(deserialize_with = "lenient::string")]
    pub(super) subject: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    pub(super) description: Option<String>,
}

/// `tokens` of a `gemini` message (`TokensSummary`).
#[derive(Deserialize, Default, Debug, Clone)]
#[serde(default)]
pub(super) struct WireTokens {
    #[serde(deserialize_with = "lenient::count")]
    pub(super) input: Option<u64>,
    #[serde(deserialize_with = "lenient::count")]
    pub(super) output: Option<u64>,
    #[serde(deserialize_with = "lenient::count")]
    pub(super) thoughts: Option<u64>,
}

/// One tool call of a `gemini` message (`ToolCallRecord`), its result beside it.
#[derive(Deserialize, Default, Debug, Clone)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct WireToolCall {
    #[serde(deserialize_with = "lenient::string")]
    pub(super) id: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    pub(super) name: Option<String>,
    pub(super) args: Option<Value>,
    #[serde(deserialize_with = "present_parts")]
    pub(super) result: Option<Parts>,
    #[serde(deserialize_with = "lenient::string")]
    pub(super) status: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    pub(super) timestamp: Option<String>,
    #[serde(deserialize_with = "lenient::string")]
    pub(super) agent_id: Option<String>,
    pub(super) result_display: Option<Value>,
}

/// A list of `T`: any JSON value, an array's objects read as `T` (the rest skipped).
#[derive(Debug, Clone)]
pub(super) struct List<T>(pub(super) Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(List(match Value::deserialize(d)? {
            Value::Array(items) => items
                .into_iter()
                .filter(Value::is_object)
                .filter_map(|v| T::deserialize(v).ok())
                .collect(),
            _ => Vec::new(),
        }))
    }
}

/// One part of content (`Part` of `@google/genai`).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Part {
    /// `{text}`.
    Text(String),
    /// `{text, thought: true}`: the model's reasoning.
    Thought(String),
    /// `{inlineData: {mimeType, data}}`: an image or a pasted file.
    Inline {
        mime: Option<String>,
        data: Option<String>,
    },
    /// `{fileData: {mimeType, fileUri}}`.
    File { uri: Option<String> },
    /// `{functionResponse: {id, name, response}}`.
    Response {
        id: Option<String>,
        name: Option<String>,
        response: Value,
    },
    /// Any other part (`functionCall`, `executableCode`, ...), by its first key.
    Other(Option<String>),
}

/// Content (`PartListUnion`): a string, one part, or a list of parts (strings allowed).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Parts(pub(super) Vec<Part>);

impl<'de> Deserialize<'de> for Parts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Parts::of(Value::deserialize(d)?))
    }
}

/// `Some` for a present field, even `null` (which reads as no parts).
fn present_parts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Parts>, D::Error> {
    Ok(Some(Parts::of(Value::deserialize(d)?)))
}

impl Parts {
    /// The parts of a content value.
    pub(super) fn of(value: Value) -> Parts {
        match value {
            Value::String(s) => Parts(vec![Part::Text(s)]),
            Value::Array(items) => Parts(items.into_iter().filter_map(part).collect()),
            v @ Value::Object(_) => Parts(part(v).into_iter().collect()),
            _ => Parts(Vec::new()),
        }
    }

    /// The text parts, joined by newlines (thoughts left out).
    pub(super) fn text(&self) -> String {
        let texts: Vec<&str> = self
            .0
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }

    /// True when some part is text that is not blank, or an image or file.
    pub(super) fn has_input(&self) -> bool {
        self.0.iter().any(|p| match p {
            Part::Text(t) => !t.trim().is_empty(),
            Part::Inline { .. } | Part::File { .. } => true,
            _ => false,
        })
    }
}

/// The part a JSON value holds (`None` for a value that is none).
fn part(value: Value) -> Option<Part> {
    let mut object = match value {
        Value::String(s) => return Some(Part::Text(s)),
        Value::Object(o) => o,
        _ => return None,
    };
    let text = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    if let Some(t) = text(object.remove("text")) {
        let thought = object.get("thought").and_then(Value::as_bool) == Some(true);
        return Some(if thought { Part::Thought(t) } else { Part::Text(t) });
    }
    if let Some(Value::Object(mut d)) = object.remove("inlineData") {
        return Some(Part::Inline {
            mime: text(d.remove("mimeType")),
            data: text(d.remove("data")),
        });
    }
    if let Some(Value::Object(mut f)) = object.remove("fileData") {
        return Some(Part::File {
            uri: text(f.remove("fileUri")),
        });
    }
    if let Some(Value::Object(mut r)) = object.remove("functionResponse") {
        return Some(Part::Response {
            id: text(r.remove("id")),
            name: text(r.remove("name")),
            response: r.remove("response").unwrap_or(Value::Null),
        });
    }
    Some(Part::Other(object.keys().next().cloned()))
}

#[cfg(test)]
mod tests {
    use crate::formats::gemini::wire::*;

    #[test]
    fn content_is_a_string_a_part_or_a_list() {
        assert_eq!(Parts::of(Value::from("hi")).text(), "hi");
        let one: Value = serde_json::from_str(r#"{"text":"a"}"#).unwrap();
        assert_eq!(Parts::of(one).text(), "a");
        let many: Value = serde_json::from_str(
            r#"["x",{"text":"y"},{"text":"t","thought":true},{"inlineData":{"mimeType":"image/png","data":"AA=="}},{"functionCall":{"name":"f"}},3]"#,
        )
        .unwrap();
        let parts = Parts::of(many);
        assert_eq!(parts.text(), "x\ny");
        assert_eq!(parts.0.len(), 5);
        assert_eq!(parts.0[2], Part::Thought("t".into()));
        assert!(matches!(&parts.0[3], Part::Inline { mime: Some(m), .. } if m == "image/png"));
        assert_eq!(parts.0[4], Part::Other(Some("functionCall".into())));
    }

    #[test]
    fn odd_fields_read_as_absent() {
        let m: WireMessage = serde_json::from_str(
            r#"{"id":7,"type":"gemini","content":null,"thoughts":"no","toolCalls":[1,{"id":"c","name":"ls","status":"success","result":null}],"tokens":[]}"#,
        )
        .unwrap();
        assert_eq!(m.id, None);
        assert!(m.thoughts.0.is_empty());
        assert_eq!(m.tool_calls.0.len(), 1);
        assert_eq!(m.tool_calls.0[0].result, Some(Parts::default()));
        assert!(m.tokens.0.is_none());
        assert!(m.display_content.is_none());
    }
}
