//! Errors of the core, each carrying a message that names the problem and the fix.

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The database is not the orchestration's (exit 1, nothing written).
    #[error("{0}")]
    Schema(String),
    /// `SQLite` failed in a way that is not the schema's fault.
    #[error("{0}")]
    Database(String),
    /// Another process holds the database locked (`SQLite`'s busy and locked errors):
    /// a reader waits and tries again.
    #[error("{0}")]
    Busy(String),
    /// The operation would destroy something and was refused.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
}

impl CoreError {
    /// A database failure said as `text`: [`CoreError::Busy`] when another process
    /// holds the lock, else [`CoreError::Database`].
    pub fn database(e: &rusqlite::Error, text: String) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                Self::Busy(text)
            }
            _ => Self::Database(text),
        }
    }

    pub fn io(path: &Path, e: &std::io::Error) -> Self {
        Self::Io(format!("{}: {e}", path.display()))
    }
}
