//! The project's files: `temp/` is there and readable, its logs and PID files are
//! what the orchestration writes.

use std::path::Path;

use super::Level;
use crate::cli::project::Project;
use crate::core::domain::LogKind;

/// Task logs that cannot be followed: unreadable, FIFOs and other non-regular files,
/// folders, dangling symlinks. Nothing is opened for reading but regular files' metadata.
fn log_files(temp: &Path, add: &mut dyn FnMut(Level, &'static str, String)) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    let mut problems = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        if LogKind::parse_file_name(&name).is_none() {
            continue;
        }
        let path = e.path();
        match std::fs::metadata(&path) {
            Err(_) if path.symlink_metadata().is_ok() => {
                problems.push(format!("{name} is a dangling symlink"));
            }
            Err(err) => problems.push(format!("{name}: {err}")),
            Ok(m) if m.is_dir() => problems.push(format!("{name} is a folder")),
            Ok(m) if !m.is_file() => {
                problems.push(format!(
                    "{name} is not a regular file (a FIFO, socket or device)"
                ));
            }
            Ok(m) if m.permissions().readonly() && std::fs::File::open(&path).is_err() => {
                problems.push(format!("{name} cannot be read"));
            }
            Ok(_) => {}
        }
    }
    if !problems.is_empty() {
        add(
            Level::Warning,
            "logs",
            format!(
                "{}; maestro skips these (fix or remove them so the Sentinel sees those tasks)",
                problems.join("; ")
            ),
        );
    }
}

/// The windows maestro or the Conductor recorded: is each PID still running?
fn pid_files(temp: &Path, add: &mut dyn FnMut(Level, &'static str, String)) {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return;
    };
    let mut live = Vec::new();
    let mut dead = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let is_pid_file = name == "souffleur-conductor.pid"
            || (name.starts_with("musician-")
                && std::path::Path::new(&name)
                    .extension()
                    .is_some_and(|x| x == "pid"));
        if !is_pid_file {
            continue;
        }
        let pid = crate::core::windows::pid_in(&e.path());
        match pid {
            Some(p) if crate::core::procs::is_alive(p) => {
                live.push(format!("{name} ({p})"));
            }
            Some(p) => dead.push(format!("{name} ({p} is not running)")),
            None => dead.push(format!("{name} (no PID in it)")),
        }
    }
    if !dead.is_empty() {
        add(
            Level::Warning,
            "windows",
            format!(
                "{}; remove the stale PID files or relaunch those tasks",
                dead.join(", ")
            ),
        );
    } else if !live.is_empty() {
        add(
            Level::Ok,
            "windows",
            format!("running: {}", live.join(", ")),
        );
    }
}

/// The log folder: a folder, its task logs, their files and the PID files.
pub(super) fn temp_folder(project: &Project, add: &mut dyn FnMut(Level, &'static str, String)) {
    if project.temp.exists() && !project.temp.is_dir() {
        add(
            Level::Error,
            "temp",
            format!(
                "{} is not a folder; the Musicians cannot write their logs there. Move it away, or pass --temp with the log folder.",
                project.temp.display()
            ),
        );
    } else if project.temp.is_dir() {
        let logs = std::fs::read_dir(&project.temp).map_or(0, |d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(LogKind::parse_file_name)
                        .is_some()
                })
                .count()
        });
        add(
            Level::Ok,
            "temp",
            format!("{} holds {logs} task log files", project.temp.display()),
        );
        log_files(&project.temp, add);
        pid_files(&project.temp, add);
    } else {
        add(
            Level::Warning,
            "temp",
            format!(
                "{} does not exist yet; maestro will pick it up when it appears",
                project.temp.display()
            ),
        );
    }
}
