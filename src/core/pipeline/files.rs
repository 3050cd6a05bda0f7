//! A pipeline's definition file: its name (a file name, so letters, digits, `-` and
//! `_`), where it is, and reading it the careful way. Shared by the host, the editor
//! and trust, which each build on it.

use std::path::{Path, PathBuf};

use crate::core::pipeline::spec::DefinitionError;
use crate::core::safe_fs;

/// Why a definition file cannot be named, read or checked; each says the fix.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionFileError {
    #[error("{name:?} is not a pipeline name (letters, digits, - and _).")]
    BadName { name: String },
    #[error("there is no {}; `maestro sentinel list` shows the pipelines.", .path.display())]
    Missing { path: PathBuf },
    #[error("{source}: a definition may hold at most 1 MiB; make it smaller")]
    TooLarge { source: safe_fs::Refused },
    #[error("{source}; put the definition itself in .maestro/sentinels/")]
    NotItself { source: safe_fs::Refused },
    #[error(transparent)]
    Unreadable(safe_fs::Refused),
    #[error("{} is not JSON ({source}); fix it first.", .path.display())]
    NotJson {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A definition as a whole breaks the format.
    #[error(transparent)]
    Invalid(#[from] DefinitionError),
}

/// The largest definition file maestro reads.
pub const MAX_DEFINITION_BYTES: u64 = 1024 * 1024;

/// Pipeline names become file names: letters, digits, `-` and `_` only.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The file of pipeline `name`, which must exist.
pub fn definition_file(dir: &Path, name: &str) -> Result<PathBuf, DefinitionFileError> {
    if !valid_name(name) {
        return Err(DefinitionFileError::BadName {
            name: name.to_owned(),
        });
    }
    let path = dir.join(format!("{name}.json"));
    if !path.is_file() {
        return Err(DefinitionFileError::Missing { path });
    }
    Ok(path)
}

/// A definition file's bytes, read the careful way (regular, no symlink, no FIFO, at
/// most [`MAX_DEFINITION_BYTES`]), with a message that says the fix.
pub fn read_definition_bytes(path: &Path) -> Result<Vec<u8>, DefinitionFileError> {
    safe_fs::read_regular(path, MAX_DEFINITION_BYTES).map_err(|e| match e {
        safe_fs::Refused::TooLarge { .. } => DefinitionFileError::TooLarge { source: e },
        safe_fs::Refused::Symlink(_) | safe_fs::Refused::NotRegular(_) => {
            DefinitionFileError::NotItself { source: e }
        }
        other => DefinitionFileError::Unreadable(other),
    })
}

/// A definition file's JSON, read the careful way.
pub fn read_definition_json(path: &Path) -> Result<serde_json::Value, DefinitionFileError> {
    let bytes = read_definition_bytes(path)?;
    serde_json::from_slice(&bytes).map_err(|source| DefinitionFileError::NotJson {
        path: path.to_path_buf(),
        source,
    })
}
