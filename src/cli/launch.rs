//! `maestro launch`: opens the dashboard for the project in a new terminal window, using
//! the `[launch] terminal` argv template (kitty by default). Never a shell string.

use std::os::unix::process::CommandExt;
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
    if crate::core::recovery::launch::is_kitty(&program)
        && std::env::var_os("DISPLAY").is_none_or(|d| d.is_empty())
        && std::env::var_os("WAYLAND_DISPLAY").is_none_or(|d| d.is_empty())
    {
        return Err(CliError::Runtime(format!(
            "no display to open a window on: DISPLAY and WAYLAND_DISPLAY are both unset, so {program} cannot start here. Run `maestro` in this terminal instead, or launch from a graphical session."
        )));
    }
    // kitty's own complaints land in an unnamed file: read if it fails, never a pipe
    // that would break a window that lives on.
    let errors = tempfile::tempfile()
        .map_err(|e| CliError::Runtime(format!("cannot make a scratch file: {e}")))?;
    let stderr = errors
        .try_clone()
        .map_err(|e| CliError::Runtime(format!("cannot make a scratch file: {e}")))?;
    let mut child = std::process::Command::new(&program)
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .process_group(0)
        .spawn()
        .map_err(|e| CliError::Runtime(format!("cannot start {program}: {e}")))?;
    // A window that opens stays; a terminal that cannot open one exits within moments.
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(status);
    });
    let Ok(status) = rx.recv_timeout(LAUNCH_GRACE) else {
        // The window belongs to the user now; the thread reaps it if it ends.
        println!("opened {title} in a new {program} window");
        return Ok(());
    };
    let _ = waiter.join();
    let mut said = String::new();
    let mut errors = errors;
    let _ = std::io::Seek::rewind(&mut errors);
    let _ = std::io::Read::read_to_string(&mut std::io::Read::take(&mut errors, 4096), &mut said);
    let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
    Err(CliError::Runtime(format!(
        "{program} exited at once ({status}) and opened no window: {}. Fix that (a display, kitty's configuration), or run `maestro` in this terminal.",
        crate::core::text::one_line(said.trim())
    )))
}

/// How long a terminal that failed to open a window takes to say so.
const LAUNCH_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
