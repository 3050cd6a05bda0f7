//! `maestro sentinel …`: pipelines from the command line. Definitions are files in
//! `.maestro/sentinels/`; step edits rewrite them atomically (checked first), and the
//! process hosting the project's pipelines is asked to take the change, or to start,
//! stop, pause and resume a run, over its Unix socket. Each command returns once the
//! host has accepted or refused.

mod files;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cli::args::{SentinelAction, StepAction};
use crate::cli::error::CliError;
use crate::cli::project::Project;
use crate::core::paths::{ProjectKey, definitions_dir};
use crate::core::pipeline::edit::{read_definition, write_definition};
use crate::core::pipeline::files::{definition_file, read_definition_bytes, valid_name};
use crate::core::pipeline::host::request;
use crate::core::pipeline::spec::{parse_definition, parse_step};
use crate::core::pipeline::trust::{TrustStore, content_hash};
use crate::core::store;
use crate::core::text::printable;

use crate::cli::error::{runtime, usage};
use CliError::{Runtime, Usage};

const NO_HOST: &str = "no maestro is running this project's pipelines; start `maestro` or `maestro --no-tui` in the project first";

pub fn run(project: &Project, action: &SentinelAction, as_json: bool) -> Result<(), CliError> {
    let dir = definitions_dir(&project.root);
    let ask = |req: Value| request(&project.root, &req);
    match action {
        SentinelAction::List => {
            let mut answer = ask(json!({"op": "list"}))
                .unwrap_or_else(|| json!({"ok": true, "pipelines": from_folder(project, &dir)}));
            with_run_figures(project, &mut answer);
            if as_json {
                println!("{}", crate::core::text::json_line(&answer));
            } else {
                for p in answer["pipelines"].as_array().into_iter().flatten() {
                    println!(
                        "{:<24} {:<8} {}",
                        printable(p["name"].as_str().unwrap_or_default()),
                        printable(p["status"].as_str().unwrap_or_default()),
                        printable(&p["steps"].to_string())
                    );
                }
            }
            Ok(())
        }
        SentinelAction::Show { name, runs: true } => {
            file_of(&dir, name)?;
            show_runs(project, name, as_json)
        }
        SentinelAction::Show { name, runs: false } => {
            let path = file_of(&dir, name)?;
            let answer = match ask(json!({"op": "show", "name": name})) {
                Some(a) if a["ok"] == true => a,
                _ => {
                    json!({"ok": true, "name": name, "status": "stopped", "definition": read(&path)?})
                }
            };
            let mut answer = answer;
            with_run_figures(project, &mut answer);
            if as_json {
                println!("{}", crate::core::text::json_line(&answer));
            } else {
                println!("{name} ({})", answer["status"].as_str().unwrap_or_default());
                println!(
                    "{}",
                    serde_json::to_string_pretty(&answer["definition"]).unwrap_or_default()
                );
            }
            Ok(())
        }
        SentinelAction::Start { name }
        | SentinelAction::Stop { name }
        | SentinelAction::Pause { name }
        | SentinelAction::Resume { name } => {
            file_of(&dir, name)?;
            let op = match action {
                SentinelAction::Start { .. } => "start",
                SentinelAction::Stop { .. } => "stop",
                SentinelAction::Pause { .. } => "pause",
                _ => "resume",
            };
            let answer =
                ask(json!({"op": op, "name": name})).ok_or_else(|| Runtime(NO_HOST.into()))?;
            finish(&answer, as_json, &format!("{name}: {op}"))
        }
        SentinelAction::Step(step) => edit(&dir, step, as_json, &ask),
        SentinelAction::Create(args) => files::create(&dir, args, as_json),
        SentinelAction::Import { path, force } => files::import(&dir, path, *force, as_json),
        SentinelAction::Export {
            name,
            output,
            force,
        } => files::export(&file_of(&dir, name)?, output.as_deref(), *force, as_json),
        SentinelAction::Trust { name, all } => {
            let names = match name {
                Some(n) if !*all => vec![n.clone()],
                _ => folder_names(&dir).into_iter().map(|(n, _)| n).collect(),
            };
            trust(project, &dir, &names, *all, as_json, &ask)
        }
        SentinelAction::Untrust { name } => {
            file_of(&dir, name)?;
            let mut store = TrustStore::load(&ProjectKey::of(&project.root));
            let was = store.untrust(name);
            store.save().map_err(runtime)?;
            let _ = ask(json!({"op": "reload", "name": name}));
            let detail = if was {
                format!("{name} is no longer trusted: it runs nothing until trusted again")
            } else {
                format!("{name} was not trusted")
            };
            finish(
                &json!({"ok": true, "name": name, "detail": detail}),
                as_json,
                &detail,
            )
        }
    }
}

