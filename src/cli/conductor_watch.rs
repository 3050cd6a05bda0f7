//! `maestro conductor watch [--json]`: the Conductor's background message-watcher as a
//! command (see `core::conductor_watch`). It waits, keeping task-00's heartbeat fresh,
//! and exits as soon as a Musician enters a state the Conductor handles or a message
//! reaches the Conductor, printing each once (a relaunched watcher starts where this one
//! stopped). Exit status: 0 events printed, 5 a newer watcher took over, 1 the database
//! cannot be used. SIGTERM exits quietly (0).

use std::process::ExitCode;
use std::time::Duration;

use serde_json::json;

use crate::cli::CliError;
use crate::cli::error::runtime as failed;
use crate::cli::musician::{WatcherSignals, message_json};
use crate::cli::project::Project;
use crate::core::conductor_watch::{self, ConductorEvent, Outcome, Seen};
use crate::core::domain::{CONDUCTOR_ID, TaskId};
use crate::core::musician_watch::{self, WatchConfig};
use crate::core::paths::{self, ProjectKey};
use crate::core::sources::watchers::WatchMode;
use crate::core::text::{json_line, printable};

/// How old task-00's heartbeat may get before the watcher refreshes it.
const HEARTBEAT_AFTER: Duration = Duration::from_secs(60);

pub fn watch(project: &Project, as_json: bool) -> Result<ExitCode, CliError> {
    let runtime = crate::cli::runtime()?;
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
    let mut conn = crate::core::store::open_existing(&cfg.db).map_err(failed)?;
    let (outcome, _) = runtime.block_on(async {
        let signals = WatcherSignals::listen()?;
        let claim = musician_watch::claim(&key, &conductor, WatchMode::Background)
            .await
            .map_err(failed)?;
        // Read after the claim: a watcher it replaced has kept what it told by now.
        let seen: Seen = match conductor_watch::read_seen(&seen_path) {
            Some(seen) => seen,
            None => conductor_watch::baseline(&conn).map_err(|source| {
                failed(musician_watch::WatchError::Read {
                    db: cfg.db.clone(),
                    source,
                })
            })?,
        };
        let (replaced, stop) = signals.forward();
        let watched =
            conductor_watch::watch(&cfg, &mut conn, &seen_path, seen, replaced, stop).await;
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
        ConductorEvent::Message(m) => (
            json!({"event": "message", "task_id": CONDUCTOR_ID, "message": message_json(m)}),
            musician_watch::message_line(m),
        ),
    }
}
