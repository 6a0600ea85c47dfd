//! Labels on the command line, read from a server's label store without changing it:
//! `labels export` (the stream `GET /api/labels/export` serves), and the labels `export`
//! shows on the views that show them ([`ExportLabelArgs`]). Neither creates a directory, a
//! database or a table: a data directory or a label store that is not there is an error
//! naming it, and an unknown session is refused as the route refuses it.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::{json, Value};

use crate::config::{CodebookArgs, ConfigError, SessionsArgs, StoreArgs, UploadStoreArgs};
use crate::core::pipeline::session::Session;
use crate::core::views::annotations::UnitLabels;
use crate::core::views::View;
use crate::labels::consensus::shown_labels;
use crate::labels::sets_cache::Sets;
use crate::labels::{
    Codebook, CodebookError, Codebooks, LabelError, LabelPolicy, LabelSet, LabelStore, OpenError,
    UnknownCodebook,
};
use crate::store::upload_store::UploadStore;
use crate::store::{Store, StoreError, UploadStoreError, UploadStoreKind};

/// Where `export` reads labels for the views that show them, as their routes do:
/// annotations and dialog (each unit's labels), diagnostics (`orphaned_labels`, the
/// labeled units the session no longer has). Read only when named; flags only, never the
/// environment (a server's `SESSIONGRAPH_DATA_DIR` does not turn it on).
#[derive(Debug, Args)]
#[command(next_help_heading = "Labels")]
pub struct ExportLabelArgs {
    /// A server's data directory whose label database (`labels.sqlite3`) to read, never
    /// create, for the views that show labels (annotations, dialog, and diagnostics'
    /// orphaned labels), as their routes show them. Flags only: the environment is not
    /// read. Without it or --database-url, units show `labels: []`.
    #[arg(long, value_name = "DIR", conflicts_with = "database_url")]
    pub data_dir: Option<PathBuf>,
    /// The label database to read (`postgres://...` or `sqlite:...`) instead of a data
    /// directory's.
    #[arg(long, value_name = "URL")]
    pub database_url: Option<String>,
    /// The session's id in the label store (default: the main log's name without its
    /// extension, the id a sessions directory serves it under; an upload's is the
    /// `graph_id` its upload answered).
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// The codebook whose labels are shown (default: the default codebook), as
    /// `?codebook=`.
    #[arg(long, value_name = "ID")]
    pub codebook_id: Option<String>,
    /// The codebooks, as the server is given them.
    #[command(flatten)]
    pub codebooks: CodebookArgs,
}

/// What the label store gives the view being exported.
#[derive(Debug)]
pub enum ViewLabels {
    /// Nothing: no label store named, the view shows no labels, or none applies.
    None,
    /// The labels each unit shows (annotations, dialog).
    Units(UnitLabels),
    /// The labeled units the session no longer has, with their annotators (diagnostics).
    Orphans(Value),
}

impl ViewLabels {
    /// True when `view`'s route reads the label store.
    pub fn read_by(view: View) -> bool {
        view.shows_units() || view == View::Diagnostics
    }
}

