//! The database source: one OS thread owns the rusqlite connection to `comms.db`.
//!
//! It wakes on a kernel event for the database or its `-wal`/`-journal` file (notify on
//! the database's folder), asks `SQLite` whether anything changed (`PRAGMA data_version`,
//! no table read), and only then reads the task table and the messages above the last
//! id seen. Every read is its own short autocommit statement: no read transaction is
//! held between wake-ups. The same thread performs the writes the hub asks for.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, params};
use tokio::sync::mpsc;

use crate::core::domain::{AnomalyKind, TaskId};
use crate::core::error::CoreError;
use crate::core::event::{CoreEvent, DbStatus, MessageRow, TaskRow};
use crate::core::schema;

const SOURCE: &str = "database";
/// Messages read per statement, so a huge backlog never holds one long read.
const PAGE: i64 = 500;
/// The `-wal` event arrives before the commit is visible (`SQLite` writes the frames,
/// syncs, then publishes the commit in the shared memory index, which makes no file
/// event), and one wake-up may carry the events of several commits of which only the
/// first is visible yet. So after every wake-up by a file event the database is
/// re-checked after each of these delays (a cheap `PRAGMA data_version`), until the
/// next event restarts the sequence: densely in the first two milliseconds, where a
/// commit usually becomes visible (so an event follows its commit's return within a
/// fraction of a millisecond), then further apart, since the sync can take a second
/// on a loaded machine. About two dozen checks per burst of writes, none while idle.
pub const RECHECKS: [Duration; 25] = [
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(100),
    Duration::from_micros(250),
    Duration::from_micros(250),
    Duration::from_micros(250),
    Duration::from_micros(250),
    Duration::from_millis(1),
    Duration::from_millis(2),
    Duration::from_millis(4),
    Duration::from_millis(8),
    Duration::from_millis(16),
    Duration::from_millis(32),
    Duration::from_millis(64),
    Duration::from_millis(128),
    Duration::from_millis(256),
    Duration::from_millis(512),
    Duration::from_millis(1024),
];
/// How often a missing database is looked for, besides the kernel's events.
const MISSING_RECHECK: Duration = Duration::from_millis(500);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// What the hub asks of the database.
#[derive(Debug, Clone)]
pub enum DbCmd {
    /// Record a Sentinel report as a message to the Conductor.
    InsertReport { text: String },
    /// Record a pipeline step in the run history (`maestro_pipeline_steps`).
    RecordStep(Box<crate::core::event::StepRecord>),
}

enum Input {
    FileEvent,
    Cmd(DbCmd),
    Stop,
}

/// What maestro writes to the project's database, built once from the settings
/// (`[sentinel] report_to_db`, `[pipelines] history_runs`) and handed whole to the hub
/// and the database source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbWrites {
    /// Write each anomaly as the Sentinel's report; read the reports already there, so a
    /// restart repeats none.
    pub report_to_db: bool,
    /// Runs kept per pipeline in the run history.
    pub history_runs: usize,
}

#[derive(Debug, Clone)]
pub struct DbSettings {
    pub path: PathBuf,
    /// What is written (reports, the run history's bound).
    pub writes: DbWrites,
    /// How often the file is re-checked when the kernel watcher is unavailable.
    pub reading: crate::core::sources::Reading,
}

/// The connection and what has been seen through it.
pub struct DbSource {
    conn: Connection,
    settings: DbSettings,
    /// (device, inode) of the file opened: a different one at the path means the
    /// database was replaced (a new orchestration), none means it was removed.
    identity: (u64, u64),
    data_version: Option<i64>,
    /// Opened read-only as immutable (this user cannot write the project): reopened on
    /// every wake-up, since such a connection sees no change.
    immutable: bool,
    last_message_id: i64,
    tasks: Vec<TaskRow>,
    /// The task table held more than [`MAX_TASKS`] rows, and that was said.
    said_too_many: bool,
    /// `warning` if the table's CHECK admits it, else `system`.
    report_type: &'static str,
}

/// Task rows followed (the first, by task id): a table another process fills without
/// end cannot grow this maestro without limit.
pub const MAX_TASKS: usize = 10_000;

