//! The Musician watchers source: which tasks have a `maestro musician watch` attached,
//! and in which mode. Follows the project's watcher folder (files written by the
//! watchers themselves) with the kernel's events, and each live watcher's end through
//! a pidfd, so a killed watcher is noticed at once too. The folder's naming
//! (`<task>.<mode>` holding a PID, `.next` for a watcher taking over) is defined here,
//! for `musician watch` that writes it and for this source that reads it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::domain::TaskId;
use crate::core::event::CoreEvent;
use crate::core::paths::{self, ProjectKey};
use crate::core::procs::{self, ProcessId};

/// Fallback check when a watcher's end cannot be awaited through a pidfd.
const PID_POLL: Duration = Duration::from_secs(1);

/// Runs until `cancel`: sends `CoreEvent::Watchers` with the whole list whenever it
/// changes.
pub async fn run(project: ProjectKey, events: mpsc::Sender<CoreEvent>, cancel: CancellationToken) {
    let Ok(dir) = paths::watchers_dir(&project) else {
        return;
    };
    if crate::core::safe_fs::create_dirs(&dir, 0o700).is_err() {
        return;
    }
    let (wake_tx, mut wake) = mpsc::unbounded_channel::<()>();
    let notify_tx = wake_tx.clone();
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if res.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
            let _ = notify_tx.send(());
        }
    });
    let _watcher = watcher.ok().and_then(|mut w| {
        w.watch(&dir, RecursiveMode::NonRecursive).ok()?;
        Some(w)
    });
    let mut last = Vec::new();
    let mut awaited: HashSet<i32> = HashSet::new();
    loop {
        let now = live_watchers(&project);
        for (_, _, pid) in &now {
            if awaited.insert(*pid) {
                let tx = wake_tx.clone();
                let process = ProcessId::observe(*pid);
                let cancel = cancel.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = procs::wait_for_exit(process, PID_POLL) => { let _ = tx.send(()); }
                        () = cancel.cancelled() => {}
                    }
                });
            }
        }
        awaited.retain(|pid| now.iter().any(|(_, _, p)| p == pid));
        if now != last {
            let list = now
                .iter()
                .map(|(task, mode, pid)| (task.clone(), mode.as_str(), *pid))
                .collect();
            if events.send(CoreEvent::Watchers(list)).await.is_err() {
                return;
            }
            last = now;
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

/// Which watcher: during work, or while waiting for the Conductor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    Background,
    Pause,
}

impl WatchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Background => "background",
            Self::Pause => "pause",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "background" => Some(Self::Background),
            "pause" => Some(Self::Pause),
            _ => None,
        }
    }
}

/// `<task>.<mode>.next`: the PID of a watcher taking over, while the old one leaves.
pub(crate) fn successor_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".next");
    PathBuf::from(name)
}

/// The live watchers of a project: (task, mode, pid) from the watcher files.
pub fn live_watchers(project: &ProjectKey) -> Vec<(TaskId, WatchMode, i32)> {
    let Ok(dir) = paths::watchers_dir(project) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<(TaskId, WatchMode, i32)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (task, mode) = name.rsplit_once('.')?;
            let task = TaskId::parse(task)?;
            let mode = WatchMode::parse(mode)?;
            let live_pid = |p: &Path| -> Option<i32> {
                let pid: i32 = std::fs::read_to_string(p).ok()?.trim().parse().ok()?;
                (pid > 1 && procs::is_alive(pid)).then_some(pid)
            };
            // The watcher taking over, else the holder. The successor file is read
            // first: a successor writes the holder file before it removes its own, so
            // one of the two reads finds it (read the other way round, a takeover
            // between the reads looked like no watcher at all).
            let pid = live_pid(&successor_file(&e.path())).or_else(|| live_pid(&e.path()))?;
            Some((task, mode, pid))
        })
        .collect();
    found.sort_by(|a, b| (a.0.as_str(), a.1.as_str()).cmp(&(b.0.as_str(), b.1.as_str())));
    found
}
