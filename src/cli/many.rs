//! Several projects in one headless maestro: `maestro --no-tui --project A --project B`.
//! Each project has its own core (sources and hub) and pipeline host in this process;
//! their happenings are printed as they come, each JSON line with a `project` field
//! and each text line with a `[project] ` prefix. With one project, none of this runs:
//! the output is exactly the single-project one.

use std::process::ExitCode;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cli::CliError;
use crate::cli::args::GlobalArgs;
use crate::cli::headless;
use crate::cli::life::stop_on_signals;
use crate::cli::output_queue::OutputQueue;
use crate::cli::project::{Place, Project};
use crate::core::clock::Clock;
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::event::{Happening, What};
use crate::core::event_json::output_line;
use crate::core::runtime;
use crate::metrics::ProjectFeed;
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
    let (mut started, feeds) = Started::all(&chosen, settings, clock, runtime::Presenter::Lines)?;
    let (tx, mut rx) = mpsc::channel::<(usize, Happening)>(4096);
    for (i, core) in started.cores.iter_mut().enumerate() {
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
    let metrics = crate::cli::metrics::start_feeds(global, settings, feeds, clock).await?;
    if metrics.is_none() {
        for core in &mut started.cores {
            core.without_snapshots();
        }
    }
    let stop = CancellationToken::new();
    stop_on_signals(stop.clone()).map_err(crate::cli::error::runtime)?;
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
    started.shutdown(metrics).await;
    Ok(ExitCode::SUCCESS)
}

/// Every project's core and pipeline host, started in this process (headless or the
/// dashboard); a remote project's core is fed by its link.
pub struct Started {
    pub cores: Vec<runtime::RunningCore>,
    hosts: Vec<Option<crate::core::pipeline::host::HostHandle>>,
    /// Each remote project's link, to ask its host (`None` for a local project).
    pub links: Vec<Option<crate::remote::link::Requests>>,
}

impl Started {
    /// Starts each project; with the metrics feed of each.
    pub fn all(
        chosen: &[(String, Place)],
        settings: &Settings,
        clock: Clock,
        presenter: runtime::Presenter,
    ) -> Result<(Self, Vec<ProjectFeed>), CliError> {
        let mut started = Self {
            cores: Vec::new(),
            hosts: Vec::new(),
            links: Vec::new(),
        };
        let mut feeds = Vec::new();
        for (name, place) in chosen {
            let project = match place {
                Place::Local(p) => p,
                Place::Remote(remote) => {
                    let config = runtime::CoreConfig {
                        presenter,
                        ..Project::of_remote(remote).core_config(settings)
                    };
                    let core = runtime::start_fed(&config, clock);
                    let link = crate::remote::link::spawn(
                        remote.clone(),
                        settings.remote.clone(),
                        core.events.clone(),
                        core.cancel.clone(),
                    );
                    feeds.push(ProjectFeed {
                        name: name.clone(),
                        snapshots: core.snapshots.clone(),
                        rules: settings.rules,
                    });
                    started.hosts.push(None);
                    started.links.push(Some(link));
                    started.cores.push(core);
                    continue;
                }
            };
            let config = runtime::CoreConfig {
                presenter,
                ..project.core_config(settings)
            };
            let core = runtime::start(&config, clock).map_err(crate::cli::error::runtime)?;
            feeds.push(ProjectFeed {
                name: name.clone(),
                snapshots: core.snapshots.clone(),
                rules: settings.rules,
            });
            started.hosts.push(project.host_pipelines(settings, &core));
            started.links.push(None);
            crate::cli::life::say_unrecorded(&core);
            started.cores.push(core);
        }
        Ok((started, feeds))
    }

    /// Stops the pipeline hosts, the metrics server, then the cores.
    pub async fn shutdown(self, metrics: Option<CancellationToken>) {
        for host in self.hosts.into_iter().flatten() {
            host.shutdown().await;
        }
        if let Some(m) = metrics {
            m.cancel();
        }
        for core in self.cores {
            core.shutdown().await;
        }
    }
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
