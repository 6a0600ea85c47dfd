//! Searle's five speech acts: the `speechact` codebook, and CommuGraph's speech-act tags
//! read as one model's suggestions under it (pure).
//!
//! # The codebook
//!
//! [`CODEBOOK`] (`codebooks/speechact.yaml`) is CommuGraph's speech-act guideline
//! (`public/annotation_schema/speechact.md`, MIT; see `codebooks/README.md`) in our codebook
//! shape: five labels, one per act, in the family `speech_act`, on user and assistant
//! turns. The label ids are the ones CommuGraph's own loader gives the acts
//! (`SPEECH_ACT_REPRESENTATIVE`, ...). The guideline's recommended multi-act option, "one
//! primary label + optional secondary", is each label's optional `rank` field
//! (`primary` or `secondary`).
//!
//! # The tagged lines
//!
//! CommuGraph tags units with a line per unit, `{event_id, unit_type, text_preview,
//! speech_act}`, in one of two shapes of `speech_act`, both read here:
//!
//! - `{primary_type, secondary_type?, notes?}`: the guideline's Option A, and what
//!   CommuGraph's loader (its `speech-act-loader.ts`) reads;
//! - `{types: [...], notes?}`: what its tagging agent (`.claude/agents/speech-act-tagger.md`)
//!   writes: every act present, in no order of importance.
//!
//! A line becomes one [`ImportItem`], a suggestion of the model the import names, as
//! CommuGraph's loader turns a line into label records:
//!
//! - `primary_type`: its label with no `confidence` (the tagger gives none; 1.0 would claim
//!   a certainty it never stated), `fields.rank = "primary"`, and `notes` as its
//!   `evidence.cue`;
//! - `secondary_type` (absent, `null` or `""`: none): its label with `confidence` 0.5 and
//!   `fields.rank = "secondary"`; one naming the primary act again adds nothing and is
//!   left out;
//! - `types`: each act once, in the order given, with no `confidence` and no `rank`, and
//!   `notes` as the first one's `evidence.cue`.
//!
//! Act names are read case-insensitively, with the guideline's alternative names:
//! `REPRESENTATIVE`, `ASSERTIVE` and `REPRESENTATIVE (ASSERTIVE)` are one act,
//! `DECLARATION`, `DECLARATIVE` and `DECLARATION (DECLARATIVE)` another, and a label id
//! (`SPEECH_ACT_DIRECTIVE`) names its act. The session is the line's `session_id` when it
//! has one (CommuGraph's lines do not), else the import's; the two must agree. Everything
//! else a line holds (`unit_type`, `text_preview`, `line_num`) is left alone. A line that
//! is not JSON, lacks a field, or names an unknown act is an [`Invalid`] naming the field.

use serde_json::{json, Map, Value};

use super::codebook::{Codebook, CodebookError};
use super::model::{ImportItem, ImportKind};
use super::validate::{check_no_nul, invalid, Invalid, MAX_CUE_CHARS};

/// The id the speech-act codebook is registered under among the built-in codebooks.
pub const CODEBOOK_ID: &str = "speechact";

/// The speech-act codebook's text: CommuGraph's guideline converted (MIT; see
/// `codebooks/README.md`).
pub const CODEBOOK: &str = include_str!("../../codebooks/speechact.yaml");

/// The name the speech-act codebook is shown under.
pub const CODEBOOK_NAME: &str = "speechact.yaml (built in)";

/// The `confidence` of a secondary act's label, as CommuGraph's loader gives it.
pub const SECONDARY_CONFIDENCE: f64 = 0.5;

/// The speech-act codebook, parsed, under its id [`CODEBOOK_ID`].
pub fn codebook() -> Result<Codebook, CodebookError> {
    let mut codebook = Codebook::parse(CODEBOOK_NAME, CODEBOOK)?;
    codebook.set_id(CODEBOOK_ID);
    Ok(codebook)
}

/// One of Searle's five illocutionary acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpeechAct {
    /// Representative (assertive): the speaker commits to how things are.
    Representative,
    /// Directive: the speaker tries to get the hearer to do something.
    Directive,
    /// Commissive: the speaker commits themself to a future action.
    Commissive,
    /// Expressive: the speaker expresses a feeling or attitude.
    Expressive,
    /// Declaration (declarative): saying it changes an institutional status.
    Declaration,
}

