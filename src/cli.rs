//! `sessiongraph export`: prints a view body exactly as the server would return it, without
//! running a server.

use std::io::Write;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::Args;

use crate::config::MemoryBoundArgs;
use crate::core::pipeline::session::Branch;
use crate::core::pipeline::session::NoConversation;
use crate::core::views::branches::{context_body, ContextError};
use crate::core::views::graph::GraphMode;
use crate::core::views::{self, View, ViewOptions};
use crate::core::{LoadOptions, Session, SessionError};
use crate::store::disk::{self, DiskError};

/// Arguments of `sessiongraph export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The view to print.
    #[arg(long, value_parser = view_parser())]
    pub view: View,
    /// Cut the workflow or graph at this step (as `?step=N`).
    #[arg(long)]
    pub step: Option<u64>,
    /// Include sub-agents: sidechain units in annotations, sub-agent messages in the chat log.
    #[arg(long)]
    pub include_subagents: bool,
    /// Fail on the first unreadable line instead of recording it as a diagnostic.
    #[arg(long)]
    pub strict: bool,
    /// Print the (empty) view of a file that holds no conversation instead of failing, as
    /// the server does for a log found in a sessions directory.
    #[arg(long, conflicts_with = "strict")]
    pub lenient: bool,
    /// `active` leaves abandoned branches out of annotations, workflow and chat log.
    #[arg(long, default_value = "all")]
    pub branch: Branch,
    /// The graph and metrics as CommuGraph computes them for Claude Code: senders only, no
    /// edges (as `?edges=none`).
    #[arg(long)]
    pub no_edges: bool,
    /// With `--view context`: the entry whose context to build (default: the current leaf).
    #[arg(long)]
    pub leaf: Option<String>,
    /// A main session log (its sub-agents are found beside it), a directory holding one
    /// session, or several files of one session.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The memory bound of the session.
    #[command(flatten)]
    pub memory: MemoryBoundArgs,
}

/// Reads `--view`: the names come from [`View::NAMES`], so the help lists every view the
/// server has.
fn view_parser() -> impl TypedValueParser<Value = View> {
    clap::builder::PossibleValuesParser::new(View::NAMES).try_map(|name| name.parse::<View>())
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The session's files could not be read.
    #[error(transparent)]
    Disk(#[from] DiskError),
    /// The session could not be loaded.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The session's records would pass the memory bound.
    #[error("{0}; --memory-per-input-byte and --memory-allowance set the bound")]
    TooManyRecords(SessionError),
    /// The files hold no conversation (the upload route's 400, word for word).
    #[error(transparent)]
    NoConversation(#[from] NoConversation),
    /// The output could not be written.
    #[error("failed to write the output: {0}")]
    Output(#[from] std::io::Error),
    /// `--leaf` names no entry of the session.
    #[error(transparent)]
    Leaf(#[from] ContextError),
}

/// Runs `export`, writing the body and a newline to `out`. Returns the session built, for
/// the caller to drop or, when the process ends next, to leave to the operating system:
/// freeing a large session allocation by allocation takes longer than building some of
/// it did.
pub fn export(args: &ExportArgs, out: &mut impl Write) -> Result<Session, ExportError> {
    let input = disk::read_session(&args.paths)?;
    let options = LoadOptions {
        strict: args.strict,
        format: None,
        memory_bound: Some(args.memory.bound()),
        without_workflow: !args.view.reads_workflow(),
    };
    let session = Session::build(&input, options).map_err(|e| match e {
        SessionError::TooManyRecords { .. } => ExportError::TooManyRecords(e),
        other => ExportError::Session(other),
    })?;
    // The session keeps the files' bytes it needs (its records' text is slices of them).
    drop(input);
    for (stage, took) in &session.timings {
        tracing::debug!(stage, ms = took.as_secs_f64() * 1000.0, "built");
    }
    if !args.lenient {
        let main = session.files.first().map_or("", |f| f.name.as_str());
        session.require_conversation(main)?;
    }
    let options = ViewOptions {
        step: args.step,
        include_subagents: args.include_subagents,
        branch: args.branch,
        graph: if args.no_edges {
            GraphMode::Reference
        } else {
            GraphMode::Edges
        },
    };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    match (&args.view, &args.leaf) {
        (View::Context, Some(leaf)) => {
            let body = context_body(&session, Some(leaf))?;
            serde_json::to_writer(&mut out, &body).map_err(std::io::Error::from)?;
        }
        _ => {
            let started = std::time::Instant::now();
            views::write(&session, args.view, options, &mut out)?;
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            tracing::debug!(view = %args.view, ms, "written");
        }
    }
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(session)
}

/// Arguments of `sessiongraph healthcheck`.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// The health URL to probe (plain HTTP).
    #[arg(
        long,
        env = "SESSIONGRAPH_HEALTHCHECK_URL",
        default_value = "http://127.0.0.1:8080/healthz"
    )]
    pub url: String,
}

/// Why a health probe failed.
#[derive(Debug, thiserror::Error)]
pub enum HealthcheckError {
    /// The URL is not `http://host:port/path`.
    #[error("not a plain http URL: {0}")]
    Url(String),
    /// The server could not be reached or answered garbage.
    #[error("health probe failed: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered another status than 200.
    #[error("unhealthy: {0}")]
    Status(String),
}

/// Probes a health URL with a minimal HTTP/1.1 GET (the runtime image has no curl). Succeeds
/// on a 200 answer within three seconds.
pub fn healthcheck(args: &HealthcheckArgs) -> Result<(), HealthcheckError> {
    use std::io::{Read, Write};
    use std::net::{TcpStream, ToSocketAddrs};
    use std::time::Duration;

    let rest = args
        .url
        .strip_prefix("http://")
        .ok_or_else(|| HealthcheckError::Url(args.url.clone()))?;
    let (authority, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let addr = authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| HealthcheckError::Url(args.url.clone()))?;
    let timeout = Duration::from_secs(3);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head)?;
    let status_line = String::from_utf8_lossy(&head).into_owned();
    if status_line.starts_with("HTTP/1.1 200") || status_line.starts_with("HTTP/1.0 200") {
        Ok(())
    } else {
        Err(HealthcheckError::Status(status_line))
    }
}

