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
use rusqlite::OptionalExtension;
use serde_json::{Value, json};

use crate::core::domain::TaskId;
use crate::core::handoff;
use crate::core::procs::{self, ProcessId};
use crate::core::recovery::launch::{LaunchError, Launcher, write_pid_file};

mod error;
use crate::core::store::{self, Author, Moved};
use crate::core::text::printable;
use crate::core::windows::LaunchTemplates;
pub use error::ActionError;

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
    let review = |task: &TaskId,
                  from: &str,
                  to: &str,
                  kind: &str,
                  m: &str|
     -> Result<String, ActionError> {
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
        TaskRequest::Approve { task, message } => review(
            task,
            "needs_review",
            "review_approved",
            "approval",
            message.as_deref().unwrap_or("Approved."),
        ),
        TaskRequest::Reject { task, message } => {
            review(task, "needs_review", "review_failed", "rejection", message)
        }
        TaskRequest::Fix { task, message } => {
            review(task, "error", "fix_proposed", "fix_proposal", message)
        }
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
        TaskRequest::Approve { task, message } => review(
            project,
            task,
            "needs_review",
            "review_approved",
            "approval",
            message.clone(),
        ),
        TaskRequest::Reject { task, message } => review(
            project,
            task,
            "needs_review",
            "review_failed",
            "rejection",
            Some(message.clone()),
        ),
        TaskRequest::Fix { task, message } => review(
            project,
            task,
            "error",
            "fix_proposed",
            "fix_proposal",
            Some(message.clone()),
        ),
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
    from: &str,
    to: &str,
    kind: &str,
    message: Option<String>,
) -> Result<Done, ActionError> {
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

/// How much of a Musician's log a relaunch reads (its end).
const HISTORY_READ: u64 = 16 * 1024 * 1024;

/// A relaunch, decided before anything is done (so the confirmation can say exactly
/// what will happen).
pub struct Relaunch {
    pub task: TaskId,
    pub plan: handoff::Plan,
    pub facts: handoff::Facts,
    pub state: String,
    pub window: Option<ProcessId>,
    /// Why the PID file's process is not the window (it is left alone).
    pub refused: Option<String>,
    pub title: String,
}

impl Relaunch {
    /// What will happen, in one paragraph: for the confirmation dialog and prompt.
    pub fn describe(&self) -> String {
        let kill = match self.window {
            Some(p) => format!(
                "PID {} gets SIGTERM (SIGKILL after the grace period) and its PID file is removed",
                p.pid
            ),
            None => match &self.refused {
                Some(why) => format!("nothing is killed ({why})"),
                None => "no window is running (nothing is killed)".to_owned(),
            },
        };
        format!(
            "Relaunch {task} ({previous}) after a {kind} handoff ({why})? {kill}; {moves} with a `handoff` message; window \"{title}\" opens for {next}.",
            task = self.task,
            // Database text: never a control byte on the operator's terminal.
            previous = printable(&self.plan.previous),
            kind = self.plan.kind.as_str(),
            why = match self.plan.kind {
                handoff::HandoffKind::Crash => "no HANDOFF".to_owned(),
                _ => format!(
                    "HANDOFF present, context {}",
                    self.facts
                        .context
                        .map_or("unknown".into(), |c| format!("{c}%"))
                ),
            },
            // A task already in fix_proposed stays there: no move to the same state.
            moves = if self.state == "fix_proposed" {
                "the task stays fix_proposed (its heartbeat refreshed)".to_owned()
            } else {
                format!("the task moves {} -> fix_proposed", printable(&self.state))
            },
            title = printable(&self.title),
            next = printable(&self.plan.next),
        )
    }
}

/// Gathers the facts of the handoff procedure: HANDOFF file, context, the window's
/// PID, who worked the task, the last completed step, the deviations.
pub fn prepare_relaunch(project: &Target, task: &TaskId) -> Result<Relaunch, ActionError> {
    let conn = store::open_existing(&project.db)?;
    let row: Option<(String, Option<String>)> = conn
        .query_row(
            "SELECT coalesce(state, ''), worked_by FROM orchestration_tasks WHERE task_id = ?1",
            [task.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| db_error(project, e))?;
    let Some((state, worked_by)) = row else {
        return Err(not_in_table(task));
    };
    if state == "complete" {
        return Err(ActionError::Complete { task: task.clone() });
    }
    // Files of the Musician's: never through a link, never blocking, the last part of
    // a huge one.
    let read = |name: String| {
        crate::core::safe_fs::read_regular_tail(&project.temp.join(name), HISTORY_READ)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let status = read(format!("{task}-status"));
    let handoff_present = project
        .temp
        .join(format!("{task}-HANDOFF"))
        .symlink_metadata()
        .is_ok_and(|m| m.is_file());
    let found = window(project, task);
    // A PID file naming a process that is not the window is said, and left alone.
    let refused = found
        .as_ref()
        .err()
        .filter(|e| matches!(e, ActionError::NotTheWindow(_)))
        .map(ToString::to_string);
    let window = found.ok();
    let facts = handoff::Facts {
        handoff_present,
        context: crate::core::headroom::analyze(status.as_deref()).current,
        pid_alive: window.is_some(),
        worked_by,
        last_completed: status.as_deref().and_then(handoff::last_completed_step),
        deviations: read(format!("{task}-deviations"))
            .map_or(0, |d| d.lines().filter(|l| !l.trim().is_empty()).count()),
    };
    let plan = handoff::plan(task, &facts);
    let title = format!("Musician: {task} ({})", plan.generation);
    Ok(Relaunch {
        task: task.clone(),
        plan,
        facts,
        state,
        window,
        refused,
        title,
    })
}

/// The Conductor's handoff procedure: guarded kill of the old window and its PID file
/// removed; `fix_proposed` (heartbeat refreshed), the next `worked_by` and a `handoff`
/// message in one transaction; the replacement window opened (a fresh session: a
/// handoff exists to shed context) and its PID recorded once it is seen alive.
///
/// What can be checked before any write (the terminal, a display) is checked first, so
/// a refused relaunch changes nothing. A window whose session does not run (it exits,
/// runs nothing, or the session ends at once) is an error, and the task's row and
/// messages are put back as they were.
pub fn relaunch(
    project: &Target,
    launch: &LaunchTemplates,
    kill_grace: Duration,
    task: &TaskId,
    r: &Relaunch,
) -> Result<Done, ActionError> {
    let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
    let launcher = Launcher {
        templates: launch.clone(),
        project: root,
    };
    launcher
        .preflight()
        .map_err(|source| ActionError::NotLaunchable {
            task: task.clone(),
            source,
        })?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ActionError::Runtime)?;
    if let Some(p) = r.window {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGCONT);
        rt.block_on(procs::guarded_kill(p, kill_grace));
    }
    let pid_file = project.temp.join(task.window_pid_file());
    if let Err(source) = std::fs::remove_file(&pid_file)
        && source.kind() != std::io::ErrorKind::NotFound
    {
        return Err(ActionError::PidFile {
            file: pid_file,
            source,
        });
    }
    let mut conn = store::open_existing(&project.db)?;
    let written = store::write(&mut conn, |tx| {
        let heartbeat = store::heartbeat(tx, task.as_str())?;
        store::set_state(tx, task.as_str(), "fix_proposed")?;
        store::set_worked_by(tx, task.as_str(), &r.plan.next)?;
        let message = store::send_message(
            tx,
            task.as_str(),
            Author::Operator,
            "handoff",
            &r.plan.message,
        )?;
        Ok(Written { heartbeat, message })
    })
    .map_err(|e| db_error(project, e))?;
    let argv = launcher.claude_window(&r.title, &musician_args(launch, task, r));
    let new = match rt.block_on(launcher.spawn_alive(&argv)) {
        Ok(new) => new,
        Err(why) => return Err(undo_handoff(project, &mut conn, task, r, &written, why)),
    };
    write_pid_file(&project.temp, &task.window_pid_file(), new.pid)?;
    Ok(relaunched(task, r, new.pid))
}

/// The replacement Musician's arguments: the skill's prompt and where to pick up.
fn musician_args(launch: &LaunchTemplates, task: &TaskId, r: &Relaunch) -> Vec<String> {
    let prompt = format!(
        "{}\n\nPrevious session: {}\nNew session will be: {}\n{}",
        launch.musician_prompt.replace("{task}", task.as_str()),
        r.plan.previous,
        r.plan.next,
        match r.plan.kind {
            handoff::HandoffKind::Crash =>
                format!("Read temp/{task}-status for the last known state."),
            _ => format!("Read HANDOFF from temp/{task}-HANDOFF for context."),
        }
    );
    vec![
        "--permission-mode".to_owned(),
        "acceptEdits".to_owned(),
        prompt,
    ]
}

/// What a relaunch wrote before its window was opened: the heartbeat it replaced and
/// the handoff message's id, for [`undo_handoff`].
struct Written {
    heartbeat: Option<String>,
    message: i64,
}

/// After a window whose session did not run: the task's state, worker and heartbeat as
/// they were, and the handoff message taken back (it said a session was launched, and
/// none runs). The error names what was seen.
fn undo_handoff(
    project: &Target,
    conn: &mut rusqlite::Connection,
    task: &TaskId,
    r: &Relaunch,
    written: &Written,
    why: LaunchError,
) -> ActionError {
    let undone = store::write(conn, |tx| {
        let before = store::RowBefore {
            state: &r.state,
            worked_by: r.facts.worked_by.as_deref(),
            heartbeat: written.heartbeat.as_deref(),
        };
        store::put_back(tx, task.as_str(), &before)?;
        store::take_back_message(tx, written.message, "handoff")
    });
    match undone {
        Ok(()) => ActionError::PutBack {
            task: task.clone(),
            state: r.state.clone(),
            source: why,
        },
        Err(e) => ActionError::NotPutBack {
            task: task.clone(),
            why,
            source: Box::new(db_error(project, e)),
        },
    }
}

fn relaunched(task: &TaskId, r: &Relaunch, pid: i32) -> Done {
    Done {
        json: json!({"ok": true, "task_id": task, "handoff": r.plan.kind, "context": r.facts.context,
                "previous": r.plan.previous, "next": r.plan.next, "prev_state": r.state,
                "state": "fix_proposed", "old_pid": r.window.map(|p| p.pid), "pid": pid}),
        text: format!(
            "{task}: {} handoff, {} -> {}, window \"{}\" (PID {pid}), its session running",
            r.plan.kind.as_str(),
            printable(&r.plan.previous),
            printable(&r.plan.next),
            printable(&r.title),
        ),
    }
}

/// A failed write, naming the file and what to do about it.
fn db_error(project: &Target, source: rusqlite::Error) -> ActionError {
    ActionError::Database {
        db: project.db.clone(),
        source,
    }
}
