//! Whether a maestro reports this project's anomalies to its database right now: every
//! maestro running with `report_to_db` holds a shared lock on the project's reporter
//! file for as long as it runs (the kernel lets go when it dies, however it dies);
//! `maestro hook --replace-pollers` refuses the LLM Sentinel only while someone holds it.

use std::fs::File;

use nix::fcntl::{Flock, FlockArg};

use crate::core::error::{DataFileError, OwnFileError};
use crate::core::paths::{self, ProjectKey, Service};
use crate::core::safe_fs;

/// The reporter's hold on the lock: dropped, the project has one reporter fewer.
pub struct ReporterLock {
    _lock: Flock<File>,
}

/// Takes the project's reporter lock, shared with every other reporter.
pub fn hold(project: &ProjectKey) -> Result<ReporterLock, DataFileError> {
    let path = paths::lock_file(Service::Reporter, project)?;
    let file = safe_fs::open_own_lock(&path)?;
    let lock = Flock::lock(file, FlockArg::LockSharedNonblock)
        .map_err(|(_, e)| OwnFileError::doing("lock", &path)(e.into()))?;
    Ok(ReporterLock { _lock: lock })
}

/// Whether any process holds the project's reporter lock. A lock file that cannot be
/// opened (none, a symlink) means no reporter.
pub fn is_held(project: &ProjectKey) -> bool {
    let Ok(path) = paths::lock_file(Service::Reporter, project) else {
        return false;
    };
    let Ok((file, _)) = safe_fs::open_regular(&path) else {
        return false;
    };
    // An exclusive lock is refused while any shared one is held.
    Flock::lock(file, FlockArg::LockExclusiveNonblock).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_held_while_a_reporter_runs_and_let_go_after() {
        let data = tempfile::tempdir().expect("tempdir");
        let project = ProjectKey {
            root: data.path().join("p"),
            key: format!("test{:012x}", std::process::id()),
        };
        let path = paths::lock_file(Service::Reporter, &project).expect("data dir");
        let _ = std::fs::remove_file(&path);
        assert!(!is_held(&project), "no file, no reporter");
        let first = hold(&project).expect("hold");
        let second = hold(&project).expect("a second reporter shares it");
        assert!(is_held(&project));
        drop(first);
        assert!(is_held(&project), "one reporter still runs");
        drop(second);
        assert!(!is_held(&project));
        let _ = std::fs::remove_file(&path);
    }
}
