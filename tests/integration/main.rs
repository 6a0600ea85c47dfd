//! The integration test binary: one target, one module per concern.

mod cli;
mod conformance;
mod helpers;
mod properties;
mod regressions;
mod snapshots;
