//! `maestro souffleur PID:<pid> SESSION_ID:<id>`: the core plus the Souffleur role,
//! shown in the dashboard or printed headless. Only one process per project holds the
//! role (an advisory lock in maestro's data directory).

pub(crate) mod watcher;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use std::process::ExitCode;

use crate::cli::args::GlobalArgs;
use crate::cli::error::CliError;
use crate::cli::life::Life;
use crate::cli::project::Project;
use crate::cli::{dashboard, headless};
use crate::core::clock::Clock;
use crate::core::event::CoreEvent;
use crate::core::ipc;
use crate::core::paths::{self, ProjectKey, Service};
use crate::core::recovery::RecoveryEnv;
use crate::core::recovery::launch::Launcher;
use crate::core::recovery::payload::load_orchestra_config;
use crate::core::runtime;
use crate::core::store::role::RoleDb;
use crate::core::watchdog::control;
use crate::core::watchdog::role::{self, RoleConfig, RoleEnd};
use crate::settings::Settings;
use crate::tui::TuiConfig;

/// Takes the role, in the dashboard or headless; exit 0 when the Conductor completed or
/// the operator stopped the role, 1 when it failed.
pub fn run(
    project: &Project,
    settings: &Settings,
    args: &GlobalArgs,
    invocation: String,
    clock: Clock,
) -> Result<ExitCode, CliError> {
    let tui = if args.no_tui {
        None
    } else {
        let tui = TuiConfig::from_settings(project.name(), settings, clock)
            .map_err(crate::cli::error::usage)?;
        dashboard::require_terminal()?;
        Some(tui)
    };
    let ok = crate::cli::life::runtime()?
        .block_on(run_role(project, settings, args, invocation, clock, tui))?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs the role to its end. `Ok(true)`: the Conductor completed or the operator
/// stopped it; `Ok(false)`: the role failed.
async fn run_role(
    project: &Project,
    settings: &Settings,
    args: &GlobalArgs,
    invocation: String,
    clock: Clock,
    tui: Option<TuiConfig>,
) -> Result<bool, CliError> {
    if !runtime::database_exists(&project.db) {
        return Err(CliError::Usage(format!(
            "the Souffleur role needs the orchestration's database, and there is none at {}. Pass --project or --db.",
            project.db.display()
        )));
    }
    // The schema is checked before anything is locked or written.
    RoleDb::open(&project.db).map_err(super::error::runtime)?;
    let lock = role::acquire_lock(&project.root).map_err(super::error::runtime)?;
    let key = ProjectKey::of(&project.root);
    // A control socket that cannot be made never stops the role: it runs, and says why
    // `maestro conductor …` cannot reach it.
    let control = paths::socket_path(Service::Souffleur, &key)
        .and_then(|path| ipc::bind_owner_only(&path).map(|l| (path, l)));

    let mut resume = headless::resume_for(project, settings, args)?;
    let mut config = project.core_config(settings);
    config.souffleur_role = true;
    if tui.is_some() {
        config.presenter = runtime::Presenter::Screen;
    }
    let mut life = Life::start(project, settings, &config, clock).await?;
    let role_config = role_config(project, settings, invocation, clock, key, life.core())?;
    let (cmd_tx, cmd_rx) = mpsc::channel(8);
    let (socket, server) = serve_control(control, &cmd_tx, life.core()).await;
    let role_cancel = CancellationToken::new();
    let role_task = tokio::spawn(role::run(
        role_config,
        life.core().events.clone(),
        cmd_rx,
        role_cancel.clone(),
    ));

    let stop = life.stop.clone();
    let presented = if let Some(mut tui) = tui {
        tui.watchdog = Some(cmd_tx);
        tui.pipelines = Some(crate::tui::PipelineAccess::for_project(&project.root));
        tui.actions = Some(project.action_access(settings));
        crate::tui::run(crate::tui::Feeds::live(life.core()), tui, stop).await
    } else {
        headless::present_on_stdout(
            &mut life.core().happenings,
            args.json,
            clock,
            false,
            resume.as_mut(),
            stop,
        )
        .await;
        drop(cmd_tx);
        Ok(())
    };
    // Closing the presenter ends the role (it marks its row `exited`).
    if let Some(server) = server {
        server.abort();
    }
    if let Some(socket) = socket {
        let _ = std::fs::remove_file(socket);
    }
    role_cancel.cancel();
    let end = role_task
        .await
        .unwrap_or(RoleEnd::Failed("the role task panicked".into()));
    life.shutdown().await;
    drop(lock);
    presented.map_err(crate::cli::error::runtime)?;
    Ok(!matches!(end, RoleEnd::Failed(_)))
}

/// What the role runs with: the invocation, timings, the recovery's environment (its
/// windows, exports and database), the orchestra's settings and the hold flag's key.
fn role_config(
    project: &Project,
    settings: &Settings,
    invocation: String,
    clock: Clock,
    key: ProjectKey,
    core: &runtime::RunningCore,
) -> Result<RoleConfig, CliError> {
    let s = &settings.souffleur;
    let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
    let orchestra = load_orchestra_config(&root, s.max_external_permission);
    Ok(RoleConfig {
        db_path: project.db.clone(),
        invocation,
        timings: s.role.clone(),
        recovery: RecoveryEnv {
            launcher: Launcher {
                templates: settings.launch.clone(),
                project: root,
            },
            temp: project.temp.clone(),
            db: RoleDb::open(&project.db).map_err(super::error::runtime)?,
            timings: s.recovery.clone(),
            trimmed_dir: paths::exports_dir().map_err(|e| CliError::Runtime(e.to_string()))?,
            force_compact: orchestra.force_compact,
            events: core.events.clone(),
        },
        orchestra,
        clock,
        hold: Some(key),
    })
}

type Control =
    Result<(std::path::PathBuf, tokio::net::UnixListener), crate::core::paths::PathError>;

/// The control socket served (`maestro conductor …`), or why it cannot be, said as an
/// error event: the role runs either way.
async fn serve_control(
    control: Control,
    cmd_tx: &mpsc::Sender<control::WatchdogRequest>,
    core: &runtime::RunningCore,
) -> (
    Option<std::path::PathBuf>,
    Option<tokio::task::JoinHandle<()>>,
) {
    match control {
        Ok((path, listener)) => (
            Some(path),
            Some(tokio::spawn(control::serve(listener, cmd_tx.clone()))),
        ),
        Err(e) => {
            let _ = core
                .events
                .send(CoreEvent::SourceFailed {
                    source: "souffleur",
                    task: None,
                    detail: format!(
                        "the role runs, but `maestro conductor …` cannot reach it: {e}"
                    ),
                })
                .await;
            (None, None)
        }
    }
}
