//! Rendering under load (issue 15 D3): bodies cut at a step assembled from the whole body.

use sessiongraph::core::session::Branch;
use sessiongraph::core::views::step::WholeWorkflow;
use sessiongraph::core::views::{self, View, ViewOptions};

use crate::helpers::{fixture, load_path};

/// Steps worth checking in a workflow of `len` nodes: the first ones, a spread, the last
/// ones and past the end.
fn steps_to_check(len: usize, spread: usize) -> Vec<u64> {
    let len = len as u64;
    let mut steps: Vec<u64> = (0..12).collect();
    steps.extend((0..len).step_by((len as usize / spread).max(1)));
    steps.extend(len.saturating_sub(3)..len + 2);
    steps.push(u64::MAX);
    steps.sort_unstable();
    steps.dedup();
    steps
}

/// Issue 15 D3: a body cut at a step is assembled from the whole body (only the nodes next
/// to the cut, the lanes and the totals are rendered) and is byte for byte the body
/// rendered from scratch, for every branch.
#[test]
fn d3_a_body_cut_at_a_step_is_the_whole_body_shared_and_equals_a_fresh_render() {
    let sessions = [
        ("commugraph-sample", 40),
        ("synthetic/subagents", 1000),
        ("synthetic/edge_cases", 1000),
        ("synthetic/multi_block", 1000),
        ("synthetic/duplicate_lines", 1000),
    ];
    for (dir, spread) in sessions {
        let session = load_path(&fixture(dir));
        for branch in [Branch::All, Branch::Active] {
            let whole = WholeWorkflow::render(&session, branch);
            let options = ViewOptions {
                branch,
                ..ViewOptions::default()
            };
            assert_eq!(
                whole.body.to_bytes(),
                views::render(&session, View::Workflow, options).to_bytes(),
                "{dir} {branch:?}: the whole body"
            );
            let len = session.workflow_for(branch).nodes.len();
            for step in steps_to_check(len, spread) {
                let cut = whole.cut(&session, step);
                let fresh = views::render(
                    &session,
                    View::Workflow,
                    ViewOptions {
                        step: Some(step),
                        ..options
                    },
                );
                assert!(
                    cut.to_bytes() == fresh.to_bytes(),
                    "{dir} {branch:?} step {step}: the cut body differs from a fresh render"
                );
            }
        }
    }
    // Most of a cut body is shared: the sample cut half way renders a few nodes.
    let session = load_path(&fixture("commugraph-sample"));
    let whole = WholeWorkflow::render(&session, Branch::All);
    let half = session.workflow.nodes.len() as u64 / 2;
    let (fresh, cut) = (whole.cut_fresh_bytes(&session, half), whole.cut(&session, half));
    assert!(
        fresh * 20 < cut.len(),
        "{fresh} fresh bytes of {} in the body cut at {half}",
        cut.len()
    );
}
