//! maestro's entry point: parse the command line, load settings, then run the dashboard,
//! headless mode or a subcommand. Exit status: 0 ok, 1 runtime failure, 2 usage/config.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use time::UtcOffset;
use tokio_util::sync::CancellationToken;

use maestro::cli::{Cli, Command, ConfigCommand, GlobalArgs};
use maestro::core::clock::Clock;
use maestro::core::runtime;
use maestro::core::schema;
use maestro::headless::{self};
use maestro::project::{Project, UsageError, load_settings};
use maestro::settings::{DEFAULT_TOML, Settings};
use maestro::tui::TuiConfig;

/// How a run failed, which decides the exit status.
enum Failure {
    /// Bad arguments or configuration: exit 2.
    Usage(String),
    /// Something went wrong while running: exit 1.
    Runtime(String),
}

impl From<maestro::project::CommandError> for Failure {
    fn from(e: maestro::project::CommandError) -> Self {
        match e {
            maestro::project::CommandError::Usage(m) => Self::Usage(m),
            maestro::project::CommandError::Runtime(m) => Self::Runtime(m),
        }
    }
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Self::Usage(e.0)
    }
}

fn main() -> ExitCode {
    // Read before any thread exists: the local offset cannot be read reliably later.
    let local_offset = UtcOffset::current_local_offset().unwrap_or(UtcOffset::UTC);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let _ = color_eyre::install();
    match dispatch(&cli, local_offset) {
        Ok(code) => code,
        Err(Failure::Usage(msg)) => {
            eprintln!("maestro: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(msg)) => {
            eprintln!("maestro: {msg}");
            ExitCode::from(1)
        }
    }
}

fn dispatch(cli: &Cli, local_offset: UtcOffset) -> Result<ExitCode, Failure> {
    let clock = Clock::system(local_offset);
    match &cli.command {
        Some(Command::Config(ConfigCommand::Default)) => {
            print!("{DEFAULT_TOML}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Init) => {
            let project = Project::from_args(&cli.global)?;
            schema::init_database(&project.db).map_err(|e| Failure::Runtime(e.to_string()))?;
            if cli.global.json {
                println!("{}", serde_json::json!({"ok": true, "db": project.db}));
            } else {
                println!("created {}", project.db.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Doctor) => {
            let project = Project::from_args(&cli.global)?;
            let settings = load_settings(&cli.global);
            Ok(maestro::doctor::run(
                &project,
                settings.as_ref().map_err(|e| e.0.as_str()),
                cli.global.json,
            ))
        }
        Some(Command::Task(task)) => {
            let project = Project::from_args(&cli.global)?;
            let settings = load_settings(&cli.global)?;
            let code =
                maestro::task_cmd::run(&project, &settings, task, cli.global.json, cli.global.yes)?;
            Ok(ExitCode::from(code))
        }
        Some(Command::Sentinel(action)) => {
            let project = Project::from_args(&cli.global)?;
            maestro::sentinel_cmd::run(&project, action, cli.global.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Conductor(c)) => {
            let project = Project::from_args(&cli.global)?;
            let data = maestro::project::data_dir().ok_or_else(|| {
                Failure::Runtime("cannot find maestro's data directory (is HOME set?)".into())
            })?;
            let socket =
                maestro::core::watchdog::role::control_socket(&data.join("locks"), &project.root);
            maestro::conductor_cmd::run(&socket, &c.action, cli.global.yes, cli.global.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Souffleur(args)) => {
            let project = Project::from_args(&cli.global)?;
            let settings = load_settings(&cli.global)?;
            let invocation = args.invocation.join(" ");
            run_souffleur(&project, &settings, &cli.global, invocation, clock)
        }
        Some(Command::Launch) => {
            let project = Project::from_args(&cli.global)?;
            let settings = load_settings(&cli.global)?;
            maestro::launch::open_dashboard(&project, &settings, cli.global.config.as_deref())
                .map_err(Failure::Runtime)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Demo(demo)) => {
            let settings = load_settings(&cli.global)?;
            if !cli.global.no_tui {
                // Checked before anything is created.
                TuiConfig::from_settings(String::new(), &settings, clock)
                    .map_err(Failure::Usage)?;
                require_terminal()?;
            }
            let rt = runtime()?;
            rt.block_on(maestro::demo::run(
                demo.clone(),
                cli.global.clone(),
                settings,
                clock,
            ))
            .map_err(Failure::Runtime)?;
            Ok(ExitCode::SUCCESS)
        }
        None if cli.global.souffleur => {
            let project = Project::from_args(&cli.global)?;
            let settings = load_settings(&cli.global)?;
            let (Some(pid), Some(session)) = (cli.global.conductor_pid, &cli.global.session_id)
            else {
                return Err(Failure::Usage(
                    "--souffleur needs --conductor-pid PID and --session-id ID (or use `maestro souffleur PID:<pid> SESSION_ID:<id>`).".into(),
                ));
            };
            run_souffleur(
                &project,
                &settings,
                &cli.global,
                format!("PID:{pid} SESSION_ID:{session}"),
                clock,
            )
        }
        None => {
            let project = Project::from_args(&cli.global)?;
            let settings = load_settings(&cli.global)?;
            let rt = runtime()?;
            if cli.global.no_tui {
                rt.block_on(run_headless(&project, &settings, &cli.global, clock))
            } else {
                let mut tui = TuiConfig::from_settings(project.name(), &settings, clock)
                    .map_err(Failure::Usage)?;
                tui.pipelines = Some(maestro::tui::PipelineAccess::for_project(&project.root));
                require_terminal()?;
                rt.block_on(run_dashboard(&project, &settings, tui))
            }
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Runtime(format!("cannot start the async runtime: {e}")))
}

fn run_souffleur(
    project: &Project,
    settings: &Settings,
    args: &GlobalArgs,
    invocation: String,
    clock: Clock,
) -> Result<ExitCode, Failure> {
    let tui = if args.no_tui {
        None
    } else {
        let tui =
            TuiConfig::from_settings(project.name(), settings, clock).map_err(Failure::Usage)?;
        require_terminal()?;
        Some(tui)
    };
    let rt = runtime()?;
    let outcome = rt
        .block_on(maestro::souffleur::run(
            project, settings, args, invocation, clock, tui,
        ))
        .map_err(|e| match e {
            maestro::souffleur::Refused::Usage(m) => Failure::Usage(m),
            maestro::souffleur::Refused::Runtime(m) => Failure::Runtime(m),
        })?;
    Ok(if outcome {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn require_terminal() -> Result<(), Failure> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() {
        Ok(())
    } else {
        Err(Failure::Usage(
            "the dashboard needs a terminal, and stdin or stdout is not one. Run with --no-tui for headless output.".into(),
        ))
    }
}

async fn run_dashboard(
    project: &Project,
    settings: &Settings,
    tui: TuiConfig,
) -> Result<ExitCode, Failure> {
    let config = runtime::CoreConfig {
        forward_logs: true,
        ..project.core_config(settings)
    };
    let mut core =
        runtime::start(&config, tui.clock).map_err(|e| Failure::Runtime(e.to_string()))?;
    let _pipelines = project.host_pipelines(settings, core.events.clone());
    let stop = CancellationToken::new();
    headless::stop_on_signals(stop.clone()).map_err(Failure::Runtime)?;
    let result = maestro::tui::run(&mut core, tui, stop).await;
    core.shutdown().await;
    result.map_err(Failure::Runtime)?;
    Ok(ExitCode::SUCCESS)
}

async fn run_headless(
    project: &Project,
    settings: &Settings,
    args: &GlobalArgs,
    clock: Clock,
) -> Result<ExitCode, Failure> {
    if settings.report_to_db && !runtime::database_exists(&project.db) {
        return Err(Failure::Usage(format!(
            "--report-to-db needs a database, and there is none at {}. Create it with `maestro init`, point --db at it, or drop the flag.",
            project.db.display()
        )));
    }
    let mut core = runtime::start(&project.core_config(settings), clock)
        .map_err(|e| Failure::Runtime(e.to_string()))?;
    let _pipelines = project.host_pipelines(settings, core.events.clone());
    if !core.with_database {
        eprintln!(
            "maestro: no database at {}; watching {} only.",
            project.db.display(),
            project.temp.display()
        );
    }
    let stop = CancellationToken::new();
    headless::stop_on_signals(stop.clone()).map_err(Failure::Runtime)?;
    // Every way headless output ends (signal, completion, closed stdout) is a success.
    headless::present_on_stdout(
        &mut core.happenings,
        args.json,
        clock,
        args.until_complete,
        stop,
    )
    .await;
    core.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
