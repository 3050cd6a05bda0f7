//! `maestro souffleur --watcher PID:<pid> SESSION_ID:<id>`: the Souffleur's watcher
//! layer as a process, for a Souffleur session that runs its skill unchanged. What the
//! skill's LLM watcher does, it does: the `souffleur` heartbeat kept fresh, the Conductor
//! checked (its PID at once through a pidfd, its heartbeat, its state, a new session id
//! when awaited), and an exit with the watcher's report: `CONDUCTOR_DEAD:pid` …, then the
//! task count, on stdout. The session acts on that output as on the watcher's.

use std::io::Write;
use std::process::ExitCode;

use crate::cli::args::SouffleurArgs;
use crate::cli::error::CliError;
use crate::cli::project::Project;
use crate::core::clock::Clock;
use crate::core::domain::souffleur::{WatcherMode, valid_session_id};
use crate::core::procs::ProcessId;
use crate::core::store::role::RoleDb;
use crate::core::watchdog::checks::parse_invocation;
use crate::settings::Settings;

/// Watches until a reason holds; exit 0 with the report, 2 on bad arguments, 1 when the
/// database cannot be used.
pub fn run(
    project: &Project,
    settings: &Settings,
    args: &SouffleurArgs,
    invocation: &str,
    clock: Clock,
) -> Result<ExitCode, CliError> {
    let (mode, pid, session) = parse(args, invocation)?;
    let db = RoleDb::open(&project.db).map_err(|e| {
        CliError::Runtime(format!(
            "the Souffleur's watcher needs the orchestration's database: {e}. Run it from the project folder or pass --project."
        ))
    })?;
    let timings = settings.souffleur.role.clone();
    // The PID is only watched (kill -0, a pidfd), never signalled: its identity is the
    // process that holds it now.
    let conductor = pid.map(ProcessId::observe);
    let (reason, count) =
        crate::cli::life::runtime()?.block_on(crate::core::watchdog::watch_until_exit(
            db,
            mode,
            args.awaiting_session_id,
            session,
            conductor,
            timings,
            clock,
        ));
    // A shell that went away takes the report with it; nothing else to do.
    let _ = writeln!(std::io::stdout(), "{reason} (task count: {count})");
    Ok(ExitCode::SUCCESS)
}

/// The mode, the PID (normal mode) and the session id, each checked.
fn parse(
    args: &SouffleurArgs,
    invocation: &str,
) -> Result<(WatcherMode, Option<i32>, String), CliError> {
    if args.heartbeat_only {
        let session = invocation
            .split_whitespace()
            .find_map(|w| w.strip_prefix("SESSION_ID:"))
            .filter(|s| valid_session_id(s))
            .ok_or_else(|| {
                CliError::Usage(
                    "--heartbeat-only needs SESSION_ID:<id> (letters, digits, - and _).".into(),
                )
            })?;
        return Ok((WatcherMode::HeartbeatOnly, None, session.to_owned()));
    }
    let (pid, session) = parse_invocation(invocation).map_err(|why| {
        CliError::Usage(format!(
            "{why}: the watcher takes PID:<pid> SESSION_ID:<id> (or --heartbeat-only SESSION_ID:<id>)."
        ))
    })?;
    Ok((WatcherMode::Normal, Some(pid), session))
}
