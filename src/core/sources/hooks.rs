//! The hooks source: follows the project's hook spool (what `maestro hook` appends) with
//! the kernel's events and hands each event to the hub in order, with the task whose
//! window its `claude` process runs in and whether that process is still alive. What
//! the spool held at start is read first, so a prompt that began before maestro did is
//! seen (unless its session has ended or its process is gone).

use std::path::{Path, PathBuf};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::domain::CONDUCTOR_PID_FILE;
use crate::core::event::CoreEvent;
use crate::core::hooks::book::HookInput;
use crate::core::hooks::event::HookEvent;
use crate::core::hooks::spool::{self, SpoolReader};
use crate::core::paths::ProjectKey;
use crate::core::procs::{self, ProcessId};

/// Runs until `cancel`, sending `CoreEvent::Hooks` for each batch of new events.
pub async fn run(
    project: ProjectKey,
    temp: PathBuf,
    events: mpsc::Sender<CoreEvent>,
    cancel: CancellationToken,
) {
    let (Some(dir), Some(path)) = (spool::spool_dir(), spool::spool_path(&project)) else {
        return;
    };
    {
        use std::os::unix::fs::DirBuilderExt;
        if std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .is_err()
        {
            return;
        }
    }
    let (wake_tx, mut wake) = mpsc::unbounded_channel::<()>();
    let name = path.file_name().map(std::ffi::OsStr::to_os_string);
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.is_ok_and(|e| {
            !matches!(e.kind, notify::EventKind::Access(_))
                && e.paths.iter().any(|p| p.file_name() == name.as_deref())
        }) {
            let _ = wake_tx.send(());
        }
    });
    let _watcher = watcher.ok().and_then(|mut w| {
        w.watch(&dir, RecursiveMode::NonRecursive).ok()?;
        Some(w)
    });
    let mut reader = SpoolReader::new(path);
    let mut ends = ProcessEnds::default();
    loop {
        let batch = in_context(reader.read_new(), &temp);
        ends.follow(&batch, &cancel);
        if !batch.is_empty() && events.send(CoreEvent::Hooks(batch)).await.is_err() {
            return;
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            got = wake.recv() => {
                if got.is_none() {
                    return;
                }
                while wake.try_recv().is_ok() {}
            }
            Some(process) = ends.ended.recv() => {
                if let Some(ended) = ends.input(process)
                    && events.send(CoreEvent::Hooks(vec![ended])).await.is_err()
                {
                    return;
                }
            }
        }
    }
}

/// The live `claude` processes that ran hooks, each with the last session it ran them
/// for, and a waiter on each one's pidfd: when one ends (killed in the middle of a
/// response, say), its session is told ended, with no poll.
struct ProcessEnds {
    sessions: std::collections::HashMap<(i32, Option<u64>), String>,
    ended_tx: mpsc::UnboundedSender<(i32, Option<u64>)>,
    ended: mpsc::UnboundedReceiver<(i32, Option<u64>)>,
}

impl Default for ProcessEnds {
    fn default() -> Self {
        let (ended_tx, ended) = mpsc::unbounded_channel();
        Self {
            sessions: std::collections::HashMap::new(),
            ended_tx,
            ended,
        }
    }
}

/// Where no pidfd can be had (a kernel before 5.3): how often `kill -0` looks.
const EXIT_FALLBACK_POLL: std::time::Duration = std::time::Duration::from_secs(2);

impl ProcessEnds {
    fn follow(&mut self, batch: &[HookInput], cancel: &CancellationToken) {
        for input in batch.iter().filter(|i| i.claude_alive) {
            let Some(pid) = input.event.claude_pid else {
                continue;
            };
            let key = (pid, input.event.claude_start);
            let fresh = self
                .sessions
                .insert(key, input.event.session_id.clone())
                .is_none();
            if fresh {
                let (tx, cancel) = (self.ended_tx.clone(), cancel.clone());
                let process = ProcessId {
                    pid,
                    start_time: key.1,
                };
                tokio::spawn(async move {
                    tokio::select! {
                        () = cancel.cancelled() => {}
                        () = procs::wait_for_exit(process, EXIT_FALLBACK_POLL) => {
                            let _ = tx.send(key);
                        }
                    }
                });
            }
        }
    }

    /// The note that this process's last session ended.
    fn input(&mut self, process: (i32, Option<u64>)) -> Option<HookInput> {
        let session = self.sessions.remove(&process)?;
        let at_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
        Some(HookInput {
            event: HookEvent::process_ended(&session, process, at_ms),
            window_task: None,
            claude_alive: false,
        })
    }
}

/// Events with what the process table says about their `claude` processes, as the hub
/// takes them: one look per process of the batch (the spool read at start may hold
/// thousands of events of a few sessions).
pub fn in_context(events: Vec<HookEvent>, temp: &Path) -> Vec<HookInput> {
    let mut seen = std::collections::HashMap::new();
    events
        .into_iter()
        .map(|e| with_context(e, temp, &mut seen))
        .collect()
}

/// What the process table says of one `claude` process: alive, and in which window.
type ProcessFacts = (bool, Option<String>);

/// The event with what the process table says about its `claude` process.
fn with_context(
    event: HookEvent,
    temp: &Path,
    seen: &mut std::collections::HashMap<(i32, Option<u64>), ProcessFacts>,
) -> HookInput {
    let claude = event.claude_pid.map(|pid| ProcessId {
        pid,
        start_time: event.claude_start,
    });
    let (claude_alive, window) = claude.map_or((false, None), |c| {
        seen.entry((c.pid, c.start_time))
            .or_insert_with(|| {
                let alive = c.is_same_alive();
                (alive, alive.then(|| window_task(c.pid, temp)).flatten())
            })
            .clone()
    });
    let window_task = match event.event.as_str() {
        "SessionStart" | "UserPromptSubmit" | "Notification" | "PermissionRequest" => window,
        _ => None,
    };
    HookInput {
        event,
        window_task,
        // Without a recorded process, nothing says it is gone.
        claude_alive: claude.is_none() || claude_alive,
    }
}

/// The task whose window PID file names the process or one of its ancestors.
fn window_task(pid: i32, temp: &Path) -> Option<String> {
    let line: Vec<i32> = std::iter::once(pid).chain(procs::ancestors(pid)).collect();
    for f in std::fs::read_dir(temp).ok()?.flatten() {
        let name = f.file_name().to_string_lossy().into_owned();
        let task = if name == CONDUCTOR_PID_FILE {
            crate::core::domain::CONDUCTOR_ID.to_owned()
        } else if let Some(task) = name
            .strip_prefix("musician-")
            .and_then(|n| n.strip_suffix(".pid"))
            .filter(|t| crate::core::domain::TaskId::parse(t).is_some())
        {
            task.to_owned()
        } else {
            continue;
        };
        if crate::core::windows::pid_in(&f.path()).is_some_and(|window| line.contains(&window)) {
            return Some(task);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_below_a_window_pid_file_is_that_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        let parent = procs::parent_of(me).unwrap();
        std::fs::write(
            dir.path().join("musician-task-04.pid"),
            format!("{parent}\n"),
        )
        .unwrap();
        std::fs::write(dir.path().join("musician-bogus.pid"), format!("{me}\n")).unwrap();
        assert_eq!(window_task(me, dir.path()).as_deref(), Some("task-04"));
        std::fs::write(dir.path().join("musician-task-04.pid"), "1\n").unwrap();
        assert_eq!(window_task(me, dir.path()), None, "init is no window");
    }
}
