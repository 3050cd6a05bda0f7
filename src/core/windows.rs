//! Which process a window action may signal. A PID file in `temp/` is written by
//! someone else (a Musician may write any number there), so a PID is acted on only
//! once the process behind it is shown to be the task's window:
//!
//! - a window maestro launched was recorded with its start time (in maestro's data
//!   directory, never in the project): the live process must still be that one;
//! - a window the Conductor launched (the seed's PID file holds the PID alone) must be a
//!   terminal or `claude` process the configuration names;
//! - and always: owned by this user, and neither maestro itself nor a process maestro
//!   runs under (its terminal, its shell).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::paths::ProjectKey;
use crate::core::procs::{self, ProcessId};
use crate::core::safe_fs;

/// How maestro opens windows (`[launch]`): argv templates, never shell strings.
#[derive(Debug, Clone)]
pub struct LaunchTemplates {
    pub terminal: Vec<String>,
    pub claude: Vec<String>,
    pub claude_export: Vec<String>,
    pub lethe: Vec<String>,
    /// The prompt a relaunched Musician starts with; `{task}` is its task id.
    pub musician_prompt: String,
    /// The mode a Musician's window starts in: acceptEdits, held to the user's ceiling.
    pub musician_permission: crate::core::domain::permission::Permission,
    /// kitty windows maestro opens listen for remote control (`w` focuses them).
    pub kitty_remote_control: bool,
    /// The remote-control socket of a kitty maestro did not open (`unix:/tmp/kitty`),
    /// when its windows do not say it themselves (`KITTY_LISTEN_ON`).
    pub kitty_socket: Option<String>,
    /// The size, in cells, of the kitty windows maestro opens (0: kitty's own default).
    pub window_columns: u16,
    pub window_lines: u16,
}

#[derive(Debug, Serialize, Deserialize)]
struct Recorded {
    pid: i32,
    start_time: Option<u64>,
}

/// Where maestro keeps the identity of a window it launched: keyed by the canonical
/// log folder and the PID file's name.
fn record_path(temp: &Path, pid_file: &str) -> Option<PathBuf> {
    let dir = crate::core::paths::data_dir()?
        .join("windows")
        .join(ProjectKey::of(temp).key);
    Some(dir.join(format!("{pid_file}.json")))
}

/// The PID a window PID file holds: a regular file (never a link or a FIFO) of at most
/// 64 bytes holding a number above 1. Whose process it is, is [`verify`]'s question.
pub fn pid_in(path: &Path) -> Option<i32> {
    let bytes = safe_fs::read_regular(path, 64).ok()?;
    String::from_utf8_lossy(&bytes)
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|p| *p > 1)
}

/// Remembers the process maestro just launched for `temp/<pid_file>`.
pub fn record_launch(temp: &Path, pid_file: &str, process: ProcessId) {
    let Some(path) = record_path(temp, pid_file) else {
        return;
    };
    let Some(dir) = path.parent() else { return };
    if crate::core::safe_fs::create_dirs(dir, 0o700).is_err() {
        return;
    }
    let text = serde_json::json!({"pid": process.pid, "start_time": process.start_time});
    // Without the record the window is still checked by its command line.
    let _ = safe_fs::write_atomic(&path, text.to_string().as_bytes(), 0o600);
}

/// A window PID file and its record as they were before a relaunch replaced them
/// ([`previous`]): put back when the relaunch fails after all.
#[derive(Debug)]
pub struct Previous {
    file: (PathBuf, Option<Vec<u8>>),
    record: Option<(PathBuf, Option<Vec<u8>>)>,
}

/// What `temp/<pid_file>` and its record hold now (nothing where there is no regular
/// file), to be put back.
pub fn previous(temp: &Path, pid_file: &str) -> Previous {
    let held = |path: PathBuf, max| {
        let bytes = safe_fs::read_regular(&path, max).ok();
        (path, bytes)
    };
    Previous {
        file: held(temp.join(pid_file), 64),
        record: record_path(temp, pid_file).map(|p| held(p, 4096)),
    }
}

impl Previous {
    /// Writes back what was there, or removes what was not.
    pub fn put_back(self) {
        let restore = |(path, bytes): (PathBuf, Option<Vec<u8>>), mode| match bytes {
            Some(b) => {
                let _ = safe_fs::write_atomic(&path, &b, mode);
            }
            None => {
                let _ = std::fs::remove_file(&path);
            }
        };
        restore(self.file, 0o644);
        if let Some(record) = self.record {
            restore(record, 0o600);
        }
    }
}

/// The program names a window may run as: the configured terminal and `claude`
/// launcher (seen through `env`), plus `kitty` and `claude` themselves.
pub fn window_programs(launch: &LaunchTemplates) -> Vec<String> {
    let mut names = vec!["kitty".to_owned(), "claude".to_owned()];
    if let Some(t) = launch.terminal.first() {
        names.push(base(t).to_owned());
    }
    names.extend(launched_program(&launch.claude));
    names.sort();
    names.dedup();
    names
}

/// The program the `claude` template runs, by its file name, seen through `env` and
/// its options (`env -u CLAUDECODE claude` runs `claude`).
pub fn launched_program(claude: &[String]) -> Option<String> {
    launched_word(claude).map(|w| base(w).to_owned())
}

