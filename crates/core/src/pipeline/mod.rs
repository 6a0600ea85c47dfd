//! From parsed records to an analysed [`Session`](session::Session): dedup, sub-agent
//! links, turns, order, classified items, the session tree and the workflow DAG.

pub mod classify;
pub mod dedup;
pub mod group;
pub mod order;
pub mod session;
pub mod subagents;
pub mod tree;
pub mod workflow;
