//! Every write maestro makes to the orchestration database goes through here: send a
//! message, move a task from one state to another, refresh a heartbeat, record a retry.
//! Each follows docs/orchestration.md §1 once for everyone: a state change refreshes
//! `last_heartbeat`, a message always names its type, and [`warning_type`] says whether
//! the table's CHECK admits `warning` (else `system`). [`write`] runs a group of them as one
//! `BEGIN IMMEDIATE` transaction, which waits for a busy database instead of failing.
//!
//! The functions take a `&Connection`, so they run alone or inside [`write`]'s
//! transaction alike. `role` is the Souffleur's async handle over the same writes.

pub mod role;

use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::core::domain::state;
use crate::core::schema;

/// How long a write waits for other writers before it gives up.
pub const WRITE_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Who a message is from, as `from_session` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Author<'a> {
    /// The human at maestro. Written as the Conductor (`task-00`), because the
    /// Musicians' documented queries read only the Conductor's messages; the text
    /// says it came from the operator.
    Operator,
    Souffleur,
    Sentinel,
    /// Any session by its id (the demo plays the sessions).
    Session(&'a str),
}

/// The mark an operator's message text starts with.
pub const OPERATOR_MARK: &str = "[operator via maestro] ";

impl<'a> Author<'a> {
    fn session(self) -> &'a str {
        match self {
            Self::Operator => "task-00",
            Self::Souffleur => "souffleur",
            Self::Sentinel => "sentinel",
            Self::Session(s) => s,
        }
    }
}

/// Why the orchestration's database cannot be opened for a write.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("there is no database at {}; pass --project or --db.", .db.display())]
    NoDatabase { db: std::path::PathBuf },
    #[error("{note}. Ask the project's owner, or run this as the user who owns it.")]
    ReadOnly { note: String },
    #[error(transparent)]
    Core(#[from] crate::core::error::CoreError),
}

/// Opens an existing database and checks its schema, for a command that acts on it:
/// a missing file or a foreign schema is an error naming the fix.
pub fn open_existing(db: &std::path::Path) -> Result<Connection, OpenError> {
    if !db.exists() {
        return Err(OpenError::NoDatabase {
            db: db.to_path_buf(),
        });
    }
    if !schema::writable(db) {
        return Err(OpenError::ReadOnly {
            note: schema::read_only_note(db),
        });
    }
    let conn = schema::open(db)?;
    schema::verify(&conn, db)?;
    Ok(conn)
}

/// Runs `f` in one `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so
/// a busy database is waited for (`SQLite` does not call the busy handler when a deferred
/// read upgrades to a write) and nothing is half-written if any step fails.
pub fn write<T>(
    conn: &mut Connection,
    f: impl FnOnce(&Transaction<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.busy_timeout(WRITE_BUSY_TIMEOUT)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let value = f(&tx)?;
    tx.commit()?;
    Ok(value)
}

/// `warning` where the table's CHECK admits it, else `system` (docs/orchestration.md §1).
pub fn warning_type(conn: &Connection) -> &'static str {
    if schema::message_type_allowed(conn, "warning").unwrap_or(false) {
        "warning"
    } else {
        "system"
    }
}

/// Inserts a message; returns its id. `kind` is written as given: for a warning, pass
/// [`warning_type`] (read once per connection). An operator's text is marked as such.
pub fn send_message(
    conn: &Connection,
    task: &str,
    author: Author<'_>,
    kind: &str,
    text: &str,
) -> rusqlite::Result<i64> {
    let text = if author == Author::Operator && !text.starts_with(OPERATOR_MARK) {
        format!("{OPERATOR_MARK}{text}")
    } else {
        text.to_owned()
    };
    conn.execute(
        "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES (?1, ?2, ?3, ?4)",
        params![task, author.session(), text, kind],
    )?;
    Ok(conn.last_insert_rowid())
}

