//! Workflow bodies cut at a step, assembled from the whole body.
//!
//! Nodes are in step order and every edge points forward, so a cut at step `s` keeps the
//! nodes up to `s` and the edges between them. A kept node's JSON differs from the whole
//! body's only when one of its neighbours is cut (its `childNodeIds` lose that child), and an
//! edge's JSON never differs. So a body cut at a step shares almost every byte with the
//! whole body: it is assembled from slices of the whole body's chunks (nothing copied) and
//! only the nodes next to the cut, the lanes and the totals are rendered. The bytes are
//! exactly those of rendering the cut body from scratch.

use std::io::{self, Write};
use std::mem::size_of;
use std::ops::Range;

use serde::Serialize;

use super::body::{Body, ChunkWriter, ObjectMembers};
use super::workflow::{snapshot_tail, write_parallel, NodesJson, WorkflowLayout, EDGES_OPEN, NODES_OPEN};
use crate::heap::HeapSize;
use crate::pipeline::session::{Branch, Session};
use crate::pipeline::workflow::Workflow;

/// A whole workflow body (not cut at a step), with what bodies cut at a step need to share
/// it.
#[derive(Debug)]
pub struct WholeWorkflow {
    /// The body.
    pub body: Body,
    layout: WorkflowLayout,
    /// The workflow the body shows, when it is not the session's own (the active branch's
    /// is built for the request and kept here, so that cut bodies need not build it again).
    branch_workflow: Option<Workflow>,
}

impl WholeWorkflow {
    /// Renders the whole workflow of `branch`.
    pub fn render(session: &Session, branch: Branch) -> WholeWorkflow {
        let w = session.workflow_for(branch);
        let mut out = ChunkWriter::new();
        let body = super::workflow::workflow(session, &w, None);
        // Writing into memory cannot fail, nor can serialising these types.
        let layout = write_parallel(&body, &mut out).unwrap_or_default();
        drop(body);
        WholeWorkflow {
            body: out.finish(),
            layout,
            branch_workflow: match w {
                std::borrow::Cow::Owned(w) => Some(w),
                std::borrow::Cow::Borrowed(_) => None,
            },
        }
    }

    fn workflow<'s>(&'s self, session: &'s Session) -> &'s Workflow {
        self.branch_workflow.as_ref().unwrap_or(&session.workflow)
    }

    /// Memory it holds besides the body: the layout and the branch's workflow.
    pub fn extra_bytes(&self) -> usize {
        let layout = 8 * (self.layout.node_ends.len() + self.layout.edge_ends.len());
        layout
            + self
                .branch_workflow
                .as_ref()
                .map_or(0, |w| size_of::<Workflow>() + w.heap_size())
    }

    /// An upper bound of the bytes [`WholeWorkflow::cut`] renders for `step` (the rest is
    /// shared with the whole body).
    pub fn cut_fresh_bytes(&self, session: &Session, step: u64) -> usize {
        let w = self.workflow(session);
        if !self.layout.describes(w) {
            return self.body.len();
        }
        let fresh_nodes: usize = (0..w.nodes.len())
            .filter(|&n| kept(w, step, n) && !shared(w, step, n))
            .map(|n| self.layout.node_range(n).len())
            .sum();
        // The lanes can only shrink; `currentStep` is a number instead of `null`.
        fresh_nodes + self.layout.tail_len + 32
    }

    /// The body cut at `step`: the bytes of rendering it from scratch, most of them shared
    /// with the whole body.
    pub fn cut(&self, session: &Session, step: u64) -> Body {
        let w = self.workflow(session);
        let mut out = ChunkWriter::new();
        if !self.layout.describes(w) {
            let body = super::workflow::workflow(session, w, Some(step));
            // Writing into memory cannot fail, nor can serialising these types.
            let _ = write_parallel(&body, &mut out);
            return out.finish();
        }
        // Writing into memory cannot fail, nor can serialising these types.
        let _ = self.write_cut(session, w, step, &mut out);
        out.finish()
    }

    fn write_cut(&self, session: &Session, w: &Workflow, step: u64, out: &mut ChunkWriter) -> io::Result<()> {
        let nodes = NodesJson {
            session,
            w,
            step: Some(step),
        };
        let spawned = nodes.spawned();
        out.write_all(NODES_OPEN)?;
        let mut list = SharedList::new(&self.body, out);
        for n in (0..w.nodes.len()).filter(|&n| kept(w, step, n)) {
            if shared(w, step, n) {
                list.shared(self.layout.node_range(n));
            } else if let Some(node) = nodes.node(n, &spawned) {
                list.fresh(&node)?;
            }
        }
        list.end();
        out.write_all(EDGES_OPEN)?;
        let mut list = SharedList::new(&self.body, out);
        for (e, edge) in w.edges.iter().enumerate() {
            if kept(w, step, edge.source) && kept(w, step, edge.target) {
                list.shared(self.layout.edge_range(e));
            }
        }
        list.end();
        out.write_all(b"],")?;
        serde_json::to_writer(ObjectMembers::new(out), &snapshot_tail(session, w, Some(step)))?;
        out.write_all(b"}")
    }
}

/// True when node `n` is within `step`.
fn kept(w: &Workflow, step: u64, n: usize) -> bool {
    (w.nodes[n].step as u64) <= step
}

/// True when node `n` has the same JSON cut at `step` as in the whole body: none of its
/// neighbours is cut.
fn shared(w: &Workflow, step: u64, n: usize) -> bool {
    w.outgoing.of(n).all(|e| kept(w, step, w.edges[e].target))
        && w.incoming.of(n).all(|e| kept(w, step, w.edges[e].source))
}

/// The elements of a JSON list being written: runs of elements shared with a body (appended
/// as slices of its chunks) and elements rendered afresh, separated by commas.
struct SharedList<'b, 'o> {
    whole: &'b Body,
    out: &'o mut ChunkWriter,
    run: Option<Range<usize>>,
    wrote: bool,
}

impl<'b, 'o> SharedList<'b, 'o> {
    fn new(whole: &'b Body, out: &'o mut ChunkWriter) -> Self {
        SharedList {
            whole,
            out,
            run: None,
            wrote: false,
        }
    }

    /// The element at `range` of the whole body. Consecutive elements are one run (their
    /// comma included).
    fn shared(&mut self, range: Range<usize>) {
        match &mut self.run {
            Some(run) if run.end + 1 == range.start => run.end = range.end,
            _ => {
                self.end();
                self.run = Some(range);
            }
        }
    }

    /// An element rendered here.
    fn fresh(&mut self, value: &impl Serialize) -> io::Result<()> {
        self.end();
        self.comma()?;
        serde_json::to_writer(&mut *self.out, value)?;
        Ok(())
    }

    /// Writes the pending run.
    fn end(&mut self) {
        if let Some(run) = self.run.take() {
            // Writing into memory cannot fail.
            let _ = self.comma();
            self.out.append_range(self.whole, run);
        }
    }

    fn comma(&mut self) -> io::Result<()> {
        if self.wrote {
            self.out.write_all(b",")?;
        }
        self.wrote = true;
        Ok(())
    }
}
