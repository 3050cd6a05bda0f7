//! The orchestration schema of docs/orchestration.md §1: creating it (`maestro init`), checking an
//! existing database against it, and reading what its CHECK constraints admit.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use crate::core::error::CoreError;

/// The message types of the table's CHECK list (newer databases also allow
/// `warning`, see docs/orchestration.md).
pub const MESSAGE_TYPES: [&str; 13] = [
    "review_request",
    "error",
    "context_warning",
    "completion",
    "emergency",
    "handoff",
    "approval",
    "fix_proposal",
    "rejection",
    "instruction",
    "claim_blocked",
    "resumption",
    "system",
];

/// The DDL `maestro init` runs, exactly the orchestration's schema. No participant rows:
/// a Conductor or Souffleur exists once it writes its own (a fresh heartbeat written here
/// would read as a live Conductor, and later as a dead one).
pub const SCHEMA_SQL: &str = "
CREATE TABLE orchestration_tasks (
    task_id TEXT PRIMARY KEY,
    state TEXT NOT NULL CHECK (state IN (
        'watching','reviewing','exit_requested','complete',
        'working','needs_review','review_approved','review_failed',
        'error','fix_proposed','exited','context_recovery','confirmed')),
    instruction_path TEXT, session_id TEXT, worked_by TEXT,
    started_at TEXT, completed_at TEXT, report_path TEXT,
    retry_count INTEGER DEFAULT 0,
    last_heartbeat TEXT,
    last_error TEXT);

CREATE TABLE orchestration_messages (
    id INTEGER PRIMARY KEY,
    task_id TEXT, from_session TEXT, message TEXT,
    message_type TEXT CHECK (message_type IN (
        'review_request','error','context_warning','completion','emergency',
        'handoff','approval','fix_proposal','rejection','instruction',
        'claim_blocked','resumption','system')),
    timestamp TEXT DEFAULT CURRENT_TIMESTAMP);

CREATE TABLE repetiteur_conversation (
    id INTEGER PRIMARY KEY, sender TEXT NOT NULL, message TEXT NOT NULL,
    timestamp TEXT DEFAULT CURRENT_TIMESTAMP);

CREATE INDEX idx_messages_task_time ON orchestration_messages(task_id, timestamp);
CREATE INDEX idx_messages_type ON orchestration_messages(message_type);
CREATE INDEX idx_tasks_state_heartbeat ON orchestration_tasks(state, last_heartbeat);
";

const REQUIRED: &[(&str, &[&str])] = &[
    (
        "orchestration_tasks",
        &[
            "task_id",
            "state",
            "instruction_path",
            "session_id",
            "worked_by",
            "started_at",
            "completed_at",
            "report_path",
            "retry_count",
            "last_heartbeat",
            "last_error",
        ],
    ),
    (
        "orchestration_messages",
        &[
            "id",
            "task_id",
            "from_session",
            "message",
            "message_type",
            "timestamp",
        ],
    ),
    (
        "repetiteur_conversation",
        &["id", "sender", "message", "timestamp"],
    ),
];

const OBSOLETE_TABLES: &[&str] = &["coordination_status", "migration_tasks", "task_messages"];

/// maestro's own table for pipeline run history (created on the first record).
pub const PIPELINE_HISTORY_DDL: &str = "CREATE TABLE IF NOT EXISTS maestro_pipeline_steps (
    id INTEGER PRIMARY KEY,
    pipeline TEXT NOT NULL,
    run_started TEXT NOT NULL,
    iteration INTEGER NOT NULL,
    step INTEGER NOT NULL,
    step_type TEXT NOT NULL,
    started TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    excerpt TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS maestro_pipeline_steps_run ON maestro_pipeline_steps (pipeline, run_started);";

const FIX: &str = "Point --db (or --project) at the orchestration's comms.db; if this one is damaged, `maestro init --replace-damaged` keeps it beside a fresh one.";

