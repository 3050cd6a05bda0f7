//! Errors of the core, each carrying a message that names the problem and the fix, and
//! the error it comes from when there is one (`SQLite`'s, the system's).

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The database is not the orchestration's (exit 1, nothing written).
    #[error("{0}")]
    Schema(String),
    /// `SQLite` failed in a way that is not the schema's fault: what maestro was doing
    /// and the fix, then `SQLite`'s own error.
    #[error("{text}")]
    Database {
        text: String,
        source: Option<rusqlite::Error>,
    },
    /// Another process holds the database locked (`SQLite`'s busy and locked errors):
    /// a reader waits and tries again.
    #[error("{text}")]
    Busy {
        text: String,
        source: rusqlite::Error,
    },
    /// The operation would destroy something and was refused.
    #[error("{0}")]
    Refused(String),
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A connection's lock was poisoned by a panic in another of its users.
    #[error("database connection poisoned")]
    Poisoned,
    /// A blocking database call ended without an answer (its task panicked or was
    /// cancelled).
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

impl CoreError {
    /// A database failure said as `text`: [`CoreError::Busy`] when another process
    /// holds the lock, else [`CoreError::Database`].
    pub fn database(e: rusqlite::Error, text: String) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                Self::Busy { text, source: e }
            }
            _ => Self::Database {
                text,
                source: Some(e),
            },
        }
    }

    /// A database problem with no `SQLite` error behind it.
    pub fn database_text(text: String) -> Self {
        Self::Database { text, source: None }
    }

    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One of maestro's own files (a lock, a flag, a record in its data folder) that could
/// not be made, opened, locked, written or removed: what was done, where, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot {doing} {} ({source}).", .path.display())]
pub struct OwnFileError {
    pub doing: &'static str,
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl OwnFileError {
    /// A closure for `map_err`: `cannot <doing> <path> (<the system's error>).`
    pub fn doing(doing: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self {
            doing,
            path,
            source,
        }
    }
}

/// A file of maestro's own in its data folder (a lock, a flag): no folder to put it
/// in, or what could not be done to it there.
#[derive(Debug, thiserror::Error)]
pub enum DataFileError {
    #[error(transparent)]
    Place(#[from] crate::core::paths::PathError),
    #[error(transparent)]
    File(#[from] OwnFileError),
}
