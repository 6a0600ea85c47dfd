//! The labeling codebook: the labels a unit may carry, each with its definition, rules,
//! cues and typed output fields, read from a YAML file of CommuGraph's annotation schema
//! shape (`codebooks/annotation_schema_v02.yaml` is built in).
//!
//! A codebook that does not parse, has no labels, repeats a label id or declares a field of
//! an unknown type is refused with a [`CodebookError`] naming the file and the problem: the
//! server does not start on it.

use std::fmt;

use bytes::Bytes;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The built-in codebook's text: CommuGraph's annotation schema v0.2 (MIT; see
/// `codebooks/README.md`).
pub const BUILT_IN: &str = include_str!("../../codebooks/annotation_schema_v02.yaml");

/// The name the built-in codebook is shown under.
pub const BUILT_IN_NAME: &str = "annotation_schema_v02.yaml (built in)";

/// The built-in codebook's id.
pub const BUILT_IN_ID: &str = "delegation";

/// The longest codebook id.
pub const MAX_ID_LEN: usize = 64;

/// Why a codebook was refused.
#[derive(Debug, thiserror::Error)]
pub enum CodebookError {
    /// The file could not be read.
    #[error("cannot read the codebook {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The text is not YAML of the codebook's shape.
    #[error("the codebook {file} does not parse: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message (with the line and column).
        message: String,
    },
    /// The codebook defines no label.
    #[error("the codebook {file} defines no labels (expected a `labels:` list)")]
    NoLabels {
        /// The file.
        file: String,
    },
    /// Two labels share an id.
    #[error("the codebook {file} repeats the label id {id} (labels {first} and {second})")]
    RepeatedLabel {
        /// The file.
        file: String,
        /// The id.
        id: String,
        /// 1-based positions of the two labels in the list.
        first: usize,
        /// The second position.
        second: usize,
    },
    /// The codebook's id (its `id:` key, else its file name without the extension) is not
    /// 1 to 64 ASCII letters, digits, `_`, `-` or `.`.
    #[error("the codebook {file} has the id {id:?}; an id is 1 to 64 ASCII letters, digits, '_', '-' or '.' (set `id:` in the file)")]
    BadId {
        /// The file.
        file: String,
        /// The id.
        id: String,
    },
    /// Two configured codebooks have one id.
    #[error("two codebooks have the id {id} ({first} and {second})")]
    RepeatedId {
        /// The id.
        id: String,
        /// The first file.
        first: String,
        /// The second.
        second: String,
    },
    /// A directory given as codebooks holds no `.yaml` or `.yml` file.
    #[error("the codebook directory {dir} holds no .yaml or .yml file")]
    EmptyDirectory {
        /// The directory.
        dir: String,
    },
    /// A label is malformed.
    #[error("the codebook {file}, label {label}: {problem}")]
    Label {
        /// The file.
        file: String,
        /// The label's id, or its 1-based position when it has none.
        label: String,
        /// What is wrong.
        problem: String,
    },
}

/// The type of a label's output field, as the codebook spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// `string`.
    String,
    /// `number`: any JSON number.
    Number,
    /// `integer`: a JSON number without a fraction.
    Integer,
    /// `boolean`.
    Boolean,
    /// `list[string]`.
    StringList,
}

impl FieldType {
    /// The spelling in the codebook.
    pub fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Number => "number",
            FieldType::Integer => "integer",
            FieldType::Boolean => "boolean",
            FieldType::StringList => "list[string]",
        }
    }

    fn parse(spelling: &str) -> Option<FieldType> {
        Some(match spelling.trim() {
            "string" | "str" => FieldType::String,
            "number" | "float" => FieldType::Number,
            "integer" | "int" => FieldType::Integer,
            "boolean" | "bool" => FieldType::Boolean,
            "list[string]" | "list[str]" | "array[string]" => FieldType::StringList,
            _ => return None,
        })
    }

    /// True when `value` is of this type.
    pub fn accepts(self, value: &Value) -> bool {
        match self {
            FieldType::String => value.is_string(),
            FieldType::Number => value.is_number(),
            FieldType::Integer => value.is_i64() || value.is_u64(),
            FieldType::Boolean => value.is_boolean(),
            FieldType::StringList => value.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
        }
    }
}

