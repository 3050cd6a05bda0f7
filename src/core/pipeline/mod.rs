//! Sentinel pipelines (PROTOCOL.md §6, CONTRACT.md "Pipeline definition files"):
//! definitions as data, a condition language, a runner, and the host that loads the
//! definitions folder and takes commands.

pub mod edit;
pub mod expr;
pub mod host;
pub mod runner;
pub mod spec;
