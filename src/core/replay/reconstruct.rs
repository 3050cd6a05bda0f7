//! A timeline rebuilt from what a run left behind, for projects maestro never recorded.
//!
//! - Messages: exact (id order, their `timestamp`).
//! - Task states: each row appears as `watching`, moves to `working` at `started_at`,
//!   follows the messages that imply a state (`review_request` → `needs_review`,
//!   `approval` → `review_approved`, `rejection` → `review_failed`, `error` → `error`,
//!   `fix_proposal` → `fix_proposed`, `completion` → `complete`), and ends as the row
//!   now reads at its `last_heartbeat`. Heartbeats between those moments are lost.
//! - Log lines: in file order, spread evenly between the file's creation and its last
//!   change (the lines carry no time). Because those moments are estimates, the rules
//!   that judge time gaps (`stalled`, stale heartbeats) are not applied; the three
//!   that judge content are.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use time::OffsetDateTime;

use crate::core::clock::parse_sqlite_utc;
use crate::core::domain::state;
use crate::core::domain::{LogKind, TaskId};
use crate::core::event::{MessageRow, TaskRow};
use crate::core::event_log::input::{Input, RecordedSettings, TaskTable};
use crate::core::event_log::timeline::{Entry, Origin, Session, Timeline};
use crate::core::sources::db::{message_row, task_row, text};

/// A threshold so far away that it never falls due: the rule is not applied.
const NOT_JUDGED: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A task row as it stands, with the columns that date its life.
struct Dated {
    row: TaskRow,
    started: Option<OffsetDateTime>,
    completed: Option<OffsetDateTime>,
}

/// Rebuilds a timeline from `db` and `temp`. `settings` are the rules to judge by.
pub fn from_files(db: &Path, temp: &Path, settings: &RecordedSettings) -> Timeline {
    let mut notes = Vec::new();
    let (rows, messages) = read_database(db, &mut notes);
    let logs = read_logs(temp, &rows, &mut notes);

    let mut timed: Vec<(OffsetDateTime, Input)> = Vec::new();
    // Messages: at their stamps; an unreadable stamp takes the one before it.
    let mut last = None;
    let mut unstamped = 0usize;
    for row in &messages {
        let at = row.timestamp.as_deref().and_then(parse_sqlite_utc);
        if at.is_none() {
            unstamped += 1;
        }
        let Some(at) = at.or(last) else { continue };
        last = Some(at);
        timed.push((
            at,
            Input::Messages {
                rows: vec![row.clone()],
            },
        ));
    }
    if unstamped > 0 {
        notes.push(format!(
            "{unstamped} messages have no readable timestamp: each is placed at the message before it"
        ));
    }
    for (at, task, kind, line) in logs {
        timed.push((
            at,
            Input::Lines {
                task: task.to_string(),
                kind: kind.suffix().to_owned(),
                lines: vec![line],
                mtime: None,
            },
        ));
    }
    // Task states last among equal moments, so the table is never ahead of the log.
    let first_seen = timed.iter().map(|(at, _)| *at).min();
    timed.extend(task_changes(&rows, &messages, first_seen));
    timed.sort_by_key(|(at, _)| *at);

    let mut table = TaskTable::default();
    let mut current: BTreeMap<String, TaskRow> = BTreeMap::new();
    let mut entries = Vec::with_capacity(timed.len());
    for (at, input) in timed {
        let input = match input {
            Input::Tasks { set, .. } => {
                for row in set {
                    current.insert(row.task_id.clone(), row);
                }
                let whole: Vec<TaskRow> = current.values().cloned().collect();
                match table.diff(&whole) {
                    Some(diff) => diff,
                    None => continue,
                }
            }
            other => other,
        };
        entries.push(Entry { at, input });
    }
    let mut settings = settings.clone();
    settings.with_database = !rows.is_empty() || !messages.is_empty();
    for ms in [
        &mut settings.stall_after_ms,
        &mut settings.task_stale_after_ms,
        &mut settings.conductor_stale_after_ms,
        &mut settings.souffleur_stale_after_ms,
    ] {
        *ms = u64::try_from(NOT_JUDGED.as_millis()).unwrap_or(u64::MAX);
    }
    if entries.is_empty() {
        notes.push("nothing to replay: no task rows, messages or log lines were found".into());
    }
    let start = entries.first().map_or(OffsetDateTime::UNIX_EPOCH, |e| e.at);
    let end = entries.last().map_or(start, |e| e.at);
    Timeline {
        origin: Origin::Files,
        sessions: vec![Session {
            settings: Some(settings),
            entries,
            start,
            end,
        }],
        notes,
    }
}

/// The state a message implies for the task it names, if any.
fn implied_state(message_type: &str) -> Option<&'static str> {
    Some(match message_type {
        "review_request" => state::NEEDS_REVIEW,
        "approval" => state::REVIEW_APPROVED,
        "rejection" => state::REVIEW_FAILED,
        "error" => state::ERROR,
        "fix_proposal" => state::FIX_PROPOSED,
        "completion" => state::COMPLETE,
        _ => return None,
    })
}

