//! Headless output with backpressure: lines go into a bounded queue that a writer
//! thread drains to stdout. When the reader stalls (a paused pager, a full pipe), the
//! queue fills and [`OutputQueue::push`] waits: the presenter stops taking happenings,
//! the hub stops taking events, and the sources stop reading (their offsets wait; the
//! files and the database are the buffer). Memory stays bounded and nothing is lost
//! (docs/cli.md: each message exactly once). Timed checks (staleness, stalls) are made
//! when the hub moves again, each once.
//!
//! When nothing is queued and the reader has room (`poll` says stdout takes a line now
//! without waiting), a line is written at once by the presenter itself: an anomaly
//! reaches the reader without waking the writer thread.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

/// Lines waiting for the reader before the presenter waits too.
pub const BOUND: usize = 10_000;

/// A line no longer than this is written at once when the reader has room: a pipe
/// that polls writable takes at least `PIPE_BUF` (4,096) bytes without blocking.
const DIRECT_MAX: usize = 4096;

/// What the presenter and the writer thread share.
struct Shared {
    out: Mutex<Box<dyn Write + Send>>,
    /// The writer failed (the reader closed the pipe).
    closed: AtomicBool,
    /// Lines queued or being written by the thread: a direct write waits its turn.
    in_flight: AtomicUsize,
}

