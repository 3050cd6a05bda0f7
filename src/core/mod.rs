//! The engine shared by the dashboard and headless mode. Nothing here draws.

pub mod actions;
pub mod children;
pub mod clock;
pub mod domain;
pub mod error;
pub mod event;
pub mod event_json;
pub mod forecast;
pub mod handoff;
pub mod headroom;
pub mod hub;
pub mod ipc;
pub mod musician_watch;
pub mod paths;
pub mod pipeline;
pub mod recovery;
pub mod replay;
pub mod runtime;
pub mod safe_fs;
pub mod schema;
pub mod sentinel;
pub mod snapshot;
pub mod sources;
pub mod store;
pub mod text;
pub mod watchdog;