/// Creates `path` with the orchestration schema; refuses if anything exists there.
/// The file is built under a temporary name and renamed into place, so a failure never
/// leaves a half-made database behind.
pub fn init_database(path: &Path) -> Result<(), CoreError> {
    if path.exists() || path.symlink_metadata().is_ok() {
        return Err(CoreError::Refused(format!(
            "{} already exists; `maestro init` never touches an existing database. If it is damaged, `maestro init --replace-damaged` keeps it (renamed) beside a fresh one.",
            path.display()
        )));
    }
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| CoreError::io(dir, e))?;
    let tmp = dir.join(format!(
        ".{}.maestro-init-{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("comms.db"),
        std::process::id()
    ));
    let build = || -> Result<(), rusqlite::Error> {
        let conn = Connection::open(&tmp)?;
        conn.execute_batch(SCHEMA_SQL)?;
        // WAL lets the sessions, the MCP server and maestro read while one writes.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.close().map_err(|(_, e)| e)
    };
    if let Err(e) = build() {
        let _ = std::fs::remove_file(&tmp);
        return Err(CoreError::database(
            e,
            format!("could not create {}", path.display()),
        ));
    }
    // The WAL was checkpointed on close; only the main file moves.
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", tmp.display()));
    }
    // Link instead of rename: it fails if someone created the file meanwhile.
    let placed = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    placed.map_err(|e| CoreError::io(path, e))
}

/// A task row for the unit tests of the layers below the store (the hooks), which may
/// not reach up to it.
#[cfg(test)]
pub fn seed_task(path: &Path, task: &str, state: &str) -> rusqlite::Result<()> {
    Connection::open(path)?
        .execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, ?2, datetime('now'))",
            [task, state],
        )
        .map(drop)
}

/// Renames a damaged database (and its `-wal`/`-shm`) to `<name>.damaged-<UTC time>`
/// beside it, keeping everything it held, so `init` can start a fresh one. A database
/// that reads well (the schema and `quick_check`) is refused: nothing is moved.
pub fn set_aside_damaged(path: &Path) -> Result<PathBuf, CoreError> {
    let healthy = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .ok()
        .filter(|c| verify(c, path).is_ok())
        .and_then(|c| {
            c.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0))
                .ok()
        })
        .is_some_and(|r| r == "ok");
    if healthy {
        return Err(CoreError::Refused(format!(
            "{} is not damaged (its schema and integrity check are fine); nothing was replaced.",
            path.display()
        )));
    }
    let stamp = time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year][month][day]T[hour][minute][second]Z"
        ))
        .unwrap_or_default();
    let kept = PathBuf::from(format!("{}.damaged-{stamp}", path.display()));
    if kept.symlink_metadata().is_ok() {
        return Err(CoreError::Refused(format!(
            "{} already exists; try again in a second.",
            kept.display()
        )));
    }
    std::fs::rename(path, &kept).map_err(|e| CoreError::io(path, e))?;
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", path.display()));
        if side.exists() {
            let _ = std::fs::rename(&side, format!("{}{suffix}", kept.display()));
        }
    }
    Ok(kept)
}

/// Opens the database without writing anything: with no `-wal`/`-shm` beside it, as
/// immutable (so `SQLite` creates neither); otherwise read-only.
pub fn open_without_writing(db: &Path) -> rusqlite::Result<Connection> {
    let side = |suffix: &str| {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        std::path::PathBuf::from(p).exists()
    };
    if side("-wal") || side("-shm") {
        Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
    } else {
        let uri = format!(
            "file:{}?immutable=1",
            db.display()
                .to_string()
                .replace('%', "%25")
                .replace('?', "%3f")
                .replace('#', "%23")
        );
        Connection::open_with_flags(
            uri,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
        )
    }
}

/// Whether this user may write the database (the file, and its folder for the journal).
/// A project another user owns is watched read-only: actions are disabled.
pub fn writable(path: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    access(path, AccessFlags::W_OK).is_ok() && access(dir, AccessFlags::W_OK).is_ok()
}

/// What a user who may only read the project gets told wherever an action is refused.
pub fn read_only_note(path: &Path) -> String {
    format!(
        "read-only: you cannot write {}, so actions are disabled (maestro watches it all the same)",
        path.display()
    )
}

