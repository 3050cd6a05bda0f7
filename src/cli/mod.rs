//! The command line: argument definitions (`args`), the one error type and its exit
//! codes (`error`), and one file per verb family. [`main`] is what `main.rs` calls.
//!
//! Exit status: 0 ok, 1 runtime failure, 2 usage/config (docs/cli.md).

pub mod args;
pub mod conductor;
pub mod dashboard;
pub mod demo;
pub mod doctor;
pub mod error;
pub mod headless;
pub mod hooks;
pub mod init;
mod invocation;
pub mod launch;
pub mod life;
pub mod many;
pub mod metrics;
pub mod musician;
pub mod output_queue;
pub mod project;
pub mod remote;
pub mod replay;
mod run_within;
pub mod sentinel;
pub mod serve;
pub mod souffleur;
pub mod task;
pub mod usage;

use std::process::ExitCode;

use clap::Parser;
use time::UtcOffset;

use crate::core::clock::Clock;
use crate::settings::DEFAULT_TOML;
use crate::tui::TuiConfig;
use args::{Cli, Command, ConfigCommand};
pub use error::CliError;
use invocation::Invocation;
use life::runtime;
use project::Project;

/// Parses the command line, runs what it asks, and maps the outcome to an exit status.
pub fn main() -> ExitCode {
    // The hook Claude Code runs: before anything that could fail or take time.
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // (`maestro hook --help` is for a person: clap answers it below.)
    let asks_help = argv.iter().skip(2).any(|a| a == "--help" || a == "-h");
    if argv.get(1).is_some_and(|a| a == "hook") && !asks_help {
        hooks::hook_main(&argv[2..]);
        return ExitCode::SUCCESS;
    }
    // The gate in a window maestro opened (`maestro gate DIR -- claude …`): internal,
    // so not among the commands clap lists.
    if let [_, gate, dir, dashes, command @ ..] = argv.as_slice()
        && gate == "gate"
        && dashes == "--"
    {
        let code = crate::core::recovery::gate::run_gate(std::path::Path::new(dir), command);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // The guardian of processes a relaunch holds stopped: internal too.
    if argv.len() == 2 && argv[1] == crate::core::paused::VERB {
        let code = crate::core::paused::run();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    raise_open_files_limit();
    // Read before any thread exists: the local offset cannot be read reliably later.
    let local_offset = UtcOffset::current_local_offset().unwrap_or(UtcOffset::UTC);
    // The report's hook for a panic, before anything that could panic, parsing
    // included. Every failure has an exit code of its own and is reported below in
    // maestro's words; installing twice is the only way this fails.
    if let Err(e) = color_eyre::install() {
        eprintln!("maestro: {e}");
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => {
            match args::focused_help(&argv) {
                Some(help) => print!("{help}"),
                None => {
                    let _ = e.print();
                }
            }
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    quiet_on_closed_stdout();
    match dispatch(&cli, Clock::system(local_offset)) {
        Ok(code) => code,
        Err(e) => {
            // Each line made safe for the terminal on its own: the causes stay lines.
            let report = e.report();
            let mut lines = report.lines();
            let first = lines.next().unwrap_or_default();
            eprintln!("maestro: {}", crate::core::text::printable(first));
            for cause in lines {
                eprintln!("{}", crate::core::text::printable(cause));
            }
            ExitCode::from(e.exit_code())
        }
    }
}

/// `maestro usage | head`: a reader that went away ends a command quietly with 141
/// (128 + SIGPIPE, what the shell shows for `cat`), not with a panic report from
/// `println!`. The long-running modes write through `output_queue`, which stops on it.
fn quiet_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload_as_str().unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info);
    }));
}

/// Writes generated text to stdout; a reader that went away (`| head`) is no error.
fn print_all(bytes: &[u8]) -> Result<ExitCode, CliError> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::Runtime(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// The soft limit of open files raised to the hard one, as Go programs and many servers
/// do: followed logs, transcripts and scrapes must not run out at a desktop's 1,024.
fn raise_open_files_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let target = hard.min(1 << 20);
        if soft < target {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, target, hard);
        }
    }
}

