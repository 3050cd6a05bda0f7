//! The Souffleur role: validating the invocation, the watcher and teammate layers, the
//! router state machine, the operator's hold and the control socket that steers it.
//! The recoveries it asks for live in `core::recovery`.

pub mod checks;
pub mod control;
pub mod hold;
mod layers;
pub mod machine;
pub mod role;
pub use layers::watch_until_exit;
