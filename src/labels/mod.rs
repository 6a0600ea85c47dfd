//! Labeling: what a team codes annotation units with.
//!
//! - [`codebook`]: the labels, their definitions, rules, cues and typed output fields.
pub mod codebook;

pub use codebook::{Codebook, CodebookError};
