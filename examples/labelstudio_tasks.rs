//! Writes a Label Studio labeling config of the built-in codebook and a few hand-made tasks
//! (two annotators, an adjudicated, a discarded and an empty set, quotes after non-ASCII
//! text, an orphaned unit, suggestions) for a round trip through a real Label Studio:
//!
//! ```sh
//! cargo run --example labelstudio_tasks -- /tmp/lsrt
//! ```
//!
//! then import `tasks.json` with `config.xml` into a Label Studio project and export it
//! again (`fixtures/labelstudio/README.md` tells how the kept exports were made).

use std::path::PathBuf;

use serde_json::{json, Map, Value};
use sessiongraph::labels::labelstudio::{label_config, task};
use sessiongraph::labels::model::{Evidence, LabelRecord};
use sessiongraph::labels::{Codebook, ExportedUnit, LabelSet, Status, Suggestion};

fn label(id: &str, confidence: Option<f64>, quote: Option<&str>, cue: Option<&str>) -> LabelRecord {
    LabelRecord {
        id: id.into(),
        confidence,
        evidence: (quote.is_some() || cue.is_some()).then(|| Evidence {
            quote: quote.map(Into::into),
            cue: cue.map(Into::into),
        }),
        fields: None,
    }
}

fn fields(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}

fn set(event_id: &str, annotator: &str, status: Status, labels: Vec<LabelRecord>) -> LabelSet {
    LabelSet {
        event_id: event_id.into(),
        annotator: annotator.into(),
        status,
        labels,
        note: None,
        lead_time: Some(8.25),
        version: 1,
        updated_at: "2026-11-23T17:00:00Z".into(),
        codebook_version: None,
    }
}

fn suggestion(event_id: &str, model: &str, score: Option<f64>, labels: Vec<LabelRecord>) -> Suggestion {
    Suggestion {
        event_id: event_id.into(),
        model: model.into(),
        score,
        labels,
        updated_at: "2026-11-23T17:00:00Z".into(),
    }
}

fn unit(
    event_id: &str,
    unit_type: &str,
    text: &str,
    sets: Vec<LabelSet>,
    suggestions: Vec<Suggestion>,
) -> ExportedUnit {
    let adjudicated = sets
        .iter()
        .rev()
        .find(|s| s.status == Status::Adjudicated)
        .cloned();
    ExportedUnit {
        codebook: None,
        session_id: "s1".into(),
        event_id: event_id.into(),
        unit_type: Some(unit_type.into()),
        text: text.into(),
        unit: None,
        orphaned: false,
        annotations: sets,
        suggestions,
        adjudicated,
    }
}

/// The first unit: two annotators, an adjudicated and a discarded set, a draft, a suggestion.
fn first() -> ExportedUnit {
    let id = "U:0001";
    let text = "Café déjà vu — please split the migration into three steps and let the sub-agent handle the schema part.";
    let mut decomposition = label(
        "TASK_DECOMPOSITION",
        Some(0.9),
        Some("split the migration into three steps"),
        Some("split"),
    );
    decomposition.fields = fields(json!({"decomposition": ["schema", "data", "code"]}));
    let mut alice = set(
        id,
        "alice",
        Status::Submitted,
        vec![
            decomposition,
            label(
                "TASK_SUBTASK_DELEGATION",
                Some(0.7),
                Some("let the sub-agent handle the schema part"),
                None,
            ),
        ],
    );
    alice.note = Some("clear «case», two labels".into());
    alice.version = 4;
    let bob = set(
        id,
        "bob@example.com",
        Status::Submitted,
        vec![label("TASK_DECOMPOSITION", Some(0.6), Some("déjà vu"), None)],
    );
    let mut judge = set(
        id,
        "judge",
        Status::Adjudicated,
        vec![label("TASK_DECOMPOSITION", Some(1.0), None, None)],
    );
    judge.lead_time = None;
    let carol = set(id, "carol", Status::Discarded, vec![]);
    let dave = set(
        id,
        "dave",
        Status::Draft,
        vec![label("EXEC_COGNITIVE", None, None, None)],
    );
    let rules = suggestion(
        id,
        "rules-v1",
        Some(0.66),
        vec![label(
            "TASK_DECOMPOSITION",
            Some(0.5),
            Some("split the migration"),
            None,
        )],
    );
    unit(
        id,
        "user_turn",
        text,
        vec![alice, bob, judge, carol, dave],
        vec![rules],
    )
}

/// The second unit: an empty submitted set, fields, two suggestions (one without a score).
fn second() -> ExportedUnit {
    let id = "A:req2:msg2";
    let text = "I checked the build log: the tests still fail on the parser → so I will rerun after the fix.";
    let mut digital = label(
        "EXEC_DIGITAL",
        Some(0.8),
        Some("I checked the build log"),
        Some("checked"),
    );
    digital.fields = fields(json!({"tool_name": "Bash", "command": "cargo test"}));
    let alice = set(
        id,
        "alice",
        Status::Submitted,
        vec![
            label("COORD_MONITORING", Some(0.95), Some("rerun after the fix"), None),
            digital,
        ],
    );
    let bob = set(id, "bob@example.com", Status::Submitted, vec![]);
    let rules = suggestion(
        id,
        "rules-v1",
        Some(0.4),
        vec![label("COORD_MONITORING", Some(0.4), None, None)],
    );
    let agent = suggestion(
        id,
        "agent:claude",
        None,
        vec![label(
            "COORD_STATE_UPDATING",
            None,
            Some("the tests still fail"),
            None,
        )],
    );
    unit(id, "assistant_turn", text, vec![alice, bob], vec![rules, agent])
}

/// The third unit: orphaned (no text), its quote travels in the meta.
fn third() -> ExportedUnit {
    let id = "U:0003";
    let judge = set(
        id,
        "judge",
        Status::Adjudicated,
        vec![label("DELEGATION_DECISION", Some(0.85), Some("You decide"), None)],
    );
    let mut unit = unit(id, "user_turn", "", vec![judge], vec![]);
    unit.unit_type = None;
    unit.orphaned = true;
    unit
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    std::fs::create_dir_all(&dir)?;
    let codebook = Codebook::built_in()?;
    std::fs::write(dir.join("config.xml"), label_config(&codebook))?;
    let tasks: Vec<Value> = [first(), second(), third()].iter().map(task).collect();
    std::fs::write(dir.join("tasks.json"), serde_json::to_string_pretty(&tasks)?)?;
    println!("wrote {} tasks and config.xml to {}", tasks.len(), dir.display());
    Ok(())
}
