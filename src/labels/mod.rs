//! Labeling: what a team codes annotation units with, and where their labels live.
//!
//! - [`access`]: who a request is made as, and for whom it may act (pure).
//! - [`agreement`]: inter-annotator agreement (Krippendorff's alpha, Cohen's and Fleiss'
//!   kappa) and the label-set agreement report, its pairs a page at a time (pure).
//! - [`codings`]: the submitted sets agreement is computed from, held compactly (pure).
//! - [`codebook`]: the labels, their definitions, rules, cues and typed output fields;
//!   [`codebooks`]: the codebooks a server has, by id, and the default.
//! - [`model`]: label records, sets, history entries, `If-Match` preconditions.
//! - [`validate`]: every write checked before the store takes it, against the codebook,
//!   the unit's text and who writes: [`ValidSet`], [`ValidRemoval`], [`ValidSuggestion`],
//!   the only writes [`store`] and [`import`] store, or a [`Refusal`] (pure).
//! - [`labelstudio`]: the codebook as a Label Studio config, units as Label Studio tasks,
//!   Label Studio's JSON export back into import items (pure).
//! - [`store`]: the label database (SQLite or PostgreSQL), migrations and transactions;
//!   storage only.
//! - [`import`]: sets and suggestions imported line by line, in short transactions;
//!   [`import_body`]: an import body split and counted before any record is parsed;
//!   [`reads`]: reads across sessions; [`set_reads`]: a session's sets read in bulk, a unit
//!   at a time.
//! - [`sets_cache`]: the sets of recently read sessions of an SQLite database.
//! - [`queue`]: the next unit for an annotator, with reservations and an overlap.
//! - [`consensus`]: which labels a unit shows, and to whom (blind mode) (pure).
//! - [`progress`]: units labeled per session and annotator (pure).
//! - [`export`]: every unit with its labels, streamed as JSONL or Label Studio tasks.
//! - [`speechact`]: the speech-act codebook (Searle's five acts), and CommuGraph's
//!   speech-act tags read as a model's suggestions (pure).
//! - [`model_agreement`]: a model's suggestions as one more annotator: its agreement with
//!   the humans and the adjudicated sets, precision and recall per label (pure).
//! - [`unit_keys`]: the units a label filter names (labeled, by whom, with which label).
pub mod access;
pub mod agreement;
pub mod codebook;
pub mod codebooks;
pub mod codings;
pub mod consensus;
pub mod export;
pub mod import;
pub mod import_body;
pub mod labelstudio;
pub mod model;
pub mod model_agreement;
pub mod progress;
pub mod queue;
pub mod reads;
pub mod set_reads;
pub mod sets_cache;
pub mod speechact;
pub mod store;
pub mod unit_keys;
pub mod validate;

pub use access::{Caller, Forbidden};
pub use codebook::{Codebook, CodebookError};
pub use codebooks::{Codebooks, UnknownCodebook};
pub use model::{
    ExportedUnit, HistoryEntry, ImportItem, ImportKind, LabelSet, Precondition, SetFilter, SetKey, Status,
    Suggestion,
};
pub use store::{LabelError, LabelPolicy, LabelStore, OpenError};
pub use validate::{Invalid, Refusal, ValidRemoval, ValidSet, ValidSuggestion, Validator};
