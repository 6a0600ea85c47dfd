//! The integration test binary: one target, one module per concern.

mod api;
mod cli;
mod conformance;
mod helpers;
mod properties;
mod reference_errors;
mod regressions;
mod server;
mod snapshots;
