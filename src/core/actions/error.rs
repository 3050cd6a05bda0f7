//! Why a task action was refused or failed.

use crate::core::domain::TaskId;
use crate::core::error::OwnFileError;
use crate::core::recovery::launch::LaunchError;
use crate::core::store;

/// Why a task action was refused or failed; each says the fix, and that nothing
/// changed where nothing did.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error(transparent)]
    Open(#[from] store::OpenError),
    #[error(
        "cannot write to {} ({source}); nothing was changed. Fix: {}.",
        .db.display(),
        db_fix(.source)
    )]
    Database {
        db: std::path::PathBuf,
        source: rusqlite::Error,
    },
    #[error("{task} is not in orchestration_tasks.")]
    NotInTable { task: TaskId },
    #[error("{task} is {now}, not {from}; nothing changed.")]
    WrongState {
        task: TaskId,
        now: String,
        from: String,
    },
    #[error("{source}; maestro only signals windows it can identify.")]
    Unidentified {
        source: crate::core::safe_fs::Refused,
    },
    #[error("{} does not hold a PID.", .file.display())]
    NoPid { file: std::path::PathBuf },
    #[error("{task}'s window (PID {pid}) is not running.")]
    NotRunning { task: TaskId, pid: i32 },
    #[error(transparent)]
    NotTheWindow(#[from] crate::core::windows::NotTheWindow),
    #[error("cannot signal PID {pid}: {source}")]
    Signal { pid: i32, source: nix::errno::Errno },
    /// The runtime a blocking action waits on could not be built.
    #[error(transparent)]
    Runtime(std::io::Error),
    #[error(
        "{task} is complete; a completed task is not relaunched (create a {task}-fix task instead)."
    )]
    Complete { task: TaskId },
    #[error("{task} was not relaunched: {source}. Nothing was changed.")]
    NotLaunchable { task: TaskId, source: LaunchError },
    #[error(
        "{task} was not relaunched: its session PID {pid} belongs to another user (uid {uid}), and maestro may not end it. Nothing was changed. Ask that user to end it, or relaunch as them."
    )]
    ForeignSession { task: TaskId, pid: i32, uid: u32 },
    #[error(
        "{task} was not relaunched: {source}. The handoff was written (message #{handoff}) before the session was released, and stays (a row is never deleted to undo); {}. Its previous sessions run on as before{}. Fix the cause (`[launch] claude`) and relaunch again.",
        match .notice { Some(id) => format!("message #{id} tells the task the relaunch failed"), None => "telling the task the relaunch failed could not be written".to_owned() },
        if .running.is_empty() { String::new() } else { format!(" (PID {})", .running.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")) }
    )]
    NotStarted {
        task: TaskId,
        handoff: i64,
        notice: Option<i64>,
        running: Vec<i32>,
        source: LaunchError,
    },
    #[error(transparent)]
    NewPidFile(#[from] OwnFileError),
    #[error(
        "{task} is being relaunched already{}; nothing was changed. Wait for that relaunch to end, then look at the task again.",
        if *.pid > 0 { format!(" (by maestro PID {})", .pid) } else { String::new() }
    )]
    RelaunchBusy { task: TaskId, pid: i32 },
    #[error(
        "{task} is {state}; a finished task gets no new window (create a {task}-fix task instead)."
    )]
    Finished { task: TaskId, state: String },
    #[error(
        "{task} already has a live session (PID {}); nothing was launched. To replace it, use `maestro task relaunch {task}`.",
        .pids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    AlreadyRunning { task: TaskId, pids: Vec<i32> },
    #[error(
        "{task} was not relaunched: maestro's data folder cannot be found (set HOME or XDG_DATA_HOME), so two relaunches could not be kept apart. Nothing was changed."
    )]
    NoLockFolder { task: TaskId },
}

/// What to do about a failed write.
fn db_fix(e: &rusqlite::Error) -> &'static str {
    use rusqlite::ErrorCode;
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "another process held the write lock for too long; try again in a moment"
        }
        Some(ErrorCode::ReadOnly) => "make the file (and its folder) writable for this user",
        Some(ErrorCode::DiskFull) => "free some disk space and try again",
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            "the file is damaged; restore it from a backup or start a new orchestration"
        }
        _ => "check the file and try again",
    }
}
