//! The relaunch of a Musician by the Conductor's handoff procedure: decided first (so
//! the confirmation says what will happen), then proven before it ends the old window.

use std::time::Duration;

use rusqlite::OptionalExtension;
use serde_json::json;

use super::{ActionError, Done, Target, db_error, live, not_in_table, relaunch_lock, window};
use crate::core::domain::TaskId;
use crate::core::domain::state;
use crate::core::handoff;
use crate::core::procs::{self, ProcessId};
use crate::core::recovery::launch::{LaunchError, Launcher, write_pid_file};
use crate::core::store::{self, Author};
use crate::core::text::printable;
use crate::core::windows::LaunchTemplates;

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
    /// Every live session of the task (the window's first), ended once the new one runs.
    pub sessions: Vec<live::LiveSession>,
    /// Why the PID file's process is not the window (it is left alone).
    pub refused: Option<String>,
    pub title: String,
    /// Held from the preparation to the end: the task's one relaunch.
    pub lock: relaunch_lock::RelaunchLock,
}

impl Relaunch {
    /// What will happen, in one paragraph: for the confirmation dialog and prompt.
    pub fn describe(&self) -> String {
        let kill = if self.sessions.is_empty() {
            match &self.refused {
                Some(why) => format!("nothing is killed ({why})"),
                None => "no session of it is running (nothing is killed)".to_owned(),
            }
        } else {
            format!(
                "once the new session runs, {} get SIGTERM (SIGKILL after the grace period), and if it does not, they run on as before",
                self.sessions
                    .iter()
                    .map(|l| format!("PID {} ({})", l.process.pid, l.how))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
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
            moves = if self.state == state::FIX_PROPOSED {
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
    let lock = relaunch_lock::take(project, task)?;
    let conn = store::open_existing(&project.db)?;
    let row: Option<(String, Option<String>, Option<String>)> = conn
        .query_row(
            "SELECT coalesce(state, ''), worked_by, session_id FROM orchestration_tasks WHERE task_id = ?1",
            [task.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(|e| db_error(project, e))?;
    let Some((state, worked_by, recorded)) = row else {
        return Err(not_in_table(task));
    };
    if state == state::COMPLETE {
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
    let sessions = live::live_sessions(&project.root, task, window, recorded.as_deref());
    let facts = handoff::Facts {
        handoff_present,
        context: crate::core::headroom::analyze(status.as_deref()).current,
        // "Crashed" only when no session of the task was alive.
        pid_alive: !sessions.is_empty(),
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
        sessions,
        refused,
        title,
        lock,
    })
}

/// The Conductor's handoff procedure, proved before it is committed: the new window is
/// opened with its session held at a gate; once the window runs, the task's old
/// sessions are paused, `fix_proposed` (heartbeat refreshed), the next `worked_by` and a
/// `handoff` message are written in one transaction, and the session is released. Only
/// when it runs are the old sessions ended and the new window's PID recorded.
///
/// A window that fails changes nothing: no row, no message, no id consumed, the old
/// sessions running as before. A session that fails after its release leaves the
/// handoff written (never deleted) and a message saying the relaunch failed; the old
/// sessions run on.
pub fn relaunch(
    project: &Target,
    launch: &LaunchTemplates,
    kill_grace: Duration,
    task: &TaskId,
    r: &Relaunch,
) -> Result<Done, ActionError> {
    let (launcher, rt) = window_launcher(project, launch, task)?;
    let not_launchable = |source| ActionError::NotLaunchable {
        task: task.clone(),
        source,
    };
    if let Some((pid, uid)) = live::foreign(&r.sessions) {
        return Err(ActionError::ForeignSession {
            task: task.clone(),
            pid,
            uid,
        });
    }
    let argv = musician_args(launch, task, r);
    // Opened first and closed last: closing it (a WAL checkpoint) must not stand
    // between the handoff's commit and the guardian being told of it.
    let mut conn = store::open_existing(&project.db)?;
    let held = rt
        .block_on(launcher.open_held(&r.title, &argv))
        .map_err(not_launchable)?;
    let roots: Vec<ProcessId> = r.sessions.iter().map(|l| l.process).collect();
    let mut paused = crate::core::paused::Paused::pause(&roots);
    // The new window is the task's from the handoff on: a watcher looking while the old
    // sessions end, or after this maestro died, finds it. Put back on a failure.
    let pid_file = task.window_pid_file();
    let previous = crate::core::windows::previous(&project.temp, &pid_file);
    let written = write_pid_file(&project.temp, &pid_file, held.window().pid)
        .map_err(ActionError::from)
        .and_then(|()| write_handoff(&mut conn, project, task, r));
    let written = match written {
        Ok(id) => id,
        Err(e) => {
            previous.put_back();
            rt.block_on(held.close());
            paused.resume();
            return Err(e);
        }
    };
    // From here a dying maestro leaves the old sessions to be ended, not resumed.
    paused.committed();
    let window = match rt.block_on(held.release()) {
        Ok(window) => window,
        Err(source) => {
            previous.put_back();
            paused.resume();
            return Err(not_started(project, task, r, written, source));
        }
    };
    let ended = rt.block_on(paused.end(kill_grace));
    drop(conn);
    Ok(relaunched(task, r, window.pid, &ended))
}

/// What opens a task's window (from the project's real folder), checked before anything
/// is written, and the runtime its proof waits on.
pub(super) fn window_launcher(
    project: &Target,
    launch: &LaunchTemplates,
    task: &TaskId,
) -> Result<(Launcher, tokio::runtime::Runtime), ActionError> {
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
    Ok((launcher, rt))
}

/// The handoff in one transaction: state, worker, heartbeat and the message; its id.
/// A failed transaction leaves nothing (`SQLite` rolls it back; no id is consumed).
fn write_handoff(
    conn: &mut rusqlite::Connection,
    project: &Target,
    task: &TaskId,
    r: &Relaunch,
) -> Result<i64, ActionError> {
    store::write(conn, |tx| {
        store::heartbeat(tx, task.as_str())?;
        store::set_state(tx, task.as_str(), state::FIX_PROPOSED)?;
        store::set_worked_by(tx, task.as_str(), &r.plan.next)?;
        store::send_message(
            tx,
            task.as_str(),
            Author::Operator,
            "handoff",
            &r.plan.message,
        )
    })
    .map_err(|e| db_error(project, e))
}

/// After a released session that did not run: the handoff stays (a row is never
/// deleted to undo), a further message tells the task's sessions the relaunch failed,
/// and the error says exactly that.
fn not_started(
    project: &Target,
    task: &TaskId,
    r: &Relaunch,
    handoff: i64,
    source: LaunchError,
) -> ActionError {
    let text = format!(
        "The relaunch as {} failed: its session did not run ({}). {} carries on with the task; ignore message #{handoff}.",
        r.plan.next,
        crate::core::text::one_line(&source.to_string()),
        r.plan.previous,
    );
    let notice = store::open_existing(&project.db)
        .map_err(ActionError::from)
        .and_then(|mut conn| {
            store::write(&mut conn, |tx| {
                store::send_message(tx, task.as_str(), Author::Operator, "instruction", &text)
            })
            .map_err(|e| db_error(project, e))
        });
    ActionError::NotStarted {
        task: task.clone(),
        handoff,
        notice: notice.ok(),
        running: r.sessions.iter().map(|l| l.process.pid).collect(),
        source,
    }
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
        launch.musician_permission.as_str().to_owned(),
        prompt,
    ]
}

fn relaunched(task: &TaskId, r: &Relaunch, pid: i32, ended: &[(i32, procs::KillOutcome)]) -> Done {
    let ended_pids: Vec<i32> = ended.iter().map(|(p, _)| *p).collect();
    let said = if ended.is_empty() {
        String::new()
    } else {
        format!(
            "; ended {}",
            ended
                .iter()
                .map(|(p, o)| format!("PID {p} ({})", format!("{o:?}").to_lowercase()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Done {
        json: json!({"ok": true, "task_id": task, "handoff": r.plan.kind, "context": r.facts.context,
                "previous": r.plan.previous, "next": r.plan.next, "prev_state": r.state,
                "state": state::FIX_PROPOSED, "old_pid": r.window.map(|p| p.pid), "ended": ended_pids, "pid": pid}),
        text: format!(
            "{task}: {} handoff, {} -> {}, window \"{}\" (PID {pid}), its session running{said}",
            r.plan.kind.as_str(),
            printable(&r.plan.previous),
            printable(&r.plan.next),
            printable(&r.title),
        ),
    }
}
