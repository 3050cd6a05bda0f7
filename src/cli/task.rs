//! `maestro task …`: the operator's actions on one Musician, from the command line.
//!
//! Review answers move the task through the state machine of PROTOCOL.md §1 (and
//! refresh its heartbeat, as every writer must) and leave a message for the Musician, in
//! one transaction: a task that is no longer in the expected state is left alone. Process
//! actions act on the PID in `temp/musician-<task>.pid`, only if that process is alive.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rusqlite::OptionalExtension;
use serde_json::json;

use crate::cli::CliError;
use crate::cli::args::{MessageArgs, TaskAction, TaskCommand};
use crate::cli::project::{Project, confirm};
use crate::core::domain::TaskId;
use crate::core::handoff;
use crate::core::recovery::launch::{Launcher, write_pid_file};
use crate::core::schema;
use crate::core::sources::procs::{self, ProcessId};
use crate::core::store::{self, Author, Moved};
use crate::settings::Settings;

/// Runs a task command; returns the exit status on success (headroom uses 0/1/2).
pub fn run(
    project: &Project,
    settings: &Settings,
    cmd: &TaskCommand,
    as_json: bool,
    yes: bool,
) -> Result<u8, CliError> {
    let raw = match &cmd.action {
        TaskAction::Approve(t)
        | TaskAction::Reject(t)
        | TaskAction::Fix(t)
        | TaskAction::Instruct(t) => &t.task_id,
        TaskAction::Kill(t)
        | TaskAction::Relaunch(t)
        | TaskAction::Freeze(t)
        | TaskAction::Thaw(t)
        | TaskAction::Headroom(t) => &t.task_id,
    };
    let task = TaskId::parse(raw)
        .filter(TaskId::is_musician)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "{raw:?} is not a Musician task id; use one like task-03 or task-03-fix."
            ))
        })?;
    match &cmd.action {
        TaskAction::Approve(t) => review(
            project,
            &task,
            "needs_review",
            "review_approved",
            "approval",
            message(&t.message, true)?,
            as_json,
        ),
        TaskAction::Reject(t) => review(
            project,
            &task,
            "needs_review",
            "review_failed",
            "rejection",
            message(&t.message, false)?,
            as_json,
        ),
        TaskAction::Fix(t) => review(
            project,
            &task,
            "error",
            "fix_proposed",
            "fix_proposal",
            message(&t.message, false)?,
            as_json,
        ),
        TaskAction::Instruct(t) => instruct(
            project,
            &task,
            &message(&t.message, false)?.unwrap_or_default(),
            as_json,
        ),
        TaskAction::Headroom(_) => Ok(headroom(project, &task, as_json)),
        TaskAction::Freeze(_) => signal(project, &task, Signal::SIGSTOP, "frozen", as_json),
        TaskAction::Thaw(_) => signal(project, &task, Signal::SIGCONT, "thawed", as_json),
        TaskAction::Kill(_) => {
            confirm(&format!("Kill {task}'s window?"), yes)?;
            kill_window(project, &task, as_json)
        }
        TaskAction::Relaunch(_) => {
            let prepared = prepare_relaunch(project, settings, &task)?;
            confirm(&prepared.describe(), yes)?;
            relaunch(project, settings, &task, &prepared, as_json)
        }
    }
}

/// The message text from `--message` or `--message-file`; `optional` allows none.
fn message(args: &MessageArgs, optional: bool) -> Result<Option<String>, CliError> {
    let text = match (&args.message, &args.message_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(f)) => Some(std::fs::read_to_string(f).map_err(|e| {
            CliError::Usage(format!(
                "cannot read the message file {} ({e}); pass a readable UTF-8 file.",
                f.display()
            ))
        })?),
        (None, None) => None,
    };
    match text {
        Some(t) if t.trim().is_empty() => Err(CliError::Usage(
            "the message is empty; say what the Musician should do.".into(),
        )),
        None if !optional => Err(CliError::Usage(
            "this action needs --message TEXT or --message-file F.".into(),
        )),
        other => Ok(other),
    }
}

fn open(project: &Project) -> Result<rusqlite::Connection, CliError> {
    if !project.db.exists() {
        return Err(CliError::Runtime(format!(
            "there is no database at {}; pass --project or --db.",
            project.db.display()
        )));
    }
    let conn = schema::open(&project.db).map_err(|e| CliError::Runtime(e.to_string()))?;
    schema::verify(&conn, &project.db).map_err(|e| CliError::Runtime(e.to_string()))?;
    Ok(conn)
}

