//! Readable dumps of the views of each synthetic fixture, kept as insta snapshots so that a
//! change to the order, the grouping or the DAG shows up as a reviewable diff.

use serde_json::Value;
use sessiongraph::core::views::{View, ViewOptions};

use crate::helpers::{body, fixture, load_path};

fn short(id: &str) -> String {
    // Fixture uuids end in a distinctive counter; keep the tail.
    match id.split_once('/') {
        Some((uuid, tool)) => format!("{}/{tool}", &uuid[uuid.len().saturating_sub(4)..]),
        None => id[id.len().saturating_sub(4)..].to_owned(),
    }
}

fn first_line(s: &str, n: usize) -> String {
    s.lines().next().unwrap_or("").chars().take(n).collect()
}

/// One line per node: step, lane, type, id, incoming edges, content.
pub(crate) fn workflow_dump(w: &Value) -> String {
    let mut out = String::new();
    for n in w["workflow"]["nodes"].as_array().unwrap() {
        let parents: Vec<String> = n["parentNodeIds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| short(p.as_str().unwrap()))
            .collect();
        out.push_str(&format!(
            "{:>2} {:<15} {:<16} {:<10} <- [{}] {}\n",
            n["stepIndex"],
            n["laneId"].as_str().unwrap(),
            n["nodeType"].as_str().unwrap(),
            short(n["id"].as_str().unwrap()),
            parents.join(","),
            first_line(n["content"].as_str().unwrap(), 50),
        ));
    }
    for l in w["workflow"]["lanes"].as_array().unwrap() {
        out.push_str(&format!(
            "lane {} ({})\n",
            l["id"].as_str().unwrap(),
            l["label"].as_str().unwrap()
        ));
    }
    out
}

/// One line per unit: id, type, text.
pub(crate) fn annotations_dump(a: &Value) -> String {
    let mut out = String::new();
    for u in a["annotations"].as_array().unwrap() {
        let r = &u["text_or_artifact_ref"];
        let text = r["text"].as_str().or(r["thinking"].as_str()).unwrap_or("");
        let tools = u["tool_summary"]["tool_calls"]
            .as_array()
            .map(|c| {
                c.iter()
                    .map(|t| {
                        format!(
                            "{}:{}",
                            t["tool_name"].as_str().unwrap(),
                            if t["success"] == true { "ok" } else { "fail" }
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<42} {:<14} {} {}\n",
            u["event_id"].as_str().unwrap(),
            u["unit_type"].as_str().unwrap(),
            first_line(text, 40),
            tools
        ));
    }
    out
}

fn dump(name: &str) -> String {
    let session = load_path(&fixture(&format!("synthetic/{name}")));
    let all = ViewOptions {
        include_subagents: true,
        ..ViewOptions::default()
    };
    format!(
        "# workflow\n{}\n# annotations (with sub-agents)\n{}",
        workflow_dump(&body(&session, View::Workflow, all)),
        annotations_dump(&body(&session, View::Annotations, all))
    )
}

#[test]
fn edge_cases_dump() {
    insta::assert_snapshot!(dump("edge_cases"));
}

#[test]
fn subagents_dump() {
    insta::assert_snapshot!(dump("subagents"));
}

#[test]
fn multi_block_dump() {
    insta::assert_snapshot!(dump("multi_block"));
}

#[test]
fn duplicate_lines_dump() {
    insta::assert_snapshot!(dump("duplicate_lines"));
}
