//! Where sessions come from.

pub mod disk;
