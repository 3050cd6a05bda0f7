//! `maestro usage`: every task's Claude Code sessions with their tokens, list-price
//! cost, context and activity, read from Claude Code's own files (docs/sessions.md), like
//! `ccusage session` but by task. Reads only; works on a finished orchestration.

mod table;

use std::process::ExitCode;

use serde_json::{Value, json};

use crate::cli::error::CliError;
use crate::cli::project::Project;
use crate::core::sessions::figures::{SessionFigures, Whose};
use crate::core::sessions::find::{self, TaskFacts};
use crate::core::sessions::prices::{PriceTable, Tokens};
use crate::core::sessions::tally::Tally;
use crate::core::sessions::{ContextWindows, tally_sessions};

/// Claude Code's folder: `$CLAUDE_CONFIG_DIR`, else the demo's own when the project is a
/// kept demo (its sessions are there, never in the real `~/.claude`), else `~/.claude`.
fn claude_dir_for(project: &Project) -> Result<std::path::PathBuf, CliError> {
    let env_set = std::env::var_os("CLAUDE_CONFIG_DIR").is_some_and(|d| !d.is_empty());
    let demo = crate::cli::demo::demo_claude_dir(project);
    let is_demo = std::fs::symlink_metadata(demo.join("projects")).is_ok_and(|m| m.is_dir())
        && std::fs::symlink_metadata(&demo).is_ok_and(|m| m.is_dir());
    if !env_set && is_demo {
        return Ok(demo);
    }
    find::claude_dir().ok_or_else(|| {
        CliError::Usage("cannot find Claude Code's folder: set HOME or CLAUDE_CONFIG_DIR.".into())
    })
}

/// The sessions' figures summed: tokens, the priced cost, what is unpriced, and the LLM
/// pollers among the subagents.
struct Totals {
    tokens: Tokens,
    cost: f64,
    unpriced: usize,
    unpriced_models: std::collections::BTreeSet<String>,
    /// (count, tokens, cost: none once one is unpriced).
    pollers: (usize, u64, Option<f64>),
}

impl Default for Totals {
    fn default() -> Self {
        Self {
            tokens: Tokens::default(),
            cost: 0.0,
            unpriced: 0,
            unpriced_models: std::collections::BTreeSet::new(),
            pollers: (0, 0, Some(0.0)),
        }
    }
}

impl Totals {
    fn add(&mut self, figures: &SessionFigures) {
        self.tokens.add(&Tokens {
            input: figures.input_tokens,
            output: figures.output_tokens,
            cache_write: figures.cache_write_tokens,
            cache_read: figures.cache_read_tokens,
            cache_write_1h: 0,
        });
        if let Some(c) = figures.cost_usd {
            self.cost += c;
        } else {
            self.unpriced += 1;
            self.unpriced_models
                .extend(figures.unpriced_models.iter().cloned());
        }
        for p in &figures.pollers {
            self.pollers.0 += 1;
            self.pollers.1 += p.total_tokens;
            self.pollers.2 = self.pollers.2.zip(p.cost_usd).map(|(a, b)| a + b);
        }
    }

    /// The `total` object of `--json` (and the table's last row) for `sessions` rows.
    fn to_json(&self, sessions: usize) -> Value {
        let t = &self.tokens;
        json!({
            "sessions": sessions,
            "input_tokens": t.input,
            "output_tokens": t.output,
            "cache_write_tokens": t.cache_write,
            "cache_read_tokens": t.cache_read,
            "total_tokens": t.total(),
            // Nothing priced: unknown, never 0. Otherwise the priced part, with the
            // sessions and models left out named beside it.
            "cost_usd": (self.unpriced == 0 || self.unpriced < sessions)
                .then(|| (self.cost * 1e6).round() / 1e6),
            "sessions_without_price": self.unpriced,
            "unpriced_models": self.unpriced_models,
            // The LLM pollers among the subagents (null cost where a model is unpriced).
            "pollers": {
                "count": self.pollers.0,
                "total_tokens": self.pollers.1,
                "cost_usd": self.pollers.2.map(|c| (c * 1e6).round() / 1e6),
            },
        })
    }
}

