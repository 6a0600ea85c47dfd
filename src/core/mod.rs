//! The shared core: one pipeline from bytes to every view.
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

pub mod agentchat;
pub mod autogen;
pub mod autogen_read;
pub mod autogen_shape;
pub mod classify;
pub mod dedup;
pub mod diagnostics;
pub mod frame;
pub mod group;
pub mod heap;
pub mod input;
pub mod jsnum;
pub mod json_text;
pub mod lenient;
pub mod literals;
pub mod members;
pub mod memory_bound;
pub mod order;
pub mod parse;
pub mod pi;
pub mod records;
pub mod session;
pub mod subagents;
pub mod text;
pub mod time;
pub mod tree;
pub mod views;
pub mod workflow;

pub use input::{SessionInput, SourceFile};
pub use session::{LoadOptions, Session, SessionError};