fn dispatch(cli: &Cli, clock: Clock) -> Result<ExitCode, CliError> {
    let global = &cli.global;
    let inv = Invocation::new(global);
    if let Some(code) = remote::forward_if_remote(cli, &inv)? {
        return Ok(code);
    }
    match &cli.command {
        Some(Command::Config(ConfigCommand::Default)) => {
            print!("{DEFAULT_TOML}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Init(init)) => init::run(global, init),
        Some(Command::Usage(args)) => {
            let project = inv.project()?;
            let settings = inv.settings()?;
            usage::run(
                project,
                &settings.context_windows,
                &settings.prices,
                global.json,
                args.wide,
            )
        }
        Some(Command::Doctor) => {
            let project = inv.project()?;
            let settings = inv.settings();
            Ok(doctor::run(
                project,
                settings.as_ref().copied(),
                global.json,
            ))
        }
        Some(Command::Task(task)) => {
            let project = inv.project()?;
            let settings = inv.settings()?;
            let code = task::run(project, settings, task, global.json, global.yes)?;
            Ok(ExitCode::from(code))
        }
        Some(Command::Sentinel(action)) => {
            let project = inv.project()?;
            sentinel::run(project, action, global.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Conductor(c)) if c.action == "watch" => {
            let project = inv.project()?;
            let settings = inv.settings().ok();
            conductor::watch::watch(project, settings, global.json)
        }
        Some(Command::Conductor(c)) => {
            let project = inv.project()?;
            conductor::run(project, &c.action, global.yes, global.json)?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Souffleur(args)) => {
            let project = inv.project()?;
            let settings = inv.settings()?;
            let invocation = args.invocation.join(" ");
            if args.watcher {
                return souffleur::watcher::run(project, settings, args, &invocation, clock);
            }
            souffleur::run(project, settings, global, invocation, clock)
        }
        Some(Command::Musician(args::MusicianCommand::Watch(watch))) => {
            let project = inv.project()?;
            musician::watch(project, watch, global.json)
        }
        Some(Command::Hook(_)) => Ok(ExitCode::SUCCESS),
        Some(Command::RunWithin(args)) => run_within::run(args),
        Some(Command::Serve) => {
            let project = inv.project()?;
            let settings = inv.settings()?;
            runtime()?.block_on(serve::run(project, settings, clock))
        }
        Some(Command::Completions { .. } | Command::Man) => print_generated(cli),
        Some(Command::Hooks(h)) => {
            let project = inv.project()?;
            hooks::run(
                &project.root,
                &h.action,
                h.user,
                h.replace_pollers,
                global.json,
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Launch) => {
            let project = inv.project()?;
            let settings = inv.settings()?;
            launch::open_dashboard(project, settings, global.config.as_deref())?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::Replay(args)) => {
            let project = inv.project()?;
            let settings = inv.settings()?;
            replay::run(project, settings, args, global, clock)
        }
        Some(Command::Demo(demo)) => run_demo(demo, &inv, clock),
        None => watch(cli, &inv, clock),
    }
}

/// No verb: watch the project(s), in the dashboard or headless (or take the Souffleur
/// role with `--souffleur`).
fn watch(cli: &Cli, inv: &Invocation<'_>, clock: Clock) -> Result<ExitCode, CliError> {
    let global = &cli.global;
    if global.souffleur {
        let project = inv.project()?;
        let settings = inv.settings()?;
        let (Some(pid), Some(session)) = (global.conductor_pid, &global.session_id) else {
            return Err(CliError::Usage(
                "--souffleur needs --conductor-pid PID and --session-id ID (or use `maestro souffleur PID:<pid> SESSION_ID:<id>`).".into(),
            ));
        };
        let invocation = format!("PID:{pid} SESSION_ID:{session}");
        return souffleur::run(project, settings, global, invocation, clock);
    }
    // Several projects, or a remote one: each its own hub, a link feeding a remote one.
    let many = global.projects.len() > 1
        || remote::remote_project(cli)?.is_some()
        || (global.projects.is_empty()
            && inv.settings().is_ok_and(|s| {
                s.projects.len() > 1
                    || s.projects.iter().any(|(_, dir)| {
                        crate::remote::RemoteProject::is_remote(&dir.to_string_lossy())
                    })
            }));
    let settings = inv.settings()?;
    if many {
        let chosen = many::chosen(global, settings)?;
        refuse_after_on_a_dashboard(global)?;
        return if global.no_tui {
            runtime()?.block_on(many::run(chosen, global, settings, clock))
        } else {
            dashboard::run_many(chosen, settings, clock)
        };
    }
    // One project in `[projects]` and none given: that one.
    let project = match (global.projects.is_empty(), settings.projects.as_slice()) {
        (true, [(_, dir)]) => Project::at(Some(dir), global)?,
        _ => Project::from_args(global)?,
    };
    refuse_after_on_a_dashboard(global)?;
    if global.no_tui {
        runtime()?.block_on(headless::run(&project, settings, global, clock))
    } else {
        dashboard::run(&project, settings, clock)
    }
}

/// `maestro demo`: the dashboard checked before anything is created.
fn run_demo(
    demo: &args::DemoArgs,
    inv: &Invocation<'_>,
    clock: Clock,
) -> Result<ExitCode, CliError> {
    let (global, settings) = (inv.global, inv.settings()?.clone());
    if !global.no_tui {
        // Checked before anything is created.
        TuiConfig::from_settings(String::new(), &settings, clock)
            .map_err(crate::cli::error::usage)?;
        dashboard::require_terminal()?;
    }
    runtime()?
        .block_on(crate::cli::demo::run(
            demo.clone(),
            global.clone(),
            settings,
            clock,
        ))
        .map_err(crate::cli::error::runtime)?;
    Ok(ExitCode::SUCCESS)
}

/// `completions` and `man`: made from the command line's own definitions.
fn print_generated(cli: &Cli) -> Result<ExitCode, CliError> {
    use clap::CommandFactory;
    if let Some(Command::Completions { shell }) = &cli.command {
        let mut script = Vec::new();
        clap_complete::generate(*shell, &mut args::Cli::command(), "maestro", &mut script);
        return print_all(&script);
    }
    let mut page = Vec::new();
    clap_mangen::Man::new(args::Cli::command())
        .render(&mut page)
        .map_err(|e| CliError::Runtime(format!("cannot write the manual page: {e}")))?;
    print_all(&page)
}

/// `--after` resumes a script's reading; the dashboard shows everything, old events
/// with their own times.
fn refuse_after_on_a_dashboard(global: &args::GlobalArgs) -> Result<(), CliError> {
    if global.after.is_some() && !global.no_tui {
        return Err(CliError::Usage(
            "--after resumes headless output: add --no-tui (and --json to read each event's cursor). The dashboard always shows old events, with the times they happened.".into(),
        ));
    }
    Ok(())
}
