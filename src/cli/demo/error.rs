//! Why the demo cannot start or play a step, each with what it was doing.

use std::path::{Path, PathBuf};

use crate::cli::error::CliError;

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot {what} {}: {source}", .path.display())]
    File {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "{} already holds {taken}; the demo only plays into a new or empty folder. Pass another --project, or leave it out for a scratch folder.",
        .dir.display()
    )]
    Occupied { dir: PathBuf, taken: &'static str },
    #[error(transparent)]
    Scenario(#[from] super::scenario::ScenarioError),
    #[error("cannot open {}: {source}", .path.display())]
    Database {
        path: PathBuf,
        source: rusqlite::Error,
    },
    /// A step's write to the database.
    #[error(transparent)]
    Write(#[from] rusqlite::Error),
    #[error(transparent)]
    Schema(#[from] crate::core::error::CoreError),
    #[error(transparent)]
    Trust(#[from] crate::core::pipeline::trust::TrustError),
    #[error("cannot start the demo player: {0}")]
    Player(#[source] std::io::Error),
    #[error(transparent)]
    Dashboard(#[from] crate::tui::TuiError),
    #[error(transparent)]
    Cli(#[from] CliError),
}

impl DemoError {
    /// A file operation's failure on `path`, for `map_err`.
    pub fn file(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self::File { what, path, source }
    }
}
