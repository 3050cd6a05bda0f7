//! `maestro launch`: opens the dashboard for the project in a new terminal window, using
//! the `[launch] terminal` argv template (kitty by default). Never a shell string.

use std::path::Path;

use crate::cli::error::CliError;
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
    if crate::core::recovery::launch::is_kitty(&program)
        && std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty())
        && std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty())
    {
        return Err(CliError::Runtime(format!(
            "no display to open a window on: DISPLAY and WAYLAND_DISPLAY are both unset, so {program} cannot start here. Run `maestro` in this terminal instead, or launch from a graphical session."
        )));
    }
    // Opened means maestro runs in it: a process named as this program below the window,
    // still running a moment later (a window that runs nothing is ended, and said so).
    let launcher = crate::core::recovery::launch::Launcher {
        templates: settings.launch.clone(),
        project: root.clone(),
    };
    let wanted = me
        .file_name()
        .map_or_else(|| "maestro".into(), |n| n.to_string_lossy().into_owned());
    let mut full = vec![program.clone()];
    full.extend(argv);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    match rt.block_on(launcher.spawn_running(&full, &wanted)) {
        Ok(_) => {
            println!("opened {title} in a new {program} window, maestro running in it");
            Ok(())
        }
        Err(why) => Err(CliError::Runtime(format!(
            "{why}. Fix that (a display, kitty's configuration), or run `maestro` in this terminal."
        ))),
    }
}