impl SpeechAct {
    /// The five, in the guideline's order (the codebook's).
    pub const ALL: [SpeechAct; 5] = [
        SpeechAct::Representative,
        SpeechAct::Directive,
        SpeechAct::Commissive,
        SpeechAct::Expressive,
        SpeechAct::Declaration,
    ];

    /// The act's name as CommuGraph writes it (`DIRECTIVE`).
    pub fn name(self) -> &'static str {
        match self {
            SpeechAct::Representative => "REPRESENTATIVE",
            SpeechAct::Directive => "DIRECTIVE",
            SpeechAct::Commissive => "COMMISSIVE",
            SpeechAct::Expressive => "EXPRESSIVE",
            SpeechAct::Declaration => "DECLARATION",
        }
    }

    /// The act's label id in the speech-act codebook (`SPEECH_ACT_DIRECTIVE`).
    pub fn label_id(self) -> &'static str {
        match self {
            SpeechAct::Representative => "SPEECH_ACT_REPRESENTATIVE",
            SpeechAct::Directive => "SPEECH_ACT_DIRECTIVE",
            SpeechAct::Commissive => "SPEECH_ACT_COMMISSIVE",
            SpeechAct::Expressive => "SPEECH_ACT_EXPRESSIVE",
            SpeechAct::Declaration => "SPEECH_ACT_DECLARATION",
        }
    }

    /// The act `name` names, case-insensitively, surrounding spaces ignored: its name, the
    /// guideline's alternative (`ASSERTIVE`, `DECLARATIVE`), the two together as the
    /// guideline lists them (`REPRESENTATIVE (ASSERTIVE)`), or its label id.
    pub fn parse(name: &str) -> Option<SpeechAct> {
        let name = name.trim().to_ascii_uppercase();
        let name = name.strip_prefix("SPEECH_ACT_").unwrap_or(&name);
        Some(match name {
            "REPRESENTATIVE" | "ASSERTIVE" | "REPRESENTATIVE (ASSERTIVE)" => SpeechAct::Representative,
            "DIRECTIVE" => SpeechAct::Directive,
            "COMMISSIVE" => SpeechAct::Commissive,
            "EXPRESSIVE" => SpeechAct::Expressive,
            "DECLARATION" | "DECLARATIVE" | "DECLARATION (DECLARATIVE)" => SpeechAct::Declaration,
            _ => return None,
        })
    }
}

/// What a speech-act import gives every line: the model the suggestions are stored under,
/// and the session of lines that name none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpeechActImport {
    /// The model (or tagging agent) the suggestions are stored under.
    pub model: String,
    /// The session of the lines (`None`: every line names its own `session_id`).
    pub session_id: Option<String>,
}

/// The acts of a line, before they become labels.
enum Acts {
    /// `primary_type` and `secondary_type` (`None`: none, or the primary again).
    Ranked(SpeechAct, Option<SpeechAct>),
    /// `types`: each act once, in the order given.
    Listed(Vec<SpeechAct>),
}

/// Reads one line of CommuGraph's speech-act tags into the suggestion it makes (see the
/// [module documentation](self) for the mapping).
pub fn parse_tagged_line(text: &str, import: &SpeechActImport) -> Result<ImportItem, Invalid> {
    let value: Value = serde_json::from_str(text).map_err(|e| invalid("line", format!("not JSON: {e}")))?;
    let line = value
        .as_object()
        .ok_or_else(|| invalid("line", "must be a JSON object"))?;
    let event_id = match line.get("event_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err(invalid("event_id", "must be a non-empty string")),
        None => return Err(invalid("event_id", "is required")),
    };
    let session_id = session_of(line, import.session_id.as_deref())?;
    let speech_act = match line.get("speech_act") {
        Some(Value::Object(o)) => o,
        Some(_) => return Err(invalid("speech_act", "must be an object")),
        None => return Err(invalid("speech_act", "is required")),
    };
    let notes = notes_of(speech_act)?;
    let labels = match acts_of(speech_act)? {
        Acts::Ranked(primary, secondary) => ranked_labels(primary, secondary, notes),
        Acts::Listed(acts) => listed_labels(&acts, notes),
    };
    Ok(ImportItem {
        codebook: Some(CODEBOOK_ID.to_owned()),
        session_id,
        event_id,
        kind: ImportKind::Suggestion {
            model: import.model.clone(),
            score: None,
            labels: Value::Array(labels),
        },
    })
}

