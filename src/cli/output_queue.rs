//! Headless output with backpressure: lines go into a bounded queue that a writer
//! thread drains to stdout. When the reader stalls (a paused pager, a full pipe), the
//! queue fills and [`OutputQueue::push`] waits: the presenter stops taking happenings,
//! the hub stops taking events, and the sources stop reading (their offsets wait; the
//! files and the database are the buffer). Memory stays bounded and nothing is lost
//! (docs/cli.md: each message exactly once). Timed checks (staleness, stalls) are made
//! when the hub moves again, each once.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;

/// Lines waiting for the reader before the presenter waits too.
pub const BOUND: usize = 10_000;

/// The writing end of the queue; the writer thread ends when this is finished.
pub struct OutputQueue {
    tx: Option<mpsc::Sender<String>>,
    /// The writer failed (the reader closed the pipe).
    closed: Arc<AtomicBool>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl OutputQueue {
    /// Starts a writer thread on `out`.
    pub fn start(out: Box<dyn Write + Send>) -> Self {
        let (tx, rx) = mpsc::channel(BOUND);
        let closed = Arc::new(AtomicBool::new(false));
        let for_writer = Arc::clone(&closed);
        let writer = std::thread::Builder::new()
            .name("maestro-stdout".into())
            .spawn(move || write_until_finished(rx, out, &for_writer))
            .ok();
        Self {
            tx: Some(tx),
            closed,
            writer,
        }
    }

    /// Queues one line (with its newline), waiting while the queue is full. False once
    /// the reader has gone away.
    pub async fn push(&self, line: String) -> bool {
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        match &self.tx {
            Some(tx) => tx.send(line).await.is_ok(),
            None => false,
        }
    }

    /// Lines waiting now (for tests and the benchmark).
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

fn write_until_finished(
    mut rx: mpsc::Receiver<String>,
    mut out: Box<dyn Write + Send>,
    closed: &AtomicBool,
) {
    let mut lines = Vec::with_capacity(256);
    // Everything already queued is written before one flush.
    while rx.blocking_recv_many(&mut lines, 4096) > 0 {
        let ok = lines.iter().all(|l| out.write_all(l.as_bytes()).is_ok()) && out.flush().is_ok();
        lines.clear();
        if !ok {
            closed.store(true, Ordering::Relaxed);
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
