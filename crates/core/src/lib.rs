//! sessiongraph's core: one pipeline from a session's bytes to every view body.
//!
//! ```text
//! SessionInput (named files)
//!   -> frame     split each file into physical lines (memchr)
//!   -> parse     one typed Record per JSON object; bad lines become diagnostics
//!   -> dedup     drop duplicate uuids, duplicated assistant chunks, partial user copies,
//!                and the phantom branches that hung off them
//!   -> link      tie each sub-agent file to the Task call that spawned it
//!   -> group     assistant records sharing (requestId, message.id) form one turn
//!   -> order     iterative parent-uuid topological sort over turns and records
//!   -> items     one classified item per turn / record, in that order
//!   -> views     annotations, workflow, chat log, graph, metrics, diagnostics
//! ```
//!
//! Everything here is synchronous and free of I/O so that the server, the command line
//! and the tests share exactly the same code.

pub mod diagnostics;
pub mod formats;
pub mod heap;
pub mod json;
pub mod memory_bound;
pub mod pipeline;
pub mod views;

pub use formats::input::{SessionInput, SourceFile};
pub use pipeline::load::{LoadOptions, SessionError};
pub use pipeline::session::Session;