impl Serialize for FieldType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One output field of a label.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OutputField {
    /// Its name (the key in a label's `fields`).
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub field_type: FieldType,
    /// True when a label must give it.
    pub required: bool,
    /// What it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The values allowed, when the codebook lists them.
    #[serde(rename = "enum", skip_serializing_if = "Option::is_none")]
    pub allowed: Option<Vec<String>>,
}

impl OutputField {
    /// Checks `value` against the field's type and allowed values; says why it does not fit.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        if !self.field_type.accepts(value) {
            return Err(format!("must be of type {}", self.field_type.name()));
        }
        if let (Some(allowed), Some(s)) = (&self.allowed, value.as_str()) {
            if !allowed.iter().any(|a| a == s) {
                return Err(format!("must be one of: {}", allowed.join(", ")));
            }
        }
        Ok(())
    }
}

/// Positive and negative examples of a label.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Examples {
    /// Texts the label applies to.
    pub positive: Vec<String>,
    /// Texts it does not apply to.
    pub negative: Vec<String>,
}

/// One label of the codebook.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Label {
    /// Its id (`TASK_DECOMPOSITION`), what a label record names.
    pub id: String,
    /// Its display name.
    pub name: String,
    /// Its family (`task_structuring`).
    pub family: String,
    /// What it means.
    pub definition: String,
    /// When to apply it.
    pub include_when: Vec<String>,
    /// When not to.
    pub exclude_when: Vec<String>,
    /// Words and signs that suggest it.
    pub cues: Vec<String>,
    /// Examples.
    pub examples: Examples,
    /// Its typed output fields, in the codebook's order (required ones first).
    pub output_fields: Vec<OutputField>,
}

impl Label {
    /// The output field called `name`.
    pub fn field(&self, name: &str) -> Option<&OutputField> {
        self.output_fields.iter().find(|f| f.name == name)
    }
}

/// A family of labels, in the codebook's order.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Family {
    /// Its id.
    pub id: String,
    /// The ids of its labels, in order.
    pub labels: Vec<String>,
}

/// A loaded codebook, with its JSON body and ETag ready to serve.
#[derive(Debug, Clone)]
pub struct Codebook {
    /// Its id: what `?codebook=` names and labels are stored under.
    pub id: String,
    /// Its version: `sha256:` and the first 16 hex digits of the SHA-256 of its text. A set
    /// records the version it was written under.
    pub version: String,
    /// The file it was read from.
    pub file: String,
    /// `schema_name`.
    pub schema_name: Option<String>,
    /// `schema_version`.
    pub schema_version: Option<String>,
    /// The labels, in order.
    pub labels: Vec<Label>,
    /// The unit types it codes (`annotation_unit.unit_types`); `None`: every type.
    pub unit_types: Option<Vec<String>>,
    /// Top-level keys the file repeats (the last value was kept).
    pub repeated_keys: Vec<String>,
    body: Bytes,
    etag: String,
}

/// The JSON body of `GET /api/codebook`.
#[derive(Serialize)]
struct CodebookBody<'a> {
    id: &'a str,
    version: &'a str,
    file: &'a str,
    schema_name: Option<&'a str>,
    schema_version: Option<&'a str>,
    unit_types: Option<&'a [String]>,
    families: Vec<Family>,
    labels: &'a [Label],
}

impl Codebook {
    /// The built-in codebook.
    pub fn built_in() -> Result<Codebook, CodebookError> {
        let mut codebook = Codebook::parse(BUILT_IN_NAME, BUILT_IN)?;
        codebook.set_id(BUILT_IN_ID);
        Ok(codebook)
    }

    /// Gives the codebook the id `id` (a built-in one's, whatever its file is called).
    pub fn set_id(&mut self, id: &str) {
        self.id = id.to_owned();
        self.render();
    }

