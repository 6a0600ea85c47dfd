//! sessiongraph's core: one pipeline from a session's bytes to every view body.
//!
//! ```text
//! SessionInput (named files)                                   formats::input
//!   -> parse     frame each file into lines (memchr), then one     pipeline::read,
//!                typed Record per JSON object; bad lines become     json::frame, formats::*
//!                diagnostics
//!   -> link      tie each sub-agent file to its Task call           pipeline::subagents
//!   -> dedup     drop duplicate uuids, duplicated assistant         pipeline::dedup
//!                chunks, partial user copies, and the phantom
//!                branches that hung off them
//!   -> group     assistant records sharing (requestId,              pipeline::group,
//!                message.id) form one turn; lanes                   pipeline::lanes
//!   -> order     iterative parent-uuid topological sort over        pipeline::units,
//!                turns and records                                  pipeline::order
//!   -> items     one classified item per unit that shows            pipeline::items
//!   -> workflow  the DAG, and beside it the session tree            pipeline::workflow,
//!                                                                   pipeline::tree
//!   -> views     annotations, workflow, chat log, graph, metrics,   views
//!                diagnostics, branches, context
//! ```
//!
//! [`Session::build`] runs the stages. Everything here is synchronous and free of I/O, and
//! depends on no async runtime, web framework or database, so that the server, the command
//! line and the tests share exactly the same code.

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
