//! The operator's hold on recoveries, kept as a file in maestro's data directory so it
//! outlives a role: set before a role starts, or kept across a role's crash and restart,
//! until released.

use crate::core::error::{DataFileError, OwnFileError};
use crate::core::paths::{self, ProjectKey};

/// Whether recoveries are held for the project (false when the flag cannot be read).
pub fn is_held(project: &ProjectKey) -> bool {
    paths::hold_file(project).is_ok_and(|p| p.exists())
}

/// Records a hold (`true`) or a release (`false`); returns the value recorded.
pub fn set(project: &ProjectKey, held: bool) -> Result<bool, DataFileError> {
    let path = paths::hold_file(project)?;
    if held {
        if let Some(dir) = path.parent() {
            crate::core::safe_fs::create_dirs(dir, 0o700)
                .map_err(OwnFileError::doing("create", dir))?;
        }
        crate::core::safe_fs::write_atomic(
            &path,
            format!("{}\n", project.root.display()).as_bytes(),
            0o600,
        )
        .map_err(OwnFileError::doing("record the hold in", &path))?;
    } else if let Err(e) = std::fs::remove_file(&path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(OwnFileError::doing("clear the hold in", &path)(e).into());
    }
    Ok(held)
}
