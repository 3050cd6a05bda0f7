//! The operator's actions on one Musician, shared by the command line (`maestro task
//! …`) and the dashboard's keys: review answers, instructions, freeze/thaw/kill of the
//! recorded window, and the relaunch by the Conductor's handoff procedure.
//!
//! Review answers move the task through the state machine of docs/orchestration.md §1 (and
//! refresh its heartbeat, as every writer must) and leave a message for the Musician, in
//! one transaction: a task that is no longer in the expected state is left alone. Process
//! actions act on the PID in `temp/musician-<task>.pid`, only if that process is alive.
//! Each returns what it did as JSON and as a line of text; errors name the fix.

use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::core::domain::TaskId;
use crate::core::domain::state;
use crate::core::procs::{self, ProcessId};

mod error;
pub mod first_launch;
pub mod live;
mod relaunch;
pub mod relaunch_lock;
use crate::core::store::{self, Author, Moved};
use crate::core::windows::LaunchTemplates;
pub use error::ActionError;
pub use relaunch::{Relaunch, prepare_relaunch, relaunch};

/// Where the orchestration lives.
#[derive(Debug, Clone)]
pub struct Target {
    pub root: PathBuf,
    pub db: PathBuf,
    pub temp: PathBuf,
    /// The program names a task's window may run as (see `core::windows`).
    pub window_programs: Vec<String>,
}

/// What an action did: one JSON object for `--json`, one line for people.
#[derive(Debug, Clone)]
pub struct Done {
    pub json: Value,
    pub text: String,
}

/// An action on one task, as the dashboard asks for it (and a remote project's link
/// carries it, as JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum TaskRequest {
    Approve {
        task: TaskId,
        message: Option<String>,
    },
    Reject {
        task: TaskId,
        message: String,
    },
    Fix {
        task: TaskId,
        message: String,
    },
    Instruct {
        task: TaskId,
        message: String,
    },
    Relaunch {
        task: TaskId,
    },
    Kill {
        task: TaskId,
    },
    Freeze {
        task: TaskId,
    },
    Thaw {
        task: TaskId,
    },
}

/// An answer to a review or an error: the state it answers, the state it moves the task
/// to, and the type of the message it sends (the one table the dashboard, `task` and
/// the remote read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    pub from: &'static str,
    pub to: &'static str,
    pub kind: &'static str,
}

pub const APPROVAL: Answer = Answer {
    from: state::NEEDS_REVIEW,
    to: state::REVIEW_APPROVED,
    kind: "approval",
};
pub const REJECTION: Answer = Answer {
    from: state::NEEDS_REVIEW,
    to: state::REVIEW_FAILED,
    kind: "rejection",
};
pub const FIX_PROPOSAL: Answer = Answer {
    from: state::ERROR,
    to: state::FIX_PROPOSED,
    kind: "fix_proposal",
};

impl TaskRequest {
    pub fn task(&self) -> &TaskId {
        match self {
            Self::Approve { task, .. }
            | Self::Reject { task, .. }
            | Self::Fix { task, .. }
            | Self::Instruct { task, .. }
            | Self::Relaunch { task }
            | Self::Kill { task }
            | Self::Freeze { task }
            | Self::Thaw { task } => task,
        }
    }
}

/// The refusal of a request made in another state: the same words before the
/// confirmation (the dashboard) as at the write (the command line).
fn wrong_state(task: &TaskId, now: &str, from: &str) -> ActionError {
    ActionError::WrongState {
        task: task.clone(),
        now: now.to_owned(),
        from: from.to_owned(),
    }
}

fn not_in_table(task: &TaskId) -> ActionError {
    ActionError::NotInTable { task: task.clone() }
}

