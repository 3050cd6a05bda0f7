//! A Musician's watcher without an LLM (docs/orchestration.md §5, the Musician skill's watcher
//! protocol): waits, event-driven like the database source, for what the Musician is
//! waiting for, and keeps the task's heartbeat fresh meanwhile.
//!
//! - background mode: a new message from the Conductor (`from_session = 'task-00'`, the
//!   Musicians' documented query) for the task with `id > since`; or the task turning
//!   `complete`/`exited`;
//! - pause mode: the task's state leaving `needs_review`/`error`; after
//!   `conductor_check_after`, a Conductor heartbeat older than `conductor_fresh_within`
//!   ends the wait with a timeout (a fresh one keeps it going, checked again when it
//!   would turn stale).
//!
//! Both modes refresh the heartbeat when it is older than `heartbeat_after`, as one
//! short `BEGIN IMMEDIATE` write, at the moment it turns that old (no poll). One watcher
//! of each kind per task: [`claim`] takes the task's watcher file, asking a previous
//! holder to stand down (SIGUSR1) first.

use std::fs::File;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::core::domain::TaskId;
use crate::core::domain::state;
use crate::core::error::OwnFileError;
use crate::core::event::MessageRow;
use crate::core::paths::{self, PathError, ProjectKey};
use crate::core::procs;
use crate::core::sources::db::{RECHECKS, message_row, watch_database};
use crate::core::sources::watchers::{WatchMode, successor_file};
use crate::core::store;

#[derive(Debug, Clone)]
pub struct WatchConfig {
    pub db: PathBuf,
    pub task: TaskId,
    pub mode: WatchMode,
    /// Background: messages above this id (default: the highest at start).
    pub since_id: Option<i64>,
    pub heartbeat_after: Duration,
    pub conductor_check_after: Duration,
    pub conductor_fresh_within: Duration,
}

/// Why the watcher stopped waiting.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Background: a message from the Conductor for the task.
    Message(MessageRow),
    /// Pause: the task left `needs_review`/`error`; the newest Conductor message with it.
    StateChanged {
        state: String,
        prev_state: String,
        message: Option<MessageRow>,
    },
    /// Pause: the Conductor's heartbeat is stale (or missing) after the check delay.
    ConductorStale { age: Option<Duration> },
    /// Background: the task reached a terminal state.
    Terminal { state: String },
    /// A newer watcher of the same kind took over.
    Replaced,
    /// SIGTERM or SIGINT.
    Stopped,
}

