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
use crate::core::sources::procs::{self, ProcessId};

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
    loop {
        let batch = in_context(reader.read_new(), &temp);
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
        }
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
