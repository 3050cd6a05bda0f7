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
            confirm(&format!("Kill {task}'s window and open a new one?"), yes)?;
            relaunch(project, settings, &task, as_json)
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

/// Kills the window (if one is recorded and running) and opens a new one with the
/// configured prompt, resuming the task's session when its id is known and valid.
fn relaunch(
    project: &Project,
    settings: &Settings,
    task: &TaskId,
    as_json: bool,
) -> Result<u8, CliError> {
    let session: Option<String> = open(project)?
        .query_row(
            "SELECT session_id FROM orchestration_tasks WHERE task_id = ?1",
            [task.as_str()],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| CliError::Runtime(format!("database: {e}")))?
        .flatten()
        .filter(|s: &String| crate::core::domain::souffleur::valid_session_id(s));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    let old = window(project, task).ok();
    if let Some(p) = old {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGCONT);
        rt.block_on(procs::guarded_kill(p, settings.souffleur.kill_grace));
    }
    let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
    let launcher = Launcher {
        templates: settings.launch.clone(),
        project: root,
    };
    let mut args = Vec::new();
    if let Some(s) = &session {
        args.extend(["--resume".to_owned(), s.clone()]);
    }
    args.extend([
        "--permission-mode".to_owned(),
        "acceptEdits".to_owned(),
        settings
            .launch
            .musician_prompt
            .replace("{task}", task.as_str()),
    ]);
    let argv = launcher.claude_window(&format!("Musician {task}"), &args);
    let new = rt.block_on(async { launcher.spawn(&argv) }).map_err(|e| {
        CliError::Runtime(format!(
            "{e}. Check `[launch] terminal` in the configuration."
        ))
    })?;
    write_pid_file(&project.temp, &format!("musician-{task}.pid"), new.pid)
        .map_err(CliError::Runtime)?;
    report(
        as_json,
        &json!({"ok": true, "task_id": task, "old_pid": old.map(|p| p.pid), "pid": new.pid, "resumed_session": session}),
        &format!("{task}: relaunched (PID {})", new.pid),
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
