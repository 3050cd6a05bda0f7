//! `maestro doctor`: checks the project, database, logs and configuration, and says
//! what to fix. It never writes: the database is opened read-only.

use std::process::ExitCode;

use rusqlite::Connection;
use serde_json::json;

use std::path::Path;

use crate::cli::error::CliError;
use crate::cli::project::Project;
use crate::core::clock::Clock;
use crate::core::domain::TaskId;
use crate::core::recovery::payload::load_orchestra_config;
use crate::core::schema;
use crate::settings::Settings;
use crate::tui::TuiConfig;

mod files;
mod loops;
use files::temp_folder;

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

/// The journal mode from the file header (bytes 18 and 19 are 2 in WAL mode), read
/// without `SQLite` so that nothing is created beside the file.
fn journal_mode(db: &Path) -> &'static str {
    use std::io::Read;
    let mut header = [0u8; 20];
    match std::fs::File::open(db).and_then(|mut f| f.read_exact(&mut header)) {
        Ok(()) if header[18] == 2 && header[19] == 2 => "wal",
        Ok(()) => "delete",
        Err(_) => "unknown",
    }
}

/// A task, its heartbeat's age in seconds, and the heartbeat as written.
type Beat = (String, Option<f64>, Option<String>);

/// Musicians in an active state whose heartbeat is older than the staleness threshold
/// (the Conductor's own query), and heartbeats that are not times.
fn stale_sessions(
    conn: &Connection,
    settings: Option<&Settings>,
    add: &mut dyn FnMut(Level, &'static str, String),
) {
    let limit = settings.map_or(540, |s| s.rules.deadlines.task_stale_after.as_secs());
    let rows: rusqlite::Result<Vec<Beat>> = conn
        .prepare(
            "SELECT task_id, (julianday('now') - julianday(last_heartbeat)) * 86400, last_heartbeat
             FROM orchestration_tasks
             WHERE state IN ('working', 'review_approved', 'review_failed', 'fix_proposed')",
        )
        .and_then(|mut st| {
            st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect()
        });
    match rows {
        Err(e) => add(
            Level::Error,
            "sessions",
            format!(
                "cannot read the heartbeats ({e}); restore comms.db from a backup or start a new orchestration"
            ),
        ),
        Ok(rows) => {
            let mut stale = Vec::new();
            for (task, age, text) in rows {
                match (age, text) {
                    (Some(a), _) if a > limit as f64 => {
                        stale.push(format!("{task} ({}s)", a as u64));
                    }
                    (None, Some(t)) => {
                        stale.push(format!("{task} (heartbeat {t:?} is not a time)"));
                    }
                    (None, None) => stale.push(format!("{task} (no heartbeat)")),
                    _ => {}
                }
            }
            if stale.is_empty() {
                add(
                    Level::Ok,
                    "sessions",
                    format!("no active Musician is older than {limit}s"),
                );
            } else {
                add(
                    Level::Warning,
                    "sessions",
                    format!(
                        "stale sessions (heartbeat older than {limit}s): {}; check their windows (maestro task headroom, then relaunch)",
                        stale.join(", ")
                    ),
                );
            }
        }
    }
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
    configuration(project, settings, &mut add);
    database(project, settings.ok(), &mut add);
    temp_folder(project, &mut add);
    event_log(project, settings.ok(), &mut add);
    definitions(project, &mut add);
    hooks(project, &mut add);
    // Claude Code's transcripts, read once for the checks below.
    let sessions = settings
        .ok()
        .and_then(|s| crate::cli::usage::read_sessions(project, &s.prices));
    if let Some(sessions) = &sessions {
        for (model, tasks) in sessions.unpriced_models() {
            add(
                Level::Warning,
                "prices",
                format!(
                    "{} (sessions of {}) has no list price, so their cost is unknown; add {}",
                    crate::core::text::printable(&model),
                    tasks.join(", "),
                    crate::core::sessions::prices::price_line(&model)
                ),
            );
        }
    }
    if let (Ok(s), Some(sessions)) = (settings, &sessions) {
        pollers(project, s, sessions, &mut add);
    }
    if let Some(loops) = loops::seen_loops(&project.root) {
        add(Level::Warning, "loops", loops);
    }
    // As the dashboard: a database this user may only read is watched, read-only.
    if project.db.is_file() && !crate::core::schema::writable(&project.db) {
        add(
            Level::Warning,
            "access",
            crate::core::schema::read_only_note(&project.db),
        );
    }
    for problem in crate::core::paths::socket_dir_problems() {
        add(Level::Warning, "sockets", problem);
    }

    report(&checks, as_json)
}

/// The configuration, as the dashboard will apply it (themes and key actions too), and
/// the orchestra's Souffleur settings.
fn configuration(
    project: &Project,
    settings: Result<&Settings, &CliError>,
    add: &mut dyn FnMut(Level, &'static str, String),
) {
    // Valid means valid as the dashboard will apply it: themes and key actions too.
    match settings
        .map(|s| TuiConfig::from_settings(String::new(), s, Clock::system(time::UtcOffset::UTC)))
    {
        Ok(Ok(_)) => add(Level::Ok, "config", "configuration is valid".into()),
        Ok(Err(e)) => add(Level::Error, "config", e.to_string()),
        Err(e) => add(Level::Error, "config", e.to_string()),
    }
    let ceiling = settings.ok().map_or(
        crate::core::recovery::payload::Permission::AcceptEdits,
        |s| s.souffleur.max_external_permission,
    );
    let orchestra = load_orchestra_config(&project.root, ceiling);
    add(
        if orchestra.warnings.is_empty() {
            Level::Ok
        } else {
            Level::Warning
        },
        "souffleur",
        if orchestra.warnings.is_empty() {
            orchestra.describe()
        } else {
            format!(
                "{}; {}",
                orchestra.describe(),
                orchestra.warnings.join("; ")
            )
        },
    );
}

/// The database: there, openable, the orchestration's schema, and what it holds.
fn database(
    project: &Project,
    settings: Option<&Settings>,
    add: &mut dyn FnMut(Level, &'static str, String),
) {
    if project.db.exists() {
        match crate::core::schema::open_without_writing(&project.db) {
            Err(e) => add(
                Level::Error,
                "database",
                format!("cannot open {}: {e}", project.db.display()),
            ),
            Ok(conn) => {
                schema_and_content(project, &conn, settings, add);
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
}

/// An open database checked: its schema, its integrity, WAL, its task ids and stale
/// sessions.
fn schema_and_content(
    project: &Project,
    conn: &Connection,
    settings: Option<&Settings>,
    add: &mut dyn FnMut(Level, &'static str, String),
) {
    if let Err(e) = schema::verify(conn, &project.db) {
        add(Level::Error, "database", e.to_string());
    } else {
        add(
            Level::Ok,
            "database",
            format!("{} has the orchestration schema", project.db.display()),
        );
        match conn.query_row("PRAGMA quick_check", [], |r| r.get::<_, String>(0)) {
            Ok(r) if r == "ok" => add(Level::Ok, "integrity", "quick_check ok".into()),
            Ok(r) => {
                // The first problem, and how many more: the full list is long.
                let problems: Vec<&str> = r.lines().filter(|l| !l.starts_with("***")).collect();
                let more = match problems.len() {
                    0 | 1 => String::new(),
                    n => format!(" and {} more problems", n - 1),
                };
                add(
                    Level::Error,
                    "integrity",
                    format!(
                        "quick_check found damage ({}{more}); restore comms.db from a backup or start a new orchestration",
                        problems.first().copied().unwrap_or("unknown")
                    ),
                );
            }
            Err(e) => add(
                Level::Error,
                "integrity",
                format!(
                    "cannot check {} ({e}); restore it from a backup or start a new orchestration",
                    project.db.display()
                ),
            ),
        }
        let mode = journal_mode(&project.db);
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
        let ids: Vec<String> = match conn
            .prepare("SELECT task_id FROM orchestration_tasks")
            .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
        {
            Ok(ids) => ids,
            Err(e) => {
                add(
                    Level::Error,
                    "task ids",
                    format!(
                        "cannot read orchestration_tasks ({e}); restore comms.db from a backup or start a new orchestration"
                    ),
                );
                Vec::new()
            }
        };
        let bad: Vec<&String> = ids.iter().filter(|i| TaskId::parse(i).is_none()).collect();
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
        stale_sessions(conn, settings, add);
    }
}

/// The checks printed (a line each, or one JSON object); the exit status is the worst.
fn report(checks: &[Check], as_json: bool) -> ExitCode {
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
        println!(
            "{}",
            crate::core::text::json_line(&json!({"status": word(worst), "checks": list}))
        );
    } else {
        for c in checks {
            println!("{:<8} {:<9} {}", word(c.level), c.name, c.detail);
        }
    }
    ExitCode::from(match worst {
        Level::Ok => 0,
        Level::Warning => 1,
        Level::Error => 2,
    })
}

/// The pipeline definitions, and which of them wait for the operator's trust.
/// LLM pollers still launched where maestro does their work: an LLM Sentinel beside
/// maestro's Sentinel reporting to the database (every anomaly reaches the Conductor
/// twice), a Musician's LLM watchers where `maestro musician watch` could run.
fn pollers(
    project: &Project,
    settings: &Settings,
    sessions: &crate::cli::usage::ReadSessions,
    add: &mut dyn FnMut(Level, &'static str, String),
) {
    let lately = std::time::Duration::from_secs(15 * 60);
    let key = crate::core::paths::ProjectKey::of(&project.root);
    // A poller the guard has already stopped is no longer one to warn about.
    let stopped = |session: &str, agent: &str| {
        crate::core::hooks::guard::ledger::Ledger::of(&key, session)
            .is_some_and(|l| l.stopped(agent).is_some())
    };
    let running: Vec<_> = sessions
        .running_pollers(lately)
        .into_iter()
        .filter(|p| !stopped(&p.session_id, &p.agent))
        .collect();
    if running.is_empty() {
        return;
    }
    let reports_to_db = settings.db_writes.report_to_db || maestro_reports_in(&project.db);
    for p in &running {
        let who = format!(
            "session {} ({}) runs {} (agent {})",
            crate::core::text::printable(&p.session_id),
            crate::core::text::printable(&p.task_id),
            p.role,
            crate::core::text::printable(&p.agent)
        );
        match p.role.as_str() {
            "sentinel" if reports_to_db => add(
                Level::Warning,
                "pollers",
                format!(
                    "{who}, an LLM Sentinel, while maestro's Sentinel reports to the database: every anomaly reaches the Conductor twice. `maestro hooks install --replace-pollers` refuses its launch (docs/orchestration.md, \"Switching the LLM pollers off\")."
                ),
            ),
            "musician-watcher" | "musician-pause-watcher" => add(
                Level::Warning,
                "pollers",
                format!(
                    "{who}, an LLM watcher: `maestro musician watch {}` does its work without an LLM, and `maestro hooks install --replace-pollers` names it to the session instead (docs/orchestration.md, \"Switching the LLM pollers off\").",
                    crate::core::text::printable(&p.task_id)
                ),
            ),
            _ => add(
                Level::Warning,
                "pollers",
                format!(
                    "{who}, an LLM poller maestro can replace: `maestro hooks install --replace-pollers` (docs/orchestration.md, \"Switching the LLM pollers off\")."
                ),
            ),
        }
    }
}

/// Whether maestro's Sentinel has written reports to this database.
fn maestro_reports_in(db: &Path) -> bool {
    crate::core::schema::open_read_only(db)
        .ok()
        .and_then(|(conn, _)| {
            conn.query_row(
                "SELECT count(*) FROM orchestration_messages WHERE from_session = 'sentinel'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .ok()
        })
        .is_some_and(|n| n > 0)
}

fn definitions(project: &Project, add: &mut dyn FnMut(Level, &'static str, String)) {
    use crate::core::pipeline::files::read_definition_bytes;
    use crate::core::pipeline::trust::{TrustStore, content_hash};
    let dir = crate::core::paths::definitions_dir(&project.root);
    let names = crate::cli::sentinel::folder_names(&dir);
    if names.is_empty() {
        return;
    }
    let store = TrustStore::load(&crate::core::paths::ProjectKey::of(&project.root));
    let untrusted: Vec<&str> = names
        .iter()
        .filter(|(name, path)| {
            !read_definition_bytes(path).is_ok_and(|b| store.is_trusted(name, &content_hash(&b)))
        })
        .map(|(name, _)| name.as_str())
        .collect();
    if untrusted.is_empty() {
        add(
            Level::Ok,
            "pipelines",
            format!("{} definitions, all trusted", names.len()),
        );
    } else {
        add(
            Level::Warning,
            "pipelines",
            format!(
                "{} of {} definitions wait for your trust and run nothing: {}. Read each with `maestro sentinel show NAME`, then `maestro sentinel trust NAME`",
                untrusted.len(),
                names.len(),
                untrusted.join(", ")
            ),
        );
    }
}

/// Where `maestro replay` will find this project's runs, and how much is kept.
/// Whether maestro's Claude Code hooks are installed (project or user settings) and
/// whether events have come through them.
fn hooks(project: &Project, add: &mut dyn FnMut(Level, &'static str, String)) {
    use crate::core::hooks::{event::EVENTS, install, spool};
    let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
    let mut installed = Vec::new();
    for path in [
        install::settings_path(Some(&root)),
        install::settings_path(None),
    ]
    .into_iter()
    .flatten()
    {
        match install::read(&path) {
            Ok((v, _)) => {
                let events = install::installed_events(&v);
                if !events.is_empty() {
                    installed.push(format!(
                        "{} ({} of {} events)",
                        path.display(),
                        events.len(),
                        EVENTS.len()
                    ));
                }
            }
            Err(e) => add(Level::Warning, "hooks", e.to_string()),
        }
    }
    let key = crate::core::paths::ProjectKey::of(&root);
    let last = spool::spool_path(&key)
        .and_then(|p| std::fs::metadata(p).ok())
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.elapsed().ok());
    let arrived = match last {
        Some(ago) => format!(
            "the last event arrived {} ago",
            crate::core::sentinel::human_duration(ago)
        ),
        None => "no event has arrived yet".into(),
    };
    if installed.is_empty() {
        add(
            Level::Ok,
            "hooks",
            format!(
                "maestro's Claude Code hooks are not installed, so a session waiting at a permission prompt is not seen; run `maestro hooks install` to see them ({arrived})"
            ),
        );
    } else {
        add(
            Level::Ok,
            "hooks",
            format!("installed in {}; {arrived}", installed.join(", ")),
        );
    }
}

fn event_log(
    project: &Project,
    settings: Option<&Settings>,
    add: &mut dyn FnMut(Level, &'static str, String),
) {
    if settings.is_some_and(|s| s.event_log_bytes == 0) {
        add(
            Level::Ok,
            "replay",
            "recording is off ([logs] event_log_mib = 0): `maestro replay` rebuilds runs from comms.db and temp/".into(),
        );
        return;
    }
    let key = crate::core::paths::ProjectKey::of(&project.root);
    let files = match crate::core::paths::event_log(&key) {
        Ok(files) => files,
        Err(why) => {
            add(
                Level::Warning,
                "replay",
                format!("{why} Until then runs are not recorded and nothing is kept there."),
            );
            return;
        }
    };
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let kept = size(&files.current) + size(&files.previous);
    add(
        Level::Ok,
        "replay",
        if kept == 0 {
            format!(
                "no event log yet at {}: maestro records the project while it watches it",
                files.current.display()
            )
        } else {
            format!(
                "event log {} ({} KiB kept): `maestro replay` plays it",
                files.current.display(),
                kept.div_ceil(1024)
            )
        },
    );
}
