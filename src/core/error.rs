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
    /// The operation would destroy something and was refused.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Io(String),
}

impl CoreError {
    pub fn io(path: &Path, e: &std::io::Error) -> Self {
        Self::Io(format!("{}: {e}", path.display()))
    }
}
