//! `maestro souffleur PID:<pid> SESSION_ID:<id>`: the core plus the Souffleur role,
//! shown in the dashboard or printed headless. Only one process per project holds the
//! role (an advisory lock in maestro's data directory).

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cli::GlobalArgs;
use crate::core::clock::Clock;
use crate::core::recovery::RecoveryEnv;
use crate::core::recovery::launch::Launcher;
use crate::core::runtime;
use crate::core::watchdog::payload::load_orchestra_config;
use crate::core::watchdog::role::{self, RoleConfig, RoleEnd, RoleTimings};
use crate::core::watchdog::role_db::RoleDb;
use crate::headless::{self};
use crate::project::Project;
use crate::settings::Settings;
use crate::tui::TuiConfig;

/// Why the role could not run: a usage problem (exit 2) or a runtime one (exit 1).
pub enum Refused {
    Usage(String),
    Runtime(String),
}

/// Runs the role to its end. `Ok(true)`: the Conductor completed or the operator
/// stopped it; `Ok(false)`: the role failed.
pub async fn run(
    project: &Project,
    settings: &Settings,
    args: &GlobalArgs,
    invocation: String,
    clock: Clock,
    tui: Option<TuiConfig>,
) -> Result<bool, Refused> {
    if !runtime::database_exists(&project.db) {
        return Err(Refused::Usage(format!(
            "the Souffleur role needs the orchestration's database, and there is none at {}. Pass --project or --db.",
            project.db.display()
        )));
    }
    // The schema is checked before anything is locked or written.
    RoleDb::open(&project.db).map_err(Refused::Runtime)?;
    let data = crate::project::data_dir().ok_or_else(|| {
        Refused::Runtime("cannot find a data directory for maestro (is HOME set?)".into())
    })?;
    let lock = role::acquire_lock(&data.join("locks"), &project.root).map_err(Refused::Runtime)?;
    let control =
        crate::conductor_cmd::bind(&role::control_socket(&data.join("locks"), &project.root))
            .map_err(Refused::Runtime)?;

    let mut config = project.core_config(settings);
    config.souffleur_role = true;
    config.forward_logs = tui.is_some();
    let mut core = runtime::start(&config, clock).map_err(|e| Refused::Runtime(e.to_string()))?;
    let s = &settings.souffleur;
    let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
    let orchestra = load_orchestra_config(&root);
    let role_config = RoleConfig {
        db_path: project.db.clone(),
        invocation,
        timings: RoleTimings {
            conductor_stale_after: settings.conductor_stale_after,
            initial_wait: s.initial_wait,
            poll: s.poll,
            teammate_initial_wait: s.teammate_initial_wait,
            teammate_poll: s.teammate_poll,
            watcher_stale_after: s.watcher_stale_after,
            max_no_progress: s.max_no_progress_recoveries,
        },
        claude_projects_dir: s.claude_projects_dir.clone(),
        recovery: RecoveryEnv {
            launcher: Launcher {
                templates: settings.launch.clone(),
                project: root.clone(),
            },
            temp: project.temp.clone(),
            db: RoleDb::open(&project.db).map_err(Refused::Runtime)?,
            kill_grace: s.kill_grace,
            claude_projects_dir: s.claude_projects_dir.clone(),
            export_dir: s.export_dir.clone(),
            trimmed_dir: data.join("exports"),
            force_compact: orchestra.force_compact,
            compact_timeout: s.compact_timeout,
            events: core.events.clone(),
        },
        orchestra,
        clock,
    };
    let _pipelines = project.host_pipelines(settings, core.events.clone());
    let (cmd_tx, cmd_rx) = mpsc::channel(8);
    let server = tokio::spawn(crate::conductor_cmd::serve(control, cmd_tx.clone()));
    let role_cancel = CancellationToken::new();
    let role_task = tokio::spawn(role::run(
        role_config,
        core.events.clone(),
        cmd_rx,
        role_cancel.clone(),
    ));

    let stop = CancellationToken::new();
    headless::stop_on_signals(stop.clone()).map_err(Refused::Runtime)?;
    let presented = if let Some(mut tui) = tui {
        tui.watchdog = Some(cmd_tx);
        tui.pipelines = Some(crate::tui::PipelineAccess::for_project(&project.root));
        crate::tui::run(&mut core, tui, stop).await
    } else {
        headless::present_on_stdout(&mut core.happenings, args.json, clock, false, stop).await;
        drop(cmd_tx);
        Ok(())
    };
    // Closing the presenter ends the role (it marks its row `exited`).
    server.abort();
    let _ = std::fs::remove_file(role::control_socket(&data.join("locks"), &project.root));
    role_cancel.cancel();
    let end = role_task
        .await
        .unwrap_or(RoleEnd::Failed("the role task panicked".into()));
    core.shutdown().await;
    drop(lock);
    presented.map_err(Refused::Runtime)?;
    Ok(!matches!(end, RoleEnd::Failed(_)))
}
