//! Taking the operator to a task's window: `kitty @ --to <socket> focus-window --match
//! pid:<window process>`, for the `w` key and `maestro task focus`.
//!
//! The task's `claude` process comes, in order of trust, from its hooks (the process that
//! ran them), the hook spool, then the window PID file (verified as the task's window)
//! and the `claude` process below it. The socket comes from the configuration, the
//! window's own `KITTY_LISTEN_ON`, or the socket of a window maestro opened.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::core::domain::TaskId;
use crate::core::hooks::book::NeedsYouBook;
use crate::core::hooks::spool::SpoolReader;
use crate::core::paths::ProjectKey;
use crate::core::procs::{self, ProcessId};
use crate::core::safe_fs;
use crate::core::windows::LaunchTemplates;

/// What is told when nothing says where kitty listens.
pub const REMOTE_CONTROL_HELP: &str = "turn on kitty's remote control for windows maestro did not open: add `allow_remote_control socket-only` and `listen_on unix:/tmp/kitty` to kitty.conf (or set [launch] kitty_socket)";

/// How long `kitty @` may take.
const KITTY_WAIT: Duration = Duration::from_secs(5);

fn owned_by_me(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}"))
        .is_ok_and(|m| m.uid() == rustix::process::getuid().as_raw())
}

/// The task's live `claude` process, if one can be found and trusted.
pub fn claude_of(
    project: &Path,
    temp: &Path,
    task: &TaskId,
    hint: Option<ProcessId>,
    launch: &LaunchTemplates,
) -> Option<ProcessId> {
    let usable = |p: &ProcessId| p.is_same_alive() && owned_by_me(p.pid);
    if let Some(h) = hint.filter(usable) {
        return Some(h);
    }
    // The hook spool, read the way the hub reads it.
    if let Some(path) = crate::core::hooks::spool::spool_path(&ProjectKey::of(project)) {
        let mut book = NeedsYouBook::default();
        let events = SpoolReader::new(path).read_new();
        for input in crate::core::sources::hooks::in_context(events, temp) {
            book.apply(&input, |_| true, |_| None);
        }
        if let Some(p) = book.claude_of(task.as_str()).filter(usable) {
            return Some(p);
        }
    }
    // The window PID file, verified, and the `claude` process below it.
    let pid_file = task.window_pid_file();
    let window = crate::core::windows::pid_in(&temp.join(&pid_file))?;
    let programs = crate::core::windows::window_programs(launch);
    let window = crate::core::windows::verify(temp, &pid_file, window, &programs).ok()?;
    procs::descendants(window.pid)
        .into_iter()
        .chain([window.pid])
        .find(|p| procs::comm(*p).is_some_and(|c| c == "claude"))
        .map(ProcessId::observe)
        .filter(usable)
}

/// Where to send `focus-window`: the kitty socket and the window's process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub socket: String,
    pub window_pid: i32,
}

/// Why a task's window was not brought to the front; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum FocusError {
    #[error(
        "no running claude process is known for {task}: install the hooks (`maestro hooks install`) or check temp/{}",
        .task.window_pid_file()
    )]
    NoSession { task: TaskId },
    #[error("{task}: {source}")]
    Of {
        task: TaskId,
        source: Box<FocusError>,
    },
    #[error("its claude process (PID {claude}) does not run in a kitty window")]
    NotInKitty { claude: i32 },
    #[error("kitty (PID {kitty}) does not listen for remote control; {REMOTE_CONTROL_HELP}")]
    NoRemoteControl { kitty: i32 },
    #[error("cannot run kitty @: {0}")]
    Kitty(#[source] std::io::Error),
    #[error("kitty @ focus-window did not answer within {}s", KITTY_WAIT.as_secs())]
    NoAnswer,
    #[error("kitty @ focus-window failed for {task}: {said}; {REMOTE_CONTROL_HELP}")]
    Refused { task: TaskId, said: String },
}

