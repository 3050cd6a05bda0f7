//! `maestro launch`: opens the dashboard for the project in a new terminal window, using
//! the `[launch] terminal` argv template (kitty by default). Never a shell string.

use std::path::Path;

use crate::cli::CliError;
use crate::cli::project::Project;
use crate::core::recovery::launch::{find_program, terminal_argv};
use crate::settings::Settings;

pub fn open_dashboard(
    project: &Project,
    settings: &Settings,
    config: Option<&Path>,
) -> Result<(), CliError> {
    let root = std::fs::canonicalize(&project.root).unwrap_or_else(|_| project.root.clone());
    let title = format!("maestro: {}", project.name());
    // Said before the window opens: a squatted socket folder turns focus off.
    let problems = crate::core::paths::socket_dir_problems().into_iter().chain(
        crate::core::recovery::launch::kitty_focus_problem(&settings.launch, &root),
    );
    for problem in problems {
        eprintln!(
            "maestro: warning: {}",
            crate::core::text::printable(&problem)
        );
    }
    let mut argv = terminal_argv(&settings.launch, &root, &title);
    let program = argv.remove(0);
    if find_program(&program).is_none() {
        return Err(CliError::Runtime(format!(
            "{program} was not found on PATH, so maestro cannot open a window. Install kitty, set `[launch] terminal` in the configuration to your terminal's argv, or run `maestro` in this terminal."
        )));
    }
    let me = std::env::current_exe()
        .map_err(|e| CliError::Runtime(format!("cannot find maestro's own path: {e}")))?;
    argv.push(me.display().to_string());
    argv.push("--project".into());
    argv.push(root.display().to_string());
    if let Some(c) = config {
        argv.push("--config".into());
        argv.push(c.display().to_string());
    }
    std::process::Command::new(&program)
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| CliError::Runtime(format!("cannot start {program}: {e}")))?;
    println!("opened {title} in a new {program} window");
    Ok(())
}
