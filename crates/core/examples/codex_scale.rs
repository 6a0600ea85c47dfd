//! Writes an N-times longer copy of one Codex rollout, for benchmarks: the copies one
//! after the other in one file, every `call_id` of copy k ≥ 1 suffixed `_c<k>` so that each
//! call still meets its own output (the copy's records take their ids from their lines).
//! Copy 0 is the file's lines as they are.
//!
//! ```sh
//! cargo run --release -p sessiongraph-core --example codex_scale -- rollout-….jsonl /tmp/codex-x100.jsonl 100
//! ```

use serde_json::Value;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [source, out, n] = args.as_slice() else {
        panic!("usage: codex_scale ROLLOUT OUT N");
    };
    let n: usize = n.parse().expect("N is a count");
    let data = std::fs::read_to_string(source).expect("a readable UTF-8 rollout");
    let lines: Vec<&str> = data.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut written = String::with_capacity(data.len() * n);
    for copy in 0..n {
        for line in &lines {
            if copy == 0 {
                written.push_str(line);
            } else {
                written.push_str(&renamed(line, copy));
            }
            written.push('\n');
        }
    }
    std::fs::write(out, written).expect("the copy is written");
}

/// `line` with its `call_id` (the envelope's payload's, or a bare item's) suffixed for
/// copy `copy`; a line that is not a JSON object is kept as it is.
fn renamed(line: &str, copy: usize) -> String {
    let Ok(mut value) = serde_json::from_str::<Value>(line) else {
        return line.to_owned();
    };
    let suffix = |target: Option<&mut Value>| {
        if let Some(Value::String(id)) = target.and_then(|t| t.get_mut("call_id")) {
            id.push_str(&format!("_c{copy}"));
        }
    };
    suffix(value.pointer_mut("/payload"));
    suffix(Some(&mut value));
    value.to_string()
}
