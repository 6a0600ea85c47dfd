//! N-times larger sessions made from a real one, in memory: the Rust twin of
//! the `scale.py` benchmark tool, for the benchmarks and the complexity test (which must not
//! read files outside the repository or commit large files).
//!
//! Copy 0 is the source as is. Copy k >= 1 has every identifier rewritten so that copies
//! never collide: `uuid`, `parentUuid`, `logicalParentUuid` get a new UUID derived from
//! (k, old); `requestId`, `message.id`, `tool_use.id` and `tool_result.tool_use_id` get a
//! `_c<k>` suffix; agent ids (record `agentId`, `toolUseResult.agentId` and the agent file's
//! name) a new 8-hex id. Timestamps are shifted by k times the source's span plus a minute.
//! With `chain`, the roots of copy k hang off the last record of copy k-1's main file, so
//! the copies form one long conversation.

use serde_json::Value;
use sessiongraph::core::{SessionInput, SourceFile};
use sha2::{Digest, Sha256};

/// A hex digest of `text`.
fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

fn new_uuid(k: usize, old: &str) -> String {
    let h = digest(&format!("{k}:{old}"));
    format!(
        "{}-{}-4{}-8{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

fn new_agent_id(k: usize, old: &str) -> String {
    digest(&format!("agent:{k}:{old}"))[..8].to_owned()
}

fn millis(ts: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp_millis())
}

fn shifted(ts: &str, by_ms: i64) -> String {
    millis(ts)
        .and_then(|ms| chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms + by_ms))
        .map_or_else(
            || ts.to_owned(),
            |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        )
}

fn rewrite(record: &mut Value, k: usize, shift_ms: i64) {
    let Some(r) = record.as_object_mut() else {
        return;
    };
    for key in ["uuid", "parentUuid", "logicalParentUuid"] {
        if let Some(Value::String(s)) = r.get_mut(key) {
            *s = new_uuid(k, s);
        }
    }
    if let Some(Value::String(s)) = r.get_mut("requestId") {
        *s = format!("{s}_c{k}");
    }
    if let Some(Value::String(s)) = r.get_mut("timestamp") {
        *s = shifted(s, shift_ms);
    }
    if let Some(Value::String(s)) = r.get_mut("agentId") {
        *s = new_agent_id(k, s);
    }
    if let Some(Value::String(s)) = r.get_mut("toolUseResult").and_then(|t| t.get_mut("agentId")) {
        *s = new_agent_id(k, s);
    }
    let Some(message) = r.get_mut("message").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(Value::String(s)) = message.get_mut("id") {
        *s = format!("{s}_c{k}");
    }
    let Some(Value::Array(blocks)) = message.get_mut("content") else {
        return;
    };
    for block in blocks.iter_mut().filter_map(Value::as_object_mut) {
        for key in ["id", "tool_use_id"] {
            if let Some(Value::String(s)) = block.get_mut(key) {
                *s = format!("{s}_c{k}");
            }
        }
    }
}

/// The span of the source's timestamps plus a minute: how far each copy is shifted.
fn period_ms(input: &SessionInput) -> i64 {
    let times: Vec<i64> = input
        .files
        .iter()
        .flat_map(|f| f.bytes.split(|&b| b == b'\n'))
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .filter_map(|v| v.get("timestamp").and_then(Value::as_str).and_then(millis))
        .collect();
    let span = times
        .iter()
        .max()
        .zip(times.iter().min())
        .map_or(0, |(a, b)| a - b);
    (span / 1000 + 1) * 1000 + 60_000
}

/// The name of copy `k` of a sub-agent file: `agent-<new id>.jsonl`.
fn copy_name(name: &str, k: usize) -> String {
    let agent = name.strip_prefix("agent-").and_then(|n| n.strip_suffix(".jsonl"));
    match (k, agent) {
        (0, _) => name.to_owned(),
        (_, Some(id)) => format!("agent-{}.jsonl", new_agent_id(k, id)),
        (_, None) => format!("copy{k}-{name}"),
    }
}

/// `source` made `n` times larger (see the module docs).
pub fn scaled(source: &SessionInput, n: usize, chain: bool) -> SessionInput {
    let main = source.main_index().expect("the source has a main file");
    let period = period_ms(source);
    let mut main_out: Vec<u8> = Vec::new();
    let mut files: Vec<SourceFile> = Vec::new();
    let mut last_uuid: Option<String> = None;
    for k in 0..n {
        for (fi, file) in source.files.iter().enumerate() {
            let mut out = Vec::with_capacity(file.bytes.len());
            for line in file.bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                if k == 0 {
                    out.extend_from_slice(line);
                } else {
                    let Ok(mut record) = serde_json::from_slice::<Value>(line) else {
                        out.extend_from_slice(line);
                        out.push(b'\n');
                        continue;
                    };
                    rewrite(&mut record, k, period * k as i64);
                    if chain && fi == main && record.get("parentUuid") == Some(&Value::Null) {
                        if let (Some(last), Some(r)) = (&last_uuid, record.as_object_mut()) {
                            r.insert("parentUuid".into(), Value::String(last.clone()));
                        }
                    }
                    serde_json::to_writer(&mut out, &record).expect("a Value serialises");
                }
                out.push(b'\n');
            }
            if fi == main {
                let last = out.split(|&b| b == b'\n').rev().find_map(|l| {
                    serde_json::from_slice::<Value>(l)
                        .ok()?
                        .get("uuid")?
                        .as_str()
                        .map(str::to_owned)
                });
                last_uuid = last.or(last_uuid.take());
                main_out.extend_from_slice(&out);
            } else {
                files.push(SourceFile::new(copy_name(&file.name, k), out));
            }
        }
    }
    files.insert(0, SourceFile::new(source.files[main].name.clone(), main_out));
    SessionInput::new(files)
}