/// The line's session: its `session_id`, else the import's; refused when they differ or
/// neither is given.
fn session_of(line: &Map<String, Value>, given: Option<&str>) -> Result<String, Invalid> {
    let own = match line.get("session_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.as_str()),
        Some(_) => return Err(invalid("session_id", "must be a non-empty string")),
    };
    match (own, given) {
        (Some(own), Some(given)) if own != given => Err(invalid(
            "session_id",
            format!(
                "the line names session '{}', the import session '{}'",
                crate::core::json::utf16::echo(own),
                crate::core::json::utf16::echo(given)
            ),
        )),
        (Some(session), _) | (None, Some(session)) => Ok(session.to_owned()),
        (None, None) => Err(invalid(
            "session_id",
            "is required: the line names no session and the import gives none (?session=ID)",
        )),
    }
}

/// `speech_act.notes`: absent, `null` or `""` is none (as CommuGraph's loader reads it);
/// otherwise a string that fits an evidence cue.
fn notes_of(speech_act: &Map<String, Value>) -> Result<Option<String>, Invalid> {
    const FIELD: &str = "speech_act.notes";
    match speech_act.get("notes") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s.chars().count() > MAX_CUE_CHARS => Err(invalid(
            FIELD,
            format!("must be at most {MAX_CUE_CHARS} characters (it becomes the label's evidence cue)"),
        )),
        Some(Value::String(s)) => check_no_nul(FIELD, s).map(|()| Some(s.clone())),
        Some(_) => Err(invalid(FIELD, "must be a string")),
    }
}

/// The acts a line's `speech_act` names, in either shape.
fn acts_of(speech_act: &Map<String, Value>) -> Result<Acts, Invalid> {
    let given = |key: &str| speech_act.get(key).filter(|v| !v.is_null());
    match (given("primary_type"), given("types")) {
        (Some(_), Some(_)) => Err(invalid(
            "speech_act",
            "gives both primary_type and types; give one of them",
        )),
        (Some(primary), None) => {
            let primary = act("speech_act.primary_type", primary)?;
            let secondary = match given("secondary_type") {
                None => None,
                Some(Value::String(s)) if s.is_empty() => None,
                Some(secondary) => Some(act("speech_act.secondary_type", secondary)?),
            };
            Ok(Acts::Ranked(primary, secondary.filter(|&s| s != primary)))
        }
        (None, Some(Value::Array(types))) if !types.is_empty() => {
            let mut acts = Vec::new();
            for (i, name) in types.iter().enumerate() {
                let act = act(&format!("speech_act.types[{i}]"), name)?;
                if !acts.contains(&act) {
                    acts.push(act);
                }
            }
            Ok(Acts::Listed(acts))
        }
        (None, Some(_)) => Err(invalid(
            "speech_act.types",
            "must be a non-empty array of speech act names",
        )),
        (None, None) => Err(invalid(
            "speech_act.primary_type",
            "is required (or speech_act.types, a list of acts)",
        )),
    }
}

/// The act `value` names, at `field`.
fn act(field: &str, value: &Value) -> Result<SpeechAct, Invalid> {
    let name = value
        .as_str()
        .ok_or_else(|| invalid(field, "must be a string naming a speech act"))?;
    SpeechAct::parse(name).ok_or_else(|| {
        invalid(
            field,
            format!(
                "unknown speech act '{}' (expected one of: REPRESENTATIVE or ASSERTIVE, DIRECTIVE, COMMISSIVE, EXPRESSIVE, DECLARATION or DECLARATIVE)",
                crate::core::json::utf16::echo(name)
            ),
        )
    })
}

