//! Actors that own an outside resource and turn its changes into `CoreEvent`s.

pub mod db;
pub mod history;
pub mod hooks;
pub mod kernel_watch;
pub mod lines;
pub mod sessions;
pub mod temp_logs;
pub mod watchers;

/// How the sources read (`[logs]`), built once from the settings and handed whole to
/// each source and to the dashboard's reader of older lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Longest line kept whole; longer lines are cut (start, mark, end).
    pub max_line: usize,
    /// Rescan period when the kernel watcher is unavailable.
    pub fallback_poll: std::time::Duration,
}

/// Opening or reading a file (ours or anyone's) is an event too; it changes nothing.
pub fn is_read_access(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode};
    matches!(
        kind,
        notify::EventKind::Access(
            AccessKind::Open(_) | AccessKind::Close(AccessMode::Read) | AccessKind::Read
        )
    )
}
