//! Every live session of one task, as a relaunch must know them before it commits: its
//! own window's, the sessions Claude Code's hooks tied to the task (a claude in tmux, in
//! another terminal), and the process of the task's recorded session. A relaunch ends
//! each of them only once its successor runs: never two Musicians on one task.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::core::domain::TaskId;
use crate::core::hooks::spool::{SpoolReader, spool_path};
use crate::core::paths::ProjectKey;
use crate::core::procs::{self, ProcessId};
use crate::core::sessions::find;

/// One live session of a task and how it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveSession {
    /// The window's process (its claude below it), or the claude process itself.
    pub process: ProcessId,
    /// `window`, `hooks` or `recorded session`.
    pub how: &'static str,
}

/// The most spool reads one look takes (each up to 1 MiB; the spool starts over past 1 MiB).
const SPOOL_READS: usize = 4;

/// The live sessions of `task`: the window (when its PID file names a live window), then
/// each live claude the hooks or the recorded session id tie to the task that does not
/// run inside that window.
pub fn live_sessions(
    root: &Path,
    task: &TaskId,
    window: Option<ProcessId>,
    recorded: Option<&str>,
) -> Vec<LiveSession> {
    let mut out: Vec<LiveSession> = window
        .into_iter()
        .map(|process| LiveSession {
            process,
            how: "window",
        })
        .collect();
    let inside_window =
        |pid: i32| window.is_some_and(|w| w.pid == pid || procs::ancestors(pid).contains(&w.pid));
    let mut add = |process: ProcessId, how: &'static str| {
        if process.is_same_alive()
            && !inside_window(process.pid)
            && !out.iter().any(|s| s.process.pid == process.pid)
        {
            out.push(LiveSession { process, how });
        }
    };
    for process in hooked_claudes(root, task, recorded) {
        add(process, "hooks");
    }
    if let Some(session) = recorded.filter(|s| !s.is_empty()) {
        for pid in claudes_of_session(session) {
            add(ProcessId::observe(pid), "recorded session");
        }
    }
    out
}

/// The claude processes of the sessions the hooks' events tie to `task`: by the launch
/// command in a prompt, by the first prompt of the session's transcript, or by the
/// session id the task's row records. The newest process of each session.
fn hooked_claudes(root: &Path, task: &TaskId, recorded: Option<&str>) -> Vec<ProcessId> {
    let Some(path) = spool_path(&ProjectKey::of(root)) else {
        return Vec::new();
    };
    let mut reader = SpoolReader::new(path);
    let mut tied: HashMap<String, bool> = HashMap::new();
    let mut process: BTreeMap<String, ProcessId> = BTreeMap::new();
    for _ in 0..SPOOL_READS {
        let events = reader.read_new();
        if events.is_empty() {
            break;
        }
        for e in events {
            let by_prompt = e
                .prompt
                .as_deref()
                .and_then(find::task_by_command)
                .is_some_and(|t| t == task.as_str());
            let is_tied = tied.entry(e.session_id.clone()).or_insert_with(|| {
                recorded == Some(e.session_id.as_str())
                    || e.transcript_path
                        .as_deref()
                        .is_some_and(|t| transcript_launches(Path::new(t), root, task))
            });
            *is_tied |= by_prompt;
            if let Some(pid) = e.claude_pid {
                process.insert(
                    e.session_id.clone(),
                    ProcessId {
                        pid,
                        start_time: e.claude_start,
                    },
                );
            }
        }
    }
    process
        .into_iter()
        .filter(|(session, _)| tied.get(session).copied().unwrap_or(false))
        .map(|(_, p)| p)
        .collect()
}

/// Whether a transcript (read safely, its head only) is of a session launched for
/// `task` in this project.
fn transcript_launches(transcript: &Path, root: &Path, task: &TaskId) -> bool {
    find::head(transcript).is_some_and(|t| {
        t.cwd.as_deref().is_some_and(|c| find::in_project(c, root))
            && t.first_prompt
                .as_deref()
                .and_then(find::launch_task)
                .is_some_and(|launched| launched == task.as_str())
    })
}

/// The running claude processes of a session: its `sessions/<pid>.json` file, and a
/// `claude --resume <session>`.
fn claudes_of_session(session: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    if let Some(dir) = find::claude_dir().map(|d| d.join("sessions"))
        && let Ok(entries) = std::fs::read_dir(&dir)
    {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let names_it = crate::core::safe_fs::read_regular(&entry.path(), 64 * 1024)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v["sessionId"].as_str() == Some(session));
            if names_it && procs::is_alive(pid) {
                pids.push(pid);
            }
        }
    }
    pids.extend(procs::find_resumed_claude(session));
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// The first of these sessions maestro may not end (another user's process, even for
/// root: a relaunch never ends someone else's work): its PID and owner.
pub fn foreign(sessions: &[LiveSession]) -> Option<(i32, u32)> {
    let me = rustix::process::geteuid().as_raw();
    sessions.iter().find_map(|s| {
        procs::owner(s.process.pid)
            .filter(|uid| *uid != me)
            .map(|uid| (s.process.pid, uid))
    })
}
