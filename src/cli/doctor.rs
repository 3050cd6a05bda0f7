//! `maestro doctor`: checks the project, database, logs and configuration, and says
//! what to fix. It never writes: the database is opened read-only.

use std::process::ExitCode;

use rusqlite::{Connection, OpenFlags};
use serde_json::json;

use crate::cli::CliError;
use crate::cli::project::Project;
use crate::core::domain::{LogKind, TaskId};
use crate::core::schema;
use crate::settings::Settings;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Ok,
    Warning,
    Error,
}

struct Check {
    level: Level,
    name: &'static str,
    detail: String,
}

/// Prints the checks and returns 0 (all ok), 1 (warnings) or 2 (errors).
pub fn run(project: &Project, settings: Result<&Settings, &CliError>, as_json: bool) -> ExitCode {
    let mut checks = Vec::new();
    let mut add = |level, name, detail: String| {
        checks.push(Check {
            level,
            name,
            detail,
        });
    };

    match settings {
        Ok(_) => add(Level::Ok, "config", "configuration is valid".into()),
        Err(e) => add(Level::Error, "config", e.to_string()),
    }
    if project.db.exists() {
        match Connection::open_with_flags(&project.db, OpenFlags::SQLITE_OPEN_READ_ONLY) {
            Err(e) => add(
                Level::Error,
                "database",
                format!("cannot open {}: {e}", project.db.display()),
            ),
            Ok(conn) => {
                if let Err(e) = schema::verify(&conn, &project.db) {
                    add(Level::Error, "database", e.to_string());
                } else {
                    add(
                        Level::Ok,
                        "database",
                        format!("{} has the orchestration schema", project.db.display()),
                    );
                    let mode: String = conn
                        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                        .unwrap_or_default();
                    if mode.eq_ignore_ascii_case("wal") {
                        add(Level::Ok, "journal", "WAL journal".into());
                    } else {
                        add(
                            Level::Warning,
                            "journal",
                            format!(
                                "journal mode is {mode:?}, not WAL: readers and writers will block each other. Run `PRAGMA journal_mode=WAL` on it once, with the orchestration stopped."
                            ),
                        );
                    }
                    let ids: Vec<String> = conn
                        .prepare("SELECT task_id FROM orchestration_tasks")
                        .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
                        .unwrap_or_default();
                    let bad: Vec<&String> =
                        ids.iter().filter(|i| TaskId::parse(i).is_none()).collect();
                    if bad.is_empty() {
                        add(
                            Level::Ok,
                            "task ids",
                            format!("{} task rows, all ids valid", ids.len()),
                        );
                    } else {
                        add(
                            Level::Warning,
                            "task ids",
                            format!(
                                "task ids {bad:?} are not of the form task-NN[-fix|-S<n>]; maestro shows them but never reads files for them"
                            ),
                        );
                    }
                }
            }
        }
    } else {
        add(
            Level::Warning,
            "database",
            format!(
                "no database at {}: temp-only mode. Create one with `maestro init`.",
                project.db.display()
            ),
        );
    }
    if project.temp.is_dir() {
        let logs = std::fs::read_dir(&project.temp).map_or(0, |d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(LogKind::parse_file_name)
                        .is_some()
                })
                .count()
        });
        add(
            Level::Ok,
            "temp",
            format!("{} holds {logs} task log files", project.temp.display()),
        );
    } else {
        add(
            Level::Warning,
            "temp",
            format!(
                "{} does not exist yet; maestro will pick it up when it appears",
                project.temp.display()
            ),
        );
    }

    let worst = checks.iter().map(|c| c.level).max().unwrap_or(Level::Ok);
    let word = |l: Level| match l {
        Level::Ok => "ok",
        Level::Warning => "warning",
        Level::Error => "error",
    };
    if as_json {
        let list: Vec<_> = checks
            .iter()
            .map(|c| json!({"check": c.name, "level": word(c.level), "detail": c.detail}))
            .collect();
        println!("{}", json!({"status": word(worst), "checks": list}));
    } else {
        for c in &checks {
            println!("{:<8} {:<9} {}", word(c.level), c.name, c.detail);
        }
    }
    ExitCode::from(match worst {
        Level::Ok => 0,
        Level::Warning => 1,
        Level::Error => 2,
    })
}
