//! Rounds: a coding study's unit of work. A round fixes, when it is created, the units a
//! team labels (a search or a list, sampled reproducibly), the codebook they are labeled
//! under, the overlap, who labels, and the guidelines; its queue, progress, agreement and
//! export see only its units.
//!
//! - [`definition`]: what a round is made of, checked field by field (pure).
//! - [`sample`]: the sample drawn from the candidate units, reproducible from its seed
//!   (pure).
//! - [`store`]: rounds and their units in the label database.
//! - [`queue`]: the next of a round's units for an annotator.
//! - [`transfer`]: a round carried in an export's first line, and read back (pure).
pub mod definition;
pub mod queue;
pub mod sample;
pub mod store;
pub mod transfer;

pub use definition::{RoundDefinition, Selection, UnitKey};
pub use sample::{Candidate, SampleSpec, Strata};
pub use store::{Round, RoundError, RoundStatus};
