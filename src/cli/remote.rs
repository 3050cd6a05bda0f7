//! A command given a remote project (`--project ssh://…`) is run by the maestro on
//! that host (`remote::forward`); the dashboard and `--no-tui` watch it over a link
//! (`cli::many`).

use std::process::ExitCode;

use crate::cli::args::{Cli, Command};
use crate::cli::error::CliError;
use crate::remote::{RemoteProject, forward};

/// The one remote project of a command line, if `--project` names one.
pub fn remote_project(cli: &Cli) -> Result<Option<RemoteProject>, CliError> {
    let [one] = cli.global.projects.as_slice() else {
        return Ok(None);
    };
    let text = one.to_string_lossy();
    if !RemoteProject::is_remote(&text) {
        return Ok(None);
    }
    RemoteProject::parse(&text)
        .map(Some)
        .map_err(crate::cli::error::usage)
}

/// Runs the command on the remote project's host, when it is one that acts on a
/// project and the project is remote; `None`: run it here.
pub fn forward_if_remote(
    cli: &Cli,
    inv: &crate::cli::invocation::Invocation<'_>,
) -> Result<Option<ExitCode>, CliError> {
    let Some(command) = &cli.command else {
        return Ok(None);
    };
    let acts_on_project = match command {
        // Each verb says whether it acts on the project: a new verb must choose.
        Command::Init(_)
        | Command::Replay(_)
        | Command::Task(_)
        | Command::Conductor(_)
        | Command::Sentinel(_)
        | Command::Souffleur(_)
        | Command::Doctor
        | Command::Usage(_)
        | Command::Hooks(_)
        | Command::Musician(_) => true,
        Command::Config(_)
        | Command::Completions { .. }
        | Command::Man
        | Command::Hook(_)
        | Command::Demo(_)
        | Command::RunWithin(_) => false,
        Command::Launch => {
            if remote_project(cli)?.is_some() {
                return Err(CliError::Usage(
                    "maestro launch opens a kitty window here, on a folder of this machine. For a remote project, run `maestro --project ssh://…` in a terminal (or launch on its host).".into(),
                ));
            }
            false
        }
        Command::Serve => {
            if remote_project(cli)?.is_some() {
                return Err(CliError::Usage(
                    "maestro serve runs on the project's own host, with its local path: `ssh HOST maestro serve --project /path`.".into(),
                ));
            }
            false
        }
    };
    if !acts_on_project {
        return Ok(None);
    }
    let Some(project) = remote_project(cli)? else {
        return Ok(None);
    };
    if cli.global.db.is_some() || cli.global.temp.is_some() {
        return Err(CliError::Usage(
            "--db and --temp name files of this machine; a remote project uses the comms.db and temp/ of its folder on its host.".into(),
        ));
    }
    let settings = inv.settings()?;
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let args = forward::remote_args(&argv, &project).map_err(crate::cli::error::usage)?;
    let code =
        forward::run(&settings.remote, &project, &args).map_err(crate::cli::error::runtime)?;
    Ok(Some(ExitCode::from(code)))
}