pub fn run(
    project: &Project,
    windows: &ContextWindows,
    prices: &PriceTable,
    as_json: bool,
    wide: bool,
) -> Result<ExitCode, CliError> {
    let tasks = read_tasks(project)?;
    let claude = claude_dir_for(project)?;
    let (found, missing) = find::sessions_of(&project.root, &project.temp, &tasks, &claude);
    let mut rows = Vec::new();
    let mut totals = Totals::default();
    let now_ms = crate::core::sessions::now_ms();
    for (f, (main, agents)) in found.iter().zip(tally_all(&found, prices)) {
        let agents: Vec<_> = agents.iter().collect();
        let figures = SessionFigures::of(
            Whose {
                task_id: &f.task_id,
                session_id: &f.transcript.session_id,
                file: &f.transcript.path,
                found_by: f.rule,
            },
            &main,
            &agents,
            now_ms,
            windows,
        );
        totals.add(&figures);
        let mut row = serde_json::to_value(&figures).unwrap_or_default();
        if let Some(fields) = row.as_object_mut() {
            fields.remove("recent");
            // The name the first release of `usage` gave the tool call.
            fields.insert("last_tool".into(), json!(figures.tool));
        }
        rows.push(row);
    }
    let total = totals.to_json(rows.len());
    let missing: Vec<Value> = missing
        .iter()
        .map(|(task, why)| json!({"task_id": task, "why": why}))
        .collect();
    if as_json {
        // Escaped as the headless stream is: a transcript's text never reaches a
        // terminal as control.
        println!(
            "{}",
            crate::core::text::json_line(
                &json!({"sessions": rows, "total": total, "prices": prices.name, "missing": missing})
            )
        );
    } else {
        table::print(&rows, &total, &missing, &prices.name, table::width(wide));
        print_pollers(&rows);
    }
    Ok(ExitCode::SUCCESS)
}

/// `pollers: task-00 7f3c1a2b sentinel (agent a1b2c3): 12.3k tokens, $0.04, last 14:02`
/// under the table, one line each; nothing when no session runs one.
fn print_pollers(rows: &[Value]) {
    use crate::core::sessions::figures::{dollars, short_tokens};
    for row in rows {
        for p in row["pollers"].as_array().into_iter().flatten() {
            let sid: String = row["session_id"]
                .as_str()
                .unwrap_or("-")
                .chars()
                .take(8)
                .collect();
            println!(
                "poller: {} {sid} {} (agent {}): {} tokens, {} at list prices, last active {}",
                crate::core::text::printable(row["task_id"].as_str().unwrap_or("-")),
                p["role"].as_str().unwrap_or("-"),
                crate::core::text::printable(p["agent"].as_str().unwrap_or("?")),
                short_tokens(p["total_tokens"].as_u64().unwrap_or(0)),
                dollars(p["cost_usd"].as_f64()),
                crate::core::text::printable(p["last_activity"].as_str().unwrap_or("-")),
            );
        }
    }
}

/// A poller subagent that ran lately, for `doctor`: (task, session id, role, agent).
pub struct RunningPoller {
    pub task_id: String,
    pub session_id: String,
    pub role: String,
    pub agent: String,
}

/// The project's sessions, each read once, for checks that look at several things in
/// them (`doctor`).
pub struct ReadSessions {
    found: Vec<find::Found>,
    tallies: Vec<(Tally, Vec<Tally>)>,
}

/// Every session of the project's tasks, read once; `None` when they cannot be read.
pub fn read_sessions(project: &Project, prices: &PriceTable) -> Option<ReadSessions> {
    let (Ok(tasks), Ok(claude)) = (read_tasks(project), claude_dir_for(project)) else {
        return None;
    };
    let (found, _) = find::sessions_of(&project.root, &project.temp, &tasks, &claude);
    let tallies = tally_all(&found, prices);
    Some(ReadSessions { found, tallies })
}

