//! `maestro musician watch <task-id> [--pause] [--since-id N] [--json]`: what a Musician
//! runs from a shell in place of its LLM watcher agents (see `core::musician_watch`).
//! Exit status: 0 what it waited for came (printed), 3 the Conductor is stale (pause),
//! 4 the task is complete/exited (background), 5 a newer watcher of the same kind took
//! over, 6 (`--join`) one already runs and was left running, 2 bad arguments, 1 the
//! database cannot be used. SIGTERM exits quietly (0).

use std::process::ExitCode;

use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::cli::args::WatchArgs;
use crate::cli::error::CliError;
use crate::cli::project::Project;
use crate::core::domain::TaskId;
use crate::core::event::MessageRow;
use crate::core::musician_watch::{self, Outcome, WatchConfig};
use crate::core::paths::ProjectKey;
use crate::core::sources::watchers::WatchMode;
use crate::core::text::printable;

pub fn watch(project: &Project, args: &WatchArgs, as_json: bool) -> Result<ExitCode, CliError> {
    let (task, mode) = task_and_mode(args)?;
    if args.join
        && let Some(code) = joined(project, (&task, mode), as_json)
    {
        return Ok(ExitCode::from(code));
    }
    let runtime = crate::cli::life::runtime()?;
    let outcome = wait(project, args, (&task, mode), &runtime)?;
    let code = print(&task, mode, &outcome, as_json);
    let _ = std::io::Write::flush(&mut std::io::stdout());
    // Printed first, kept after: the next watcher starts after the last message told,
    // so one posted between two watchers is told by the second (never by neither).
    if let Outcome::Message(m) = &outcome
        && let Some(path) = told_path(project, &task)
    {
        let _ = crate::core::safe_fs::write_atomic(&path, m.id.to_string().as_bytes(), 0o600);
    }
    // The slot is released and the answer printed: the process ends now, without
    // waiting for the runtime's and the database's teardown (nothing is left to
    // write), so a Musician's shell sees the exit as soon as the line.
    std::process::exit(i32::from(code))
}

/// `--join` beside a running watcher of the same kind: it is left running (it keeps the
/// heartbeat and tells what comes), and that is said; exit 6. `None` when none runs.
fn joined(project: &Project, (task, mode): (&TaskId, WatchMode), as_json: bool) -> Option<u8> {
    let pid = musician_watch::holder(&ProjectKey::of(&project.root), task, mode)?;
    if as_json {
        let value = json!({"event": "watched", "task_id": task, "mode": mode.as_str(), "pid": pid});
        println!("{}", crate::core::text::json_line(&value));
    } else {
        println!(
            "WATCHED: {task}'s {} watcher already runs (PID {pid}); it keeps the heartbeat and tells what comes. Nothing more to run.",
            mode.as_str()
        );
    }
    Some(6)
}

/// Claims the watcher slot, waits, releases it; the task, mode and outcome.
/// The watched task and the watcher's kind, from the arguments.
fn task_and_mode(args: &WatchArgs) -> Result<(TaskId, WatchMode), CliError> {
    let task = TaskId::parse(&args.task_id)
        .filter(TaskId::is_musician)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "{:?} is not a Musician task id; use one like task-03 or task-03-fix.",
                args.task_id
            ))
        })?;
    let mode = if args.pause {
        WatchMode::Pause
    } else {
        WatchMode::Background
    };
    Ok((task, mode))
}

fn wait(
    project: &Project,
    args: &WatchArgs,
    (task, mode): (&TaskId, WatchMode),
    runtime: &tokio::runtime::Runtime,
) -> Result<Outcome, CliError> {
    if args.pause && args.since_id.is_some() {
        return Err(CliError::Usage(
            "--since-id is for background mode; a pause watcher waits for the task's state.".into(),
        ));
    }
    // Without --since-id, a background watcher starts after the last message a watcher
    // of this task told (the highest id at start when none did).
    let told = (mode == WatchMode::Background)
        .then(|| told_path(project, task))
        .flatten()
        .and_then(|p| crate::core::safe_fs::read_regular(&p, 64).ok())
        .and_then(|b| String::from_utf8_lossy(&b).trim().parse::<i64>().ok());
    let cfg = WatchConfig {
        db: project.db.clone(),
        task: task.clone(),
        mode,
        since_id: args.since_id.or(told),
        heartbeat_after: args.heartbeat_after,
        conductor_check_after: args.conductor_check_after,
        conductor_fresh_within: args.conductor_fresh_within,
    };
    let mut conn =
        crate::core::store::open_existing(&cfg.db).map_err(crate::cli::error::runtime)?;
    let outcome = runtime.block_on(async {
        let signals = WatcherSignals::listen()?;
        // Listening first, then claiming: nothing committed after the claim is missed.
        let prepared = musician_watch::prepare(&cfg, &conn).map_err(crate::cli::error::runtime)?;
        let claim = musician_watch::claim(&ProjectKey::of(&project.root), task, mode)
            .await
            .map_err(crate::cli::error::runtime)?;
        let (replaced, stop) = signals.forward();
        let outcome = musician_watch::watch(&cfg, &mut conn, prepared, replaced, stop).await;
        claim.release(matches!(outcome, Ok(Outcome::Replaced)));
        outcome.map_err(crate::cli::error::runtime)
    })?;
    Ok(outcome)
}

