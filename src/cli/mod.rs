//! The subcommands besides `serve`, each in its module, reading only the settings groups
//! of [`crate::config`] it uses:
//!
//! - [`mod@export`]: prints a view body exactly as the server returns it, without running a
//!   server (the label store read, never created, when one is named);
//! - [`labels`]: `labels export`, the stream `GET /api/labels/export` serves, read from a
//!   server's upload store (its data directory, or PostgreSQL and a bucket), sessions
//!   directories and label database without changing them; and the labels `export` shows;
//! - [`mod@healthcheck`]: probes a running server.

pub mod export;
pub mod healthcheck;
pub mod labels;

pub use export::{export, ExportArgs, ExportError};
pub use healthcheck::{healthcheck, HealthcheckArgs, HealthcheckError};
pub use labels::{labels_export, LabelsExportArgs, LabelsExportError};