/// Sets a task's state and refreshes its heartbeat; false when there is no such row.
pub fn set_state(conn: &Connection, task: &str, state: &str) -> rusqlite::Result<bool> {
    conn.execute(
        "UPDATE orchestration_tasks SET state = ?2, last_heartbeat = datetime('now') WHERE task_id = ?1",
        params![task, state],
    )
    .map(|n| n > 0)
}

/// What [`move_task`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moved {
    Done {
        from: String,
    },
    NoSuchTask,
    /// The task is in another state; nothing changed.
    WrongState(String),
}

/// Moves a task to `to` if it is in one of `from`, refreshing its heartbeat.
pub fn move_task(
    conn: &Connection,
    task: &str,
    from: &[&str],
    to: &str,
) -> rusqlite::Result<Moved> {
    let Some(state) = task_state(conn, task)? else {
        return Ok(Moved::NoSuchTask);
    };
    if !from.contains(&state.as_str()) {
        return Ok(Moved::WrongState(state));
    }
    set_state(conn, task, to)?;
    Ok(Moved::Done { from: state })
}

/// A task's state, if the row exists.
pub fn task_state(conn: &Connection, task: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT state FROM orchestration_tasks WHERE task_id = ?1",
        [task],
        |r| r.get::<_, Option<String>>(0),
    )
    .optional()
    .map(|s| s.map(Option::unwrap_or_default))
}

/// Refreshes a task's heartbeat; false when there is no such row.
pub fn refresh_heartbeat(conn: &Connection, task: &str) -> rusqlite::Result<bool> {
    conn.execute(
        "UPDATE orchestration_tasks SET last_heartbeat = datetime('now') WHERE task_id = ?1",
        [task],
    )
    .map(|n| n > 0)
}

/// Refreshes the heartbeat of every task that is not terminal, except `silent` ones.
pub fn refresh_live_heartbeats(conn: &Connection, silent: &[String]) -> rusqlite::Result<()> {
    let silent = serde_json::to_string(silent).unwrap_or_else(|_| "[]".into());
    conn.execute(
        "UPDATE orchestration_tasks SET last_heartbeat = datetime('now')
         WHERE state NOT IN ('complete', 'exited') AND task_id NOT IN (SELECT value FROM json_each(?1))",
        [silent],
    )
    .map(drop)
}

/// Counts one more retry of a task.
pub fn record_retry(conn: &Connection, task: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE orchestration_tasks SET retry_count = coalesce(retry_count, 0) + 1 WHERE task_id = ?1",
        [task],
    )
    .map(drop)
}

/// Creates a task row in `state`, or moves an existing one there (with its heartbeat).
/// `working` stamps `started_at` the first time, `complete` stamps `completed_at`.
pub fn put_task(conn: &Connection, task: &str, state: &str) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, ?2, datetime('now'))
         ON CONFLICT(task_id) DO UPDATE SET state = excluded.state, last_heartbeat = datetime('now')",
        params![task, state],
    )?;
    match state {
        state::WORKING => conn.execute(
            "UPDATE orchestration_tasks SET started_at = coalesce(started_at, datetime('now')) WHERE task_id = ?1",
            [task],
        )?,
        state::COMPLETE => conn.execute(
            "UPDATE orchestration_tasks SET completed_at = datetime('now') WHERE task_id = ?1",
            [task],
        )?,
        _ => 0,
    };
    Ok(())
}

/// Records a task's Claude Code session id, unless one is recorded already.
pub fn set_session_id_once(conn: &Connection, task: &str, session: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE orchestration_tasks SET session_id = ?1 WHERE task_id = ?2 AND session_id IS NULL",
        [session, task],
    )?;
    Ok(())
}

/// Records which session works a task (`musician-task-03-S2`).
pub fn set_worked_by(conn: &Connection, task: &str, who: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE orchestration_tasks SET worked_by = ?2 WHERE task_id = ?1",
        params![task, who],
    )
    .map(drop)
}

