//! The Musician watchers source: which tasks have a `maestro musician watch` attached,
//! and in which mode. Follows the project's watcher folder (files written by the
//! watchers themselves) with the kernel's events, and each live watcher's end through
//! a pidfd, so a killed watcher is noticed at once too.

use std::collections::HashSet;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::event::CoreEvent;
use crate::core::musician_watch::live_watchers;
use crate::core::paths::{self, ProjectKey};
use crate::core::sources::procs::{self, ProcessId};

/// Fallback check when a watcher's end cannot be awaited through a pidfd.
const PID_POLL: Duration = Duration::from_secs(1);

/// Runs until `cancel`: sends `CoreEvent::Watchers` with the whole list whenever it
/// changes.
pub async fn run(project: ProjectKey, events: mpsc::Sender<CoreEvent>, cancel: CancellationToken) {
    let Ok(dir) = paths::watchers_dir(&project) else {
        return;
    };
    if std::fs::create_dir_all(&dir).is_err() {
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
