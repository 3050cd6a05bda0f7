//! Claude Code's hooks as a source: the moment a session waits for the operator (a
//! permission prompt, an idle prompt) and which task the session is.
//!
//! - [`install`]: maestro's entries in a Claude Code settings file.
//! - `maestro hook` (in `cli/hooks.rs`) turns the event JSON on its stdin into a
//!   [`event::HookEvent`] and appends it to the project's [`spool`].
//! - [`guard`]: with `--replace-pollers`, a subagent polling in a loop stopped (the
//!   loop rule of `core::sessions::loops`), a poller's launch refused ([`replace`]), the
//!   command named instead allowed; [`reporter`]: whether a maestro reports to the database.
//! - The hooks source (`sources/hooks.rs`) follows the spool; the hub keeps the
//!   [`book::NeedsYouBook`].

pub mod book;
pub mod event;
pub mod guard;
pub mod install;
pub mod replace;
pub mod reporter;
pub mod spool;

use std::path::{Path, PathBuf};

use crate::core::procs::{self, ProcessId};

/// Shells that may stand between `claude` and the hook command.
const SHELLS: [&str; 6] = ["sh", "bash", "dash", "zsh", "fish", "ksh"];

/// The `claude` process that ran this hook: the parent, or the parent's parent when
/// the parent is the shell Claude Code ran the command with.
pub fn claude_process() -> Option<ProcessId> {
    let mut pid = nix::unistd::getppid().as_raw();
    for _ in 0..2 {
        let name = procs::comm(pid)?;
        if !SHELLS.contains(&name.as_str()) {
            break;
        }
        pid = procs::parent_of(pid)?;
    }
    (pid > 1).then(|| ProcessId::observe(pid))
}

/// The processes a watcher started from a session lives by: its parent (the shell that
/// started it, when that is not init) and the nearest `claude` above it (the session).
/// When either ends, the session that wanted the watcher is gone, and so is the need.
pub fn lifelines() -> Vec<ProcessId> {
    let me = std::process::id() as i32;
    let parent = nix::unistd::getppid().as_raw();
    let mut out = Vec::new();
    if parent > 1 {
        out.push(ProcessId::observe(parent));
    }
    if let Some(claude) = procs::ancestors(me)
        .into_iter()
        .take(16)
        .find(|p| procs::comm(*p).is_some_and(|c| c == "claude"))
        .filter(|p| *p != parent)
    {
        out.push(ProcessId::observe(claude));
    }
    out
}

/// The project a session's folder belongs to: the nearest folder at or above it that
/// holds `comms.db`, else the folder itself.
pub fn project_of(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .take(32)
        .find(|d| d.join("comms.db").is_file())
        .unwrap_or(cwd)
        .to_path_buf()
}
