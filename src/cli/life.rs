//! One life for every verb that runs one project's core (the dashboard, `--no-tui`, the
//! Souffleur, the demo): what it needs is started in one order and ended in the reverse
//! one, whatever presents it. `many` runs several cores (`many::Started`, the same order
//! for each) and `serve` lends its core to a link; both end in this order too.

use tokio_util::sync::CancellationToken;

use crate::cli::CliError;
use crate::cli::args::GlobalArgs;
use crate::cli::project::Project;
use crate::core::clock::Clock;
use crate::core::pipeline::host::HostHandle;
use crate::core::runtime::{self, CoreConfig, RunningCore};
use crate::core::text::printable;
use crate::settings::Settings;

/// A project's core and what runs beside it until the verb ends.
pub struct Life {
    pub core: RunningCore,
    /// The `/metrics` feed, when an address is configured.
    metrics: Option<CancellationToken>,
    /// The project's pipeline host, unless another maestro hosts them.
    pipelines: Option<HostHandle>,
    /// Cancelled by SIGINT, SIGTERM or SIGHUP: the presenter ends on it.
    pub stop: CancellationToken,
    /// Ends what runs, in the reverse order, if the verb leaves without
    /// [`Life::shutdown`] (an early `?`): dropped last, as the life ends.
    _guard: LifeGuard,
}

/// What a life cancels when it is dropped without its shutdown: the presenter, the
/// metrics feed, then the core (the pipeline host's own drop ends its runs).
struct LifeGuard {
    stop: CancellationToken,
    metrics: Option<CancellationToken>,
    core: CancellationToken,
}

impl Drop for LifeGuard {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(m) = &self.metrics {
            m.cancel();
        }
        self.core.cancel();
    }
}

impl Life {
    /// Starts, in this order: the core for `config`, its metrics feed, the notice that
    /// the run is not recorded (when it is not), the pipeline host, the signals.
    pub async fn start(
        project: &Project,
        settings: &Settings,
        global: &GlobalArgs,
        config: &CoreConfig,
        clock: Clock,
    ) -> Result<Self, CliError> {
        let core = runtime::start(config, clock).map_err(crate::cli::error::runtime)?;
        let metrics = crate::cli::metrics::start(global, settings, project, &core, clock).await?;
        say_unrecorded(&core);
        let pipelines = project.host_pipelines(settings, &core);
        let stop = CancellationToken::new();
        stop_on_signals(stop.clone()).map_err(crate::cli::error::runtime)?;
        let guard = LifeGuard {
            stop: stop.clone(),
            metrics: metrics.clone(),
            core: core.cancel.clone(),
        };
        Ok(Self {
            core,
            metrics,
            pipelines,
            stop,
            _guard: guard,
        })
    }

    /// Ends what [`Life::start`] began, in the reverse order: the pipelines (their runs
    /// and processes), the metrics feed, then the core.
    pub async fn shutdown(self) {
        if let Some(p) = self.pipelines {
            p.shutdown().await;
        }
        if let Some(m) = self.metrics {
            m.cancel();
        }
        self.core.shutdown().await;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A life dropped without its shutdown still ends what it started.
    #[test]
    fn the_guard_cancels_everything_when_dropped() {
        let (stop, metrics, core) = (
            CancellationToken::new(),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        let guard = LifeGuard {
            stop: stop.clone(),
            metrics: Some(metrics.clone()),
            core: core.clone(),
        };
        assert!(!core.is_cancelled());
        drop(guard);
        assert!(stop.is_cancelled() && metrics.is_cancelled() && core.is_cancelled());
    }
}
