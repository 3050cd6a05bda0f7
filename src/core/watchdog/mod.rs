//! The Souffleur role: validating the invocation, the watcher and teammate layers, the
//! router state machine and the recovery it drives.

pub mod checks;
pub mod machine;
pub mod payload;
pub mod role;
pub mod role_db;
