//! Several projects in one headless maestro: `maestro --no-tui --project A --project B`.
//! Each project has its own core (sources and hub) and pipeline host in this process;
//! their happenings are printed as they come, each JSON line with a `project` field
//! and each text line with a `[project] ` prefix. With one project, none of this runs:
//! the output is exactly the single-project one.

use std::process::ExitCode;

use tokio::sync::mpsc;

use crate::cli::args::GlobalArgs;
use crate::cli::error::CliError;
use crate::cli::headless;
use crate::cli::life::Life;
use crate::cli::output_queue::OutputQueue;
use crate::cli::project::Place;
use crate::core::clock::Clock;
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::event::{Happening, What};
use crate::core::event_json::output_line;
use crate::core::runtime;
use crate::settings::Settings;

/// The projects to watch, named: `--project` given several times (named by their
/// folders), else the configuration's `[projects]` (named there).
pub fn chosen(global: &GlobalArgs, settings: &Settings) -> Result<Vec<(String, Place)>, CliError> {
    if global.db.is_some() || global.temp.is_some() {
        return Err(CliError::Usage(
            "--db and --temp name one project's files; with several projects, each uses its own comms.db and temp/.".into(),
        ));
    }
    if global.projects.is_empty() {
        return settings
            .projects
            .iter()
            .map(|(name, dir)| {
                Place::at(dir, global)
                    .map(|p| (name.clone(), p))
                    .map_err(|e| CliError::Usage(format!("[projects] {name}: {e}")))
            })
            .collect();
    }
    let projects = global
        .projects
        .iter()
        .map(|dir| Place::at(dir, global))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(names(&projects).into_iter().zip(projects).collect())
}

/// The projects' names: folder names (a remote one's address), or the whole paths when
/// two share one.
fn names(projects: &[Place]) -> Vec<String> {
    let short: Vec<String> = projects.iter().map(Place::name).collect();
    short
        .iter()
        .zip(projects)
        .map(|(n, p)| {
            if short.iter().filter(|m| *m == n).count() > 1 {
                p.full_name()
            } else {
                n.clone()
            }
        })
        .collect()
}

pub async fn run(
    chosen: Vec<(String, Place)>,
    global: &GlobalArgs,
    settings: &Settings,
    clock: Clock,
) -> Result<ExitCode, CliError> {
    let mut life = Life::start_all(&chosen, settings, runtime::Presenter::Lines, clock).await?;
    let (tx, mut rx) = mpsc::channel::<(usize, Happening)>(4096);
    for (i, core) in life.cores.iter_mut().enumerate() {
        // Each core's happenings go, tagged, to the one presenter (waiting when it
        // waits: the sources of a slow reader's projects wait too).
        let mut happenings = std::mem::replace(&mut core.happenings, mpsc::channel(1).1);
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(h) = happenings.recv().await {
                if tx.send((i, h)).await.is_err() {
                    return;
                }
            }
        });
    }
    drop(tx);
    if !life.serves_metrics() {
        for core in &mut life.cores {
            core.without_snapshots();
        }
    }
    let stop = life.stop.clone();
    let out = OutputQueue::on_stdout();
    let mut complete = vec![false; chosen.len()];
    loop {
        let next = tokio::select! {
            // A signal is heard first, however fast happenings come.
            biased;
            () = stop.cancelled() => None,
            n = rx.recv() => n,
        };
        let Some((i, h)) = next else { break };
        let name = (chosen.len() > 1).then_some(chosen[i].0.as_str());
        let shown = headless::is_after(&h, global.after);
        if shown
            && let Some(line) = line(global.json, name, &chosen[i].0, &clock, &h)
            && !out.push(line).await
        {
            break;
        }
        if let What::Watchdog {
            reason: WatchdogReason::ConductorComplete,
            ..
        } = &h.what
        {
            complete[i] = true;
            // --until-complete: every project's Conductor has completed.
            if global.until_complete && complete.iter().all(|c| *c) {
                break;
            }
        }
    }
    out.finish(std::time::Duration::from_secs(2));
    life.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// One happening of project `project`: JSON with a `project` field, or text with every
/// line prefixed `[name] ` (none when one project is watched: a lone remote one).
fn line(
    json: bool,
    prefix: Option<&str>,
    project: &str,
    clock: &Clock,
    h: &Happening,
) -> Option<String> {
    if json {
        return output_line(h, Some(project));
    }
    let text = headless::text(clock, h)?;
    let Some(name) = prefix else {
        return Some(text);
    };
    let name = crate::core::text::printable(name);
    Some(
        text.split_inclusive('\n')
            .map(|l| {
                if l == "\n" {
                    l.to_owned()
                } else {
                    format!("[{name}] {l}")
                }
            })
            .collect(),
    )
}