/// The kitty window a process runs in and the socket to reach that kitty.
pub fn target_of(
    claude: i32,
    project: &Path,
    launch: &LaunchTemplates,
) -> Result<Target, FocusError> {
    let mut window = claude;
    let mut kitty = None;
    for _ in 0..16 {
        let parent = procs::parent_of(window).filter(|p| *p > 1);
        match parent {
            Some(p) if procs::comm(p).is_some_and(|c| c == "kitty") => {
                kitty = Some(p);
                break;
            }
            Some(p) => window = p,
            None => break,
        }
    }
    let Some(kitty) = kitty else {
        return Err(FocusError::NotInKitty { claude });
    };
    // The operator's configured socket, then the one of a window maestro opened, and
    // only then what the window's environment says (a process could set it to point
    // elsewhere): a Unix socket owned by this user, never TCP or an abstract name.
    let ours = crate::core::recovery::launch::kitty_socket_base(project)
        .ok()
        .map(|base| format!("{}-{kitty}", base.display()))
        .filter(|p| is_own_socket(Path::new(p)))
        .map(|p| format!("unix:{p}"));
    let from_env = || listen_on_of(claude).or_else(|| listen_on_of(window));
    let socket = launch
        .kitty_socket
        .clone()
        .or(ours)
        .or_else(from_env)
        .ok_or(FocusError::NoRemoteControl { kitty })?;
    Ok(Target {
        socket,
        window_pid: window,
    })
}

/// `KITTY_LISTEN_ON` in a process's environment (kitty sets it in its windows), when it
/// names a Unix socket on disk that this user owns.
fn listen_on_of(pid: i32) -> Option<String> {
    let bytes =
        safe_fs::read_regular(Path::new(&format!("/proc/{pid}/environ")), 1024 * 1024).ok()?;
    bytes
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(b"KITTY_LISTEN_ON="))
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .filter(|v| is_own_unix_address(v))
}

/// `unix:/path` to a socket this user owns: not `tcp:`, not an abstract `unix:@name`
/// (anyone on the machine can bind one), not another user's.
pub fn is_own_unix_address(address: &str) -> bool {
    address.len() < 4096
        && address
            .strip_prefix("unix:")
            .is_some_and(|p| p.starts_with('/') && is_own_socket(Path::new(p)))
}

fn is_own_socket(path: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.file_type().is_socket() && m.uid() == rustix::process::geteuid().as_raw())
}

/// The kitty program: the terminal template's, when it is kitty, else `kitty`.
fn kitty_program(launch: &LaunchTemplates) -> String {
    launch
        .terminal
        .first()
        .filter(|p| crate::core::recovery::launch::is_kitty(p))
        .cloned()
        .unwrap_or_else(|| "kitty".into())
}

/// Brings a task's window to the front; says what it did, or why it could not.
pub fn focus_task(
    project: &Path,
    temp: &Path,
    task: &TaskId,
    hint: Option<ProcessId>,
    launch: &LaunchTemplates,
) -> Result<String, FocusError> {
    let claude = claude_of(project, temp, task, hint, launch)
        .ok_or_else(|| FocusError::NoSession { task: task.clone() })?;
    let target = target_of(claude.pid, project, launch).map_err(|e| FocusError::Of {
        task: task.clone(),
        source: Box::new(e),
    })?;
    let mut child = std::process::Command::new(kitty_program(launch))
        .args(["@", "--to", &target.socket, "focus-window", "--match"])
        .arg(format!("pid:{}", target.window_pid))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(FocusError::Kitty)?;
    let end = Instant::now() + KITTY_WAIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(FocusError::NoAnswer);
            }
        }
    };
    if status.success() {
        Ok(format!("{task}: its kitty window is in front"))
    } else {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        let err = crate::core::text::printable(err.trim()).into_owned();
        Err(FocusError::Refused {
            task: task.clone(),
            said: err,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_own_unix_socket_on_disk_is_a_kitty_address() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kitty-1");
        let _listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        assert!(is_own_unix_address(&format!("unix:{}", path.display())));
        assert!(!is_own_unix_address("tcp:127.0.0.1:5000"));
        assert!(
            !is_own_unix_address("unix:@mykitty"),
            "abstract: anyone can bind it"
        );
        assert!(!is_own_unix_address(&format!(
            "unix:{}",
            dir.path().join("none").display()
        )));
        let file = dir.path().join("plain");
        std::fs::write(&file, "").expect("write");
        assert!(
            !is_own_unix_address(&format!("unix:{}", file.display())),
            "not a socket"
        );
        if rustix::process::geteuid().is_root() {
            std::os::unix::fs::chown(&path, Some(65534), None).expect("chown");
            assert!(
                !is_own_unix_address(&format!("unix:{}", path.display())),
                "another user's"
            );
        }
    }
}