impl DbSource {
    /// Opens and verifies the database. Nothing is written.
    pub fn open(settings: DbSettings) -> Result<Self, CoreError> {
        let identity = file_identity(&settings.path).ok_or_else(|| {
            CoreError::database_text(format!("{} does not exist", settings.path.display()))
        })?;
        let (conn, immutable) = if schema::writable(&settings.path) {
            (schema::open(&settings.path)?, false)
        } else {
            schema::open_read_only(&settings.path)?
        };
        schema::verify(&conn, &settings.path)?;
        let report_type = crate::core::store::warning_type(&conn);
        Ok(Self {
            conn,
            settings,
            identity,
            data_version: None,
            immutable,
            last_message_id: 0,
            tasks: Vec::new(),
            said_too_many: false,
            report_type,
        })
    }

    /// Reads everything once, synchronously, so the hub knows the tasks before the
    /// first log line arrives.
    pub fn initial_events(&mut self) -> Result<Vec<CoreEvent>, CoreError> {
        let mut out = Vec::new();
        if self.settings.writes.report_to_db {
            let recorded = self.recorded_reports().map_err(db_error)?;
            out.push(CoreEvent::RecordedReports(recorded));
        }
        self.refresh(true, &mut |e| out.push(e)).map_err(db_error)?;
        // The whole table, even empty: after a replacement the hub drops the old rows.
        if !out.iter().any(|e| matches!(e, CoreEvent::Tasks(_))) {
            out.push(CoreEvent::Tasks(Vec::new()));
        }
        Ok(out)
    }

    /// Follows the open database until it is removed or replaced, or `Stop` arrives.
    /// Reports wait in `pending` and are written in order; a write that fails (a full
    /// disk, a read-only file) keeps them for the next try.
    fn follow(
        &mut self,
        rx: &std_mpsc::Receiver<Input>,
        events: &mpsc::Sender<CoreEvent>,
        idle_wait: Option<Duration>,
        pending: &mut VecDeque<DbCmd>,
    ) -> Followed {
        let send = |e: CoreEvent| {
            let _ = events.blocking_send(e);
        };
        let mut retry_in: Option<Duration> = None;
        let mut write_failing = false;
        // An input that arrived during a re-check, handled first next time round.
        let mut held_back: Option<Input> = None;
        loop {
            let wait = match (retry_in, idle_wait) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let first = match held_back.take() {
                Some(input) => Some(input),
                None => match next_input(rx, wait) {
                    Ok(input) => input,
                    Err(()) => return Followed::Stop,
                },
            };
            let Some((from_file_event, force)) = self.take_inputs(first, rx, pending, &send) else {
                return Followed::Stop;
            };
            // The file at the path is still the one this connection reads?
            match file_identity(&self.settings.path) {
                None => return Followed::Gone(DbStatus::Removed),
                Some(id) if id != self.identity => {
                    return Followed::Gone(DbStatus::Replaced { tasks: 0 });
                }
                Some(_) => {}
            }
            self.write_pending(pending, &mut write_failing, &send);
            let mut emit = |e: CoreEvent| send(e);
            let mut result = self.refresh(force || retry_in.is_some(), &mut emit);
            if result.is_ok() && from_file_event {
                for delay in RECHECKS {
                    match rx.recv_timeout(delay) {
                        Ok(input) => {
                            held_back = Some(input);
                            break;
                        }
                        Err(std_mpsc::RecvTimeoutError::Disconnected) => return Followed::Stop,
                        Err(std_mpsc::RecvTimeoutError::Timeout) => {
                            result = self.refresh(false, &mut emit);
                            if result.is_err() {
                                break;
                            }
                        }
                    }
                }
            }
            retry_in = next_retry(result.err().as_ref(), write_failing, retry_in, &send);
        }
    }

    /// The inputs waiting, `first` first: whether a file event came, and whether a write
    /// was asked (the tables are then read whatever their version says); `None` for a
    /// stop, after what was asked before it is written.
    fn take_inputs(
        &mut self,
        first: Option<Input>,
        rx: &std_mpsc::Receiver<Input>,
        pending: &mut VecDeque<DbCmd>,
        send: &dyn Fn(CoreEvent),
    ) -> Option<(bool, bool)> {
        let (mut from_file_event, mut force) = (false, false);
        for input in first.into_iter().chain(rx.try_iter()) {
            match input {
                Input::Stop => {
                    let _ = self.flush(pending);
                    return None;
                }
                Input::FileEvent => from_file_event = true,
                Input::Cmd(cmd) => {
                    force = true;
                    queue_write(pending, cmd, send);
                }
            }
        }
        Some((from_file_event, force))
    }

