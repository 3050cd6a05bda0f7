//! `maestro conductor watch [--json]`: the Conductor's background message-watcher as a
//! command (see `core::conductor_watch`). It waits, keeping task-00's heartbeat fresh,
//! and exits as soon as a Musician enters a state the Conductor handles or a message
//! reaches the Conductor, printing each once (a relaunched watcher starts where this one
//! stopped). Exit status: 0 events printed, 5 a newer watcher took over, 1 the database
//! cannot be used. SIGTERM, or the end of the session that started it, exits quietly (0).

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use crate::cli::error::CliError;
use crate::cli::error::runtime as failed;
use crate::cli::musician::{WatcherSignals, message_json};
use crate::cli::project::Project;
use crate::core::actions::Target;
use crate::core::conductor_watch::{self, ConductorEvent, Outcome, Seen, Watching};
use crate::core::domain::{CONDUCTOR_ID, TaskId};
use crate::core::musician_watch::{self, WatchConfig};
use crate::core::paths::{self, ProjectKey};
use crate::core::sources::watchers::WatchMode;
use crate::core::text::{json_line, printable};

/// How old task-00's heartbeat may get before the watcher refreshes it.
const HEARTBEAT_AFTER: Duration = Duration::from_secs(60);

pub fn watch(
    project: &Project,
    settings: Option<&crate::settings::Settings>,
    as_json: bool,
) -> Result<ExitCode, CliError> {
    let runtime = crate::cli::life::runtime()?;
    let key = ProjectKey::of(&project.root);
    let seen_path = conductor_watch::seen_path(&paths::watchers_dir(&key).map_err(failed)?);
    let conductor = TaskId::parse(CONDUCTOR_ID)
        .ok_or_else(|| CliError::Runtime("task-00 is not a task id".into()))?;
    let cfg = WatchConfig {
        db: project.db.clone(),
        task: conductor.clone(),
        mode: WatchMode::Background,
        since_id: None,
        heartbeat_after: HEARTBEAT_AFTER,
        conductor_check_after: Duration::ZERO,
        conductor_fresh_within: Duration::ZERO,
    };
    // Where the Musicians' sessions are found (their windows, by the programs a window
    // may run: the settings', or the defaults when the settings cannot be read).
    let window_programs = settings.map_or_else(
        || vec!["claude".to_owned(), "kitty".to_owned()],
        |s| crate::core::windows::window_programs(&s.launch),
    );
    let target = Target {
        root: project.root.clone(),
        db: project.db.clone(),
        temp: project.temp.clone(),
        window_programs,
    };
    let mut conn = crate::core::store::open_existing(&cfg.db).map_err(failed)?;
    let (outcome, _) = runtime.block_on(async {
        let signals = WatcherSignals::listen()?;
        let claim = musician_watch::claim(&key, &conductor, WatchMode::Background)
            .await
            .map_err(failed)?;
        // Read after the claim: a watcher it replaced has kept what it told by now.
        let seen: Seen = conductor_watch::start_record(&conn, &seen_path).map_err(|source| {
            failed(musician_watch::WatchError::Read {
                db: cfg.db.clone(),
                source,
            })
        })?;
        let (replaced, stop) = signals.forward();
        let find = |task: &TaskId, recorded: Option<&str>| sessions_of(&target, task, recorded);
        let watching = Watching {
            cfg: &cfg,
            sessions: Some(&find),
            seen_path: &seen_path,
        };
        let watched = conductor_watch::watch(&watching, &mut conn, seen, replaced, stop).await;
        let result = watched.map_err(failed);
        if let Ok((Outcome::Events(events), next, _lock)) = &result {
            // Printed first, kept after (under the lock): a watcher killed in between
            // tells it again rather than never.
            for e in events {
                let (value, text) = describe(e);
                say(as_json, &value, &text);
            }
            let _ = std::io::Write::flush(&mut std::io::stdout());
            let _ = conductor_watch::write_seen(&seen_path, next);
        }
        claim.release(matches!(result, Ok((Outcome::Replaced, ..))));
        result.map(|(outcome, next, _)| (outcome, next))
    })?;
    let code = match outcome {
        Outcome::Events(_) | Outcome::Stopped => 0,
        Outcome::Replaced => {
            let value = json!({"event": "replaced", "task_id": CONDUCTOR_ID});
            say(
                as_json,
                &value,
                "REPLACED: a newer Conductor watcher took over; this one stops.",
            );
            5
        }
    };
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::process::exit(code)
}

/// A Musician's live sessions (its window, the sessions the hooks or its recorded id
/// tie to it), or `None` while a relaunch of it runs.
fn sessions_of(
    target: &Target,
    task: &TaskId,
    recorded: Option<&str>,
) -> Option<Vec<crate::core::procs::ProcessId>> {
    use crate::core::actions::{live, relaunch_lock, window};
    if relaunch_lock::holder(target, task).is_some() {
        return None;
    }
    let window = window(target, task).ok();
    Some(
        live::live_sessions(&target.root, task, window, recorded)
            .into_iter()
            .map(|s| s.process)
            .collect(),
    )
}

fn say(as_json: bool, value: &serde_json::Value, text: &str) {
    if as_json {
        println!("{}", json_line(value));
    } else {
        println!("{text}");
    }
}

/// One event as JSON and as the line the Conductor's watcher would report.
fn describe(e: &ConductorEvent) -> (serde_json::Value, String) {
    match e {
        ConductorEvent::State {
            task_id,
            state,
            prev_state,
            reason,
        } => (
            json!({"event": "state", "task_id": task_id, "state": state,
                   "prev_state": prev_state, "reason": reason}),
            format!(
                "STATE: {} {} -> {}{}",
                printable(task_id),
                printable(prev_state.as_deref().unwrap_or("?")),
                printable(state),
                reason
                    .as_deref()
                    .map(|r| format!(" (reason: {})", printable(r)))
                    .unwrap_or_default()
            ),
        ),
        ConductorEvent::SessionGone {
            task_id,
            state,
            pids,
        } => (
            json!({"event": "state", "task_id": task_id, "state": "dead",
                   "prev_state": state, "reason": "session gone", "pids": pids}),
            format!(
                "STATE: {} {} -> dead (session gone: PID {} ended; its row still says {})",
                printable(task_id),
                printable(state),
                pids.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                printable(state),
            ),
        ),
        ConductorEvent::Message(m) => {
            let mut value = message_json(&m.row);
            if m.is_cut() {
                value["bytes"] = json!(m.bytes);
                value["cut"] = json!(true);
            }
            let mut text = musician_watch::message_line(&m.row);
            if let Some(rest) = conductor_watch::seen::rest_pointer(m) {
                text.push(' ');
                text.push_str(&rest);
            }
            (
                json!({"event": "message", "task_id": CONDUCTOR_ID, "message": value}),
                text,
            )
        }
    }
}