/// The word of an argv that names the program run, as written (a name or a path), seen
/// through `env` and its options and assignments.
pub fn launched_word<S: AsRef<str>>(argv: &[S]) -> Option<&str> {
    let mut skip_next = false;
    for word in argv.iter().map(AsRef::as_ref) {
        if skip_next {
            skip_next = false;
            continue;
        }
        if base(word) == "env" || word.contains('=') {
            continue;
        }
        if word.starts_with('-') {
            skip_next = matches!(word, "-u" | "-C" | "--unset" | "--chdir");
            continue;
        }
        return Some(word);
    }
    None
}

fn base(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// Interpreters a launcher script runs under: the script is the program then.
const INTERPRETERS: [&str; 6] = ["sh", "bash", "dash", "zsh", "python3", "node"];

/// A PID file's process that is not the task's window, and why (the mismatch seen).
#[derive(Debug, thiserror::Error)]
#[error(
    "PID {pid} in {} is not acted on: {why}. maestro signals only the task's own window.",
    .file.display()
)]
pub struct NotTheWindow {
    pub pid: i32,
    pub file: std::path::PathBuf,
    pub why: String,
}

/// The process of `temp/<pid_file>` holding `pid`, if it is the task's window; else
/// why not, naming the mismatch.
pub fn verify(
    temp: &Path,
    pid_file: &str,
    pid: i32,
    programs: &[String],
) -> Result<ProcessId, NotTheWindow> {
    let refuse = |why: String| {
        Err(NotTheWindow {
            pid,
            file: temp.join(pid_file),
            why,
        })
    };
    let live = ProcessId::observe(pid);
    let me = std::process::id() as i32;
    if pid == me || procs::ancestors(me).contains(&pid) {
        return refuse("it is maestro itself or a process maestro runs under".into());
    }
    let uid = rustix::process::getuid().as_raw();
    match std::fs::metadata(format!("/proc/{pid}")) {
        Ok(m) if m.uid() == uid => {}
        Ok(m) => {
            return refuse(format!(
                "it belongs to uid {}, not to you (uid {uid})",
                m.uid()
            ));
        }
        Err(_) => return refuse("it is not running".into()),
    }
    let recorded = record_path(temp, pid_file)
        .and_then(|p| safe_fs::read_regular(&p, 4096).ok())
        .and_then(|b| serde_json::from_slice::<Recorded>(&b).ok())
        .filter(|r| r.pid == pid);
    if let Some(r) = recorded {
        return match (r.start_time, live.start_time) {
            (Some(then), Some(now)) if then != now => refuse(
                "the process maestro launched under that PID has ended, and the PID now belongs to another process".into(),
            ),
            _ => Ok(live),
        };
    }
    let argv = procs::cmdline(pid).unwrap_or_default();
    let program = match argv.first().map(|a| base(a)) {
        Some(first) if INTERPRETERS.contains(&first) => argv.get(1).map(|a| base(a)),
        other => other,
    };
    match program {
        Some(p) if programs.iter().any(|n| n == p) => Ok(live),
        _ => {
            let shown: String = crate::core::text::printable(&argv.join(" "))
                .chars()
                .take(80)
                .collect();
            refuse(format!(
                "it runs `{shown}`, which is not a terminal or claude process the configuration names ({})",
                programs.join(", ")
            ))
        }
    }
}

/// The PIDs above `pid`: its parent, the parent's parent, … up to init.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_programs_come_from_the_launch_templates() {
        let launch = LaunchTemplates {
            terminal: vec!["/usr/bin/alacritty".into(), "-e".into()],
            claude: vec![
                "env".into(),
                "-u".into(),
                "CLAUDECODE".into(),
                "claude-dev".into(),
            ],
            claude_export: vec![],
            lethe: vec![],
            musician_prompt: String::new(),
            musician_permission: crate::core::domain::permission::Permission::AcceptEdits,
            kitty_remote_control: true,
            kitty_socket: None,
            window_columns: 0,
            window_lines: 0,
        };
        assert_eq!(
            window_programs(&launch),
            ["alacritty", "claude", "claude-dev", "kitty"]
        );
    }

    #[test]
    fn a_foreign_process_maestro_itself_and_its_parent_are_refused() {
        let temp = tempfile::tempdir().expect("tempdir");
        let mut sleep = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let programs = vec!["kitty".to_owned(), "claude".to_owned()];
        // Until the child has exec'd, its command line is not yet `sleep`.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while procs::cmdline(sleep.id() as i32)
            .is_none_or(|a| a.first().is_none_or(|p| !p.ends_with("sleep")))
        {
            assert!(std::time::Instant::now() < end, "sleep never started");
            std::thread::yield_now();
        }
        let err = verify(
            temp.path(),
            "musician-task-01.pid",
            sleep.id() as i32,
            &programs,
        )
        .expect_err("a sleep is no window")
        .to_string();
        assert!(err.contains("`sleep 30`"), "{err}");
        let me = std::process::id() as i32;
        let err = verify(temp.path(), "x.pid", me, &programs)
            .expect_err("self")
            .to_string();
        assert!(err.contains("maestro itself"), "{err}");
        if let Some(parent) = procs::parent_of(me) {
            assert!(verify(temp.path(), "x.pid", parent, &programs).is_err());
        }
        let _ = sleep.kill();
        let _ = sleep.wait();
    }
}
