//! The integration test binary: one target, one module per concern.

mod api;
mod cli;
mod conformance;
mod docker;
mod helpers;
mod openapi;
mod properties;
mod reference_errors;
mod regressions;
mod server;
mod snapshots;
mod trees;
