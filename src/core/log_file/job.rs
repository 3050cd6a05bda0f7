//! A log file indexed on a thread of its own: the dashboard's Log pane draws how far it
//! is and takes the index once it is done, so no frame waits on a large file (a frame
//! indexes at most [`FIRST_STEP`] bytes itself: a small file is done there).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::LineIndex;

/// Bytes a frame indexes itself before handing the rest to a thread (a few ms).
pub const FIRST_STEP: u64 = 4 << 20;
/// Bytes the thread indexes between looks at whether it is still wanted.
const STEP: u64 = 8 << 20;

#[derive(Debug, Default)]
struct Shared {
    scanned: AtomicU64,
    size: AtomicU64,
    stop: AtomicBool,
    done: Mutex<Option<std::io::Result<LineIndex>>>,
}

/// The indexing of one file on its thread (clones share it).
#[derive(Debug, Clone)]
pub struct IndexJob(Arc<Shared>);

impl IndexJob {
    /// Goes on indexing `index` (whose file is `size` bytes, `scanned` of them done) on
    /// a thread of its own.
    pub fn start(mut index: LineIndex, scanned: u64, size: u64) -> Self {
        let shared = Arc::new(Shared::default());
        shared.scanned.store(scanned, Ordering::Relaxed);
        shared.size.store(size, Ordering::Relaxed);
        let on_thread = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("log-index".into())
            .spawn(move || {
                let s = on_thread;
                let result = loop {
                    if s.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    match index.refresh_some(STEP) {
                        Ok(step) => {
                            s.scanned.store(step.scanned, Ordering::Relaxed);
                            s.size.store(step.size, Ordering::Relaxed);
                            if step.done {
                                break Ok(index);
                            }
                        }
                        Err(e) => break Err(e),
                    }
                };
                if let Ok(mut done) = s.done.lock() {
                    *done = Some(result);
                }
            });
        if let Err(e) = spawned
            && let Ok(mut done) = shared.done.lock()
        {
            *done = Some(Err(e));
        }
        Self(shared)
    }

    /// Bytes indexed and the file's size.
    pub fn progress(&self) -> (u64, u64) {
        (
            self.0.scanned.load(Ordering::Relaxed),
            self.0.size.load(Ordering::Relaxed),
        )
    }

    /// The index, once done (taken once).
    pub fn take(&self) -> Option<std::io::Result<LineIndex>> {
        self.0.done.lock().ok()?.take()
    }

    /// Tells the thread it is not wanted any more (it stops at its next step).
    pub fn stop(&self) {
        self.0.stop.store(true, Ordering::Relaxed);
    }
}
