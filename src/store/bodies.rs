//! The view bodies a loaded session serves.
//!
//! A body without a step is rendered once per session version (concurrent first requests
//! wait for the same render) and kept, and so is each of its compressed variants, made
//! once per encoding on first request. A workflow body cut at a step is assembled from the
//! kept whole body, sharing its bytes ([`crate::core::views::step`]); other bodies cut at a
//! step are rendered for the request, and compressed for it if asked. Everything kept
//! counts towards the cache.
//!
//! Every render or compression that is not served from the cache first reserves an
//! estimate of its memory in the [`RenderBudget`]; a body made for one request keeps its
//! reservation until it is sent. Renders and compressions run on the CPU pool, never on
//! the async workers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::OnceCell;

use super::budget::{Admission, BudgetPermit, RenderBudget};
use super::compress::{compress, Effort, Encoding, MIN_COMPRESSED_BYTES};
use super::error::StoreError;
use super::lock;
use crate::core::pipeline::session::Branch;
use crate::core::views::annotations::{annotations, dialog_of, UnitLabels};
use crate::core::views::branches::context_body;
use crate::core::views::graph::GraphMode;
use crate::core::views::step::WholeWorkflow;
use crate::core::views::{self, Body, ChunkWriter, View, ViewOptions};
use crate::core::Session;

/// What a view request asks for, besides a step: the view, sub-agents, the branch, the
/// graph's mode.
type BodyKey = (View, bool, Branch, GraphMode);

/// A kept body, or the render of it in progress.
type Cell = Arc<OnceCell<Cached>>;

/// Fixed part of every render's estimate: small bodies, buffers, the last chunk.
const RENDER_OVERHEAD: usize = 1 << 20;

/// A kept body.
#[derive(Debug, Clone)]
enum Cached {
    /// A view body, or a compressed variant of one.
    Body(Body),
    /// The whole workflow, with what bodies cut at a step share with it.
    Workflow(Arc<WholeWorkflow>),
}

impl Cached {
    fn body(&self) -> &Body {
        match self {
            Cached::Body(b) => b,
            Cached::Workflow(w) => &w.body,
        }
    }

    /// The memory it holds (the input's texts it keeps by reference are the session's).
    fn bytes(&self) -> usize {
        match self {
            Cached::Body(b) => b.held_bytes(),
            Cached::Workflow(w) => w.body.held_bytes() + w.extra_bytes(),
        }
    }
}

/// Kept bodies up to this size are held as one buffer ([`joined_when_small`]).
const JOINED_BELOW: usize = 1 << 20;

/// `body` as one buffer when it is at most [`JOINED_BELOW`] long, else as it is. A body
/// refers to the input's long texts between chunks of its own, and a connection copies
/// runs of short chunks into one frame to send them with one write: for a kept body
/// served many times, that copy is made once here instead of once per request (at most
/// a mebibyte more held per body).
fn joined_when_small(body: Body) -> Body {
    if body.len() > JOINED_BELOW || body.chunks().len() <= 1 {
        return body;
    }
    Body::from(body.to_bytes())
}

/// A body to send, and the part of the render budget it holds until it is sent (dropped).
#[derive(Debug)]
pub struct Served {
    /// The body.
    pub body: Body,
    /// Its content coding.
    pub encoding: Encoding,
    /// What it holds of the render budget (a body made for this request).
    pub permit: Option<BudgetPermit>,
}

/// The view bodies of one parsed session: those kept (rendered by the first request that
/// needs them) and their compressed variants, and the renders made for one request.
#[derive(Debug)]
pub struct SessionBodies {
    session: Arc<Session>,
    /// The size of the session's files, which a render's estimate starts from.
    input_bytes: usize,
    cells: Mutex<HashMap<(BodyKey, Encoding), Cell>>,
    bytes: AtomicUsize,
    compressions: AtomicUsize,
}