/// The writing end of the queue; the writer thread ends when this is finished.
pub struct OutputQueue {
    tx: Option<mpsc::Sender<String>>,
    shared: Arc<Shared>,
    /// Written to directly when it has room (stdout); `None` always queues.
    direct: Option<OwnedFd>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl OutputQueue {
    /// Starts a writer thread on `out`; every line goes through the queue.
    pub fn start(out: Box<dyn Write + Send>) -> Self {
        Self::start_with(out, None)
    }

    /// The queue on this process's stdout, written directly when it has room.
    pub fn on_stdout() -> Self {
        let fd = std::io::stdout().as_fd().try_clone_to_owned().ok();
        Self::start_with(Box::new(std::io::BufWriter::new(std::io::stdout())), fd)
    }

    /// `out` writes to `fd` (a copy of its descriptor, polled for room).
    fn start_with(out: Box<dyn Write + Send>, direct: Option<OwnedFd>) -> Self {
        let (tx, rx) = mpsc::channel(BOUND);
        let shared = Arc::new(Shared {
            out: Mutex::new(out),
            closed: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
        });
        let for_writer = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("maestro-stdout".into())
            .spawn(move || write_until_finished(rx, &for_writer))
            .ok();
        Self {
            tx: Some(tx),
            shared,
            direct,
            writer,
        }
    }

    /// Queues one line (with its newline), waiting while the queue is full. False once
    /// the reader has gone away.
    pub async fn push(&self, line: String) -> bool {
        if self.shared.closed.load(Ordering::Relaxed) {
            return false;
        }
        if let Some(written) = self.write_now(&line) {
            return written;
        }
        match &self.tx {
            Some(tx) => {
                self.shared.in_flight.fetch_add(1, Ordering::SeqCst);
                let sent = tx.send(line).await.is_ok();
                if !sent {
                    self.shared.in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                sent
            }
            None => false,
        }
    }

    /// The line written here and now, when nothing is ahead of it and the reader has
    /// room; `None` sends it to the queue.
    fn write_now(&self, line: &str) -> Option<bool> {
        let fd = self.direct.as_ref()?.as_fd();
        if line.len() > DIRECT_MAX || self.shared.in_flight.load(Ordering::SeqCst) != 0 {
            return None;
        }
        let mut out = self.shared.out.try_lock().ok()?;
        // Checked again under the lock: the writer holds it while it writes.
        if self.shared.in_flight.load(Ordering::SeqCst) != 0 || !has_room(fd) {
            return None;
        }
        let ok = out
            .write_all(line.as_bytes())
            .and_then(|()| out.flush())
            .is_ok();
        if !ok {
            self.shared.closed.store(true, Ordering::Relaxed);
        }
        Some(ok)
    }

    /// Lines waiting now (for tests).
    #[cfg(test)]
    pub fn pending(&self) -> usize {
        self.tx
            .as_ref()
            .map_or(0, |tx| tx.max_capacity() - tx.capacity())
    }

    /// No more lines: lets the writer write what is queued, waiting at most `grace`
    /// for a stalled reader (the process then exits without it).
    pub fn finish(mut self, grace: Duration) {
        drop(self.tx.take());
        if let Some(writer) = self.writer.take() {
            let deadline = std::time::Instant::now() + grace;
            while !writer.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if writer.is_finished() {
                let _ = writer.join();
            }
        }
    }
}

/// Whether a write of up to [`DIRECT_MAX`] bytes to `fd` returns at once.
fn has_room(fd: BorrowedFd<'_>) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(fd, PollFlags::POLLOUT)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(1))
        && fds[0].revents().is_some_and(|r| r == PollFlags::POLLOUT)
}

fn write_until_finished(mut rx: mpsc::Receiver<String>, shared: &Shared) {
    let mut lines = Vec::with_capacity(256);
    // Everything already queued is written before one flush.
    while rx.blocking_recv_many(&mut lines, 4096) > 0 {
        let ok = {
            let mut out = shared
                .out
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            lines.iter().all(|l| out.write_all(l.as_bytes()).is_ok()) && out.flush().is_ok()
        };
        shared.in_flight.fetch_sub(lines.len(), Ordering::SeqCst);
        lines.clear();
        if !ok {
            shared.closed.store(true, Ordering::Relaxed);
            // The senders see a closed queue from now on.
            rx.close();
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Condvar, Mutex};

    /// A reader that takes nothing until released, then everything.
    struct Gate {
        open: Arc<(Mutex<bool>, Condvar)>,
        got: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (lock, cv) = &*self.open;
            let mut open = lock.lock().expect("lock");
            while !*open {
                open = cv.wait(open).expect("wait");
            }
            self.got.lock().expect("lock").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_stalled_reader_makes_the_presenter_wait_and_loses_nothing() {
        let open = Arc::new((Mutex::new(false), Condvar::new()));
        let got = Arc::new(Mutex::new(Vec::new()));
        let gate = Gate {
            open: Arc::clone(&open),
            got: Arc::clone(&got),
        };
        let q = OutputQueue::start(Box::new(gate));
        let total = BOUND * 3;
        let mut i = 0;
        // The queue takes what it can hold, then push waits.
        loop {
            let push = q.push(format!("{i}\n"));
            match tokio::time::timeout(Duration::from_millis(200), push).await {
                Ok(ok) => assert!(ok),
                Err(_) => break,
            }
            i += 1;
            assert!(i <= BOUND + 4096 + 1, "the queue is bounded");
        }
        assert!(q.pending() <= BOUND);
        // The reader comes back: every line arrives, in order.
        *open.0.lock().expect("lock") = true;
        open.1.notify_all();
        while i < total {
            assert!(q.push(format!("{i}\n")).await);
            i += 1;
        }
        q.finish(Duration::from_secs(10));
        let text = String::from_utf8(got.lock().expect("lock").clone()).expect("utf8");
        let expected: Vec<String> = (0..total).map(|n| n.to_string()).collect();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), total);
        assert!(lines.iter().zip(&expected).all(|(a, b)| a == b));
    }

    /// On a real pipe, lines written at once and lines queued behind a full pipe
    /// arrive all, in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn direct_and_queued_lines_keep_their_order() {
        use std::io::Read;
        let (read, write) = std::io::pipe().expect("pipe");
        let fd = write.as_fd().try_clone_to_owned().expect("dup");
        let q = OutputQueue::start_with(Box::new(write), Some(fd));
        let total = 40_000;
        let start = Arc::new((Mutex::new(false), Condvar::new()));
        let go = Arc::clone(&start);
        let reader = std::thread::spawn(move || {
            let (lock, cv) = &*go;
            let mut started = lock.lock().expect("lock");
            while !*started {
                started = cv.wait(started).expect("wait");
            }
            drop(started);
            let mut text = String::new();
            let mut read = read;
            read.read_to_string(&mut text).expect("read");
            text
        });
        // The first lines go straight into the pipe until it is full, the rest queue.
        let mut i = 0;
        while q.pending() == 0 {
            assert!(q.push(format!("{i}\n")).await);
            i += 1;
        }
        *start.0.lock().expect("lock") = true;
        start.1.notify_all();
        while i < total {
            assert!(q.push(format!("{i}\n")).await);
            i += 1;
        }
        q.finish(Duration::from_secs(10));
        let text = reader.join().expect("reader");
        let lines: Vec<usize> = text.lines().map(|l| l.parse().expect("number")).collect();
        assert_eq!(lines, (0..total).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn a_closed_reader_ends_the_output() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let q = OutputQueue::start(Box::new(Broken));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while q.push("x\n".into()).await {
            assert!(tokio::time::Instant::now() < deadline, "never noticed");
            tokio::task::yield_now().await;
        }
    }
}