    /// Writes what waits; a failure is said once (and its end), the records kept.
    fn write_pending(
        &self,
        pending: &mut VecDeque<DbCmd>,
        write_failing: &mut bool,
        send: &dyn Fn(CoreEvent),
    ) {
        match self.flush(pending) {
            Ok(()) => {
                if std::mem::take(write_failing) {
                    send(CoreEvent::SourceHealthy { source: SOURCE });
                }
            }
            Err(e) => {
                if !*write_failing {
                    send(CoreEvent::SourceFailed {
                        source: SOURCE,
                        task: None,
                        detail: format!(
                            "could not write {} pending record(s) (Sentinel reports, run history) to {}: {e}. They are kept and written, in order, once writing works again{}",
                            pending.len(),
                            self.settings.path.display(),
                            write_fix(&e)
                        ),
                    });
                }
                *write_failing = true;
            }
        }
    }

    /// Writes the waiting reports in order; stops at the first that fails (kept).
    fn flush(&self, pending: &mut VecDeque<DbCmd>) -> rusqlite::Result<()> {
        while let Some(cmd) = pending.front() {
            self.execute(cmd)?;
            pending.pop_front();
        }
        Ok(())
    }

    /// Reads what changed since the last call. Returns whether anything did.
    fn refresh(&mut self, force: bool, emit: &mut dyn FnMut(CoreEvent)) -> rusqlite::Result<bool> {
        let force = if self.immutable {
            // A wake-up means the file changed: read it anew.
            if let Ok((conn, immutable)) = schema::open_read_only(&self.settings.path) {
                self.conn = conn;
                self.immutable = immutable;
            }
            true
        } else {
            force
        };
        let version: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?;
        if !force && self.data_version == Some(version) {
            return Ok(false);
        }
        self.data_version = Some(version);
        let mut changed = false;
        if let Some(tasks) = self.read_tasks_if_changed()? {
            if tasks.len() == MAX_TASKS && !self.said_too_many {
                let all: i64 =
                    self.conn
                        .query_row("SELECT count(*) FROM orchestration_tasks", [], |r| r.get(0))?;
                if all > MAX_TASKS as i64 {
                    self.said_too_many = true;
                    emit(CoreEvent::SourceFailed {
                        source: SOURCE,
                        task: None,
                        detail: format!(
                            "{} holds {all} tasks; maestro follows the first {MAX_TASKS} by task id and leaves the others out",
                            self.settings.path.display()
                        ),
                    });
                }
            }
            self.tasks.clone_from(&tasks);
            emit(CoreEvent::Tasks(tasks));
            changed = true;
        }
        loop {
            let page = self.read_messages_after(self.last_message_id)?;
            let Some(last) = page.last() else { break };
            self.last_message_id = last.id;
            let full = page.len() as i64 == PAGE;
            emit(CoreEvent::Messages(page));
            changed = true;
            if !full {
                break;
            }
        }
        Ok(changed)
    }

    /// The task table, if it differs from the last one read. Rows as they were are
    /// compared in place, without building them: a commit that only adds a message
    /// costs a walk of the table, not a copy of it.
    fn read_tasks_if_changed(&self) -> rusqlite::Result<Option<Vec<TaskRow>>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT task_id, state, worked_by, session_id, last_heartbeat, retry_count, last_error
             FROM orchestration_tasks ORDER BY task_id LIMIT ?1",
        )?;
        let mut rows = stmt.query([MAX_TASKS as i64])?;
        let mut same = 0;
        while let Some(r) = rows.next()? {
            if self.tasks.get(same).is_some_and(|prev| same_row(r, prev)) {
                same += 1;
                continue;
            }
            let mut out = self.tasks[..same].to_vec();
            out.push(task_row(r)?);
            while let Some(r) = rows.next()? {
                out.push(task_row(r)?);
            }
            return Ok(Some(out));
        }
        Ok((same != self.tasks.len()).then(|| self.tasks[..same].to_vec()))
    }

    fn read_messages_after(&self, after: i64) -> rusqlite::Result<Vec<MessageRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, task_id, from_session, message_type, message, timestamp
             FROM orchestration_messages WHERE id > ?1 ORDER BY id LIMIT ?2",
        )?;
        stmt.query_map(params![after, PAGE], message_row)?.collect()
    }

    /// The Sentinel reports a previous run recorded, as dedupe keys.
    fn recorded_reports(&self) -> rusqlite::Result<Vec<(TaskId, AnomalyKind, String)>> {
        let mut stmt = self.conn.prepare(
            "SELECT message FROM orchestration_messages
             WHERE from_session = 'sentinel' AND message LIKE 'SENTINEL:%' ORDER BY id",
        )?;
        let texts: Vec<String> = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(texts.iter().filter_map(|t| parse_report(t)).collect())
    }

    fn execute(&self, cmd: &DbCmd) -> rusqlite::Result<()> {
        match cmd {
            DbCmd::InsertReport { text } => {
                crate::core::store::send_message(
                    &self.conn,
                    "task-00",
                    crate::core::store::Author::Sentinel,
                    self.report_type,
                    text,
                )?;
            }
            DbCmd::RecordStep(step) => crate::core::store::record_pipeline_step(
                &self.conn,
                step,
                self.settings.writes.history_runs,
            )?,
        }
        Ok(())
    }
}

