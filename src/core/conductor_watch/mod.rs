//! The Conductor's background message-watcher without an LLM (seed `000_…`, "Relationship
//! to Background Message-Watcher"): waits, event-driven, for a Musician entering a state
//! the Conductor handles (`needs_review`, `error` with its reason, `complete`, `exited`)
//! or a message addressed to the Conductor (`task_id = 'task-00'`: a Musician's question,
//! a Sentinel report), keeping `task-00`'s heartbeat fresh meanwhile; then returns every
//! such event at once, so the Conductor handles them and relaunches its watcher.
//!
//! Also told: a working Musician whose session died ([`alive`]), and the Souffleur's row
//! going to `error` or `exited` with its own messages.
//!
//! Each event is told once across watchers: what was told is kept in `<watchers
//! dir>/task-00.seen` ([`seen`]: the states as last seen, the last message id told, the
//! sessions seen alive), so a relaunched watcher starts where the last one stopped and
//! misses nothing in between; a state passed through untold (an approval) is kept too,
//! so the next `needs_review` of the same task is told again.

pub mod alive;
pub mod seen;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, params};

pub use seen::{
    HandOver, Seen, SeenLock, ToldMessage, hand_over, read_seen, seen_path, write_seen,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::core::domain::state;
use crate::core::domain::{CONDUCTOR_ID, SOUFFLEUR_ID};
use crate::core::musician_watch::{WatchConfig, WatchError, keep_heartbeat};
use crate::core::sources::db::{RECHECKS, watch_database};

/// Musician states the Conductor acts on.
pub const HANDLED: [&str; 4] = [
    state::NEEDS_REVIEW,
    state::ERROR,
    state::COMPLETE,
    state::EXITED,
];
/// Souffleur states the Conductor acts on (it stopped watching).
pub const SOUFFLEUR_HANDLED: [&str; 2] = [state::ERROR, state::EXITED];

/// Whether `state` of `task` is one the Conductor is told of.
fn is_handled(task: &str, state: &str) -> bool {
    if task == SOUFFLEUR_ID {
        SOUFFLEUR_HANDLED.contains(&state)
    } else {
        HANDLED.contains(&state)
    }
}

/// One thing the Conductor's watcher reports.
#[derive(Debug, Clone, PartialEq)]
pub enum ConductorEvent {
    /// A Musician (or the Souffleur) entered a state the Conductor handles; `reason` is
    /// its `last_error`.
    State {
        task_id: String,
        state: String,
        prev_state: Option<String>,
        reason: Option<String>,
    },
    /// A working Musician's every session ended, none replacing it.
    SessionGone {
        task_id: String,
        state: String,
        pids: Vec<i32>,
    },
    /// A message addressed to the Conductor, or the Souffleur's own.
    Message(ToldMessage),
}

/// Why the watcher stopped waiting.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Events(Vec<ConductorEvent>),
    Replaced,
    Stopped,
}

/// One row the watcher reads: every task but the Conductor's (the Souffleur's too).
pub struct Participant {
    pub task: String,
    pub state: String,
    pub last_error: Option<String>,
    pub session_id: Option<String>,
}

fn participants(conn: &Connection) -> rusqlite::Result<Vec<Participant>> {
    let mut q = conn.prepare_cached(
        "SELECT task_id, coalesce(state, ''), last_error, session_id FROM orchestration_tasks
         WHERE task_id IS NOT ?1 AND task_id IS NOT NULL ORDER BY task_id",
    )?;
    let rows = q.query_map(params![CONDUCTOR_ID], |r| {
        Ok(Participant {
            task: r.get(0)?,
            state: r.get(1)?,
            last_error: r.get(2)?,
            session_id: r.get(3)?,
        })
    })?;
    rows.collect()
}