impl SessionBodies {
    /// The bodies of `session`, none rendered yet.
    pub fn new(session: Arc<Session>) -> SessionBodies {
        let input_bytes = session.files.iter().map(|f| f.bytes).sum();
        SessionBodies {
            session,
            input_bytes,
            cells: Mutex::default(),
            bytes: AtomicUsize::new(0),
            compressions: AtomicUsize::new(0),
        }
    }

    /// The memory the kept bodies and variants hold.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn cell(&self, key: BodyKey, encoding: Encoding) -> Cell {
        lock(&self.cells).entry((key, encoding)).or_default().clone()
    }

    fn keep(&self, kept: &Cached) {
        self.bytes.fetch_add(kept.bytes(), Ordering::Relaxed);
    }

    /// The body of `view` with `options`, in `encoding` when that is worth it (small bodies,
    /// and bodies whose compression finds no room in the budget, are sent as they are).
    /// What is not kept is rendered or compressed on the CPU pool within `budget`.
    pub async fn body(
        &self,
        view: View,
        options: ViewOptions,
        encoding: Encoding,
        budget: &RenderBudget,
    ) -> Result<Served, StoreError> {
        let budget = &budget.admission();
        let key = (view, options.include_subagents, options.branch, options.graph);
        let Some(step) = options.step else {
            let kept = self.kept(key, budget).await?;
            return Ok(self.kept_variant(key, kept.body(), encoding, budget).await);
        };
        let cut = self.cut(key, step, budget).await?;
        Ok(compressed_for_one_request(cut, encoding, budget).await)
    }

    /// How many compressed variants of kept bodies were made (each once per body and
    /// encoding).
    pub fn compressions(&self) -> usize {
        self.compressions.load(Ordering::Relaxed)
    }

    /// The kept body of `key` (no step), rendered by the first request that needs it. The
    /// dialog body is the kept annotations body's bytes under another first key.
    async fn kept(&self, key: BodyKey, budget: &Admission<'_>) -> Result<Cached, StoreError> {
        let (view, include_subagents, branch, graph) = key;
        if view == View::Dialog {
            let annotations = (View::Annotations, include_subagents, branch, graph);
            let kept = Box::pin(self.kept(annotations, budget)).await?;
            let dialog = dialog_of(kept.body())
                .ok_or_else(|| StoreError::Task("the kept annotations body has another shape".into()))?;
            return Ok(Cached::Body(dialog));
        }
        let cell = self.cell(key, Encoding::Identity);
        let kept = cell
            .get_or_try_init(|| async {
                let permit = budget.reserve(self.whole_render_estimate(view, branch)).await?;
                let session = self.session.clone();
                let (rendered, _permit) = on_cpu_pool(permit, move || {
                    if view == View::Workflow {
                        Cached::Workflow(Arc::new(WholeWorkflow::render(&session, branch)))
                    } else {
                        let options = ViewOptions {
                            step: None,
                            include_subagents,
                            branch,
                            graph,
                        };
                        Cached::Body(joined_when_small(views::render(&session, view, options)))
                    }
                })
                .await?;
                self.keep(&rendered);
                Ok::<_, StoreError>(rendered)
            })
            .await?;
        Ok(kept.clone())
    }

    /// The kept `body` of `key` in `encoding`: its kept variant, made by the first request
    /// that asks. When the variant cannot be made now (no room in the budget), the body as
    /// it is.
    async fn kept_variant(
        &self,
        key: BodyKey,
        body: &Body,
        encoding: Encoding,
        budget: &Admission<'_>,
    ) -> Served {
        let identity = || Served {
            body: body.clone(),
            encoding: Encoding::Identity,
            permit: None,
        };
        if encoding == Encoding::Identity || body.len() < MIN_COMPRESSED_BYTES {
            return identity();
        }
        let cell = self.cell(key, encoding);
        let variant = cell
            .get_or_try_init(|| async {
                let permit = budget.reserve(compressed_estimate(body)).await?;
                let plain = body.clone();
                let (compressed, _permit) =
                    on_cpu_pool(permit, move || compress(&plain, encoding, Effort::Kept)).await?;
                let compressed = compressed.map_err(compression_failed)?;
                let variant = Cached::Body(compressed);
                self.keep(&variant);
                self.compressions.fetch_add(1, Ordering::Relaxed);
                Ok::<_, StoreError>(variant)
            })
            .await;
        match variant {
            Ok(variant) => Served {
                body: variant.body().clone(),
                encoding,
                permit: None,
            },
            Err(e) => {
                tracing::debug!(error = %e, ?encoding, "sending a body uncompressed");
                identity()
            }
        }
    }

    /// The body of `key` cut at `step`, made for the request within `budget`.
    async fn cut(&self, key: BodyKey, step: u64, budget: &Admission<'_>) -> Result<Served, StoreError> {
        let (view, include_subagents, branch, graph) = key;
        if view == View::Workflow {
            let Cached::Workflow(whole) = self.kept(key, budget).await? else {
                return Err(StoreError::Task("the kept workflow has no layout".into()));
            };
            let permit = budget.reserve(whole.cut_fresh_bytes(&self.session, step)).await?;
            let session = self.session.clone();
            let (body, permit) = on_cpu_pool(permit, move || whole.cut(&session, step)).await?;
            return Ok(Served {
                body,
                encoding: Encoding::Identity,
                permit: Some(permit),
            });
        }
        // The graph cut at a step: the senders of every node are tallied, and each
        // interaction up to the step is written with its preview.
        let permit = budget
            .reserve(RENDER_OVERHEAD + 384 * self.session.workflow.nodes.len())
            .await?;
        let session = self.session.clone();
        let options = ViewOptions {
            step: Some(step),
            include_subagents,
            branch,
            graph,
        };
        let (body, permit) = on_cpu_pool(permit, move || views::render(&session, view, options)).await?;
        Ok(Served {
            body,
            encoding: Encoding::Identity,
            permit: Some(permit),
        })
    }

    /// The context at the entry `leaf` (`None` when the session has no such entry) in
    /// `encoding` when that is worth it, rendered within `budget`.
    pub async fn context_at(
        &self,
        leaf: String,
        encoding: Encoding,
        budget: &RenderBudget,
    ) -> Result<Option<Served>, StoreError> {
        let budget = &budget.admission();
        let permit = budget
            .reserve(self.whole_render_estimate(View::Context, Branch::All))
            .await?;
        let session = self.session.clone();
        let (rendered, permit) = on_cpu_pool(permit, move || {
            let body = context_body(&session, Some(&leaf)).ok()?;
            Some(written(&body))
        })
        .await?;
        let Some(body) = rendered else {
            return Ok(None);
        };
        let served = Served {
            body,
            encoding: Encoding::Identity,
            permit: Some(permit),
        };
        Ok(Some(compressed_for_one_request(served, encoding, budget).await))
    }

    /// The annotations body (or, for [`View::Dialog`], the dialog body) with `options`
    /// showing `labels` on its units (never kept: labels change without the session
    /// changing), in `encoding` when that is worth it, rendered within `budget`.
    pub async fn annotations_labeled(
        &self,
        view: View,
        options: ViewOptions,
        labels: Arc<UnitLabels>,
        encoding: Encoding,
        budget: &RenderBudget,
    ) -> Result<Served, StoreError> {
        let budget = &budget.admission();
        let permit = budget
            .reserve(self.whole_render_estimate(view, options.branch))
            .await?;
        let session = self.session.clone();
        let (body, permit) = on_cpu_pool(permit, move || {
            let mut body = annotations(&session, options.include_subagents, options.branch);
            body.attach_labels(&labels);
            match view {
                View::Dialog => written(&body.as_dialog()),
                _ => written(&body),
            }
        })
        .await?;
        let served = Served {
            body,
            encoding: Encoding::Identity,
            permit: Some(permit),
        };
        Ok(compressed_for_one_request(served, encoding, budget).await)
    }

    /// What rendering a whole body may hold: bodies are about as large as the input, and
    /// the active branch's workflow is built for it.
    fn whole_render_estimate(&self, view: View, branch: Branch) -> usize {
        let branch_workflow = match (view, branch) {
            (View::Workflow | View::Chatlog, Branch::Active) => 512 * self.session.workflow.nodes.len(),
            _ => 0,
        };
        RENDER_OVERHEAD + self.input_bytes + branch_workflow
    }
}