    /// Reads the codebook at `path`.
    pub fn read(path: &std::path::Path) -> Result<Codebook, CodebookError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| CodebookError::Read {
            file: file.clone(),
            source,
        })?;
        Codebook::parse(&file, &text)
    }

    /// Reads a codebook from `text`, shown as `file` in errors. Its id is its `id:` key,
    /// else `file`'s name without the extension.
    pub fn parse(file: &str, text: &str) -> Result<Codebook, CodebookError> {
        let document: Document = yaml_serde::from_str(text).map_err(|e| CodebookError::Parse {
            file: file.to_owned(),
            message: e.to_string(),
        })?;
        let wire_labels = document.labels.unwrap_or_default();
        if wire_labels.is_empty() {
            return Err(CodebookError::NoLabels {
                file: file.to_owned(),
            });
        }
        let mut labels: Vec<Label> = Vec::with_capacity(wire_labels.len());
        for (i, wire) in wire_labels.into_iter().enumerate() {
            let label = wire
                .into_label(i + 1)
                .map_err(|(label, problem)| CodebookError::Label {
                    file: file.to_owned(),
                    label,
                    problem,
                })?;
            if let Some(first) = labels.iter().position(|l| l.id == label.id) {
                return Err(CodebookError::RepeatedLabel {
                    file: file.to_owned(),
                    id: label.id,
                    first: first + 1,
                    second: i + 1,
                });
            }
            labels.push(label);
        }
        let id = document.id.unwrap_or_else(|| id_of_file(file));
        if !is_valid_id(&id) {
            return Err(CodebookError::BadId {
                file: file.to_owned(),
                id,
            });
        }
        let mut codebook = Codebook {
            id,
            version: version_of(text),
            file: file.to_owned(),
            schema_name: document.schema_name,
            schema_version: document.schema_version,
            labels,
            unit_types: document.unit_types,
            repeated_keys: document.repeated,
            body: Bytes::new(),
            etag: String::new(),
        };
        codebook.render();
        Ok(codebook)
    }

    /// True when the codebook codes units of `unit_type` (`user_turn`, ...): the queue hands
    /// out, progress counts and writes accept only those.
    pub fn covers(&self, unit_type: &str) -> bool {
        self.unit_types
            .as_ref()
            .is_none_or(|types| types.iter().any(|t| t == unit_type))
    }

    /// The label with this id.
    pub fn label(&self, id: &str) -> Option<&Label> {
        self.labels.iter().find(|l| l.id == id)
    }

    /// The families, in order of their first label.
    pub fn families(&self) -> Vec<Family> {
        let mut families: Vec<Family> = Vec::new();
        for label in &self.labels {
            match families.iter_mut().find(|f| f.id == label.family) {
                Some(f) => f.labels.push(label.id.clone()),
                None => families.push(Family {
                    id: label.family.clone(),
                    labels: vec![label.id.clone()],
                }),
            }
        }
        families
    }

    /// The JSON body served at `GET /api/codebook`.
    pub fn body(&self) -> Bytes {
        self.body.clone()
    }

    /// The body's strong ETag (quoted).
    pub fn etag(&self) -> &str {
        &self.etag
    }

    fn render(&mut self) {
        let body = CodebookBody {
            id: &self.id,
            version: &self.version,
            file: &self.file,
            schema_name: self.schema_name.as_deref(),
            schema_version: self.schema_version.as_deref(),
            unit_types: self.unit_types.as_deref(),
            families: self.families(),
            labels: &self.labels,
        };
        // Serialising strings, numbers and lists into memory cannot fail.
        let json = serde_json::to_vec(&body).unwrap_or_default();
        let digest = Sha256::digest(&json);
        let hex = hex::encode(&digest[..8]);
        self.etag = format!("\"codebook-{hex}\"");
        self.body = Bytes::from(json);
    }
}