/// Where a first watcher starts (no record): the messages so far are history, and so are
/// the states, but for Musicians already waiting on the Conductor (reported now).
pub fn baseline(conn: &Connection) -> rusqlite::Result<Seen> {
    let message_id = conn.query_row(
        "SELECT coalesce(max(id), 0) FROM orchestration_messages",
        [],
        |r| r.get(0),
    )?;
    let states = participants(conn)?
        .into_iter()
        .filter(|p| {
            p.task == SOUFFLEUR_ID
                || !matches!(p.state.as_str(), state::NEEDS_REVIEW | state::ERROR)
        })
        .map(|p| (p.task, p.state))
        .collect();
    Ok(Seen {
        states,
        message_id,
        sessions: BTreeMap::new(),
    })
}

/// The record a watcher starts from: the one kept, else a baseline, kept at once (under
/// the lock) so that what happens after it is told by the next watcher even if this one
/// dies before it tells anything.
pub fn start_record(conn: &Connection, seen_path: &Path) -> rusqlite::Result<Seen> {
    let _lock = SeenLock::take(seen_path, true);
    if let Some(kept) = read_seen(seen_path) {
        return Ok(kept);
    }
    let seen = baseline(conn)?;
    let _ = write_seen(seen_path, &seen);
    Ok(seen)
}

/// Notes in `seen` each state not told of (an approval, a fix proposed, work resumed),
/// so the next handled state of that task is a new one; whether anything changed.
pub fn pass_untold_states(conn: &Connection, seen: &mut Seen) -> rusqlite::Result<bool> {
    let mut changed = false;
    for p in participants(conn)? {
        if !is_handled(&p.task, &p.state) && seen.states.get(&p.task) != Some(&p.state) {
            seen.states.insert(p.task, p.state);
            changed = true;
        }
    }
    Ok(changed)
}

/// What happened since `seen`: the events to report (in order: states by task, then
/// messages by id) and the record once they are told. Sessions are looked at by the
/// watcher, not here.
pub fn look(conn: &Connection, seen: &Seen) -> rusqlite::Result<(Vec<ConductorEvent>, Seen)> {
    let mut events = Vec::new();
    let mut next = seen.clone();
    for p in participants(conn)? {
        let before = seen.states.get(&p.task);
        if before != Some(&p.state) && is_handled(&p.task, &p.state) {
            events.push(ConductorEvent::State {
                task_id: p.task.clone(),
                state: p.state.clone(),
                prev_state: before.cloned(),
                reason: p.last_error.filter(|_| p.state == state::ERROR),
            });
        }
        next.states.insert(p.task, p.state);
    }
    for m in seen::messages_after(conn, seen.message_id)? {
        next.message_id = next.message_id.max(m.row.id);
        events.push(ConductorEvent::Message(m));
    }
    Ok((events, next))
}

/// What one watcher watches with: the database's settings, how to find the Musicians'
/// sessions (`None`: they are not looked at) and the record's path.
pub struct Watching<'a> {
    pub cfg: &'a WatchConfig,
    pub sessions: Option<&'a alive::FindSessions<'a>>,
    pub seen_path: &'a Path,
}

/// What a look at the Musicians' sessions found: the deaths to tell, the sessions now.
struct SessionsSeen {
    gone: Vec<ConductorEvent>,
    sessions: BTreeMap<String, Vec<crate::core::procs::ProcessId>>,
}