/// Why a label store could not be read, by `export` or `labels export`.
#[derive(Debug, thiserror::Error)]
pub enum LabelStoreReadError {
    /// The codebooks could not be read.
    #[error(transparent)]
    Codebook(#[from] CodebookError),
    /// `--codebook-id` names no codebook.
    #[error(transparent)]
    UnknownCodebook(#[from] UnknownCodebook),
    /// The label store could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The label store failed while read.
    #[error(transparent)]
    Labels(#[from] LabelError),
}

/// The codebooks `codebooks` names, and the one `codebook_id` names in them (the default
/// when `None`).
fn load_codebook(
    codebooks: &CodebookArgs,
    codebook_id: Option<&str>,
) -> Result<(Codebooks, Arc<Codebook>), LabelStoreReadError> {
    let codebooks = codebooks.load()?;
    let codebook = codebooks.get(codebook_id)?.clone();
    Ok((codebooks, codebook))
}

/// The label store at `url`, opened to read (created by no one) with `codebooks`.
async fn open_to_read(url: &str, codebooks: Codebooks) -> Result<LabelStore, LabelStoreReadError> {
    Ok(LabelStore::open_existing(url, codebooks, LabelPolicy::default()).await?)
}

/// Why the labels `export` shows could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadLabelsError {
    /// `--data-dir` names no directory.
    #[error("the data directory {} does not exist (--data-dir)", .0.display())]
    NoDataDir(PathBuf),
    /// A flag that names what to read was given without a label store to read it from.
    #[error("{0} needs a label store to read: give --data-dir or --database-url")]
    NoStore(&'static str),
    /// The label store could not be read.
    #[error(transparent)]
    Store(#[from] LabelStoreReadError),
    /// The runtime that reads it could not start.
    #[error("failed to start the async runtime: {0}")]
    Runtime(std::io::Error),
}

impl ExportLabelArgs {
    /// The flags of this group given on the command line, to refuse with a view that reads
    /// no labels.
    pub fn flags_given(&self) -> [(&'static str, bool); 4] {
        [
            ("--data-dir", self.data_dir.is_some()),
            ("--database-url", self.database_url.is_some()),
            ("--session-id", self.session_id.is_some()),
            ("--codebook-id", self.codebook_id.is_some()),
        ]
    }

    /// Refuses what names labels without a store to read them from, and a data directory
    /// that does not exist (before the session is read).
    pub fn check(&self) -> Result<(), ReadLabelsError> {
        if let Some(dir) = self.data_dir.as_ref().filter(|d| !d.is_dir()) {
            return Err(ReadLabelsError::NoDataDir(dir.clone()));
        }
        let named = [
            ("--session-id", self.session_id.is_some()),
            ("--codebook-id", self.codebook_id.is_some()),
        ];
        match named.into_iter().find(|(_, given)| *given) {
            Some((flag, _)) if self.url().is_none() => Err(ReadLabelsError::NoStore(flag)),
            _ => Ok(()),
        }
    }

    /// The label database's URL, when a store is named.
    fn url(&self) -> Option<Result<String, OpenError>> {
        match (&self.database_url, &self.data_dir) {
            (Some(url), _) => Some(Ok(url.clone())),
            (None, Some(dir)) => Some(crate::labels::store::default_url(dir)),
            (None, None) => None,
        }
    }

    /// What the label store gives `view` of `session` (read on a runtime of its own: the
    /// export is synchronous); [`ViewLabels::None`] without a store or for a view that
    /// shows no labels.
    pub fn read(&self, view: View, session: &Session) -> Result<ViewLabels, ReadLabelsError> {
        let Some(url) = self.url().filter(|_| ViewLabels::read_by(view)) else {
            return Ok(ViewLabels::None);
        };
        let url = url.map_err(LabelStoreReadError::from)?;
        let session_id = self
            .session_id
            .clone()
            .unwrap_or_else(|| default_session_id(session));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ReadLabelsError::Runtime)?;
        let sets = runtime.block_on(self.sets(&url, &session_id))?;
        Ok(if view == View::Diagnostics {
            orphans(session, &sets)
        } else {
            units(&sets)?
        })
    }

    /// Every set of `session_id` under the codebook asked for.
    async fn sets(&self, url: &str, session_id: &str) -> Result<Sets, LabelStoreReadError> {
        let (codebooks, codebook) = load_codebook(&self.codebooks, self.codebook_id.as_deref())?;
        let store = open_to_read(url, codebooks).await?;
        let sets = store.list(&codebook.id, session_id).await;
        store.close().await;
        Ok(sets?)
    }
}

/// The id a sessions directory gives `session`: its main log's name without the extension.
fn default_session_id(session: &Session) -> String {
    let main = session.files.first().map_or("", |f| f.name.as_str());
    let stem = std::path::Path::new(main)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    crate::store::scan::id_of_stem(&stem)
}

/// The labels each unit shows, from `sets` (sorted by unit) as a reviewer sees them: the
/// adjudicated set in force, else the majority of the submitted sets (see
/// [`shown_labels`]); the same rule the annotations route applies.
fn units(sets: &[LabelSet]) -> Result<ViewLabels, ReadLabelsError> {
    let mut shown = UnitLabels::default();
    for unit in sets.chunk_by(|a, b| a.event_id == b.event_id) {
        let unit: Vec<&LabelSet> = unit.iter().collect();
        let records = shown_labels(&unit, None);
        if records.is_empty() {
            continue;
        }
        let raw = serde_json::value::to_raw_value(&records)
            .map_err(|e| LabelStoreReadError::from(LabelError::Corrupt(e.to_string())))?;
        shown.insert(unit[0].event_id.clone(), raw);
    }
    Ok(ViewLabels::Units(shown))
}

/// The units of `sets` (sorted by unit) that `session` no longer has, each with the
/// annotators whose sets are on it, as the diagnostics route lists them; nothing when
/// there are none.
fn orphans(session: &Session, sets: &[LabelSet]) -> ViewLabels {
    let units = crate::store::units::UnitIndex::of(session);
    let listed: Vec<Value> = sets
        .chunk_by(|a, b| a.event_id == b.event_id)
        .filter(|unit| units.get(&unit[0].event_id).is_none())
        .map(|unit| {
            let annotators: Vec<&str> = unit.iter().map(|s| s.annotator.as_str()).collect();
            json!({ "event_id": unit[0].event_id, "annotators": annotators })
        })
        .collect();
    if listed.is_empty() {
        ViewLabels::None
    } else {
        ViewLabels::Orphans(Value::Array(listed))
    }
}

/// Arguments of `sessiongraph labels export`: what to export, and where the server keeps
/// its sessions, uploads and labels (read, never created or changed).
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
    /// Which store keeps the server's uploads, as the server is given it: read, never
    /// changed.
    #[command(flatten)]
    pub uploads: UploadStoreArgs,
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
    /// The upload store cannot be read: `postgres` or `s3` without a PostgreSQL label
    /// database, `s3` without a bucket, or the database or the bucket could not be opened.
    #[error(transparent)]
    Uploads(#[from] UploadStoreError),
    /// The sessions could not be read.
    #[error("cannot read the sessions: {0}")]
    Store(#[from] StoreError),
    /// `--session` names no session of the upload store or the sessions directories.
    #[error(
        "no session '{0}': no upload of the upload store (--upload-store) and no session of \
         the sessions directories has this id"
    )]
    UnknownSession(String),
    /// The label database could not be read (its codebooks, opening it, or part way).
    #[error(transparent)]
    Labels(#[from] LabelStoreReadError),
    /// The output could not be written.
    #[error("failed to write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// Runs `labels export`: the same stream as `GET /api/labels/export` (the operator's: every
/// set, blind mode or not), written to `out`, on a server whose uploads are kept where
/// `args.uploads` says.
pub async fn labels_export(args: &LabelsExportArgs, out: &mut impl Write) -> Result<(), LabelsExportError> {
    let (codebooks, codebook) = load_codebook(&args.codebooks, args.codebook_id.as_deref())?;
    if args.format == "label-studio-config" {
        out.write_all(crate::labels::labelstudio::label_config(&codebook).as_bytes())?;
        out.write_all(b"\n")?;
        return Ok(out.flush()?);
    }
    let url = args.store.database_url().map_err(LabelStoreReadError::from)?;
    let store = sessions(args, &url).await?;
    let exported = export_from(args, &store, &url, codebooks, &codebook, out).await;
    store.close().await;
    exported
}

/// Writes to `out` the export of the labels of the database at `url` (read with
/// `codebooks`) under `codebook`, over the sessions of `store`.
async fn export_from(
    args: &LabelsExportArgs,
    store: &Store,
    url: &str,
    codebooks: Codebooks,
    codebook: &Codebook,
    out: &mut impl Write,
) -> Result<(), LabelsExportError> {
    use crate::labels::export::{ExportScope, Format};
    let format = Format::parse(&args.format).unwrap_or(Format::Jsonl);
    // The sessions as the route finds them: the one asked for, or every one, the uploads
    // of a shared store as it holds them now.
    match &args.session {
        Some(id) => store.find(id).await.map(drop).map_err(|e| match e {
            StoreError::NotFound(_) => LabelsExportError::UnknownSession(id.clone()),
            other => other.into(),
        })?,
        None => store.list_current().await.map(drop)?,
    }
    let labels = open_to_read(url, codebooks).await?;
    let scope = ExportScope {
        codebook: codebook.id.clone(),
        session_id: args.session.clone(),
        all_units: args.all_units,
        ..ExportScope::default()
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let export = labels.export(store, format, &scope, tx);
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
    exported.map_err(LabelStoreReadError::from)?;
    Ok(written?)
}

/// The server's sessions, found (uploads and sessions directories), read only. Uploads are
/// read from the store `--upload-store` names: the data directory (which must exist), or
/// the PostgreSQL database at `database_url` and, with `s3`, the bucket (the data
/// directory is not read then).
async fn sessions(args: &LabelsExportArgs, database_url: &str) -> Result<Store, LabelsExportError> {
    let kind = args.uploads.upload_store;
    if kind == UploadStoreKind::Local {
        args.store.existing_data_dir()?;
    }
    let config = args
        .store
        .store_config(args.sessions.dirs()?, &args.sessions.memory, None);
    let s3 = args.uploads.s3_settings();
    let uploads = UploadStore::open_read_only(kind, &args.store.data_dir, database_url, &s3).await?;
    let store = Store::open_read_only(config, uploads);
    let restored = tokio::task::spawn_blocking(move || store.restore().map(|()| store))
        .await
        .map_err(|e| std::io::Error::other(format!("restoring the store: {e}")))?;
    Ok(restored?)
}