/// How following one open database ended.
enum Followed {
    Stop,
    Gone(DbStatus),
}

/// Reports kept while they cannot be written; past this, the oldest are dropped.
const PENDING_MAX: usize = 10_000;

/// When to try again after a turn: not at all once reads and writes work (saying the
/// source is healthy again if it was not), else after a doubling back-off; a failed
/// read is said with when it is retried.
fn next_retry(
    failed: Option<&rusqlite::Error>,
    write_failing: bool,
    retry_in: Option<Duration>,
    send: &dyn Fn(CoreEvent),
) -> Option<Duration> {
    if failed.is_none() && !write_failing {
        if retry_in.is_some() {
            send(CoreEvent::SourceHealthy { source: SOURCE });
        }
        return None;
    }
    let next = retry_in.map_or(BACKOFF_MIN, |d| (d * 2).min(BACKOFF_MAX));
    if let Some(e) = failed {
        send(CoreEvent::SourceFailed {
            source: SOURCE,
            task: None,
            detail: format!("{} (retrying in {next:?})", describe(e)),
        });
    }
    Some(next)
}

fn queue_write(pending: &mut VecDeque<DbCmd>, cmd: DbCmd, send: &dyn Fn(CoreEvent)) {
    if pending.len() == PENDING_MAX {
        pending.pop_front();
        send(CoreEvent::SourceFailed {
            source: SOURCE,
            task: None,
            detail: format!(
                "{PENDING_MAX} writes (Sentinel reports, run history) are waiting; the oldest was dropped"
            ),
        });
    }
    pending.push_back(cmd);
}

/// What to do about a failed write, for the operator.
fn write_fix(e: &rusqlite::Error) -> &'static str {
    match e.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => " (free some disk space)",
        Some(ErrorCode::ReadOnly) => " (make the file and its folder writable)",
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            " (another process holds the write lock)"
        }
        _ => "",
    }
}

/// (device, inode) of the file at `path`, following a symlink; `None` when absent.
fn file_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A read failure with what to do about it.
fn describe(e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => {
            "database busy (another process holds a lock; maestro waits and retries)".into()
        }
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => format!(
            "database read failed: {e}. The file is damaged: check it with `maestro doctor`, then restore comms.db from a backup or start a new orchestration"
        ),
        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
            format!(
                "database read failed: {e}. Make comms.db and its folder readable and writable for this user"
            )
        }
        _ => format!("database read failed: {e}"),
    }
}

fn db_error(e: rusqlite::Error) -> CoreError {
    let text = describe(&e);
    CoreError::database(e, text)
}

mod rows;
mod supervisor;
/// The next input, waiting at most `wait` (`Ok(None)`: the time is up); `Err` when the
/// sending side is gone.
fn next_input(rx: &std_mpsc::Receiver<Input>, wait: Option<Duration>) -> Result<Option<Input>, ()> {
    match wait {
        Some(d) => match rx.recv_timeout(d) {
            Ok(i) => Ok(Some(i)),
            Err(std_mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(std_mpsc::RecvTimeoutError::Disconnected) => Err(()),
        },
        None => rx.recv().map(Some).map_err(|_| ()),
    }
}

#[cfg(test)]
mod tests;

use rows::same_row;
pub use rows::{message_row, parse_report, task_row, text};
pub use supervisor::{DbHandle, spawn, watch_database};