/// How often a lifeline is looked at where no pidfd can be had.
const LIFELINE_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// A watcher's signals, listened to before it claims its slot: SIGUSR1 (a newer watcher
/// took over) and SIGTERM or SIGINT (stop). Shared with `conductor watch`.
pub(crate) struct WatcherSignals {
    usr1: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    /// The session's processes, found at once (before the claim): a shell that dies
    /// before the watcher waits on it is still seen gone.
    lifelines: Vec<crate::core::procs::ProcessId>,
}

impl WatcherSignals {
    /// Listens now (inside the runtime).
    pub(crate) fn listen() -> Result<Self, CliError> {
        let listen = |kind| {
            signal(kind).map_err(|e| CliError::Runtime(format!("cannot listen for signals: {e}")))
        };
        Ok(Self {
            usr1: listen(SignalKind::user_defined1())?,
            term: listen(SignalKind::terminate())?,
            int: listen(SignalKind::interrupt())?,
            lifelines: crate::core::hooks::lifelines(),
        })
    }

    /// The tokens the first signal cancels: (replaced, stop). The end of the session
    /// that started the watcher (its shell, its `claude`) stops it too: a watcher never
    /// outlives its session, keeping a dead one's heartbeat fresh.
    pub(crate) fn forward(mut self) -> (CancellationToken, CancellationToken) {
        let (replaced, stop) = (CancellationToken::new(), CancellationToken::new());
        let (r, s) = (replaced.clone(), stop.clone());
        let lifelines = std::mem::take(&mut self.lifelines);
        tokio::spawn(async move {
            let mut ends = tokio::task::JoinSet::new();
            for p in lifelines {
                ends.spawn(crate::core::procs::wait_for_exit(p, LIFELINE_POLL));
            }
            tokio::select! {
                _ = self.usr1.recv() => r.cancel(),
                _ = self.term.recv() => s.cancel(),
                _ = self.int.recv() => s.cancel(),
                Some(_) = ends.join_next(), if !ends.is_empty() => s.cancel(),
            }
        });
        (replaced, stop)
    }
}

/// A message as the watchers' JSON gives it.
pub(crate) fn message_json(m: &MessageRow) -> serde_json::Value {
    json!({"id": m.id, "task_id": m.task_id, "from_session": m.from_session,
           "message_type": m.message_type, "message": m.message, "timestamp": m.timestamp})
}

/// Where the last message a background watcher of `task` told is kept.
fn told_path(project: &Project, task: &TaskId) -> Option<std::path::PathBuf> {
    crate::core::paths::watcher_file(&ProjectKey::of(&project.root), task.as_str(), "told").ok()
}

/// Prints the outcome (nothing for a signal) and returns the exit status.
fn print(task: &TaskId, mode: WatchMode, outcome: &Outcome, as_json: bool) -> u8 {
    let message_text = musician_watch::message_line;
    let (code, value, text) = match outcome {
        Outcome::Message(m) => (
            0,
            json!({"event": "message", "task_id": task, "message": message_json(m)}),
            message_text(m),
        ),
        Outcome::StateChanged {
            state,
            prev_state,
            message,
        } => (
            0,
            json!({"event": "state", "task_id": task, "state": state, "prev_state": prev_state,
                   "message": message.as_ref().map(message_json)}),
            format!(
                "STATE: {task} {} -> {}{}",
                printable(prev_state),
                printable(state),
                message
                    .as_ref()
                    .map(|m| format!("\n{}", message_text(m)))
                    .unwrap_or_default()
            ),
        ),
        Outcome::ConductorStale { age } => (
            3,
            json!({"event": "timeout", "task_id": task, "conductor_heartbeat_age_s": age.map(|a| a.as_secs())}),
            format!(
                "TIMEOUT: the Conductor's heartbeat is {}; escalate (set error, write the status files).",
                age.map_or_else(|| "missing".to_owned(), |a| format!("{}s old", a.as_secs()))
            ),
        ),
        Outcome::Terminal { state } => (
            4,
            json!({"event": "terminal", "task_id": task, "state": state}),
            format!(
                "TERMINAL: {task} is {}; no more watching.",
                printable(state)
            ),
        ),
        Outcome::Replaced => (
            5,
            json!({"event": "replaced", "task_id": task, "mode": mode.as_str()}),
            format!(
                "REPLACED: a newer {} watcher for {task} took over; this one stops.",
                mode.as_str()
            ),
        ),
        Outcome::Stopped => return 0,
    };
    if as_json {
        println!("{}", crate::core::text::json_line(&value));
    } else {
        println!("{text}");
    }
    code
}