/// Every task's recoverable changes, as single-row `Tasks` inputs.
fn task_changes(
    rows: &[Dated],
    messages: &[MessageRow],
    first_seen: Option<OffsetDateTime>,
) -> Vec<(OffsetDateTime, Input)> {
    let mut out = Vec::new();
    for dated in rows {
        let id = TaskId::parse(&dated.row.task_id);
        let musician = id.as_ref().is_some_and(TaskId::is_musician);
        let heartbeat = dated
            .row
            .last_heartbeat
            .as_deref()
            .and_then(parse_sqlite_utc);
        let mut steps: Vec<(OffsetDateTime, &str)> = Vec::new();
        if musician {
            steps.extend(dated.started.map(|at| (at, state::WORKING)));
            for m in messages {
                if m.task_id.as_deref() != Some(dated.row.task_id.as_str()) {
                    continue;
                }
                let at = m.timestamp.as_deref().and_then(parse_sqlite_utc);
                let state = m.message_type.as_deref().and_then(implied_state);
                if let (Some(at), Some(state)) = (at, state) {
                    steps.push((at, state));
                }
            }
            steps.extend(dated.completed.map(|at| (at, state::COMPLETE)));
        }
        steps.sort_by_key(|(at, _)| *at);
        let appear = [first_seen, steps.first().map(|s| s.0), heartbeat]
            .into_iter()
            .flatten()
            .min();
        let Some(appear) = appear else { continue };
        let final_at = [Some(appear), steps.last().map(|s| s.0), heartbeat]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(appear);
        let at_state = |at: OffsetDateTime, state: &str| {
            let mut row = dated.row.clone();
            state.clone_into(&mut row.state);
            row.last_heartbeat = Some(sqlite_stamp(at));
            row
        };
        let mut push = |at, row| {
            out.push((
                at,
                Input::Tasks {
                    set: vec![row],
                    gone: Vec::new(),
                },
            ));
        };
        if musician {
            push(appear, at_state(appear, state::WATCHING));
        }
        for (at, state) in steps {
            push(at, at_state(at, state));
        }
        push(final_at, dated.row.clone());
    }
    out
}

fn sqlite_stamp(at: OffsetDateTime) -> String {
    let f = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    at.format(f).unwrap_or_default()
}

fn open(db: &Path) -> rusqlite::Result<Connection> {
    // Read-only, so a WAL a crashed run left is still read; immutable when even that
    // is refused (a read-only folder).
    Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).or_else(|_| {
        Connection::open_with_flags(
            format!("file:{}?immutable=1", db.display()),
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
        )
    })
}

fn read_database(db: &Path, notes: &mut Vec<String>) -> (Vec<Dated>, Vec<MessageRow>) {
    if !db.exists() {
        notes.push(format!(
            "{} is not there: task states and messages are not recovered",
            db.display()
        ));
        return (Vec::new(), Vec::new());
    }
    let read = open(db).and_then(|conn| Ok((read_tasks(&conn)?, read_messages(&conn)?)));
    match read {
        Ok(found) => found,
        Err(e) => {
            notes.push(format!(
                "{} cannot be read ({e}): task states and messages are not recovered; `maestro doctor` says more",
                db.display()
            ));
            (Vec::new(), Vec::new())
        }
    }
}

fn read_tasks(conn: &Connection) -> rusqlite::Result<Vec<Dated>> {
    let mut stmt = conn.prepare(
        "SELECT task_id, state, worked_by, session_id, last_heartbeat, retry_count, last_error,
                started_at, completed_at
         FROM orchestration_tasks ORDER BY task_id",
    )?;
    stmt.query_map([], |r| {
        Ok(Dated {
            row: task_row(r)?,
            started: text(r, 7)?.as_deref().and_then(parse_sqlite_utc),
            completed: text(r, 8)?.as_deref().and_then(parse_sqlite_utc),
        })
    })?
    .collect()
}

fn read_messages(conn: &Connection) -> rusqlite::Result<Vec<MessageRow>> {
    let mut stmt = conn.prepare(
        "SELECT id, task_id, from_session, message_type, message, timestamp
         FROM orchestration_messages ORDER BY id",
    )?;
    stmt.query_map([], message_row)?.collect()
}