/// The task's state and heartbeat age (seconds, by `SQLite`'s clock).
fn task_row(conn: &Connection, task: &str) -> rusqlite::Result<Option<(String, Option<f64>)>> {
    conn.query_row(
        "SELECT coalesce(state, ''), (julianday('now') - julianday(last_heartbeat)) * 86400
         FROM orchestration_tasks WHERE task_id = ?1",
        [task],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// One message as the watchers print it: `MESSAGE: #12 [type] from sender: text`.
pub fn message_line(m: &MessageRow) -> String {
    use crate::core::text::printable;
    format!(
        "MESSAGE: #{} [{}] from {}: {}",
        m.id,
        printable(m.message_type.as_deref().unwrap_or("-")),
        printable(m.from_session.as_deref().unwrap_or("-")),
        printable(m.message.as_deref().unwrap_or_default())
    )
}

/// The first Conductor message for the task above `after`.
fn next_message(conn: &Connection, task: &str, after: i64) -> rusqlite::Result<Option<MessageRow>> {
    conn.query_row(
        "SELECT id, task_id, from_session, message_type, message, timestamp
         FROM orchestration_messages
         WHERE task_id = ?1 AND from_session = 'task-00' AND id > ?2 ORDER BY id LIMIT 1",
        params![task, after],
        message_row,
    )
    .optional()
}

/// The newest Conductor message for the task.
fn newest_message(conn: &Connection, task: &str) -> rusqlite::Result<Option<MessageRow>> {
    conn.query_row(
        "SELECT id, task_id, from_session, message_type, message, timestamp
         FROM orchestration_messages
         WHERE task_id = ?1 AND from_session = 'task-00' ORDER BY id DESC LIMIT 1",
        [task],
        message_row,
    )
    .optional()
}

fn is_paused(state: &str) -> bool {
    matches!(state, state::NEEDS_REVIEW | state::ERROR)
}

fn secs(age: Option<f64>) -> Option<Duration> {
    age.map(|s| Duration::from_secs_f64(s.max(0.0)))
}

/// What a watcher sets up before it says it is there: the message id it starts after,
/// the state it starts in, and its ear on the database. Prepared before the claim, so
/// nothing committed after the claim can be missed.
pub struct Prepared {
    since: i64,
    start_state: String,
    wake: mpsc::UnboundedReceiver<()>,
    _watcher: Option<notify::RecommendedWatcher>,
    /// (device, inode) of the database file watched: the connection stays on this
    /// file, so one removed or replaced leaves the watcher deaf unless it says so.
    identity: Option<(u64, u64)>,
}

fn identity_of(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether the database file is still the one the watcher opened; otherwise what
/// happened to it, with the fix.
fn still_the_database(cfg: &WatchConfig, opened: Option<(u64, u64)>) -> Result<(), WatchError> {
    let now = identity_of(&cfg.db);
    if now.is_none() {
        return Err(WatchError::DatabaseRemoved {
            db: cfg.db.clone(),
            task: cfg.task.clone(),
        });
    }
    if opened.is_some() && now != opened {
        return Err(WatchError::DatabaseReplaced {
            db: cfg.db.clone(),
            task: cfg.task.clone(),
        });
    }
    Ok(())
}

fn read_error(cfg: &WatchConfig, source: rusqlite::Error) -> WatchError {
    WatchError::Read {
        db: cfg.db.clone(),
        source,
    }
}

/// Reads the starting point and starts listening to the database's files.
pub fn prepare(cfg: &WatchConfig, conn: &Connection) -> Result<Prepared, WatchError> {
    let task = cfg.task.as_str();
    let (wake_tx, wake) = mpsc::unbounded_channel::<()>();
    let watcher = watch_database(&cfg.db, move || {
        let _ = wake_tx.send(());
    })
    .ok();
    let identity = identity_of(&cfg.db);
    let Some((start_state, _)) = task_row(conn, task).map_err(|e| read_error(cfg, e))? else {
        return Err(WatchError::NotClaimed {
            task: cfg.task.clone(),
            db: cfg.db.clone(),
        });
    };
    let since = match cfg.since_id {
        Some(n) => n,
        None => conn
            .query_row(
                "SELECT coalesce(max(id), 0) FROM orchestration_messages",
                [],
                |r| r.get(0),
            )
            .map_err(|e| read_error(cfg, e))?,
    };
    Ok(Prepared {
        since,
        start_state,
        wake,
        _watcher: watcher,
        identity,
    })
}

/// Waits until something the Musician waits for happens, `replaced` fires (a newer
/// watcher) or `stop` fires (a signal). Errors are the database's, with their fix.
pub async fn watch(
    cfg: &WatchConfig,
    conn: &mut Connection,
    prepared: Prepared,
    replaced: CancellationToken,
    stop: CancellationToken,
) -> Result<Outcome, WatchError> {
    let task = cfg.task.as_str();
    let db_err = |e: rusqlite::Error| read_error(cfg, e);
    let Prepared {
        since,
        start_state,
        mut wake,
        _watcher,
        identity,
    } = prepared;
    let started = Instant::now();
    let mut conductor_check =
        (cfg.mode == WatchMode::Pause).then(|| started + cfg.conductor_check_after);
    let mut recheck: Option<(usize, Instant)> = None;
    // Heartbeats are stored to the second: our own last refresh also bounds the next,
    // so a stamp truncated at write time never makes refreshes come more often.
    let mut last_refresh: Option<Instant> = None;
    loop {
        still_the_database(cfg, identity)?;
        // Look: what the Musician waits for, then the heartbeat.
        let Some((state, age)) = task_row(conn, task).map_err(db_err)? else {
            return Err(WatchError::TaskRemoved {
                task: cfg.task.clone(),
            });
        };
        let looked = match cfg.mode {
            WatchMode::Background => background_look(cfg, conn, state, since)?,
            WatchMode::Pause => pause_look(cfg, conn, (state, &start_state), &mut conductor_check)?,
        };
        if let Some(outcome) = looked {
            return Ok(outcome);
        }
        let next_beat = keep_heartbeat(cfg, conn, secs(age), &mut last_refresh)?;
        // Wait for the next reason to look.
        let mut next = next_beat + Duration::from_millis(50);
        if let Some(at) = conductor_check {
            next = next.min(at);
        }
        if let Some((_, at)) = recheck {
            next = next.min(at);
        }
        tokio::select! {
            () = replaced.cancelled() => return Ok(Outcome::Replaced),
            () = stop.cancelled() => return Ok(Outcome::Stopped),
            got = wake.recv() => {
                while wake.try_recv().is_ok() {}
                if got.is_some() {
                    recheck = Some((0, Instant::now() + RECHECKS[0]));
                }
            }
            () = tokio::time::sleep_until(next) => {
                if let Some((i, at)) = recheck && Instant::now() >= at {
                    recheck = RECHECKS.get(i + 1).map(|d| (i + 1, Instant::now() + *d));
                }
            }
        }
    }
}

/// In the background: a message for the task, or its end, is the outcome.
fn background_look(
    cfg: &WatchConfig,
    conn: &Connection,
    state: String,
    since: i64,
) -> Result<Option<Outcome>, WatchError> {
    let db_err = |e: rusqlite::Error| read_error(cfg, e);
    if let Some(m) = next_message(conn, cfg.task.as_str(), since).map_err(db_err)? {
        return Ok(Some(Outcome::Message(m)));
    }
    Ok(matches!(state.as_str(), state::COMPLETE | state::EXITED)
        .then_some(Outcome::Terminal { state }))
}

/// In a pause: a state that is no pause any more is the outcome, with the newest
/// message; after the check delay, so is a Conductor whose heartbeat is stale (one
/// alive but busy is looked at again when it would turn stale).
fn pause_look(
    cfg: &WatchConfig,
    conn: &Connection,
    (state, start_state): (String, &str),
    conductor_check: &mut Option<Instant>,
) -> Result<Option<Outcome>, WatchError> {
    let db_err = |e: rusqlite::Error| read_error(cfg, e);
    if !is_paused(&state) {
        let message = newest_message(conn, cfg.task.as_str()).map_err(db_err)?;
        return Ok(Some(Outcome::StateChanged {
            state,
            prev_state: start_state.to_owned(),
            message,
        }));
    }
    let Some(at) = *conductor_check else {
        return Ok(None);
    };
    if Instant::now() < at {
        return Ok(None);
    }
    // An age that includes a suspend or pause of this watcher is no evidence.
    let age = task_row(conn, "task-00")
        .map_err(db_err)?
        .and_then(|r| secs(r.1))
        .map(|a| crate::core::clock::gaps::Gaps::system().evidence(a));
    match age {
        Some(a) if a <= cfg.conductor_fresh_within => {
            let left = cfg.conductor_fresh_within.saturating_sub(a);
            *conductor_check = Some(Instant::now() + left + Duration::from_millis(500));
            Ok(None)
        }
        other => Ok(Some(Outcome::ConductorStale { age: other })),
    }
}

/// Refreshes the task's heartbeat when it is older than `heartbeat_after` (never more
/// often than that by our own last refresh: stamps are stored to the second); when the
/// next refresh is due.
pub fn keep_heartbeat(
    cfg: &WatchConfig,
    conn: &mut Connection,
    age: Option<Duration>,
    last_refresh: &mut Option<Instant>,
) -> Result<Instant, WatchError> {
    let task = cfg.task.as_str();
    let not_before = last_refresh.map(|t| t + cfg.heartbeat_after);
    let next_beat = match age {
        Some(a) if a <= cfg.heartbeat_after => {
            Instant::now() + cfg.heartbeat_after.saturating_sub(a)
        }
        _ if not_before.is_some_and(|t| Instant::now() < t) => {
            not_before.unwrap_or_else(Instant::now)
        }
        _ => {
            store::write(conn, |tx| store::refresh_heartbeat(tx, task)).map_err(|source| {
                WatchError::Heartbeat {
                    task: cfg.task.clone(),
                    db: cfg.db.clone(),
                    source,
                }
            })?;
            *last_refresh = Some(Instant::now());
            Instant::now() + cfg.heartbeat_after
        }
    };
    Ok(not_before.map_or(next_beat, |t| next_beat.max(t)))
}

/// Why a watcher cannot start or stopped watching; each says the fix.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(
        "{} was removed while watching {task}; the watcher can no longer see its messages. Start the watcher again once the orchestration's database is back.",
        .db.display()
    )]
    DatabaseRemoved { db: PathBuf, task: TaskId },
    #[error(
        "{} was replaced by another file while watching {task}; the watcher was reading the old one. Start the watcher again to follow the new database.",
        .db.display()
    )]
    DatabaseReplaced { db: PathBuf, task: TaskId },
    #[error("cannot read {} ({source}); check it with `maestro doctor`.", .db.display())]
    Read {
        db: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "{task} is not in orchestration_tasks of {}; start the watcher after the task is claimed.",
        .db.display()
    )]
    NotClaimed { task: TaskId, db: PathBuf },
    #[error("{task} was removed from orchestration_tasks.")]
    TaskRemoved { task: TaskId },
    #[error(
        "cannot refresh {task}'s heartbeat in {} ({source}); the Conductor will see the task as stale.",
        .db.display()
    )]
    Heartbeat {
        task: TaskId,
        db: PathBuf,
        source: rusqlite::Error,
    },
    #[error(transparent)]
    Place(#[from] PathError),
    #[error(transparent)]
    File(#[from] OwnFileError),
    #[error(
        "another watcher holds {} and did not stand down; stop it (its PID is in the file) and try again.",
        .path.display()
    )]
    NotStandingDown { path: PathBuf },
}