/// Arguments of `sessiongraph labels export`: the server's settings (data directory,
/// sessions directories, label database, codebook) and what to export.
#[derive(Debug, Args)]
pub struct LabelsExportArgs {
    /// `jsonl` (one unit per line), `label-studio` (Label Studio tasks) or
    /// `label-studio-config` (the labeling config generated from the codebook).
    #[arg(long, default_value = "jsonl", value_parser = ["jsonl", "label-studio", "label-studio-config"])]
    pub format: String,
    /// Only this session.
    #[arg(long)]
    pub session: Option<String>,
    /// Every unit of the sessions, labeled or not (default: units with labels or suggestions).
    #[arg(long)]
    pub all_units: bool,
    /// The id of the codebook whose labels are exported (default: the default codebook).
    #[arg(long)]
    pub codebook_id: Option<String>,
    /// The server's settings: where sessions and labels are.
    #[command(flatten)]
    pub serve: crate::config::ServeArgs,
}

/// Why a label export failed.
#[derive(Debug, thiserror::Error)]
pub enum LabelsExportError {
    /// The data directory could not be opened.
    #[error("cannot open the data directory: {0}")]
    Store(#[from] crate::store::StoreError),
    /// The codebook could not be read.
    #[error(transparent)]
    Codebook(#[from] crate::labels::CodebookError),
    /// `--codebook-id` names no codebook.
    #[error(transparent)]
    UnknownCodebook(#[from] crate::labels::UnknownCodebook),
    /// The label database could not be opened.
    #[error(transparent)]
    Open(#[from] crate::labels::OpenError),
    /// The label database failed part way.
    #[error(transparent)]
    Labels(#[from] crate::labels::LabelError),
    /// The output could not be written.
    #[error("failed to write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Runs `labels export`: the same stream as `GET /api/labels/export`, written to `out`.
pub async fn labels_export(args: &LabelsExportArgs, out: &mut impl Write) -> Result<(), LabelsExportError> {
    use crate::labels::export::{ExportScope, Format};
    let codebooks = args.serve.codebooks()?;
    let codebook = codebooks.get(args.codebook_id.as_deref())?.clone();
    if args.format == "label-studio-config" {
        out.write_all(crate::labels::labelstudio::label_config(&codebook).as_bytes())?;
        out.write_all(b"\n")?;
        return Ok(out.flush()?);
    }
    let format = Format::parse(&args.format).unwrap_or(Format::Jsonl);
    let store = crate::store::Store::new(crate::store::StoreConfig {
        background_counts: false,
        ..args.serve.store_config()
    })?;
    let store = tokio::task::spawn_blocking(move || store.restore().map(|()| store))
        .await
        .map_err(|e| std::io::Error::other(format!("restoring the store: {e}")))??;
    let labels =
        crate::labels::LabelStore::open(&args.serve.database_url()?, codebooks, args.serve.label_policy())
            .await?;
    // The operator's export: every set, blind mode or not.
    let scope = ExportScope {
        codebook: codebook.id.clone(),
        session_id: args.session.clone(),
        all_units: args.all_units,
        ..ExportScope::default()
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let export = labels.export(&store, format, &scope, tx);
    let write = async {
        let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
        while let Some(chunk) = rx.recv().await {
            out.write_all(&chunk?)?;
        }
        if format == Format::Jsonl {
            return out.flush();
        }
        out.write_all(b"\n")?;
        out.flush()
    };
    let (exported, written) = tokio::join!(export, write);
    labels.close().await;
    exported?;
    Ok(written?)
}