/// The task's heartbeat as written.
pub fn heartbeat(conn: &Connection, task: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT last_heartbeat FROM orchestration_tasks WHERE task_id = ?1",
        [task],
        |row| row.get(0),
    )
}

/// Records a task's last error (`context_exhaustion_warning`, …).
pub fn set_last_error(conn: &Connection, task: &str, error: &str) -> rusqlite::Result<()> {
    conn.execute(
        "UPDATE orchestration_tasks SET last_error = ?2 WHERE task_id = ?1",
        params![task, error],
    )
    .map(drop)
}

/// The most steps one run keeps in the history (its latest).
pub const STEPS_PER_RUN: i64 = 1000;

/// Adds a pipeline step to the run history, creating maestro's own table the first
/// time (a `maestro_` table: the orchestration's three are never changed).
pub fn record_pipeline_step(
    conn: &Connection,
    step: &crate::core::event::StepRecord,
    keep_runs: usize,
) -> rusqlite::Result<()> {
    conn.execute_batch(schema::PIPELINE_HISTORY_DDL)?;
    conn.execute(
        "INSERT INTO maestro_pipeline_steps (pipeline, run_started, iteration, step, step_type, started, duration_ms, outcome, excerpt)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            step.pipeline,
            step.run_started,
            step.iteration as i64,
            step.step as i64,
            step.step_type,
            step.started,
            step.duration_ms as i64,
            step.outcome,
            step.excerpt
        ],
    )?;
    // Retention: the first step of a new run drops the runs past the newest
    // `keep_runs`, and a run keeps at most STEPS_PER_RUN steps (a long loop keeps its
    // latest ones), so the table stays bounded whatever a definition does.
    if step.iteration <= 1 && step.step == 0 {
        conn.execute(
            "DELETE FROM maestro_pipeline_steps WHERE pipeline = ?1 AND run_started < (
                 SELECT run_started FROM (SELECT DISTINCT run_started FROM maestro_pipeline_steps
                     WHERE pipeline = ?1 ORDER BY run_started DESC LIMIT 1 OFFSET ?2))",
            params![step.pipeline, keep_runs.saturating_sub(1) as i64],
        )?;
    }
    if conn.last_insert_rowid() % 100 == 0 {
        conn.execute(
            "DELETE FROM maestro_pipeline_steps WHERE pipeline = ?1 AND run_started = ?2 AND id <= (
                 SELECT id FROM maestro_pipeline_steps WHERE pipeline = ?1 AND run_started = ?2
                 ORDER BY id DESC LIMIT 1 OFFSET ?3)",
            params![step.pipeline, step.run_started, STEPS_PER_RUN],
        )?;
    }
    Ok(())
}

/// The run history of one pipeline, newest run first, its steps in order; at most
/// `runs` runs. Empty when the table does not exist yet.
/// What the run history says of one pipeline: the runs it keeps, the newest one's
/// start, and their mean length (the sum of a run's step times), as the seed's stored
/// entity counts `runCount`, `lastRunAt`, `averageDurationMs`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFigures {
    pub run_count: u64,
    pub last_run_at: Option<String>,
    pub average_duration_ms: Option<f64>,
}

/// [`RunFigures`] of every pipeline the history holds (none when it was never written).
pub fn pipeline_figures(
    conn: &Connection,
) -> rusqlite::Result<std::collections::BTreeMap<String, RunFigures>> {
    let exists: bool = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'maestro_pipeline_steps'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if !exists {
        return Ok(std::collections::BTreeMap::new());
    }
    let mut stmt = conn.prepare(
        "SELECT pipeline, count(*), max(run_started), avg(total) FROM (
             SELECT pipeline, run_started, sum(duration_ms) AS total
             FROM maestro_pipeline_steps GROUP BY pipeline, run_started)
         GROUP BY pipeline",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            RunFigures {
                run_count: r.get::<_, i64>(1)?.max(0) as u64,
                last_run_at: r.get(2)?,
                average_duration_ms: r.get(3)?,
            },
        ))
    })?;
    rows.collect()
}