/// Trusts each named definition as it is now (a valid definition only: trusting a
/// file that cannot run helps nobody), then has the host take the change. With `all`,
/// every valid one is trusted and each one left out is named with why (exit 1 says
/// that something was left out).
fn trust(
    project: &Project,
    dir: &Path,
    names: &[String],
    all: bool,
    as_json: bool,
    ask: &dyn Fn(Value) -> Option<Value>,
) -> Result<(), CliError> {
    let mut store = TrustStore::load(&ProjectKey::of(&project.root));
    let mut trusted = Vec::new();
    let mut refused: Vec<(String, String)> = Vec::new();
    for name in names {
        let checked = file_of(dir, name).and_then(|path| {
            let bytes = read_definition_bytes(&path).map_err(runtime)?;
            let def = serde_json::from_slice::<Value>(&bytes)
                .map_err(|e| format!("{} is not JSON ({e})", path.display()))
                .and_then(|raw| parse_definition(&raw, name, "").map_err(|e| e.to_string()))
                .map_err(|e| Runtime(format!("{e}; fix it before trusting it.")))?;
            Ok((bytes, def))
        });
        match checked {
            Ok((bytes, def)) => {
                let hash = content_hash(&bytes);
                store.trust(name, &hash);
                trusted.push(json!({"name": name, "sha256": hash, "steps": def.steps.len()}));
            }
            Err(e) if all => refused.push((name.clone(), e.to_string())),
            Err(e) => return Err(e),
        }
    }
    store.save().map_err(runtime)?;
    for t in &trusted {
        let _ = ask(json!({"op": "reload", "name": t["name"]}));
    }
    if as_json {
        let refused: Vec<Value> = refused
            .iter()
            .map(|(name, why)| json!({"name": name, "reason": why}))
            .collect();
        println!(
            "{}",
            crate::core::text::json_line(
                &json!({"ok": refused.is_empty(), "trusted": trusted, "refused": refused})
            )
        );
    } else if trusted.is_empty() && refused.is_empty() {
        println!(
            "no definitions in {}",
            printable(&dir.display().to_string())
        );
    } else {
        for t in &trusted {
            println!(
                "trusted {} ({} steps, sha256 {}…): its triggers may run it now",
                t["name"].as_str().unwrap_or_default(),
                t["steps"],
                &t["sha256"].as_str().unwrap_or_default()[..12]
            );
        }
        for (name, why) in &refused {
            println!("not trusted {name}: {}", printable(why));
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(Runtime(format!(
            "{} of {} definitions not trusted ({}); the others are",
            refused.len(),
            names.len(),
            refused
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

fn edit(
    dir: &Path,
    step: &StepAction,
    as_json: bool,
    ask: &dyn Fn(Value) -> Option<Value>,
) -> Result<(), CliError> {
    let name = match step {
        StepAction::List { name }
        | StepAction::Add { name, .. }
        | StepAction::Update { name, .. }
        | StepAction::Remove { name, .. } => name,
    };
    let path = file_of(dir, name)?;
    let mut def = read(&path)?;
    let steps = def
        .get_mut("steps")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| {
            Runtime(format!(
                "{}: `steps` is not a list; fix the file first.",
                path.display()
            ))
        })?;
    let parse_new = |text: &str, index: usize| -> Result<Value, CliError> {
        let v: Value = serde_json::from_str(text).map_err(|e| Usage(format!("the step is not JSON ({e}); pass one object like '{{\"type\":\"command\",\"command\":\"cargo\"}}'.")))?;
        parse_step(&v, &format!("steps[{index}]"))
            .map_err(|e| Usage(format!("the step is refused: {e}")))?;
        Ok(v)
    };
    let in_range = |i: usize, len: usize| {
        if i < len {
            Ok(())
        } else {
            Err(Usage(format!(
                "index {i} is out of range: {name} has {len} steps (0 to {}).",
                len.saturating_sub(1)
            )))
        }
    };
    let what = match step {
        StepAction::List { .. } => {
            let listing = json!({"name": name, "steps": steps});
            if as_json {
                println!("{}", crate::core::text::json_line(&listing));
            } else {
                for (i, s) in steps.iter().enumerate() {
                    println!("{i}: {}", printable(&s.to_string()));
                }
            }
            return Ok(());
        }
        StepAction::Add {
            index, step: text, ..
        } => {
            if *index > steps.len() {
                return Err(Usage(format!(
                    "index {index} is out of range: {name} has {} steps, so add at 0 to {}.",
                    steps.len(),
                    steps.len()
                )));
            }
            steps.insert(*index, parse_new(text, *index)?);
            format!("step added at {index}")
        }
        StepAction::Update {
            index, step: text, ..
        } => {
            in_range(*index, steps.len())?;
            steps[*index] = parse_new(text, *index)?;
            format!("step {index} updated")
        }
        StepAction::Remove { index, .. } => {
            in_range(*index, steps.len())?;
            steps.remove(*index);
            format!("step {index} removed")
        }
    };
    // The whole definition must still be usable before anything is written.
    write_definition(&path, name, &def).map_err(usage)?;
    let answer = ask(json!({"op": "reload", "name": name}))
        .unwrap_or_else(|| json!({"ok": true, "detail": "written; no maestro is running it now"}));
    let steps = def["steps"].clone();
    let mut answer = answer;
    answer["name"] = json!(name);
    answer["steps"] = steps;
    finish(&answer, as_json, &format!("{name}: {what}"))
}

/// Runs kept for `show --runs`.
const RUNS_SHOWN: usize = 10;

/// Each listed pipeline with what its run history says (`runCount`, `lastRunAt`,
/// `averageDurationMs`; `0` and nulls where none is kept or the database cannot be read).
fn with_run_figures(project: &Project, answer: &mut Value) {
    let figures = crate::core::schema::open_read_only(&project.db)
        .ok()
        .and_then(|(conn, _)| store::pipeline_figures(&conn).ok())
        .unwrap_or_default();
    let put = |p: &mut Value| {
        let f = p["name"].as_str().and_then(|n| figures.get(n));
        p["runCount"] = json!(f.map_or(0, |f| f.run_count));
        p["lastRunAt"] = json!(f.and_then(|f| f.last_run_at.clone()));
        p["averageDurationMs"] = json!(f.and_then(|f| f.average_duration_ms).map(f64::round));
    };
    // `show` answers with one pipeline, at the top; `list` with each in `pipelines`.
    if answer.get("name").is_some() {
        put(answer);
    }
    let listed = answer.get_mut("pipelines").and_then(Value::as_array_mut);
    for p in listed.into_iter().flatten() {
        put(p);
    }
}

/// The run history from `maestro_pipeline_steps`, newest run first; read-only.
fn show_runs(project: &Project, name: &str, as_json: bool) -> Result<(), CliError> {
    if !project.db.is_file() {
        return Err(Runtime(format!(
            "the run history is kept in the orchestration's database, and there is none at {}. Pass --project or --db.",
            project.db.display()
        )));
    }
    let conn = rusqlite::Connection::open_with_flags(
        &project.db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .map_err(|e| Runtime(format!("cannot open {}: {e}", project.db.display())))?;
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    let steps = store::pipeline_history(&conn, name, RUNS_SHOWN).map_err(|e| {
        Runtime(format!(
            "cannot read the run history in {}: {e}",
            project.db.display()
        ))
    })?;
    // Group the steps by run, keeping the newest-first order.
    let mut runs: Vec<(String, Vec<Value>)> = Vec::new();
    for s in &steps {
        let step = json!({
            "iteration": s.iteration, "step": s.step, "type": s.step_type, "started": s.started,
            "duration_ms": s.duration_ms, "outcome": s.outcome, "excerpt": s.excerpt,
        });
        match runs.last_mut() {
            Some((started, list)) if *started == s.run_started => list.push(step),
            _ => runs.push((s.run_started.clone(), vec![step])),
        }
    }
    if as_json {
        let runs: Vec<Value> = runs
            .into_iter()
            .map(|(started, steps)| json!({"started": started, "steps": steps}))
            .collect();
        println!(
            "{}",
            crate::core::text::json_line(&json!({"name": name, "runs": runs}))
        );
        return Ok(());
    }
    if runs.is_empty() {
        println!("{name}: no runs recorded yet");
    }
    for (started, steps) in runs {
        println!("run started {started}");
        for s in steps {
            println!(
                "  iteration {} step {} {:<9} {:>7} ms  {}",
                s["iteration"],
                s["step"],
                s["type"].as_str().unwrap_or_default(),
                s["duration_ms"],
                printable(s["outcome"].as_str().unwrap_or_default())
            );
        }
    }
    Ok(())
}

fn finish(answer: &Value, as_json: bool, what: &str) -> Result<(), CliError> {
    let ok = answer["ok"] == true;
    let detail = answer["detail"].as_str().unwrap_or_default();
    if as_json {
        println!("{}", crate::core::text::json_line(answer));
    } else {
        let detail = printable(detail);
        println!(
            "{what}: {} ({detail})",
            if ok { "accepted" } else { "refused" }
        );
    }
    if ok {
        Ok(())
    } else {
        Err(Runtime(format!("{what}: refused: {detail}")))
    }
}

fn file_of(dir: &Path, name: &str) -> Result<PathBuf, CliError> {
    if valid_name(name) {
        definition_file(dir, name).map_err(runtime)
    } else {
        Err(Usage(format!(
            "{name:?} is not a pipeline name (letters, digits, - and _)."
        )))
    }
}

fn read(path: &Path) -> Result<Value, CliError> {
    read_definition(path).map_err(runtime)
}

/// The definitions' names and files, by name.
pub fn folder_names(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut names: Vec<(String, PathBuf)> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name().to_str()?.strip_suffix(".json")?.to_owned();
                    valid_name(&name).then(|| (name, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Without a host: the definitions in the folder, none running.
fn from_folder(project: &Project, dir: &Path) -> Vec<Value> {
    let store = TrustStore::load(&ProjectKey::of(&project.root));
    folder_names(dir)
        .into_iter()
        .map(|(name, path)| {
            let bytes = read_definition_bytes(&path).ok();
            let hash = bytes.as_deref().map(content_hash).unwrap_or_default();
            let parsed = bytes
                .and_then(|t| serde_json::from_slice::<Value>(&t).ok())
                .map(|v| parse_definition(&v, &name, "").map(|d| d.steps.len()));
            let status = if store.is_trusted(&name, &hash) {
                "stopped"
            } else {
                "untrusted"
            };
            match parsed {
                Some(Ok(steps)) => json!({"name": name, "status": status, "steps": steps}),
                Some(Err(e)) => {
                    json!({"name": name, "status": "invalid", "steps": null, "detail": e.to_string()})
                }
                None => {
                    json!({"name": name, "status": "invalid", "steps": null, "detail": "not JSON"})
                }
            }
        })
        .collect()
}