/// Every complete line of every task log, with its estimated moment.
fn read_logs(
    temp: &Path,
    rows: &[Dated],
    notes: &mut Vec<String>,
) -> Vec<(OffsetDateTime, TaskId, LogKind, String)> {
    let entries = match std::fs::read_dir(temp) {
        Ok(entries) => entries,
        Err(e) => {
            notes.push(format!(
                "{} cannot be read ({e}): no log lines are recovered",
                temp.display()
            ));
            return Vec::new();
        }
    };
    let mut names: Vec<_> = entries.flatten().collect();
    names.sort_by_key(std::fs::DirEntry::file_name);
    let mut out = Vec::new();
    let mut any = false;
    for entry in names {
        let name = entry.file_name();
        let Some((task, kind)) = name.to_str().and_then(LogKind::parse_file_name) else {
            continue;
        };
        let path = entry.path();
        // Regular files only: a FIFO would block the read forever.
        let meta = match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => m,
            Ok(_) => {
                notes.push(format!(
                    "{} is not a regular file: left out",
                    path.display()
                ));
                continue;
            }
            Err(e) => {
                notes.push(format!("{} cannot be read ({e}): left out", path.display()));
                continue;
            }
        };
        let bytes = match crate::core::safe_fs::read_regular(&path, 1 << 30) {
            Ok(b) => b,
            Err(e) => {
                notes.push(format!("{} cannot be read ({e}): left out", path.display()));
                continue;
            }
        };
        let mut pieces: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        if pieces.pop().is_some_and(|tail| !tail.is_empty()) {
            notes.push(format!(
                "{} ends in a partial line: left out, as a live reader would",
                path.display()
            ));
        }
        let lines: Vec<String> = pieces
            .iter()
            .map(|p| String::from_utf8_lossy(p).trim_end_matches('\r').to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        let Some(end) = meta.modified().ok().map(OffsetDateTime::from) else {
            continue;
        };
        let started = rows
            .iter()
            .find(|d| d.row.task_id == task.as_str())
            .and_then(|d| d.started);
        let begin = meta
            .created()
            .ok()
            .map(OffsetDateTime::from)
            .or(started)
            .filter(|b| *b <= end)
            .unwrap_or(end);
        let span = end - begin;
        let n = lines.len();
        for (i, line) in lines.into_iter().enumerate() {
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let at = begin + span * ((i + 1) as f64 / n as f64);
            out.push((at, task.clone(), kind, line));
            any = true;
        }
    }
    if any {
        notes.push(
            "log lines carry no time: each file's lines are spread evenly between its creation and its last change, so `stalled` and stale heartbeats are not judged (maestro's own event log, kept from now on, makes a replay exact)".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RecordedSettings {
        RecordedSettings::default()
    }

    #[test]
    fn states_follow_the_messages_and_end_as_the_row_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("comms.db");
        let conn = Connection::open(&db).expect("db");
        conn.execute_batch(crate::core::schema::SCHEMA_SQL)
            .expect("schema");
        conn.execute_batch(
            "INSERT INTO orchestration_tasks (task_id, state, started_at, last_heartbeat)
               VALUES ('task-01', 'complete', '2026-11-22 10:00:00', '2026-11-22 10:30:00');
             INSERT INTO orchestration_messages (task_id, from_session, message_type, message, timestamp)
               VALUES ('task-01', 's1', 'review_request', 'please', '2026-11-22 10:10:00'),
                      ('task-01', 'c', 'rejection', 'no', '2026-11-22 10:15:00'),
                      ('task-01', 'x', 'instruction', 'odd', 'not a time');",
        )
        .expect("rows");
        drop(conn);
        let t = from_files(&db, &dir.path().join("temp"), &settings());
        let states: Vec<String> = t.sessions[0]
            .entries
            .iter()
            .filter_map(|e| match &e.input {
                Input::Tasks { set, .. } => set
                    .iter()
                    .find(|r| r.task_id == "task-01")
                    .map(|r| r.state.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            states,
            [
                "watching",
                "working",
                "needs_review",
                "review_failed",
                "complete"
            ]
        );
        let messages = t.sessions[0]
            .entries
            .iter()
            .filter(|e| matches!(e.input, Input::Messages { .. }))
            .count();
        assert_eq!(messages, 3, "the unstamped message is kept");
        let notes = t.notes.join("\n");
        assert!(
            notes.contains("1 messages have no readable timestamp"),
            "{notes}"
        );
        assert!(notes.contains("temp cannot be read"), "{notes}");
    }

    #[test]
    fn a_damaged_database_and_odd_logs_are_described() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("comms.db");
        std::fs::write(&db, vec![0x42; 8192]).expect("garbage");
        let temp = dir.path().join("temp");
        std::fs::create_dir(&temp).expect("temp");
        std::fs::write(
            temp.join("task-01-status"),
            "step 1 [ctx: 10%]\nstep 2 self-correction: x\nhalf",
        )
        .expect("log");
        nix::unistd::mkfifo(&temp.join("task-02-status"), nix::sys::stat::Mode::S_IRWXU)
            .expect("fifo");
        let t = from_files(&db, &temp, &settings());
        let lines = t.sessions[0]
            .entries
            .iter()
            .filter(|e| matches!(e.input, Input::Lines { .. }))
            .count();
        assert_eq!(lines, 2);
        let notes = t.notes.join("\n");
        assert!(notes.contains("comms.db cannot be read"), "{notes}");
        assert!(
            notes.contains("task-02-status is not a regular file"),
            "{notes}"
        );
        assert!(notes.contains("partial line"), "{notes}");
        assert!(notes.contains("are not judged"), "{notes}");
        let judged = t.sessions[0].settings.as_ref().expect("settings");
        assert!(judged.stall_after_ms >= u64::try_from(NOT_JUDGED.as_millis()).unwrap_or(0));
    }
}
