//! `maestro` with no subcommand: the core plus the dashboard, and the pipeline host
//! when no other maestro runs this project's pipelines.

use std::process::ExitCode;

use crate::cli::error::CliError;
use crate::cli::life::Life;
use crate::cli::project::{Place, Project};
use crate::core::clock::Clock;
use crate::core::runtime;
use crate::settings::Settings;
use crate::tui::{PipelineAccess, TuiConfig};

/// Opens the dashboard until the operator quits or a signal arrives.
pub fn run(project: &Project, settings: &Settings, clock: Clock) -> Result<ExitCode, CliError> {
    let mut tui = TuiConfig::from_settings(project.name(), settings, clock)
        .map_err(crate::cli::error::usage)?;
    tui.pipelines = Some(PipelineAccess::for_project(&project.root));
    tui.actions = Some(project.action_access(settings));
    require_terminal()?;
    crate::cli::life::runtime()?.block_on(present(project, settings, tui))?;
    Ok(ExitCode::SUCCESS)
}

async fn present(project: &Project, settings: &Settings, tui: TuiConfig) -> Result<(), CliError> {
    let config = runtime::CoreConfig {
        presenter: runtime::Presenter::Screen,
        ..project.core_config(settings)
    };
    let mut life = Life::start(project, settings, &config, tui.clock).await?;
    let stop = life.stop.clone();
    let result = crate::tui::run(crate::tui::Feeds::live(life.core()), tui, stop).await;
    life.shutdown().await;
    result.map_err(crate::cli::error::runtime)
}

/// The dashboard on several projects: each its own core and pipeline host in this
/// process, a projects bar to switch between them.
pub fn run_many(
    chosen: Vec<(String, Place)>,
    settings: &Settings,
    clock: Clock,
) -> Result<ExitCode, CliError> {
    let title = match chosen.as_slice() {
        [(name, _)] => name.clone(),
        _ => format!("{} projects", chosen.len()),
    };
    let tui = TuiConfig::from_settings(title, settings, clock).map_err(crate::cli::error::usage)?;
    require_terminal()?;
    crate::cli::life::runtime()?.block_on(present_many(chosen, settings, tui))?;
    Ok(ExitCode::SUCCESS)
}

async fn present_many(
    chosen: Vec<(String, Place)>,
    settings: &Settings,
    tui: TuiConfig,
) -> Result<(), CliError> {
    let mut life =
        Life::start_all(&chosen, settings, runtime::Presenter::Screen, tui.clock).await?;
    let stop = life.stop.clone();
    let screens = life
        .cores
        .iter_mut()
        .zip(&chosen)
        .zip(&life.links)
        .map(|((core, (name, place)), link)| match (place, link) {
            (Place::Remote(remote), Some(link)) => crate::tui::Screen {
                name: name.clone(),
                feeds: crate::tui::Feeds::live(core),
                // Pipelines run where the project is: on its host, by its maestro.
                pipelines: None,
                actions: Some(crate::tui::ActionAccess {
                    remote: Some(link.clone()),
                    ..Project::of_remote(remote).action_access(settings)
                }),
            },
            (Place::Local(_), _) | (Place::Remote(_), None) => {
                let project = match place {
                    Place::Local(p) => p.clone(),
                    Place::Remote(r) => Project::of_remote(r),
                };
                crate::tui::Screen {
                    name: name.clone(),
                    feeds: crate::tui::Feeds::live(core),
                    pipelines: Some(PipelineAccess::for_project(&project.root)),
                    actions: Some(project.action_access(settings)),
                }
            }
        })
        .collect();
    let result = crate::tui::run_screens(screens, tui, stop).await;
    life.shutdown().await;
    result.map_err(crate::cli::error::runtime)
}

/// The dashboard needs a terminal on both ends; say how to run without one.
pub fn require_terminal() -> Result<(), CliError> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
        Ok(())
    } else {
        Err(CliError::Usage(
            "the dashboard needs a terminal, and stdin or stdout is not one. Run with --no-tui for headless output.".into(),
        ))
    }
}