pub fn pipeline_history(
    conn: &Connection,
    pipeline: &str,
    runs: usize,
) -> rusqlite::Result<Vec<crate::core::event::StepRecord>> {
    let exists: bool = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'maestro_pipeline_steps'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    if !exists {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare(
        "SELECT pipeline, run_started, iteration, step, step_type, started, duration_ms, outcome, excerpt
         FROM maestro_pipeline_steps
         WHERE pipeline = ?1 AND run_started IN (
             SELECT DISTINCT run_started FROM maestro_pipeline_steps WHERE pipeline = ?1
             ORDER BY run_started DESC LIMIT ?2)
         ORDER BY run_started DESC, id",
    )?;
    stmt.query_map(params![pipeline, runs as i64], |r| {
        Ok(crate::core::event::StepRecord {
            pipeline: r.get(0)?,
            run_started: r.get(1)?,
            iteration: r.get::<_, i64>(2)?.max(0) as u64,
            step: r.get::<_, i64>(3)?.max(0) as u64,
            step_type: r.get(4)?,
            started: r.get(5)?,
            duration_ms: r.get::<_, i64>(6)?.max(0) as u64,
            outcome: r.get(7)?,
            excerpt: r.get(8)?,
        })
    })?
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("comms.db");
        schema::init_database(&path).expect("init");
        let conn = schema::open(&path).expect("open");
        (dir, conn)
    }

    #[test]
    fn the_run_history_keeps_the_newest_runs_and_a_bounded_run() {
        let (_dir, conn) = db();
        let step = |run: usize, iteration: u64| crate::core::event::StepRecord {
            pipeline: "loop".into(),
            run_started: format!("2026-01-01 00:00:{run:02}.000"),
            iteration,
            step: 0,
            step_type: "command".into(),
            started: String::new(),
            duration_ms: 1,
            outcome: "exit 0".into(),
            excerpt: String::new(),
        };
        for run in 0..30 {
            record_pipeline_step(&conn, &step(run, 1), 10).expect("insert");
        }
        let runs: i64 = conn
            .query_row(
                "SELECT count(DISTINCT run_started) FROM maestro_pipeline_steps",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert_eq!(runs, 10);
        // One endless run keeps its latest steps only.
        for i in 2..3000 {
            record_pipeline_step(&conn, &step(59, i), 10).expect("insert");
        }
        let steps: i64 = conn
            .query_row(
                "SELECT count(*) FROM maestro_pipeline_steps WHERE run_started LIKE '%:59.000'",
                [],
                |r| r.get(0),
            )
            .expect("count");
        assert!(steps <= STEPS_PER_RUN + 100, "{steps}");
    }

    #[test]
    fn an_operator_message_reads_as_the_conductors_and_says_who_wrote_it() {
        let (_dir, conn) = db();
        let id = send_message(&conn, "task-03", Author::Operator, "instruction", "do it")
            .expect("insert");
        let (from, text): (String, String) = conn
            .query_row(
                "SELECT from_session, message FROM orchestration_messages WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("row");
        assert_eq!(from, "task-00");
        assert_eq!(text, format!("{OPERATOR_MARK}do it"));
    }

    #[test]
    fn a_move_from_the_wrong_state_changes_nothing() {
        let (_dir, mut conn) = db();
        put_task(&conn, "task-03", "working").expect("put");
        let moved = write(&mut conn, |tx| {
            move_task(tx, "task-03", &["needs_review"], "review_approved")
        })
        .expect("write");
        assert_eq!(moved, Moved::WrongState("working".into()));
        assert_eq!(
            task_state(&conn, "task-03").expect("read").as_deref(),
            Some("working")
        );
        assert_eq!(
            write(&mut conn, |tx| move_task(
                tx,
                "task-99",
                &["working"],
                "error"
            ))
            .expect("w"),
            Moved::NoSuchTask
        );
    }
}