/// Opens a database this user may only read, for watching: read-only beside a live
/// writer's `-wal`/`-shm` (`SQLite` reads them without writing), else as immutable (a
/// quiet database whose folder it cannot write a `-shm` in); `immutable` says which, as
/// an immutable connection sees no later change and must be opened anew to read one.
pub fn open_read_only(path: &Path) -> Result<(Connection, bool), CoreError> {
    let side = |suffix: &str| {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        std::path::PathBuf::from(p).exists()
    };
    if side("-shm") {
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(|e| {
                let text = format!("could not open {} read-only: {e}", path.display());
                CoreError::database(e, text)
            })?;
        if conn
            .query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
            .is_ok()
            && verify(&conn, path).is_ok()
        {
            let _ = conn.busy_timeout(std::time::Duration::from_secs(2));
            return Ok((conn, false));
        }
    }
    let uri = format!(
        "file:{}?immutable=1",
        path.display()
            .to_string()
            .replace('%', "%25")
            .replace('?', "%3f")
            .replace('#', "%23")
    );
    let conn = Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(|e| {
        let text = format!("could not open {} read-only: {e}", path.display());
        CoreError::database(e, text)
    })?;
    Ok((conn, true))
}

/// Opens an existing database for maestro's use: never creates it, never writes on open.
pub fn open(path: &Path) -> Result<Connection, CoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| {
        let text = format!("could not open {}: {e}. {FIX}", path.display());
        CoreError::database(e, text)
    })?;
    // Other processes write concurrently: wait for their short transactions.
    conn.busy_timeout(std::time::Duration::from_secs(2))
        .map_err(|e| {
            let text = e.to_string();
            CoreError::database(e, text)
        })?;
    Ok(conn)
}

/// Checks the three tables and their columns; the obsolete design is a clear error.
pub fn verify(conn: &Connection, path: &Path) -> Result<(), CoreError> {
    let bad = |what: String| {
        CoreError::Schema(format!(
            "{} does not have the orchestration schema: {what}. {FIX}",
            path.display()
        ))
    };
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| match e {
            rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
                CoreError::Schema(format!(
                    "{} is not a SQLite database. {FIX}",
                    path.display()
                ))
            }
            other => {
                let text = format!("could not read {}: {other}", path.display());
                CoreError::database(other, text)
            }
        })?;
    if let Some(old) = OBSOLETE_TABLES
        .iter()
        .find(|t| tables.iter().any(|n| n == *t))
    {
        return Err(bad(format!(
            "it has the table `{old}` of an obsolete design"
        )));
    }
    for (table, columns) in REQUIRED {
        if !tables.iter().any(|n| n == table) {
            return Err(bad(format!("the table `{table}` is missing")));
        }
        let have = columns_of(conn, table).map_err(|e| {
            let text = e.to_string();
            CoreError::database(e, text)
        })?;
        if *table == "orchestration_tasks" && have.iter().any(|c| c == "status") {
            return Err(bad(
                "`orchestration_tasks` has a `status` column of an obsolete design".into(),
            ));
        }
        if let Some(missing) = columns.iter().find(|c| !have.iter().any(|h| h == *c)) {
            return Err(bad(format!("`{table}` has no column `{missing}`")));
        }
    }
    Ok(())
}

fn columns_of(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    stmt.query_map([table], |r| r.get(0))?.collect()
}

/// Whether `orchestration_messages.message_type` admits `wanted`, read from the table's
/// CHECK constraint (comments are not part of the list). No CHECK admits everything.
pub fn message_type_allowed(conn: &Connection, wanted: &str) -> rusqlite::Result<bool> {
    let sql: String = conn.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'orchestration_messages'",
        [],
        |r| r.get(0),
    )?;
    Ok(check_list(&sql, "message_type").is_none_or(|list| list.iter().any(|v| v == wanted)))
}

