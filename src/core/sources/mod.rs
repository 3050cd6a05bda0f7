//! Actors that own an outside resource and turn its changes into `CoreEvent`s.

pub mod db;
pub mod lines;
pub mod procs;
pub mod temp_logs;
pub mod watchers;
