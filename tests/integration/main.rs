//! The integration test binary: one target, one module per concern.

mod api;
mod autogen;
mod autogen_frameworks;
mod cli;
mod codebooks;
mod complexity;
mod concurrency;
mod conformance;
mod dialog;
mod docker;
mod docs_examples;
mod durability;
mod fuzz;
mod graph;
mod helpers;
mod hostile;
mod labeling;
mod labels;
mod modules;
mod openapi;
mod properties;
mod reference_errors;
mod references;
mod regressions;
mod render;
mod rounds;
#[path = "../support/scaled.rs"]
mod scaled;
mod search;
mod security;
mod server;
mod snapshots;
mod speechact;
mod study;
mod trees;
mod web;