/// The quoted values of `<column> IN (…)` in a CREATE TABLE statement, comments removed.
pub fn check_list(create_sql: &str, column: &str) -> Option<Vec<String>> {
    let sql = strip_sql_comments(create_sql);
    let lower = sql.to_ascii_lowercase();
    let needle = format!("{column} in");
    let mut from = 0;
    while let Some(pos) = lower[from..].find(&needle) {
        let after = from + pos + needle.len();
        let rest = sql[after..].trim_start();
        if let Some(body) = rest.strip_prefix('(') {
            let end = body.find(')')?;
            return Some(quoted_values(&body[..end]));
        }
        from = after;
    }
    None
}

fn quoted_values(list: &str) -> Vec<String> {
    list.split(',')
        .filter_map(|item| {
            let item = item.trim();
            item.strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .map(|s| s.replace("''", "'"))
        })
        .collect()
}

/// Removes `-- …` and `/* … */` comments outside string literals.
fn strip_sql_comments(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\'' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('\'', _) => {
                in_string = true;
                out.push(c);
            }
            ('-', Some('-')) => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut prev = ' ';
                for n in chars.by_ref() {
                    if prev == '*' && n == '/' {
                        break;
                    }
                    prev = n;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state the schema admits is in the domain's one table of states, once, and
    /// the table holds no other: a new state is added in the two places together.
    #[test]
    fn the_schemas_states_are_the_domains_table() {
        let mut admitted = check_list(SCHEMA_SQL, "state").expect("a CHECK list");
        let mut known: Vec<String> = crate::core::domain::STATES
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .collect();
        admitted.sort();
        known.sort();
        let before = known.len();
        known.dedup();
        assert_eq!(known.len(), before, "a state written twice");
        assert_eq!(admitted, known);
    }

    const PROTOCOL_MESSAGES: &str = "CREATE TABLE orchestration_messages (
    id INTEGER PRIMARY KEY,         -- monotonically increasing: dedupe by id, never by time
    task_id TEXT, from_session TEXT, message TEXT,
    message_type TEXT CHECK (message_type IN (
        'review_request','error','context_warning','completion','emergency',
        'handoff','approval','fix_proposal','rejection','instruction',
        'claim_blocked','resumption','system')),   -- newer databases also allow 'warning'
    timestamp TEXT DEFAULT CURRENT_TIMESTAMP)";

    #[test]
    fn comments_are_not_part_of_the_check_list() {
        let list = check_list(PROTOCOL_MESSAGES, "message_type").unwrap();
        assert!(list.contains(&"system".to_owned()));
        assert!(!list.contains(&"warning".to_owned()));
        assert_eq!(list.len(), 13);
        let with = PROTOCOL_MESSAGES.replace("'system'))", "'system', /* new */ 'warning'))");
        assert!(
            check_list(&with, "message_type")
                .unwrap()
                .contains(&"warning".to_owned())
        );
        assert!(check_list("CREATE TABLE x (message_type TEXT)", "message_type").is_none());
    }

    #[test]
    fn init_creates_a_valid_database_and_refuses_an_existing_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("comms.db");
        init_database(&path).unwrap();
        let conn = open(&path).unwrap();
        verify(&conn, &path).unwrap();
        // The schema of docs/orchestration.md, word for word: `warning` is not in its list.
        assert!(!message_type_allowed(&conn, "warning").unwrap());
        assert!(message_type_allowed(&conn, "system").unwrap());
        // Nobody's heartbeat before they start.
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM orchestration_tasks", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 0);
        let indexes: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE type='index' AND name IN ('idx_messages_task_time','idx_messages_type','idx_tasks_state_heartbeat')", [], |r| r.get(0))
            .unwrap();
        assert_eq!(indexes, 3);
        let before = std::fs::read(&path).unwrap();
        assert!(matches!(init_database(&path), Err(CoreError::Refused(_))));
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn verify_names_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE coordination_status (x)")
            .unwrap();
        let err = verify(&conn, &path).unwrap_err().to_string();
        assert!(err.contains("coordination_status"), "{err}");

        let path = dir.path().join("junk.db");
        std::fs::write(&path, b"this is not a database, just text that is long enough to matter......................................................................").unwrap();
        let conn = open(&path).unwrap();
        let err = verify(&conn, &path).unwrap_err().to_string();
        assert!(err.contains("not a SQLite database"), "{err}");
    }
}