/// The labels of a primary act and an optional secondary one.
fn ranked_labels(primary: SpeechAct, secondary: Option<SpeechAct>, notes: Option<String>) -> Vec<Value> {
    let mut first = json!({"id": primary.label_id(), "fields": {"rank": "primary"}});
    if let Some(cue) = notes {
        first["evidence"] = json!({ "cue": cue });
    }
    let second = secondary.map(|s| {
        json!({
            "id": s.label_id(),
            "confidence": SECONDARY_CONFIDENCE,
            "fields": {"rank": "secondary"},
        })
    });
    std::iter::once(first).chain(second).collect()
}

/// The labels of a list of acts: each as given, the notes on the first.
fn listed_labels(acts: &[SpeechAct], mut notes: Option<String>) -> Vec<Value> {
    acts.iter()
        .map(|act| {
            let mut label = json!({ "id": act.label_id() });
            if let Some(cue) = notes.take() {
                label["evidence"] = json!({ "cue": cue });
            }
            label
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::codebook::FieldType;
    use crate::labels::validate::Validator;

    fn import(session: Option<&str>) -> SpeechActImport {
        SpeechActImport {
            model: "claude-haiku:speech-act-tagger".to_owned(),
            session_id: session.map(str::to_owned),
        }
    }

    fn labels_of(line: &str) -> Value {
        match parse_tagged_line(line, &import(Some("s1"))).unwrap().kind {
            ImportKind::Suggestion { labels, .. } => labels,
            other => panic!("not a suggestion: {other:?}"),
        }
    }

    fn refused(line: &str) -> Invalid {
        parse_tagged_line(line, &import(Some("s1"))).unwrap_err()
    }

    #[test]
    fn the_codebook_has_the_five_acts_in_one_family() {
        let codebook = codebook().unwrap();
        let ids: Vec<&str> = codebook.labels.iter().map(|l| l.id.as_str()).collect();
        let expected: Vec<&str> = SpeechAct::ALL.iter().map(|a| a.label_id()).collect();
        assert_eq!(ids, expected);
        let families = codebook.families();
        assert_eq!(families.len(), 1);
        assert_eq!(families[0].id, "speech_act");
        assert_eq!(families[0].labels, expected);
        assert_eq!(codebook.schema_name.as_deref(), Some("speech_act_searle_five"));
        assert!(codebook.repeated_keys.is_empty());
        for label in &codebook.labels {
            assert!(!label.definition.is_empty(), "{}", label.id);
            assert!(label.definition.contains("Direction of fit"), "{}", label.id);
            assert!(
                !label.include_when.is_empty() && !label.cues.is_empty(),
                "{}",
                label.id
            );
            assert!(!label.examples.positive.is_empty(), "{}", label.id);
            let rank = label.field("rank").unwrap();
            assert_eq!(rank.field_type, FieldType::String);
            assert!(!rank.required);
            assert_eq!(
                rank.allowed.as_deref(),
                Some(&["primary".to_owned(), "secondary".to_owned()][..])
            );
        }
        // The guideline's own words, quoted.
        let directive = codebook.label("SPEECH_ACT_DIRECTIVE").unwrap();
        assert!(directive
            .include_when
            .iter()
            .any(|r| r == "Questions are directives (they request an answer)."));
        let commissive = codebook.label("SPEECH_ACT_COMMISSIVE").unwrap();
        assert_eq!(
            commissive.exclude_when,
            ["Rule 3: unless it’s clearly just a factual prediction (“This will fail” = Representative)."]
        );
    }

    #[test]
    fn the_codebook_annotates_user_and_assistant_turns() {
        let parsed = codebook().unwrap();
        assert_eq!(parsed.id, CODEBOOK_ID);
        assert_eq!(
            parsed.unit_types.as_deref(),
            Some(&["user_turn".to_owned(), "assistant_turn".to_owned()][..])
        );
        assert!(parsed.covers("user_turn") && !parsed.covers("system_turn"));
        let document: yaml_serde::Value = yaml_serde::from_str(CODEBOOK).unwrap();
        assert_eq!(
            document["source"]["commit"].as_str(),
            Some("e929370392a8b14f8bf47ab8bdf1d24d4af9dab6")
        );
    }

    #[test]
    fn act_names_are_read_case_insensitively_with_their_alternatives() {
        for act in SpeechAct::ALL {
            assert_eq!(SpeechAct::parse(act.name()), Some(act));
            assert_eq!(SpeechAct::parse(&act.name().to_lowercase()), Some(act));
            assert_eq!(SpeechAct::parse(act.label_id()), Some(act));
        }
        assert_eq!(SpeechAct::parse(" Assertive "), Some(SpeechAct::Representative));
        assert_eq!(
            SpeechAct::parse("Representative (Assertive)"),
            Some(SpeechAct::Representative)
        );
        assert_eq!(SpeechAct::parse("declarative"), Some(SpeechAct::Declaration));
        assert_eq!(SpeechAct::parse("Directive"), Some(SpeechAct::Directive));
        assert_eq!(SpeechAct::parse("question"), None);
        assert_eq!(SpeechAct::parse(""), None);
    }

    #[test]
    fn a_primary_and_a_secondary_act_become_two_ranked_labels() {
        let line = r#"{"event_id":"U:1","unit_type":"user_turn","text_preview":"Can you fix this?","speech_act":{"primary_type":"DIRECTIVE","secondary_type":"representative","notes":"User request"}}"#;
        let item = parse_tagged_line(line, &import(Some("s1"))).unwrap();
        assert_eq!((item.session_id.as_str(), item.event_id.as_str()), ("s1", "U:1"));
        assert_eq!(
            item.kind,
            ImportKind::Suggestion {
                model: "claude-haiku:speech-act-tagger".into(),
                score: None,
                labels: json!([
                    {"id": "SPEECH_ACT_DIRECTIVE", "fields": {"rank": "primary"}, "evidence": {"cue": "User request"}},
                    {"id": "SPEECH_ACT_REPRESENTATIVE", "confidence": 0.5, "fields": {"rank": "secondary"}},
                ])
            }
        );
    }

    #[test]
    fn a_missing_empty_or_repeated_secondary_act_adds_no_label() {
        for secondary in [
            "",
            r#","secondary_type":null"#,
            r#","secondary_type":"""#,
            r#","secondary_type":"Commissive""#,
        ] {
            let line =
                format!(r#"{{"event_id":"A::m","speech_act":{{"primary_type":"commissive"{secondary}}}}}"#);
            assert_eq!(
                labels_of(&line),
                json!([{"id": "SPEECH_ACT_COMMISSIVE", "fields": {"rank": "primary"}}]),
                "{line}"
            );
        }
    }

    #[test]
    fn a_list_of_acts_becomes_unranked_labels_with_the_notes_on_the_first() {
        let line = r#"{"line_num":5,"event_id":"A:r:m","speech_act":{"types":["REPRESENTATIVE","COMMISSIVE","representative"],"notes":"Reports findings, commits to plan"}}"#;
        assert_eq!(
            labels_of(line),
            json!([
                {"id": "SPEECH_ACT_REPRESENTATIVE", "evidence": {"cue": "Reports findings, commits to plan"}},
                {"id": "SPEECH_ACT_COMMISSIVE"},
            ])
        );
    }

    #[test]
    fn the_session_is_the_lines_else_the_imports() {
        let line = r#"{"session_id":"s2","event_id":"U:1","speech_act":{"primary_type":"EXPRESSIVE"}}"#;
        assert_eq!(parse_tagged_line(line, &import(None)).unwrap().session_id, "s2");
        assert_eq!(
            parse_tagged_line(line, &import(Some("s2"))).unwrap().session_id,
            "s2"
        );
        let other = parse_tagged_line(line, &import(Some("s1"))).unwrap_err();
        assert_eq!(other.field, "session_id");
        assert!(
            other.message.contains("'s2'") && other.message.contains("'s1'"),
            "{other}"
        );
        let bare = r#"{"event_id":"U:1","speech_act":{"primary_type":"EXPRESSIVE"}}"#;
        assert_eq!(
            parse_tagged_line(bare, &import(None)).unwrap_err().field,
            "session_id"
        );
    }

    #[test]
    fn bad_lines_are_refused_naming_the_field() {
        let long_notes = format!(
            r#"{{"event_id":"U:1","speech_act":{{"primary_type":"DIRECTIVE","notes":"{}"}}}}"#,
            "n".repeat(MAX_CUE_CHARS + 1)
        );
        for (line, field) in [
            ("{", "line"),
            ("[1]", "line"),
            (r#"{"speech_act":{"primary_type":"DIRECTIVE"}}"#, "event_id"),
            (
                r#"{"event_id":"","speech_act":{"primary_type":"DIRECTIVE"}}"#,
                "event_id",
            ),
            (r#"{"event_id":"U:1"}"#, "speech_act"),
            (r#"{"event_id":"U:1","speech_act":"DIRECTIVE"}"#, "speech_act"),
            (r#"{"event_id":"U:1","speech_act":{}}"#, "speech_act.primary_type"),
            (
                r#"{"event_id":"U:1","speech_act":{"notes":"x"}}"#,
                "speech_act.primary_type",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"primary_type":"QUESTION"}}"#,
                "speech_act.primary_type",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"primary_type":3}}"#,
                "speech_act.primary_type",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"primary_type":""}}"#,
                "speech_act.primary_type",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"primary_type":"DIRECTIVE","secondary_type":"maybe"}}"#,
                "speech_act.secondary_type",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"primary_type":"DIRECTIVE","secondary_type":[]}}"#,
                "speech_act.secondary_type",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"types":[]}}"#,
                "speech_act.types",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"types":"DIRECTIVE"}}"#,
                "speech_act.types",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"types":["DIRECTIVE","chat"]}}"#,
                "speech_act.types[1]",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"types":["DIRECTIVE"],"primary_type":"DIRECTIVE"}}"#,
                "speech_act",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"primary_type":"DIRECTIVE","notes":7}}"#,
                "speech_act.notes",
            ),
            (
                r#"{"event_id":"U:1","speech_act":{"primary_type":"DIRECTIVE","notes":"a\u0000b"}}"#,
                "speech_act.notes",
            ),
            (long_notes.as_str(), "speech_act.notes"),
            (
                r#"{"session_id":7,"event_id":"U:1","speech_act":{"primary_type":"DIRECTIVE"}}"#,
                "session_id",
            ),
        ] {
            assert_eq!(refused(line).field, field, "{line}");
        }
        let unknown = refused(r#"{"event_id":"U:1","speech_act":{"types":["chat"]}}"#);
        assert!(
            unknown.message.starts_with("unknown speech act 'chat'"),
            "{unknown}"
        );
    }

    /// What the parser makes is a suggestion the validator takes under the speech-act
    /// codebook: ids, ranks, confidences and cues all fit it.
    #[test]
    fn every_parsed_suggestion_validates_against_the_codebook() {
        let codebook = codebook().unwrap();
        let validator = Validator::new(&codebook, &[]);
        let mut lines: Vec<String> = Vec::new();
        for primary in SpeechAct::ALL {
            for secondary in SpeechAct::ALL {
                lines.push(format!(
                    r#"{{"event_id":"U:1","speech_act":{{"primary_type":"{}","secondary_type":"{}","notes":"n"}}}}"#,
                    primary.name(),
                    secondary.name()
                ));
            }
        }
        let all: Vec<String> = SpeechAct::ALL
            .iter()
            .map(|a| format!("\"{}\"", a.name()))
            .collect();
        lines.push(format!(
            r#"{{"event_id":"U:1","speech_act":{{"types":[{}]}}}}"#,
            all.join(",")
        ));
        for line in &lines {
            let item = parse_tagged_line(line, &import(Some("s1"))).unwrap();
            let ImportKind::Suggestion { model, score, labels } = &item.kind else {
                panic!("not a suggestion: {line}");
            };
            let valid = validator
                .suggestion(
                    &item.session_id,
                    &item.event_id,
                    model,
                    score.as_ref(),
                    labels,
                    crate::labels::validate::UnitRef {
                        unit_type: "user_turn",
                        text: "text",
                    },
                )
                .unwrap_or_else(|e| panic!("{line}: {e}"));
            assert!(!valid.labels().is_empty() && valid.labels().len() <= 5, "{line}");
        }
    }
}
