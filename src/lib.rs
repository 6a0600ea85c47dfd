//! sessiongraph: Claude Code session logs as annotation units, workflow DAGs and chat logs.
//!
//! Every view comes from one pipeline in [`core`]: frame lines, parse records, dedup, order
//! (parent-uuid topological sort), group into turns, then render a view.
//!
//! # Layout
//! - [`core`]: the pure, synchronous pipeline and the view bodies. No I/O, no async.
//! - [`store`]: where sessions come from: discovery of session files on disk.
//! - [`cli`]: the command line front end (`sessiongraph export ...`).

pub mod cli;
pub mod core;
pub mod store;