/// This process's hold on "the watcher of this kind for this task".
pub struct Claim {
    file: Option<Flock<File>>,
    pub path: PathBuf,
}

impl Claim {
    /// Lets go: the file is emptied (no watcher), unless a newer one took over.
    pub fn release(mut self, replaced: bool) {
        if let Some(mut f) = self.file.take()
            && !replaced
        {
            let _ = f.set_len(0);
            let _ = f.flush();
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(f) = &self.file {
            let _ = f.set_len(0);
        }
    }
}

/// Becomes the task's watcher of this kind: a previous one (if alive, and a maestro
/// watcher) is asked to stand down with SIGUSR1, then its lock is waited for.
pub async fn claim(
    project: &ProjectKey,
    task: &TaskId,
    mode: WatchMode,
) -> Result<Claim, WatchError> {
    let path = paths::watcher_file(project, task.as_str(), mode.as_str())?;
    let open = || crate::core::safe_fs::open_own_lock(&path);
    let mut lock = if let Ok(lock) = Flock::lock(open()?, FlockArg::LockExclusiveNonblock) {
        lock
    } else {
        let holder = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
            .filter(|pid| *pid > 1 && is_watcher(*pid));
        // Say who comes next before the old one goes, so that observers see a
        // replacement rather than an exit followed by a new watcher.
        let _ = std::fs::write(successor_file(&path), format!("{}\n", std::process::id()));
        if let Some(pid) = holder {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGUSR1,
            );
        }
        let file = open()?;
        let waited = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::task::spawn_blocking(move || Flock::lock(file, FlockArg::LockExclusive)),
        )
        .await;
        let Ok(Ok(Ok(lock))) = waited else {
            return Err(WatchError::NotStandingDown { path });
        };
        lock
    };
    let written = lock
        .set_len(0)
        .and_then(|()| lock.rewind())
        .and_then(|()| writeln!(lock, "{}", std::process::id()))
        .and_then(|()| lock.flush());
    written.map_err(OwnFileError::doing("write its PID in", &path))?;
    let _ = std::fs::remove_file(successor_file(&path));
    Ok(Claim {
        file: Some(lock),
        path,
    })
}

/// The PID of the live watcher holding the task's slot of this kind, if one does: the
/// slot's file is locked and names a maestro watcher.
pub fn holder(project: &ProjectKey, task: &TaskId, mode: WatchMode) -> Option<i32> {
    let path = paths::watcher_file(project, task.as_str(), mode.as_str()).ok()?;
    let file = crate::core::safe_fs::open_own_lock(&path).ok()?;
    if Flock::lock(file, FlockArg::LockSharedNonblock).is_ok() {
        return None;
    }
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .filter(|pid| *pid > 1 && is_watcher(*pid))
}

/// Whether `pid` is a `maestro musician watch` or `maestro conductor watch` process
/// (never signal anything else).
fn is_watcher(pid: i32) -> bool {
    procs::cmdline(pid).is_some_and(|argv| {
        argv.iter().any(|a| a == "musician" || a == "conductor")
            && argv.iter().any(|a| a == "watch")
    })
}
