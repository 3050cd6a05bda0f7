//! What follows the first look, on the runtime: the kernel's events are awaited there
//! (the inotify descriptor registered with the runtime's reactor), and an append is
//! read and handed to the hub on the thread that judges it and prints the report: no
//! wake-up of another thread between the line and its report. Only appended bytes are
//! read here (in the page cache, never a wait on a disk); a burst is read a few batches
//! at a time, each sent (awaiting room in the hub's queue) before the next.

use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{MISSING_RECHECK, TempLogs, folder_identity};
use crate::core::event::{CoreEvent, FolderStatus};
use crate::core::sources::kernel_watch::{KernelWatch, Woken};

/// The source after its first look: the logs, the kernel's watch, and the folder.
pub(super) struct Live {
    pub logs: TempLogs,
    pub kernel: Option<KernelWatch>,
    /// The kernel cannot watch: the folder is looked at every `fallback_poll`.
    pub polling: bool,
    /// The folder followed, by (device, inode); none while it is missing.
    pub followed: Option<(u64, u64)>,
}

/// Takes the source over from its first look's thread and follows the logs until
/// `cancel` (or the hub is gone).
pub(super) async fn run(handoff: oneshot::Receiver<Live>, cancel: CancellationToken) {
    let Ok(mut live) = handoff.await else { return };
    live.logs.outbox = Some(std::cell::RefCell::new(Vec::new()));
    let mut kernel = live.kernel.take().and_then(|k| register(k).ok());
    // The reactor cannot take the watch: the folder is looked at every `fallback_poll`.
    if kernel.is_none() {
        live.polling = true;
        live.logs.open_budget = 0;
    }
    loop {
        let period = live.period();
        let woken = tokio::select! {
            () = cancel.cancelled() => return,
            woken = next(kernel.as_mut(), period) => woken,
        };
        if woken.stop {
            return;
        }
        live.handle(woken, kernel.as_mut().map(AsyncFd::get_mut));
        if !live.flush().await {
            return;
        }
        while let Some(name) = live.logs.more.pop_first() {
            live.logs.sync(&name, false);
            if !live.flush().await {
                return;
            }
        }
    }
}

/// The watch registered with the runtime's reactor. `AsyncFd::new` is deprecated for
/// what a type could do (name another descriptor later); a [`KernelWatch`] owns its
/// inotify descriptor for its whole life and always names that one, which is what the
/// (unsafe, and this crate forbids unsafe code) `register` asks its caller to promise.
#[allow(deprecated)]
fn register(kernel: KernelWatch) -> std::io::Result<AsyncFd<KernelWatch>> {
    AsyncFd::with_interest(kernel, tokio::io::Interest::READABLE)
}

/// What the kernel says next, or that `period` went by.
async fn next(kernel: Option<&mut AsyncFd<KernelWatch>>, period: Option<Duration>) -> Woken {
    let heard = async {
        let Some(kernel) = kernel else {
            return std::future::pending().await;
        };
        loop {
            let Ok(mut ready) = kernel.readable_mut().await else {
                return Woken {
                    stop: true,
                    ..Woken::default()
                };
            };
            let mut woken = Woken::default();
            // Readiness is cleared only once a read leaves the queue empty: an event
            // queued after it raises readiness again (the reactor hears each new one).
            if ready.get_inner_mut().drain(&mut woken) {
                ready.clear_ready();
            }
            if woken.rescan || !woken.names.is_empty() {
                return woken;
            }
        }
    };
    match period {
        Some(period) => tokio::select! {
            woken = heard => woken,
            () = tokio::time::sleep(period) => Woken {
                timed_out: true,
                ..Woken::default()
            },
        },
        None => heard.await,
    }
}

impl Live {
    /// How long to wait at most: while `temp/` is missing it is looked for every half
    /// second (a folder behind a symlink can come back without an event); while
    /// polling, every `fallback_poll`.
    fn period(&self) -> Option<Duration> {
        let poll = self.logs.settings.reading.fallback_poll;
        if self.followed.is_none() {
            Some(MISSING_RECHECK.min(poll))
        } else {
            self.polling.then_some(poll)
        }
    }

    /// Reads what the kernel said changed; a folder removed, made or replaced starts
    /// the logs over.
    fn handle(&mut self, woken: Woken, kernel: Option<&mut KernelWatch>) {
        let logs = &mut self.logs;
        if !(woken.rescan || woken.timed_out) {
            for name in &woken.renamed {
                logs.close(name);
            }
            for name in woken.names {
                logs.sync(&name, false);
            }
            return;
        }
        let dir = logs.settings.dir.clone();
        let now = folder_identity(&dir);
        if now == self.followed {
            logs.scan();
            return;
        }
        if now.is_none() {
            logs.folder_missing(false);
            logs.forget_all();
        } else {
            if let Some(k) = kernel
                && !k.rewatch(&dir)
            {
                self.polling = true;
                logs.open_budget = 0;
            }
            logs.scan();
            logs.send(CoreEvent::LogFolder(FolderStatus::Watching(format!(
                "{} is there{}: following {} task logs",
                dir.display(),
                if self.followed.is_some() {
                    " again (a new folder)"
                } else {
                    ""
                },
                logs.tails.len()
            ))));
        }
        self.followed = now;
    }

    /// Sends what waits in the outbox, in order; false when the hub is gone.
    async fn flush(&mut self) -> bool {
        let Some(outbox) = &self.logs.outbox else {
            return true;
        };
        let waiting = std::mem::take(&mut *outbox.borrow_mut());
        for event in waiting {
            if self.logs.events.send(event).await.is_err() {
                return false;
            }
        }
        true
    }
}
