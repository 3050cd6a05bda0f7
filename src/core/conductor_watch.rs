//! The Conductor's background message-watcher without an LLM (seed `000_…`, "Relationship
//! to Background Message-Watcher"): waits, event-driven, for a Musician entering a state
//! the Conductor handles (`needs_review`, `error` with its reason, `complete`, `exited`)
//! or a message addressed to the Conductor (`task_id = 'task-00'`: a Musician's question,
//! a Sentinel report), keeping `task-00`'s heartbeat fresh meanwhile; then returns every
//! such event at once, so the Conductor handles them and relaunches its watcher.
//!
//! Each event is told once across watchers: what was told is kept in `<watchers
//! dir>/task-00.seen` (the states as last told, the last message id told), so a
//! relaunched watcher starts where the last one stopped and misses nothing in between.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, params};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::core::domain::{CONDUCTOR_ID, SOUFFLEUR_ID};
use crate::core::event::MessageRow;
use crate::core::musician_watch::{WatchConfig, WatchError, keep_heartbeat};
use crate::core::sources::db::{RECHECKS, message_row, watch_database};

/// Musician states the Conductor acts on.
pub const HANDLED: [&str; 4] = ["needs_review", "error", "complete", "exited"];

/// One thing the Conductor's watcher reports.
#[derive(Debug, Clone, PartialEq)]
pub enum ConductorEvent {
    /// A Musician entered a state the Conductor handles; `reason` is its `last_error`.
    State {
        task_id: String,
        state: String,
        prev_state: Option<String>,
        reason: Option<String>,
    },
    /// A message addressed to the Conductor.
    Message(MessageRow),
}

/// Why the watcher stopped waiting.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Events(Vec<ConductorEvent>),
    Replaced,
    Stopped,
}

/// What the watchers have told so far (kept between them).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Seen {
    /// Each Musician's state as last told (or as it was when watching began).
    pub states: BTreeMap<String, String>,
    /// The last message to the Conductor told.
    pub message_id: i64,
}

/// Where the told record lives.
pub fn seen_path(watchers_dir: &Path) -> PathBuf {
    watchers_dir.join(format!("{CONDUCTOR_ID}.seen"))
}

/// The record, when one is there and readable (a damaged one counts as none).
pub fn read_seen(path: &Path) -> Option<Seen> {
    crate::core::safe_fs::read_regular(path, 4 * 1024 * 1024)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

/// The lock held while a record is read, told and kept (by a watcher and by the hook that
/// hands reports to a working Conductor): one of them tells each message.
pub struct SeenLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl SeenLock {
    /// Takes the lock; `wait: false` gives up at once when another holds it.
    pub fn take(seen: &Path, wait: bool) -> Option<Self> {
        use nix::fcntl::{Flock, FlockArg};
        let file = crate::core::safe_fs::open_own_lock(&seen.with_extension("lock")).ok()?;
        let arg = if wait {
            FlockArg::LockExclusive
        } else {
            FlockArg::LockExclusiveNonblock
        };
        Flock::lock(file, arg).ok().map(|l| Self { _lock: l })
    }
}

/// Messages to the Conductor not told yet, handed to a Conductor busy with tool calls
/// (the `PostToolUse` hook's `additionalContext`): the text, with the record advanced,
/// or `None` (nothing new, the record busy, the database unreadable). A first look
/// with no record starts one (nothing before it is handed over).
pub fn hand_over(db: &Path, seen_path: &Path) -> Option<String> {
    let _lock = SeenLock::take(seen_path, false)?;
    let (conn, _) = crate::core::schema::open_read_only(db).ok()?;
    let _ = conn.busy_timeout(Duration::from_millis(50));
    let Some(mut seen) = read_seen(seen_path) else {
        let _ = write_seen(seen_path, &baseline(&conn).ok()?);
        return None;
    };
    let mut q = conn
        .prepare(
            "SELECT id, task_id, from_session, message_type, message, timestamp
             FROM orchestration_messages WHERE task_id = ?1 AND id > ?2 ORDER BY id LIMIT 20",
        )
        .ok()?;
    let messages: Vec<MessageRow> = q
        .query_map(params![CONDUCTOR_ID, seen.message_id], message_row)
        .ok()?
        .filter_map(Result::ok)
        .collect();
    let last = messages.last()?.id;
    let mut text = String::from("maestro: new messages to the Conductor (task-00):");
    for m in &messages {
        text.push_str(&format!(
            "\n{}",
            crate::core::musician_watch::message_line(m)
        ));
    }
    seen.message_id = seen.message_id.max(last);
    write_seen(seen_path, &seen).ok()?;
    Some(text)
}

/// Keeps what was told, whole (a temporary file, then a rename).
pub fn write_seen(path: &Path, seen: &Seen) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(seen).map_err(std::io::Error::other)?;
    crate::core::safe_fs::write_atomic(path, &bytes, 0o600)
}