/// Moves `task` from `from` to `to` and leaves a message, in one transaction.
fn review(
    project: &Project,
    task: &TaskId,
    from: &str,
    to: &str,
    kind: &str,
    message: Option<String>,
    as_json: bool,
) -> Result<u8, CliError> {
    let mut conn = open(project)?;
    let text = message.unwrap_or_else(|| "Approved.".into());
    let moved = store::write(&mut conn, |tx| {
        let moved = store::move_task(tx, task.as_str(), &[from], to)?;
        if matches!(moved, Moved::Done { .. }) {
            store::send_message(tx, task.as_str(), Author::Operator, kind, &text)?;
        }
        Ok(moved)
    })
    .map_err(|e| db_error(project, &e))?;
    match moved {
        Moved::Done { .. } => {}
        Moved::NoSuchTask => {
            return Err(CliError::Runtime(format!(
                "{task} is not in orchestration_tasks."
            )));
        }
        Moved::WrongState(s) => {
            return Err(CliError::Runtime(format!(
                "{task} is {s}, not {from}; nothing changed. Look at it in the dashboard first."
            )));
        }
    }
    report(
        as_json,
        &json!({"ok": true, "task_id": task, "state": to, "prev_state": from}),
        &format!("{task}: {from} -> {to}"),
    );
    Ok(0)
}

fn instruct(project: &Project, task: &TaskId, text: &str, as_json: bool) -> Result<u8, CliError> {
    let mut conn = open(project)?;
    let sent = store::write(&mut conn, |tx| {
        if store::task_state(tx, task.as_str())?.is_none() {
            return Ok(false);
        }
        store::send_message(tx, task.as_str(), Author::Operator, "instruction", text)?;
        Ok(true)
    })
    .map_err(|e| db_error(project, &e))?;
    if !sent {
        return Err(CliError::Runtime(format!(
            "{task} is not in orchestration_tasks."
        )));
    }
    report(
        as_json,
        &json!({"ok": true, "task_id": task, "message_type": "instruction"}),
        &format!("{task}: instruction sent"),
    );
    Ok(0)
}

/// The headroom report of `check-context-headroom.sh`, same figures and exit status:
/// 0 healthy, 1 caution / no data / no file, 2 critical.
fn headroom(project: &Project, task: &TaskId, as_json: bool) -> u8 {
    let file = project.temp.join(format!("{task}-status"));
    let text = std::fs::read(&file)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let h = crate::core::headroom::analyze(text.as_deref());
    if as_json {
        let mut v = serde_json::to_value(&h).unwrap_or_default();
        v["task_id"] = json!(task);
        // The name the first release used for the current value.
        v["context"] = json!(h.current);
        // The figures in percent, as the script prints them.
        v["per_entry"] = json!(h.per_entry_x10.map(|x| x as f64 / 10.0));
        v["per_agent"] = json!(h.per_agent_x10.map(|x| x as f64 / 10.0));
        println!("{v}");
    } else {
        print!("{}", h.render(task.as_str(), &file.display().to_string()));
    }
    h.level.exit_code()
}

/// The Musician window's process, from its PID file, if it is running.
fn window(project: &Project, task: &TaskId) -> Result<ProcessId, CliError> {
    let file = project.temp.join(format!("musician-{task}.pid"));
    let text = std::fs::read_to_string(&file).map_err(|e| {
        CliError::Runtime(format!(
            "cannot read {} ({e}); maestro only signals windows it can identify.",
            file.display()
        ))
    })?;
    let pid: i32 = text
        .trim()
        .parse()
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| CliError::Runtime(format!("{} does not hold a PID.", file.display())))?;
    if !procs::is_alive(pid) {
        return Err(CliError::Runtime(format!(
            "{task}'s window (PID {pid}) is not running."
        )));
    }
    Ok(ProcessId::observe(pid))
}

fn signal(
    project: &Project,
    task: &TaskId,
    sig: Signal,
    done: &str,
    as_json: bool,
) -> Result<u8, CliError> {
    let p = window(project, task)?;
    kill(Pid::from_raw(p.pid), sig)
        .map_err(|e| CliError::Runtime(format!("cannot signal PID {}: {e}", p.pid)))?;
    report(
        as_json,
        &json!({"ok": true, "task_id": task, "pid": p.pid, "action": done}),
        &format!("{task}: {done} (PID {})", p.pid),
    );
    Ok(0)
}

fn kill_window(project: &Project, task: &TaskId, as_json: bool) -> Result<u8, CliError> {
    let p = window(project, task)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    // A frozen window cannot act on SIGTERM: let it run again first.
    let _ = kill(Pid::from_raw(p.pid), Signal::SIGCONT);
    let outcome = rt.block_on(procs::guarded_kill(p, Duration::from_secs(5)));
    report(
        as_json,
        &json!({"ok": true, "task_id": task, "pid": p.pid, "outcome": format!("{outcome:?}").to_lowercase()}),
        &format!("{task}: window PID {} {outcome:?}", p.pid),
    );
    Ok(0)
}

/// A relaunch, decided before anything is done (so the confirmation can say exactly
/// what will happen).
pub struct Relaunch {
    pub plan: handoff::Plan,
    pub facts: handoff::Facts,
    pub state: String,
    pub window: Option<ProcessId>,
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
            None => "no window is running (nothing is killed)".to_owned(),
        };
        format!(
            "Relaunch {task} after a {kind} handoff ({why})? {kill}; the task moves {state} -> fix_proposed with a `handoff` message; window \"{title}\" opens for {next}.",
            task = self.plan.previous.trim_start_matches("musician-"),
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
            state = self.state,
            title = self.title,
            next = self.plan.next,
        )
    }
}

