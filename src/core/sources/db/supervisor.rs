//! The source's own thread: following the open database, waiting for it to appear,
//! re-arming when the file is removed, replaced or recreated; and the watch on the
//! database's folder that wakes it.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::mpsc as std_mpsc;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::{
    DbCmd, DbSettings, DbSource, Followed, Input, MISSING_RECHECK, RECHECKS, SOURCE, file_identity,
    queue_write,
};
use crate::core::error::CoreError;
use crate::core::event::{CoreEvent, DbStatus};

/// Handle to the running source: commands in, and a clean stop when dropped.
pub struct DbHandle {
    tx: std_mpsc::Sender<Input>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DbHandle {
    pub fn send(&self, cmd: DbCmd) {
        let _ = self.tx.send(Input::Cmd(cmd));
    }
}

impl Drop for DbHandle {
    fn drop(&mut self) {
        let _ = self.tx.send(Input::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs the database source on its own thread: follows `opened` (or waits for the
/// database to appear), and re-arms itself when the file is removed, replaced or
/// recreated, announcing each change.
pub fn spawn(
    settings: DbSettings,
    opened: Option<DbSource>,
    events: mpsc::Sender<CoreEvent>,
) -> DbHandle {
    let (tx, rx) = std_mpsc::channel();
    let watch_tx = tx.clone();
    let thread = std::thread::Builder::new()
        .name("maestro-db".into())
        .spawn(move || supervise(&settings, opened, &rx, watch_tx, &events))
        .ok();
    DbHandle { tx, thread }
}

fn supervise(
    settings: &DbSettings,
    mut current: Option<DbSource>,
    rx: &std_mpsc::Receiver<Input>,
    watch_tx: std_mpsc::Sender<Input>,
    events: &mpsc::Sender<CoreEvent>,
) {
    let send = |e: CoreEvent| {
        let _ = events.blocking_send(e);
    };
    let path = settings.path.clone();
    let watcher = match watch_database(&path, move || {
        let _ = watch_tx.send(Input::FileEvent);
    }) {
        Ok(w) => Some(w),
        Err(e) => {
            send(CoreEvent::SourceFailed {
                source: SOURCE,
                task: None,
                detail: format!(
                    "cannot watch {} ({e}); checking every {:?} instead",
                    path.display(),
                    settings.reading.fallback_poll
                ),
            });
            None
        }
    };
    let idle_wait = watcher.is_none().then_some(settings.reading.fallback_poll);
    let mut pending = VecDeque::new();
    let mut replaced = false;
    // A database that is there but was busy at start has been said by the caller.
    if current.is_none() && file_identity(&path).is_none() {
        send(CoreEvent::Database(DbStatus::Waiting(format!(
            "no database at {} yet; waiting for it (start a project there with `maestro init`, or see one with `maestro demo`)",
            path.display()
        ))));
    }
    loop {
        if let Some(mut source) = current.take() {
            match source.follow(rx, events, idle_wait, &mut pending) {
                Followed::Stop => return,
                Followed::Gone(status) => {
                    replaced = true;
                    say_gone(&status, &mut pending, &path, &send);
                }
            }
        }
        let Some(source) = open_when_there(settings, rx, replaced, &mut pending, &send) else {
            return;
        };
        current = Some(source);
    }
}

/// No database (or a replacement to open): tries now, then on every file event, with
/// the re-check schedule after each (a new file's schema commits later), until one
/// opens; `None` when asked to stop. What a failed attempt says is said once while it
/// stays the same; writes asked meanwhile wait in `pending`.
fn open_when_there(
    settings: &DbSettings,
    rx: &std_mpsc::Receiver<Input>,
    replaced: bool,
    pending: &mut VecDeque<DbCmd>,
    send: &dyn Fn(CoreEvent),
) -> Option<DbSource> {
    let mut last_problem: Option<String> = None;
    let mut attempt = 0;
    loop {
        if file_identity(&settings.path).is_some() {
            match open_with_events(settings) {
                Ok((source, initial)) => {
                    say_opened(initial, replaced, send);
                    return Some(source);
                }
                Err(e) => {
                    let problem = e.to_string();
                    if last_problem.as_ref() != Some(&problem) {
                        send(CoreEvent::Database(DbStatus::Waiting(format!(
                            "{problem}; waiting for a usable database"
                        ))));
                        last_problem = Some(problem);
                    }
                }
            }
        }
        // After the re-checks, look twice a second while there is no database: a file
        // behind a symlink can appear without an event in this folder.
        let wait = RECHECKS.get(attempt).copied().unwrap_or(MISSING_RECHECK);
        attempt += 1;
        let input = match rx.recv_timeout(wait) {
            Ok(i) => Some(i),
            Err(std_mpsc::RecvTimeoutError::Timeout) => None,
            Err(std_mpsc::RecvTimeoutError::Disconnected) => return None,
        };
        for input in input.into_iter().chain(rx.try_iter()) {
            match input {
                Input::Stop => return None,
                Input::FileEvent => attempt = 0,
                Input::Cmd(cmd) => queue_write(pending, cmd, send),
            }
        }
    }
}

/// The database went (removed or replaced): reports that could not be written to it
/// are dropped, said; a removal is said with what maestro waits for. A replacement is
/// opened right after, and announced with its tasks.
fn say_gone(
    status: &DbStatus,
    pending: &mut VecDeque<DbCmd>,
    path: &std::path::Path,
    send: &dyn Fn(CoreEvent),
) {
    if !pending.is_empty() {
        send(CoreEvent::SourceFailed {
            source: SOURCE,
            task: None,
            detail: format!(
                "{} Sentinel report(s) could not be written to the old database and are dropped",
                pending.len()
            ),
        });
        pending.clear();
    }
    if *status == DbStatus::Removed {
        send(CoreEvent::Database(DbStatus::Removed));
        send(CoreEvent::Database(DbStatus::Waiting(format!(
            "{} was removed; waiting for a new one",
            path.display()
        ))));
    }
}

/// A database opened: it appeared (or replaced the last), with its tasks, then what it
/// holds.
fn say_opened(initial: Vec<CoreEvent>, replaced: bool, send: &dyn Fn(CoreEvent)) {
    let tasks = initial
        .iter()
        .find_map(|e| match e {
            CoreEvent::Tasks(rows) => Some(rows.len()),
            _ => None,
        })
        .unwrap_or(0);
    send(CoreEvent::Database(if replaced {
        DbStatus::Replaced { tasks }
    } else {
        DbStatus::Appeared { tasks }
    }));
    for e in initial {
        send(e);
    }
}

fn open_with_events(settings: &DbSettings) -> Result<(DbSource, Vec<CoreEvent>), CoreError> {
    let mut source = DbSource::open(settings.clone())?;
    let initial = source.initial_events()?;
    Ok((source, initial))
}

/// Watches the database's folder and calls `wake` on every change to the database, its
/// `-wal` or its `-journal` (and when the kernel's queue overflowed).
pub fn watch_database(
    path: &Path,
    wake: impl Fn() + Send + 'static,
) -> notify::Result<notify::RecommendedWatcher> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let names = [
        name.clone(),
        format!("{name}-wal"),
        format!("{name}-journal"),
    ];
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(event) = res else {
            wake();
            return;
        };
        if crate::core::sources::is_read_access(&event.kind) {
            return;
        }
        let ours = event.need_rescan()
            || event.paths.iter().any(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| names.iter().any(|m| m == n))
            });
        if ours {
            wake();
        }
    })?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    watcher.watch(dir, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}