/// What a request will do, in one paragraph, read from the database and the files
/// (the confirmation dialog shows it; nothing is changed).
pub fn describe(project: &Target, request: &TaskRequest) -> Result<String, ActionError> {
    let state = |task: &TaskId| -> Result<String, ActionError> {
        let conn = store::open_existing(&project.db)?;
        store::task_state(&conn, task.as_str())
            .map_err(|e| db_error(project, e))?
            .ok_or_else(|| not_in_table(task))
    };
    let quote = |m: &str| {
        let m = crate::core::text::printable(m).into_owned();
        // The operator's own text, read whole before it is sent (bounded: a paste of
        // a whole file is not a question).
        if m.chars().count() > 2000 {
            format!("\"{}…\"", m.chars().take(2000).collect::<String>())
        } else {
            format!("\"{m}\"")
        }
    };
    let review = |task: &TaskId, answer: Answer, m: &str| -> Result<String, ActionError> {
        let Answer { from, to, kind } = answer;
        let now = state(task)?;
        if now != from {
            return Err(wrong_state(task, &now, from));
        }
        // "an approval message", "a rejection message": the article agrees with the word.
        let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        let kind = kind.replace('_', " ");
        Ok(format!(
            "{task}: {from} -> {to}, heartbeat refreshed, and {article} {kind} message from the Conductor, marked as yours, saying {}",
            quote(m)
        ))
    };
    match request {
        TaskRequest::Approve { task, message } => {
            review(task, APPROVAL, message.as_deref().unwrap_or("Approved."))
        }
        TaskRequest::Reject { task, message } => review(task, REJECTION, message),
        TaskRequest::Fix { task, message } => review(task, FIX_PROPOSAL, message),
        TaskRequest::Instruct { task, message } => {
            let now = state(task)?;
            Ok(format!(
                "{task} ({now}, unchanged): an `instruction` message from the Conductor (marked as yours): {}.",
                quote(message)
            ))
        }
        TaskRequest::Relaunch { task } => Ok(prepare_relaunch(project, task)?.describe()),
        TaskRequest::Kill { task } => {
            let p = window(project, task)?;
            Ok(format!(
                "{task}'s window, PID {}, gets SIGTERM, then SIGKILL after the grace period if it is still there. The task's state is left as it is.",
                p.pid
            ))
        }
        TaskRequest::Freeze { task } => {
            let p = window(project, task)?;
            Ok(format!(
                "{task}'s window, PID {}, gets SIGSTOP: it stops until thawed.",
                p.pid
            ))
        }
        TaskRequest::Thaw { task } => {
            let p = window(project, task)?;
            Ok(format!(
                "{task}'s window, PID {}, gets SIGCONT: it runs again.",
                p.pid
            ))
        }
    }
}

/// Carries out a request (blocking: run it off the draw loop).
pub fn perform(
    project: &Target,
    launch: &LaunchTemplates,
    kill_grace: Duration,
    request: &TaskRequest,
) -> Result<Done, ActionError> {
    match request {
        TaskRequest::Approve { task, message } => review(project, task, APPROVAL, message.clone()),
        TaskRequest::Reject { task, message } => {
            review(project, task, REJECTION, Some(message.clone()))
        }
        TaskRequest::Fix { task, message } => {
            review(project, task, FIX_PROPOSAL, Some(message.clone()))
        }
        TaskRequest::Instruct { task, message } => instruct(project, task, message),
        TaskRequest::Relaunch { task } => {
            let r = prepare_relaunch(project, task)?;
            relaunch(project, launch, kill_grace, task, &r)
        }
        TaskRequest::Kill { task } => kill_window(project, task, kill_grace),
        TaskRequest::Freeze { task } => signal(project, task, Signal::SIGSTOP, "frozen"),
        TaskRequest::Thaw { task } => signal(project, task, Signal::SIGCONT, "thawed"),
    }
}

