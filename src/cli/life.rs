//! One life for every verb that runs a core or a replay: the dashboard, `--no-tui`,
//! several projects (`many`), the Souffleur, the demo, `serve` (a core lent to a link)
//! and `replay`. What it needs is started in one order (each project's core, the notice
//! that it is not recorded, its pipeline host; then the `/metrics` feed of them all;
//! then the signals that end the verb) and ended in the reverse one, whatever presents
//! it. A life dropped without its shutdown (an early `?`) still cancels what it began.

use tokio_util::sync::CancellationToken;

use crate::cli::error::CliError;
use crate::cli::project::{Place, Project};
use crate::core::clock::Clock;
use crate::core::pipeline::host::HostHandle;
use crate::core::replay::player::Replay;
use crate::core::runtime::{self, CoreConfig, RunningCore};
use crate::core::text::printable;
use crate::metrics::ProjectFeed;
use crate::settings::Settings;

/// The cores (or the replay) a verb runs, and what runs beside them until it ends.
pub struct Life {
    /// Each project's core, in the order they were named (one for most verbs).
    pub cores: Vec<RunningCore>,
    /// Each project's link to its host, for a remote project (`None` for a local one).
    pub links: Vec<Option<crate::remote::link::Requests>>,
    /// A replay, for `maestro replay` (no core runs then).
    pub replay: Option<Replay>,
    /// What `/metrics` serves, until the feed starts.
    feeds: Vec<ProjectFeed>,
    /// The `/metrics` feed, when an address is configured.
    metrics: Option<CancellationToken>,
    /// The projects' pipeline hosts (a project another maestro hosts has none here).
    pipelines: Vec<HostHandle>,
    /// Cancelled by SIGINT, SIGTERM or SIGHUP: the presenter ends on it.
    pub stop: CancellationToken,
    /// Ends what runs, in the reverse order, if the verb leaves without
    /// [`Life::shutdown`]: declared last, so dropped last, as the life ends.
    guard: LifeGuard,
}

/// What a life cancels when it is dropped without its shutdown: the presenter, the
/// metrics feed, then the cores (the pipeline hosts' own drops end their runs).
struct LifeGuard {
    stop: CancellationToken,
    metrics: Option<CancellationToken>,
    cores: Vec<CancellationToken>,
}

impl Drop for LifeGuard {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(m) = &self.metrics {
            m.cancel();
        }
        for core in &self.cores {
            core.cancel();
        }
    }
}

impl Life {
    fn new() -> Self {
        let stop = CancellationToken::new();
        Self {
            cores: Vec::new(),
            links: Vec::new(),
            replay: None,
            feeds: Vec::new(),
            metrics: None,
            pipelines: Vec::new(),
            guard: LifeGuard {
                stop: stop.clone(),
                metrics: None,
                cores: Vec::new(),
            },
            stop,
        }
    }

    /// One project's core for `config`, its pipeline host, its `/metrics` feed, the
    /// signals.
    pub async fn start(
        project: &Project,
        settings: &Settings,
        config: &CoreConfig,
        clock: Clock,
    ) -> Result<Self, CliError> {
        let mut life = Self::new();
        life.add_local(&project.name(), project, settings, config, clock)?;
        life.serve_and_listen(settings, clock).await?;
        Ok(life)
    }