/// `served` (made for one request) in `encoding`, compressed quickly on the CPU pool; as it
/// is when it is small or the budget has no room for the compressed copy.
async fn compressed_for_one_request(served: Served, encoding: Encoding, budget: &Admission<'_>) -> Served {
    if encoding == Encoding::Identity || served.body.len() < MIN_COMPRESSED_BYTES {
        return served;
    }
    let Ok(permit) = budget.reserve(compressed_estimate(&served.body)).await else {
        return served;
    };
    let plain = served.body.clone();
    let compressed = on_cpu_pool(permit, move || compress(&plain, encoding, Effort::OneOff)).await;
    match compressed.and_then(|(c, permit)| Ok((c.map_err(compression_failed)?, permit))) {
        Ok((body, permit)) => Served {
            body,
            encoding,
            permit: Some(permit),
        },
        Err(e) => {
            tracing::warn!(error = %e, ?encoding, "compression failed; sending the body as it is");
            served
        }
    }
}

/// `value` written as a body (chunks, keeping the input's long texts by reference).
fn written(value: &impl serde::Serialize) -> Body {
    let mut out = ChunkWriter::new();
    // Writing into memory cannot fail, and the views' types always serialise.
    let _ = serde_json::to_writer(&mut out, value);
    out.finish()
}