/// Moves `task` from `from` to `to` and leaves a message, in one transaction.
pub fn review(
    project: &Target,
    task: &TaskId,
    answer: Answer,
    message: Option<String>,
) -> Result<Done, ActionError> {
    let Answer { from, to, kind } = answer;
    let mut conn = store::open_existing(&project.db)?;
    let text = message.unwrap_or_else(|| "Approved.".into());
    let moved = store::write(&mut conn, |tx| {
        let moved = store::move_task(tx, task.as_str(), &[from], to)?;
        if matches!(moved, Moved::Done { .. }) {
            store::send_message(tx, task.as_str(), Author::Operator, kind, &text)?;
        }
        Ok(moved)
    })
    .map_err(|e| db_error(project, e))?;
    match moved {
        Moved::Done { .. } => {}
        Moved::NoSuchTask => {
            return Err(not_in_table(task));
        }
        Moved::WrongState(s) => {
            return Err(wrong_state(task, &s, from));
        }
    }
    // The Conductor's watcher learns the answer: the task's next review is a new one.
    crate::core::conductor_watch::seen::note_passed(&project.root, &project.db);
    let done = Done {
        json: json!({"ok": true, "task_id": task, "state": to, "prev_state": from}),
        text: format!("{task}: {from} -> {to}"),
    };
    Ok(done)
}

pub fn instruct(project: &Target, task: &TaskId, text: &str) -> Result<Done, ActionError> {
    let mut conn = store::open_existing(&project.db)?;
    let sent = store::write(&mut conn, |tx| {
        if store::task_state(tx, task.as_str())?.is_none() {
            return Ok(false);
        }
        store::send_message(tx, task.as_str(), Author::Operator, "instruction", text)?;
        Ok(true)
    })
    .map_err(|e| db_error(project, e))?;
    if !sent {
        return Err(not_in_table(task));
    }
    let done = Done {
        json: json!({"ok": true, "task_id": task, "message_type": "instruction"}),
        text: format!("{task}: instruction sent"),
    };
    Ok(done)
}

/// The Musician window's process, from its PID file, if it is running.
pub fn window(project: &Target, task: &TaskId) -> Result<ProcessId, ActionError> {
    let name = task.window_pid_file();
    let file = project.temp.join(&name);
    let text = crate::core::safe_fs::read_regular(&file, 64)
        .map_err(|source| ActionError::Unidentified { source })?;
    let pid: i32 = String::from_utf8_lossy(&text)
        .trim()
        .parse()
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| ActionError::NoPid { file: file.clone() })?;
    if !procs::is_alive(pid) {
        return Err(ActionError::NotRunning {
            task: task.clone(),
            pid,
        });
    }
    Ok(crate::core::windows::verify(
        &project.temp,
        &name,
        pid,
        &project.window_programs,
    )?)
}

pub fn signal(
    project: &Target,
    task: &TaskId,
    sig: Signal,
    verb: &str,
) -> Result<Done, ActionError> {
    let p = window(project, task)?;
    kill(Pid::from_raw(p.pid), sig).map_err(|source| ActionError::Signal { pid: p.pid, source })?;
    let done = Done {
        json: json!({"ok": true, "task_id": task, "pid": p.pid, "action": verb}),
        text: format!("{task}: {verb} (PID {})", p.pid),
    };
    Ok(done)
}

pub fn kill_window(
    project: &Target,
    task: &TaskId,
    kill_grace: Duration,
) -> Result<Done, ActionError> {
    let p = window(project, task)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ActionError::Runtime)?;
    // A frozen window cannot act on SIGTERM: let it run again first.
    let _ = kill(Pid::from_raw(p.pid), Signal::SIGCONT);
    let outcome = rt.block_on(procs::guarded_kill(p, kill_grace));
    let done = Done {
        json: json!({"ok": true, "task_id": task, "pid": p.pid, "outcome": format!("{outcome:?}").to_lowercase()}),
        text: format!("{task}: window PID {} {outcome:?}", p.pid),
    };
    Ok(done)
}

/// A failed write, naming the file and what to do about it.
fn db_error(project: &Target, source: rusqlite::Error) -> ActionError {
    ActionError::Database {
        db: project.db.clone(),
        source,
    }
}