impl ReadSessions {
    /// The pollers whose last line is newer than `within` (one that stopped long ago
    /// runs no longer).
    pub fn running_pollers(&self, within: std::time::Duration) -> Vec<RunningPoller> {
        let now_ms = crate::core::sessions::now_ms();
        let within_ms = i64::try_from(within.as_millis()).unwrap_or(i64::MAX);
        let recent = |at: Option<&str>| {
            at.and_then(crate::core::sessions::timestamp::epoch_ms)
                .is_some_and(|ms| now_ms - ms <= within_ms)
        };
        let mut out = Vec::new();
        for (f, (_, agents)) in self.found.iter().zip(&self.tallies) {
            let agents: Vec<_> = agents.iter().collect();
            let task = crate::core::domain::TaskId::parse(&f.task_id);
            for p in crate::core::sessions::pollers::pollers_of(&agents, task.as_ref()) {
                if recent(p.last_activity.as_deref()) {
                    out.push(RunningPoller {
                        task_id: f.task_id.clone(),
                        session_id: f.transcript.session_id.clone(),
                        role: p.role,
                        agent: p.agent.unwrap_or_default(),
                    });
                }
            }
        }
        out
    }

    /// The models without a price, each with the tasks whose sessions use it.
    pub fn unpriced_models(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut out = std::collections::BTreeMap::<String, Vec<String>>::new();
        for (f, (main, agents)) in self.found.iter().zip(&self.tallies) {
            for model in main
                .unpriced_models
                .iter()
                .chain(agents.iter().flat_map(|a| &a.unpriced_models))
            {
                let tasks = out.entry(model.clone()).or_default();
                if !tasks.contains(&f.task_id) {
                    tasks.push(f.task_id.clone());
                }
            }
        }
        out
    }
}

/// Every session found, its files read in parallel.
fn tally_all(found: &[find::Found], prices: &PriceTable) -> Vec<(Tally, Vec<Tally>)> {
    let list: Vec<(&std::path::Path, &str)> = found
        .iter()
        .map(|f| {
            (
                f.transcript.path.as_path(),
                f.transcript.session_id.as_str(),
            )
        })
        .collect();
    tally_sessions(&list, prices)
}

/// The tasks, with the session id and start the database holds for each.
fn read_tasks(project: &Project) -> Result<Vec<TaskFacts>, CliError> {
    if !project.db.is_file() {
        return Err(CliError::Runtime(format!(
            "usage is read per task, and there is no orchestration database at {}. Pass --project or --db.",
            project.db.display()
        )));
    }
    // Nothing written beside it (no `-wal`/`-shm` made by a reader), as `doctor`.
    let conn = crate::core::schema::open_without_writing(&project.db)
        .map_err(|e| CliError::Runtime(format!("cannot open {}: {e}", project.db.display())))?;
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    let read = || -> rusqlite::Result<Vec<TaskFacts>> {
        let mut stmt = conn.prepare(
            "SELECT task_id, session_id, started_at, state FROM orchestration_tasks WHERE task_id != 'souffleur' ORDER BY task_id",
        )?;
        stmt.query_map([], |r| {
            Ok(TaskFacts {
                task_id: crate::core::sources::db::text(r, 0)?.unwrap_or_default(),
                session_id: crate::core::sources::db::text(r, 1)?,
                started_at: crate::core::sources::db::text(r, 2)?,
                state: crate::core::sources::db::text(r, 3)?,
                hook_sessions: Vec::new(),
            })
        })?
        .collect()
    };
    let tasks = read().map_err(|e| {
        CliError::Runtime(format!(
            "cannot read orchestration_tasks in {}: {e}",
            project.db.display()
        ))
    })?;
    // Only ids of the task form ever become file lookups.
    Ok(tasks
        .into_iter()
        .filter(|t| crate::core::domain::TaskId::parse(&t.task_id).is_some())
        .collect())
}
