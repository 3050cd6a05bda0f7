//! One relaunch (or first launch) of a task at a time: a lock file per task in maestro's
//! private watchers folder, held from the moment the relaunch is prepared until it
//! ends, holding the PID of the maestro that holds it. A second relaunch meanwhile is
//! refused, naming the first; the Conductor's watcher leaves a task being relaunched
//! alone (its old session ending is the relaunch's doing, not a death).

use std::io::{Read, Seek, Write};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use super::{ActionError, Target};
use crate::core::domain::TaskId;
use crate::core::paths::{self, ProjectKey};

/// How long taking the lock retries while someone only looks at it.
const TAKE_PATIENCE: Duration = Duration::from_millis(300);

/// The lock of one task's relaunch, released when dropped.
#[derive(Debug)]
pub struct RelaunchLock {
    _lock: Flock<std::fs::File>,
}

fn lock_path(target: &Target, task: &TaskId) -> Option<std::path::PathBuf> {
    paths::watcher_file(&ProjectKey::of(&target.root), task.as_str(), "relaunch").ok()
}

/// Takes the task's relaunch lock, or says who holds it.
pub fn take(target: &Target, task: &TaskId) -> Result<RelaunchLock, ActionError> {
    let path =
        lock_path(target, task).ok_or_else(|| ActionError::NoLockFolder { task: task.clone() })?;
    let deadline = Instant::now() + TAKE_PATIENCE;
    let mut file = crate::core::safe_fs::open_own_lock(&path)?;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(mut lock) => {
                let _ = lock.set_len(0);
                let _ = lock.rewind();
                let _ = write!(lock, "{}", std::process::id());
                let _ = lock.flush();
                return Ok(RelaunchLock { _lock: lock });
            }
            Err((back, _)) if Instant::now() < deadline => {
                file = back;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err((mut back, _)) => {
                return Err(ActionError::RelaunchBusy {
                    task: task.clone(),
                    pid: read_pid(&mut back),
                });
            }
        }
    }
}

/// The PID of the maestro relaunching the task now, if one is (0 when it cannot be read).
pub fn holder(target: &Target, task: &TaskId) -> Option<i32> {
    let path = lock_path(target, task).filter(|p| p.exists())?;
    let file = crate::core::safe_fs::open_own(&path, 0o600).ok()?;
    match Flock::lock(file, FlockArg::LockSharedNonblock) {
        Ok(_free) => None,
        Err((mut file, _)) => Some(read_pid(&mut file)),
    }
}

fn read_pid(file: &mut std::fs::File) -> i32 {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = Read::take(&mut *file, 32).read_to_string(&mut text);
    text.trim().parse().unwrap_or(0)
}