/// True when `id` can name a codebook: 1 to [`MAX_ID_LEN`] ASCII letters, digits, `_`, `-`
/// or `.` (it appears in URLs and file names unescaped).
pub fn is_valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A codebook file's id when it sets none: its name without the directories and the
/// extension.
fn id_of_file(file: &str) -> String {
    std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The version of a codebook's text: `sha256:` and the first 16 hex digits of its digest.
fn version_of(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!("sha256:{}", hex::encode(&digest[..8]))
}

/// The parts of the YAML document a codebook is made of. A repeated top-level key keeps
/// its last value (as PyYAML and js-yaml's JSON mode read it) and is remembered.
#[derive(Default)]
struct Document {
    id: Option<String>,
    unit_types: Option<Vec<String>>,
    schema_name: Option<String>,
    schema_version: Option<String>,
    labels: Option<Vec<WireLabel>>,
    repeated: Vec<String>,
}

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Document, D::Error> {
        struct DocumentVisitor;

        impl<'de> Visitor<'de> for DocumentVisitor {
            type Value = Document;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a mapping with a `labels` list")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
                let mut doc = Document::default();
                let mut seen: Vec<String> = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if seen.contains(&key) {
                        doc.repeated.push(key.clone());
                    } else {
                        seen.push(key.clone());
                    }
                    match key.as_str() {
                        "id" => doc.id = scalar_text(map.next_value()?),
                        "annotation_unit" => {
                            // An empty list restricts nothing.
                            doc.unit_types = map
                                .next_value::<AnnotationUnit>()?
                                .unit_types
                                .filter(|types| !types.is_empty())
                        }
                        "schema_name" => doc.schema_name = scalar_text(map.next_value()?),
                        "schema_version" => doc.schema_version = scalar_text(map.next_value()?),
                        "labels" => doc.labels = Some(map.next_value()?),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(doc)
            }
        }

        d.deserialize_map(DocumentVisitor)
    }
}

