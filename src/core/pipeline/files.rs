//! A pipeline's definition file: its name (a file name, so letters, digits, `-` and
//! `_`), where it is, and reading it the careful way. Shared by the host, the editor
//! and trust, which each build on it.

use std::path::{Path, PathBuf};

use crate::core::safe_fs;

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
pub fn definition_file(dir: &Path, name: &str) -> Result<PathBuf, String> {
    if !valid_name(name) {
        return Err(format!(
            "{name:?} is not a pipeline name (letters, digits, - and _)."
        ));
    }
    let path = dir.join(format!("{name}.json"));
    if !path.is_file() {
        return Err(format!(
            "there is no {}; `maestro sentinel list` shows the pipelines.",
            path.display()
        ));
    }
    Ok(path)
}

/// A definition file's bytes, read the careful way (regular, no symlink, no FIFO, at
/// most [`MAX_DEFINITION_BYTES`]), with a message that says the fix.
pub fn read_definition_bytes(path: &Path) -> Result<Vec<u8>, String> {
    safe_fs::read_regular(path, MAX_DEFINITION_BYTES).map_err(|e| match e {
        safe_fs::Refused::TooLarge { .. } => {
            format!("{e}: a definition may hold at most 1 MiB; make it smaller")
        }
        safe_fs::Refused::Symlink(_) | safe_fs::Refused::NotRegular(_) => {
            format!("{e}; put the definition itself in .maestro/sentinels/")
        }
        other => other.to_string(),
    })
}
