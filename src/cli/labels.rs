//! `sessiongraph labels export`: the stream `GET /api/labels/export` serves, read from a
//! server's data directory, label database and sessions directories without changing
//! them. Nothing is created: a data directory or a label store that is not there is an
//! error naming it, and an unknown session is refused as the route refuses it.

use std::io::Write;

use clap::Args;

use crate::config::{CodebookArgs, ConfigError, SessionsArgs, StoreArgs};
use crate::labels::{CodebookError, LabelError, LabelPolicy, LabelStore, OpenError, UnknownCodebook};
use crate::store::{Store, StoreError};

/// Arguments of `sessiongraph labels export`: what to export, and where the server keeps
/// its sessions and labels (read, never created or changed).
#[derive(Debug, Args)]
pub struct LabelsExportArgs {
    /// `jsonl` (one unit per line), `label-studio` (Label Studio tasks) or
    /// `label-studio-config` (the labeling config generated from the codebook; it reads
    /// nothing else).
    #[arg(long, default_value = "jsonl", value_parser = ["jsonl", "label-studio", "label-studio-config"])]
    pub format: String,
    /// Only this session (an unknown one is an error, as the route's 404).
    #[arg(long)]
    pub session: Option<String>,
    /// Every unit of the sessions, labeled or not (default: units with labels or suggestions).
    #[arg(long)]
    pub all_units: bool,
    /// The id of the codebook whose labels are exported (default: the default codebook).
    #[arg(long)]
    pub codebook_id: Option<String>,
    /// Where the server keeps uploads and labels: read, never created.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Where the server's sessions come from.
    #[command(flatten)]
    pub sessions: SessionsArgs,
    /// The server's codebooks.
    #[command(flatten)]
    pub codebooks: CodebookArgs,
}

/// Why a label export failed.
#[derive(Debug, thiserror::Error)]
pub enum LabelsExportError {
    /// The settings name a data directory or a sessions directory that is not there.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The sessions could not be read.
    #[error("cannot read the sessions: {0}")]
    Store(#[from] StoreError),
    /// `--session` names no session of the data directory or the sessions directories.
    #[error(
        "no session '{0}': no upload in the data directory and no session of the sessions \
         directories has this id"
    )]
    UnknownSession(String),
    /// The codebook could not be read.
    #[error(transparent)]
    Codebook(#[from] CodebookError),
    /// `--codebook-id` names no codebook.
    #[error(transparent)]
    UnknownCodebook(#[from] UnknownCodebook),
    /// The label database could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The label database failed part way.
    #[error(transparent)]
    Labels(#[from] LabelError),
    /// The output could not be written.
    #[error("failed to write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Runs `labels export`: the same stream as `GET /api/labels/export` (the operator's: every
/// set, blind mode or not), written to `out`.
pub async fn labels_export(args: &LabelsExportArgs, out: &mut impl Write) -> Result<(), LabelsExportError> {
    use crate::labels::export::{ExportScope, Format};
    let codebooks = args.codebooks.load()?;
    let codebook = codebooks.get(args.codebook_id.as_deref())?.clone();
    if args.format == "label-studio-config" {
        out.write_all(crate::labels::labelstudio::label_config(&codebook).as_bytes())?;
        out.write_all(b"\n")?;
        return Ok(out.flush()?);
    }
    let format = Format::parse(&args.format).unwrap_or(Format::Jsonl);
    args.store.existing_data_dir()?;
    let store = sessions(args).await?;
    if let Some(id) = &args.session {
        store
            .slot(id)
            .map_err(|_| LabelsExportError::UnknownSession(id.clone()))?;
    }
    let url = args.store.database_url()?;
    let labels = LabelStore::open_existing(&url, codebooks, LabelPolicy::default()).await?;
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

/// The server's sessions, found (uploads and sessions directories), read only.
async fn sessions(args: &LabelsExportArgs) -> Result<Store, LabelsExportError> {
    let config = args
        .store
        .store_config(args.sessions.dirs()?, &args.sessions.memory, None);
    let store = Store::open_read_only(config);
    let restored = tokio::task::spawn_blocking(move || store.restore().map(|()| store))
        .await
        .map_err(|e| std::io::Error::other(format!("restoring the store: {e}")))?;
    Ok(restored?)
}