/// Gathers the facts of the handoff procedure: HANDOFF file, context, the window's
/// PID, who worked the task, the last completed step, the deviations.
pub fn prepare_relaunch(
    project: &Project,
    _settings: &Settings,
    task: &TaskId,
) -> Result<Relaunch, CliError> {
    let conn = open(project)?;
    let row: Option<(String, Option<String>)> = conn
        .query_row(
            "SELECT coalesce(state, ''), worked_by FROM orchestration_tasks WHERE task_id = ?1",
            [task.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(|e| db_error(project, &e))?;
    let Some((state, worked_by)) = row else {
        return Err(CliError::Runtime(format!(
            "{task} is not in orchestration_tasks."
        )));
    };
    if state == "complete" {
        return Err(CliError::Runtime(format!(
            "{task} is complete; a completed task is not relaunched (create a {task}-fix task instead)."
        )));
    }
    let read = |name: String| {
        std::fs::read(project.temp.join(name))
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let status = read(format!("{task}-status"));
    let handoff_present = project
        .temp
        .join(format!("{task}-HANDOFF"))
        .metadata()
        .is_ok_and(|m| m.is_file());
    let window = window(project, task).ok();
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
        plan,
        facts,
        state,
        window,
        title,
    })
}

/// The Conductor's handoff procedure: guarded kill of the old window and its PID file
/// removed; `fix_proposed` (heartbeat refreshed), the next `worked_by` and a `handoff`
/// message in one transaction; the replacement window opened (a fresh session: a
/// handoff exists to shed context) and its PID recorded.
pub fn relaunch(
    project: &Project,
    settings: &Settings,
    task: &TaskId,
    r: &Relaunch,
    as_json: bool,
) -> Result<u8, CliError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    if let Some(p) = r.window {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGCONT);
        rt.block_on(procs::guarded_kill(p, settings.souffleur.kill_grace));
    }
    let pid_file = project.temp.join(format!("musician-{task}.pid"));
    if let Err(e) = std::fs::remove_file(&pid_file)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(CliError::Runtime(format!(
            "cannot remove {} ({e}); fix its permissions and relaunch again.",
            pid_file.display()
        )));
    }
    let mut conn = open(project)?;
    store::write(&mut conn, |tx| {
        store::set_state(tx, task.as_str(), "fix_proposed")?;
        store::set_worked_by(tx, task.as_str(), &r.plan.next)?;
        store::send_message(
            tx,
            task.as_str(),
            Author::Operator,
            "handoff",
            &r.plan.message,
        )
    })
    .map_err(|e| db_error(project, &e))?;
    let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
    let launcher = Launcher {
        templates: settings.launch.clone(),
        project: root,
    };
    let prompt = format!(
        "{}\n\nPrevious session: {}\nNew session will be: {}\n{}",
        settings
            .launch
            .musician_prompt
            .replace("{task}", task.as_str()),
        r.plan.previous,
        r.plan.next,
        match r.plan.kind {
            handoff::HandoffKind::Crash =>
                format!("Read temp/{task}-status for the last known state."),
            _ => format!("Read HANDOFF from temp/{task}-HANDOFF for context."),
        }
    );
    let args = vec![
        "--permission-mode".to_owned(),
        "acceptEdits".to_owned(),
        prompt,
    ];
    let argv = launcher.claude_window(&r.title, &args);
    let new = rt.block_on(async { launcher.spawn(&argv) }).map_err(|e| {
        CliError::Runtime(format!(
            "{e}. The task is fix_proposed with its handoff message; open the window by hand or fix `[launch] terminal` and relaunch."
        ))
    })?;
    write_pid_file(&project.temp, &format!("musician-{task}.pid"), new.pid)
        .map_err(CliError::Runtime)?;
    report(
        as_json,
        &json!({"ok": true, "task_id": task, "handoff": r.plan.kind, "context": r.facts.context,
                "previous": r.plan.previous, "next": r.plan.next, "prev_state": r.state,
                "state": "fix_proposed", "old_pid": r.window.map(|p| p.pid), "pid": new.pid}),
        &format!(
            "{task}: {} handoff, {} -> {}, window \"{}\" (PID {})",
            r.plan.kind.as_str(),
            r.plan.previous,
            r.plan.next,
            r.title,
            new.pid
        ),
    );
    Ok(0)
}

/// A failed write, naming the file and what to do about it.
fn db_error(project: &Project, e: &rusqlite::Error) -> CliError {
    use rusqlite::ErrorCode;
    let fix = match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "another process held the write lock for too long; try again in a moment"
        }
        Some(ErrorCode::ReadOnly) => "make the file (and its folder) writable for this user",
        Some(ErrorCode::DiskFull) => "free some disk space and try again",
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
            "the file is damaged; restore it from a backup or start a new orchestration"
        }
        _ => "check the file and try again",
    };
    CliError::Runtime(format!(
        "cannot write to {} ({e}); nothing was changed. Fix: {fix}.",
        project.db.display()
    ))
}

fn report(as_json: bool, value: &serde_json::Value, text: &str) {
    if as_json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}
