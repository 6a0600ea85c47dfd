//! From parsed records to an analysed [`Session`](session::Session): dedup, sub-agent
//! links, turns, order, classified items, the session tree and the workflow DAG.

pub mod classify;
pub mod dedup;
mod findings;
pub mod group;
pub mod items;
pub mod lanes;
pub mod load;
pub mod order;
pub mod read;
pub mod session;
pub mod subagents;
pub mod tree;
pub mod units;
pub mod workflow;