/// The Musicians' rows: state and last error.
fn musicians(conn: &Connection) -> rusqlite::Result<BTreeMap<String, (String, Option<String>)>> {
    let mut q = conn.prepare(
        "SELECT task_id, coalesce(state, ''), last_error FROM orchestration_tasks WHERE task_id NOT IN (?1, ?2)",
    )?;
    let rows = q.query_map(params![CONDUCTOR_ID, SOUFFLEUR_ID], |r| {
        Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?)))
    })?;
    rows.collect()
}

/// Where a first watcher starts (no record): the messages so far are history, and so are
/// the Musicians' states, but for those already waiting on the Conductor (reported now).
pub fn baseline(conn: &Connection) -> rusqlite::Result<Seen> {
    let message_id = conn.query_row(
        "SELECT coalesce(max(id), 0) FROM orchestration_messages",
        [],
        |r| r.get(0),
    )?;
    let states = musicians(conn)?
        .into_iter()
        .filter(|(_, (state, _))| !matches!(state.as_str(), "needs_review" | "error"))
        .map(|(task, (state, _))| (task, state))
        .collect();
    Ok(Seen { states, message_id })
}

/// What happened since `seen`: the events to report (in order: states by task, then
/// messages by id) and the record once they are told.
pub fn look(conn: &Connection, seen: &Seen) -> rusqlite::Result<(Vec<ConductorEvent>, Seen)> {
    let mut events = Vec::new();
    let mut next = seen.clone();
    for (task, (state, last_error)) in musicians(conn)? {
        let before = seen.states.get(&task);
        if before != Some(&state) && HANDLED.contains(&state.as_str()) {
            events.push(ConductorEvent::State {
                task_id: task.clone(),
                state: state.clone(),
                prev_state: before.cloned(),
                reason: last_error.filter(|_| state == "error"),
            });
        }
        next.states.insert(task, state);
    }
    let mut q = conn.prepare(
        "SELECT id, task_id, from_session, message_type, message, timestamp
         FROM orchestration_messages WHERE task_id = ?1 AND id > ?2 ORDER BY id LIMIT 100",
    )?;
    for m in q.query_map(params![CONDUCTOR_ID, seen.message_id], message_row)? {
        let m = m?;
        next.message_id = next.message_id.max(m.id);
        events.push(ConductorEvent::Message(m));
    }
    Ok((events, next))
}

/// Waits until there is something to report, `replaced` fires (a newer watcher) or
/// `stop` fires (a signal), refreshing task-00's heartbeat meanwhile. Returns the events
/// and the record to keep once they are printed.
pub async fn watch(
    cfg: &WatchConfig,
    conn: &mut Connection,
    seen_path: &Path,
    mut seen: Seen,
    replaced: CancellationToken,
    stop: CancellationToken,
) -> Result<(Outcome, Seen, Option<SeenLock>), WatchError> {
    let read = |source| WatchError::Read {
        db: cfg.db.clone(),
        source,
    };
    let (wake_tx, mut wake) = mpsc::unbounded_channel::<()>();
    let _watcher = watch_database(&cfg.db, move || {
        let _ = wake_tx.send(());
    })
    .ok();
    let mut recheck: Option<(usize, Instant)> = None;
    let mut last_refresh: Option<Instant> = None;
    loop {
        let (events, _) = look(conn, &seen).map_err(read)?;
        if !events.is_empty() {
            // Under the lock, with what the hook may have handed over meanwhile: the
            // caller prints and keeps the record before letting go.
            let lock = SeenLock::take(seen_path, true);
            if let Some(kept) = read_seen(seen_path) {
                seen.message_id = seen.message_id.max(kept.message_id);
            }
            let (events, next) = look(conn, &seen).map_err(read)?;
            if !events.is_empty() {
                return Ok((Outcome::Events(events), next, lock));
            }
        }
        let age: Option<f64> = conn
            .query_row(
                "SELECT (julianday('now') - julianday(last_heartbeat)) * 86400 FROM orchestration_tasks WHERE task_id = ?1",
                [CONDUCTOR_ID],
                |r| r.get(0),
            )
            .map_err(read)?;
        let age = age.map(|s| Duration::from_secs_f64(s.max(0.0)));
        let mut next_look = keep_heartbeat(cfg, conn, age, &mut last_refresh)?;
        if let Some((_, at)) = recheck {
            next_look = next_look.min(at);
        }
        tokio::select! {
            () = replaced.cancelled() => return Ok((Outcome::Replaced, seen, None)),
            () = stop.cancelled() => return Ok((Outcome::Stopped, seen, None)),
            got = wake.recv() => {
                while wake.try_recv().is_ok() {}
                if got.is_some() {
                    recheck = Some((0, Instant::now() + RECHECKS[0]));
                }
            }
            () = tokio::time::sleep_until(next_look) => {
                if let Some((i, at)) = recheck && Instant::now() >= at {
                    recheck = RECHECKS.get(i + 1).map(|d| (i + 1, Instant::now() + *d));
                }
            }
        }
    }
}