/// Waits until there is something to report, `replaced` fires (a newer watcher) or
/// `stop` fires (a signal, or the session that started the watcher ended), refreshing
/// task-00's heartbeat meanwhile. Returns the events and the record to keep once they
/// are printed, with the record's lock (held until then).
pub async fn watch(
    w: &Watching<'_>,
    conn: &mut Connection,
    mut seen: Seen,
    replaced: CancellationToken,
    stop: CancellationToken,
) -> Result<(Outcome, Seen, Option<SeenLock>), WatchError> {
    let cfg = w.cfg;
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
    let mut sessions_at = Some(Instant::now());
    let mut deaths = tokio::task::JoinSet::new();
    let mut waited: Vec<crate::core::procs::ProcessId> = Vec::new();
    loop {
        let looked = look_sessions(w, conn, &seen, &mut sessions_at).map_err(read)?;
        let (events, mut next) = look(conn, &seen).map_err(read)?;
        if !events.is_empty() || looked.as_ref().is_some_and(|l| !l.gone.is_empty()) {
            // Under the lock, with what the hook may have handed over meanwhile: the
            // caller prints and keeps the record before letting go.
            let lock = SeenLock::take(w.seen_path, true);
            if let Some(kept) = read_seen(w.seen_path) {
                seen.message_id = seen.message_id.max(kept.message_id);
            }
            let (mut events, mut next) = look(conn, &seen).map_err(read)?;
            if let Some(looked) = looked {
                events.extend(looked.gone);
                next.sessions = looked.sessions;
            }
            if !events.is_empty() {
                return Ok((Outcome::Events(events), next, lock));
            }
            seen = next;
            continue;
        }
        if let Some(looked) = looked {
            next.sessions = looked.sessions;
        }
        if next != seen {
            keep_passed(w.seen_path, &mut next);
            seen = next;
        }
        let alive_now = alive::watched(&seen);
        if alive_now != waited {
            deaths.abort_all();
            for p in &alive_now {
                let p = *p;
                deaths.spawn(crate::core::procs::wait_for_exit(p, alive::LOOK_EVERY));
            }
            waited = alive_now;
        }
        let mut next_look = keep_conductor_heartbeat(cfg, conn, &mut last_refresh)?;
        for at in recheck.map(|(_, at)| at).into_iter().chain(sessions_at) {
            next_look = next_look.min(at);
        }
        tokio::select! {
            () = replaced.cancelled() => return Ok((Outcome::Replaced, seen, None)),
            () = stop.cancelled() => return Ok((Outcome::Stopped, seen, None)),
            Some(_) = deaths.join_next(), if !deaths.is_empty() => {
                // A session seen alive ended: looked at again after a moment (a
                // successor starting, a relaunch taking its lock).
                waited.clear();
                deaths.abort_all();
                sessions_at = Some(Instant::now() + SESSION_END_GRACE);
            }
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

/// The Musicians' sessions looked at when due (`sessions_at`, then moved on).
fn look_sessions(
    w: &Watching<'_>,
    conn: &Connection,
    seen: &Seen,
    sessions_at: &mut Option<Instant>,
) -> rusqlite::Result<Option<SessionsSeen>> {
    let due = sessions_at.is_some_and(|at| Instant::now() >= at);
    let Some(find) = w.sessions.filter(|_| due) else {
        return Ok(None);
    };
    let mut next = seen.clone();
    let gone = alive::look(find, &participants(conn)?, &mut next);
    *sessions_at = Some(Instant::now() + alive::LOOK_EVERY);
    Ok(Some(SessionsSeen {
        gone,
        sessions: next.sessions,
    }))
}

/// States passed through untold and sessions seen, kept now (with what the hook handed
/// over meanwhile), so a watcher that follows (or the next `needs_review`) reads them.
fn keep_passed(seen_path: &Path, next: &mut Seen) {
    let _lock = SeenLock::take(seen_path, true);
    if let Some(kept) = read_seen(seen_path) {
        next.message_id = next.message_id.max(kept.message_id);
    }
    let _ = write_seen(seen_path, next);
}

/// How long after a session ends its task's sessions are looked at again.
const SESSION_END_GRACE: Duration = Duration::from_secs(1);

/// Refreshes task-00's heartbeat when due; when to look again for it.
fn keep_conductor_heartbeat(
    cfg: &WatchConfig,
    conn: &mut Connection,
    last_refresh: &mut Option<Instant>,
) -> Result<Instant, WatchError> {
    let age: Option<f64> = conn
        .query_row(
            "SELECT (julianday('now') - julianday(last_heartbeat)) * 86400 FROM orchestration_tasks WHERE task_id = ?1",
            [CONDUCTOR_ID],
            |r| r.get(0),
        )
        .optional()
        .map_err(|source| WatchError::Read {
            db: cfg.db.clone(),
            source,
        })?
        .flatten();
    let age = age.map(|s| Duration::from_secs_f64(s.max(0.0)));
    keep_heartbeat(cfg, conn, age, last_refresh)
}