/// A scalar's text (`0.2` and `"0.2"` alike); `None` for null, lists and mappings.
fn scalar_text(value: yaml_serde::Value) -> Option<String> {
    match value {
        yaml_serde::Value::String(s) => Some(s),
        yaml_serde::Value::Number(n) => Some(n.to_string()),
        yaml_serde::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `annotation_unit`: of it, only the unit types are read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct AnnotationUnit {
    unit_types: Option<Vec<String>>,
}

/// A label as written.
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireLabel {
    id: Option<String>,
    name: Option<String>,
    family: Option<String>,
    definition: Option<String>,
    include_when: Vec<String>,
    exclude_when: Vec<String>,
    cues: Vec<String>,
    examples: Examples,
    output_fields: WireOutputFields,
}

/// `output_fields`: `required` and `optional` mappings of field name to its declaration.
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireOutputFields {
    required: yaml_serde::Mapping,
    optional: yaml_serde::Mapping,
}

/// One field as written.
#[derive(Deserialize, Default)]
#[serde(default)]
struct WireField {
    #[serde(rename = "type")]
    field_type: Option<String>,
    description: Option<String>,
    #[serde(rename = "enum")]
    allowed: Option<Vec<String>>,
}

impl WireLabel {
    /// The label, or its name (id, else position) and what is wrong with it.
    fn into_label(self, position: usize) -> Result<Label, (String, String)> {
        let id = self
            .id
            .map(|id| id.trim().to_owned())
            .filter(|id| !id.is_empty())
            .ok_or_else(|| (format!("#{position}"), "has no id".to_owned()))?;
        let mut output_fields = Vec::new();
        for (mapping, required) in [
            (self.output_fields.required, true),
            (self.output_fields.optional, false),
        ] {
            for (name, declaration) in mapping {
                let field =
                    wire_field(name, declaration, required).map_err(|problem| (id.clone(), problem))?;
                output_fields.push(field);
            }
        }
        Ok(Label {
            name: self.name.unwrap_or_else(|| id.clone()),
            family: self.family.unwrap_or_else(|| "other".to_owned()),
            definition: self.definition.unwrap_or_default().trim().to_owned(),
            include_when: self.include_when,
            exclude_when: self.exclude_when,
            cues: self.cues,
            examples: self.examples,
            output_fields,
            id,
        })
    }
}

/// One output field from its name and declaration.
fn wire_field(
    name: yaml_serde::Value,
    declaration: yaml_serde::Value,
    required: bool,
) -> Result<OutputField, String> {
    let name = scalar_text(name).ok_or("an output field's name is not a string")?;
    let wire: WireField =
        yaml_serde::from_value(declaration).map_err(|e| format!("output field {name}: {e}"))?;
    let spelled = wire
        .field_type
        .ok_or_else(|| format!("output field {name} has no type"))?;
    let field_type = FieldType::parse(&spelled).ok_or_else(|| {
        format!("output field {name} has the unknown type {spelled:?} (known: string, number, integer, boolean, list[string])")
    })?;
    Ok(OutputField {
        name,
        field_type,
        required,
        description: wire.description.map(|d| d.trim().to_owned()),
        allowed: wire.allowed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_codebook_has_twelve_labels_in_five_families() {
        let codebook = Codebook::built_in().unwrap();
        assert_eq!(codebook.labels.len(), 12);
        let families: Vec<String> = codebook.families().into_iter().map(|f| f.id).collect();
        assert_eq!(
            families,
            [
                "task_structuring",
                "execution",
                "delegation_appraisal",
                "delegation_distribution",
                "coordination"
            ]
        );
        assert_eq!(
            codebook.schema_version.as_deref(),
            Some("0.2"),
            "the last of the repeated key"
        );
        assert_eq!(codebook.repeated_keys, ["schema_version"]);
        let state = codebook.label("COORD_STATE_UPDATING").unwrap();
        let status = state.field("status").unwrap();
        assert_eq!(status.field_type, FieldType::String);
        assert_eq!(status.allowed.as_ref().map(Vec::len), Some(5));
        assert_eq!(
            state.field("progress_percent").unwrap().field_type,
            FieldType::Number
        );
        let digital = codebook.label("EXEC_DIGITAL").unwrap();
        assert_eq!(
            digital.field("files_touched").unwrap().field_type,
            FieldType::StringList
        );
        assert!(!digital.cues.is_empty() && !digital.include_when.is_empty());
    }

    #[test]
    fn the_body_is_json_with_a_stable_etag() {
        let a = Codebook::built_in().unwrap();
        let b = Codebook::built_in().unwrap();
        assert_eq!(a.etag(), b.etag());
        let body: Value = serde_json::from_slice(&a.body()).unwrap();
        assert_eq!(body["labels"][0]["id"], "TASK_DECOMPOSITION");
        assert_eq!(body["labels"][0]["output_fields"][0]["type"], "list[string]");
        assert_eq!(body["families"][0]["labels"][1], "TASK_SUBTASK_DELEGATION");
    }

    fn refusal(text: &str) -> String {
        Codebook::parse("mine.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn a_bad_codebook_is_refused_naming_the_file_and_the_problem() {
        assert!(refusal("labels: [").starts_with("the codebook mine.yaml does not parse: "));
        assert_eq!(
            refusal("schema_name: x\n"),
            "the codebook mine.yaml defines no labels (expected a `labels:` list)"
        );
        assert_eq!(
            refusal("labels:\n  - id: A\n  - id: B\n  - id: A\n"),
            "the codebook mine.yaml repeats the label id A (labels 1 and 3)"
        );
        assert_eq!(
            refusal("labels:\n  - name: nameless\n"),
            "the codebook mine.yaml, label #1: has no id"
        );
        assert!(refusal(
            "labels:\n  - id: A\n    output_fields:\n      optional:\n        when: { type: date }\n"
        )
        .starts_with("the codebook mine.yaml, label A: output field when has the unknown type \"date\""));
    }

    #[test]
    fn field_values_are_checked_against_their_declaration() {
        let field = |field_type, allowed: Option<Vec<&str>>| OutputField {
            name: "f".into(),
            field_type,
            required: false,
            description: None,
            allowed: allowed.map(|a| a.into_iter().map(str::to_owned).collect()),
        };
        let json = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert!(field(FieldType::StringList, None)
            .check(&json(r#"["a","b"]"#))
            .is_ok());
        assert!(field(FieldType::StringList, None)
            .check(&json(r#"["a",1]"#))
            .is_err());
        assert!(field(FieldType::Integer, None).check(&json("3")).is_ok());
        assert!(field(FieldType::Integer, None).check(&json("3.5")).is_err());
        assert!(field(FieldType::Number, None).check(&json("3.5")).is_ok());
        let status = field(FieldType::String, Some(vec!["started", "done"]));
        assert!(status.check(&json(r#""done""#)).is_ok());
        assert_eq!(
            status.check(&json(r#""maybe""#)),
            Err("must be one of: started, done".to_owned())
        );
    }
}