    /// Every chosen project's core (a remote one fed by its link) and pipeline host,
    /// the `/metrics` feed of them all, the signals.
    pub async fn start_all(
        chosen: &[(String, Place)],
        settings: &Settings,
        presenter: runtime::Presenter,
        clock: Clock,
    ) -> Result<Self, CliError> {
        let mut life = Self::new();
        for (name, place) in chosen {
            match place {
                Place::Local(project) => {
                    let config = CoreConfig {
                        presenter,
                        ..project.core_config(settings)
                    };
                    life.add_local(name, project, settings, &config, clock)?;
                }
                Place::Remote(remote) => {
                    let config = CoreConfig {
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
                    life.add_core(name, settings, core, Some(link));
                }
            }
        }
        life.serve_and_listen(settings, clock).await?;
        Ok(life)
    }

    /// A core lent to a link (`serve`): what it reads is tapped for the link; the
    /// watching maestro hosts the pipelines and serves the metrics.
    pub fn lend(
        config: &CoreConfig,
        tap: tokio::sync::mpsc::Sender<crate::core::event_log::input::Line>,
        clock: Clock,
    ) -> Result<Self, CliError> {
        let mut life = Self::new();
        let core =
            runtime::start_tapped(config, clock, Some(tap)).map_err(crate::cli::error::runtime)?;
        life.guard.cores.push(core.cancel.clone());
        life.cores.push(core);
        life.listen()?;
        Ok(life)
    }

    /// A replay, until the verb ends.
    pub fn replay(replay: Replay) -> Result<Self, CliError> {
        let mut life = Self::new();
        life.replay = Some(replay);
        life.listen()?;
        Ok(life)
    }

    /// The project's core, for a life started for one (`start`, `lend`), which always
    /// holds it; with several projects, the first one's.
    pub fn core(&mut self) -> &mut RunningCore {
        &mut self.cores[0]
    }

    /// Whether `/metrics` is served (its feed reads the cores' snapshots).
    pub fn serves_metrics(&self) -> bool {
        self.metrics.is_some()
    }

    /// A local project's core, the notice that it is not recorded, its pipelines.
    fn add_local(
        &mut self,
        name: &str,
        project: &Project,
        settings: &Settings,
        config: &CoreConfig,
        clock: Clock,
    ) -> Result<(), CliError> {
        let core = runtime::start(config, clock).map_err(crate::cli::error::runtime)?;
        say_unrecorded(&core);
        self.pipelines
            .extend(project.host_pipelines(settings, &core));
        self.add_core(name, settings, core, None);
        Ok(())
    }

    fn add_core(
        &mut self,
        name: &str,
        settings: &Settings,
        core: RunningCore,
        link: Option<crate::remote::link::Requests>,
    ) {
        self.feeds.push(ProjectFeed {
            name: name.to_owned(),
            snapshots: core.snapshots.clone(),
            rules: settings.rules,
        });
        self.guard.cores.push(core.cancel.clone());
        self.cores.push(core);
        self.links.push(link);
    }

    /// The `/metrics` feed of every core added, then the signals.
    async fn serve_and_listen(
        &mut self,
        settings: &Settings,
        clock: Clock,
    ) -> Result<(), CliError> {
        let feeds = std::mem::take(&mut self.feeds);
        self.metrics = crate::cli::metrics::start_feeds(settings, feeds, clock).await?;
        self.guard.metrics.clone_from(&self.metrics);
        self.listen()
    }

    fn listen(&self) -> Result<(), CliError> {
        stop_on_signals(self.stop.clone()).map_err(crate::cli::error::runtime)
    }

    /// Ends what the start began, in the reverse order: the pipelines (their runs and
    /// processes), the metrics feed, then the cores, or the replay.
    pub async fn shutdown(mut self) {
        for host in std::mem::take(&mut self.pipelines) {
            host.shutdown().await;
        }
        if let Some(m) = self.metrics.take() {
            m.cancel();
        }
        for core in std::mem::take(&mut self.cores) {
            core.shutdown().await;
        }
        if let Some(replay) = self.replay.take() {
            // Its threads are joined on drop: off the runtime's workers.
            tokio::task::spawn_blocking(move || drop(replay)).await.ok();
        }
    }
}

/// Says on stderr (not in the event stream) that this run is not recorded.
pub fn say_unrecorded(core: &runtime::RunningCore) {
    if let Some(why) = &core.unrecorded {
        eprintln!(
            "maestro: this run is not recorded for `maestro replay`: {}. Make maestro's data directory writable (or point XDG_DATA_HOME elsewhere), or set [logs] event_log_mib = 0 to stop recording.",
            printable(why)
        );
    }
}

/// The signals that end a verb cannot be listened for.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen for signals: {0}")]
pub struct SignalError(#[source] std::io::Error);

/// Cancels `stop` on SIGINT, SIGTERM or SIGHUP.
pub fn stop_on_signals(stop: CancellationToken) -> Result<(), SignalError> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = |kind| signal(kind).map_err(SignalError);
    let mut int = listen(SignalKind::interrupt())?;
    let mut term = listen(SignalKind::terminate())?;
    let mut hup = listen(SignalKind::hangup())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
        stop.cancel();
    });
    Ok(())
}

/// The single-threaded runtime every long-running mode uses.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the async runtime: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A life dropped without its shutdown still ends what it started: the presenter,
    /// the metrics feed and every core (several projects' too).
    #[test]
    fn the_guard_cancels_everything_when_dropped() {
        let (stop, metrics) = (CancellationToken::new(), CancellationToken::new());
        let cores = [CancellationToken::new(), CancellationToken::new()];
        let guard = LifeGuard {
            stop: stop.clone(),
            metrics: Some(metrics.clone()),
            cores: cores.to_vec(),
        };
        assert!(cores.iter().all(|c| !c.is_cancelled()));
        drop(guard);
        assert!(stop.is_cancelled() && metrics.is_cancelled());
        assert!(cores.iter().all(CancellationToken::is_cancelled));
    }
}