fn compression_failed(e: std::io::Error) -> StoreError {
    StoreError::Task(format!("compression failed: {e}"))
}

/// What compressing `body` may hold: JSON bodies compress to a fifth or less; half is a
/// margin.
fn compressed_estimate(body: &Body) -> usize {
    RENDER_OVERHEAD + body.len() / 2
}

/// Runs `render` on the CPU pool (rayon's threads, one per core), where the renders' own
/// parallel parts run too, holding `permit` until it is done: the permit comes back with
/// the result, and when nobody waits any more (the request went away) it is given back
/// only once the render ends, so that the budget always covers the work running. Unlike
/// the blocking pool, which starts a thread for every task waiting, the CPU pool never
/// runs more renders at once than there are cores: a burst of cheap renders queues
/// instead of starting hundreds of threads, each with its own allocator heap, that then
/// compete with the async workers for the CPU.
async fn on_cpu_pool<T: Send + 'static>(
    permit: BudgetPermit,
    render: impl FnOnce() -> T + Send + 'static,
) -> Result<(T, BudgetPermit), StoreError> {
    let (done, result) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(render));
        // Nobody waits any more when the request went away: the permit drops here.
        let _ = done.send(outcome.map(|rendered| (rendered, permit)));
    });
    match result.await {
        Ok(Ok(rendered)) => Ok(rendered),
        Ok(Err(_)) => Err(StoreError::Task("a render panicked".into())),
        Err(_) => Err(StoreError::Task("a render was dropped".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::views::ChunkWriter;
    use bytes::Bytes;

    fn body_of(pieces: usize, piece_len: usize) -> Body {
        let mut out = ChunkWriter::new();
        for i in 0..pieces {
            out.append(Body::from(Bytes::from(vec![b'a' + (i % 26) as u8; piece_len])));
        }
        out.finish()
    }

    /// A small kept body is one buffer, byte for byte the body it was; a large one stays
    /// in its chunks (it shares the input's long texts).
    #[test]
    fn small_kept_bodies_are_joined_into_one_buffer() {
        let small = body_of(40, 1000);
        assert_eq!(small.chunks().len(), 40);
        let joined = joined_when_small(small.clone());
        assert_eq!(joined.chunks().len(), 1);
        assert_eq!(joined.to_bytes(), small.to_bytes());

        let large = body_of(300, 4000);
        assert!(large.len() > JOINED_BELOW);
        assert_eq!(
            joined_when_small(large.clone()).chunks().len(),
            large.chunks().len()
        );
    }
}
