//! JSON and JSONL as the logs write them: lines framed before parsing, strings kept as the
//! JSON they were read as, lenient fields, and texts and numbers written back the way
//! JavaScript would.

pub mod frame;
pub mod jsnum;
pub mod lenient;
pub mod literals;
pub mod members;
pub mod quick;
pub mod raw;
pub mod scan;
pub mod time;
pub mod utf16;
