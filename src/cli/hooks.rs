//! `maestro hook` (run by Claude Code for each hook event) and `maestro hooks
//! install | uninstall`.
//!
//! The hook command never gets in Claude Code's way: it prints nothing, decides
//! nothing, reads stdin to its end (at most 1 MiB, for at most [`STDIN_WAIT`]: Claude
//! Code closes it at once, and the limit holds when it never does), and exits 0 whatever
//! happens (no maestro running, garbage, an unwritable data dir, a full disk).

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::cli::CliError;
use crate::core::hooks::{self, event::HookEvent, install, spool};
use crate::core::paths::ProjectKey;

/// The most of stdin a hook event may take.
const MAX_INPUT: usize = 1024 * 1024;
/// How long the hook waits for its stdin to end: well inside the 5 s timeout maestro
/// installs its hooks with, and far longer than Claude Code takes to write an event.
const STDIN_WAIT: Duration = Duration::from_secs(1);

/// `maestro hook [--project DIR]`: spools the event on stdin. Always exit 0.
pub fn hook_main(args: &[std::ffi::OsString]) {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    // `--project-hex`: a folder whose name is not UTF-8, as its bytes (see
    // `install::hook_command`).
    let project = flag("--project").map(PathBuf::from).or_else(|| {
        flag("--project-hex")
            .and_then(|h| h.to_str())
            .and_then(from_hex)
            .map(|b| {
                PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&b))
            })
    });
    let input = read_stdin();
    let json =
        serde_json::from_slice::<serde_json::Value>(&input).unwrap_or_else(|_| cut_short(&input));
    let at_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    let Some(mut event) = HookEvent::from_claude(&json, at_ms) else {
        return;
    };
    if let Some(claude) = hooks::claude_process() {
        event.claude_pid = Some(claude.pid);
        event.claude_start = claude.start_time;
    }
    let root = project.unwrap_or_else(|| {
        // A cwd that is not UTF-8 reaches JSON with U+FFFD in it: the process's own
        // working folder (Claude Code runs hooks there) has the real bytes.
        let cwd = event
            .cwd
            .as_deref()
            .filter(|c| !c.contains('\u{FFFD}'))
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        hooks::project_of(&cwd)
    });
    if let Some(path) = spool::spool_path(&ProjectKey::of(&root)) {
        let _ = spool::append(&path, &event);
    }
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    text.len()
        .is_multiple_of(2)
        .then(|| {
            (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
                .collect()
        })
        .flatten()
}

/// An event cut at [`MAX_INPUT`] (a tool's huge output) is not valid JSON, but its
/// first fields still say which session moved on.
fn cut_short(input: &[u8]) -> serde_json::Value {
    static FIELD: std::sync::LazyLock<regex::bytes::Regex> = std::sync::LazyLock::new(|| {
        regex::bytes::Regex::new(r#""(session_id|hook_event_name|cwd)"\s*:\s*"([^"\\]{1,512})""#)
            .expect("static regex")
    });
    let head = &input[..input.len().min(8192)];
    let mut v = serde_json::json!({});
    for c in FIELD.captures_iter(head) {
        let key = String::from_utf8_lossy(&c[1]).into_owned();
        if v.get(&key).is_none() {
            v[key] = serde_json::json!(String::from_utf8_lossy(&c[2]));
        }
    }
    v
}

/// Stdin up to [`MAX_INPUT`] bytes, until it ends or [`STDIN_WAIT`] runs out.
fn read_stdin() -> Vec<u8> {
    let stdin = std::io::stdin();
    let mut lock = stdin.lock();
    let deadline = Instant::now() + STDIN_WAIT;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while out.len() < MAX_INPUT {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms =
            PollTimeout::try_from(left.as_millis().min(1000) as i32).unwrap_or(PollTimeout::ZERO);
        let ready = {
            let mut fds = [PollFd::new(lock.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, ms).unwrap_or(0)
        };
        if ready == 0 {
            break;
        }
        match lock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n.min(MAX_INPUT - out.len())]),
        }
    }
    out
}

/// `maestro hooks install | uninstall [--user]` on a project (or the user's settings).
pub fn run(project_root: &Path, action: &str, user: bool, json: bool) -> Result<(), CliError> {
    let root = std::fs::canonicalize(project_root).unwrap_or_else(|_| project_root.to_path_buf());
    let path = install::settings_path((!user).then_some(root.as_path())).ok_or_else(|| {
        CliError::Runtime("cannot find Claude Code's folder: set HOME or CLAUDE_CONFIG_DIR.".into())
    })?;
    install::refuse_unwritable(&path).map_err(CliError::Runtime)?;
    let (settings, mode) = install::read(&path).map_err(CliError::Runtime)?;
    let changed = match action {
        "install" => {
            let exe = std::env::current_exe()
                .map_err(|e| CliError::Runtime(format!("cannot find maestro's own path: {e}")))?;
            let command = install::hook_command(&exe, (!user).then_some(root.as_path()));
            install::merged(settings, &command).map_err(|why| {
                CliError::Runtime(format!(
                    "{} is not shaped like Claude Code's settings ({why}); fix it and run this again; it was left untouched",
                    path.display()
                ))
            })?
        }
        _ => install::removed(settings),
    };
    let done = changed.is_some();
    if let Some(new) = changed {
        install::write(&path, &new, mode).map_err(CliError::Runtime)?;
    }
    let said = match (action, done) {
        ("install", true) => format!(
            "installed maestro's hooks for {} events in {}; sessions started from now on report to maestro",
            hooks::event::EVENTS.len(),
            path.display()
        ),
        ("install", false) => format!(
            "maestro's hooks are already installed in {}",
            path.display()
        ),
        (_, true) => format!("removed maestro's hooks from {}", path.display()),
        (_, false) => format!("no maestro hooks in {}; nothing changed", path.display()),
    };
    if json {
        println!(
            "{}",
            serde_json::json!({"ok": true, "action": action, "changed": done, "file": path})
        );
    } else {
        println!("{said}");
    }
    Ok(())
}
