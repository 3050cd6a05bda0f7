//! Headless output that never makes maestro wait for its reader: lines go into a
//! bounded queue that a writer thread drains to stdout. When the reader stalls (a
//! paused pager, a full pipe), the newest [`BOUND`] lines are kept, older ones are
//! dropped, and one notice says how many before output resumes. Memory stays bounded
//! and the sources and the Sentinel keep running.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Lines kept while the reader does not read.
pub const BOUND: usize = 10_000;

#[derive(Default)]
struct State {
    lines: VecDeque<String>,
    dropped: u64,
    /// The writer failed (the reader closed the pipe).
    closed: bool,
    /// No more lines will come.
    finished: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// The writing end of the queue; the writer thread ends when this is finished.
pub struct OutputQueue {
    shared: Arc<Shared>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl OutputQueue {
    /// Starts a writer thread on `out`. `notice(n)` is the line that tells the reader
    /// `n` lines were dropped (in the output's format, with its newline).
    pub fn start(
        out: Box<dyn Write + Send>,
        notice: impl Fn(u64) -> String + Send + 'static,
    ) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let for_writer = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("maestro-stdout".into())
            .spawn(move || write_until_finished(&for_writer, out, &notice))
            .ok();
        Self { shared, writer }
    }

    /// Queues one line (with its newline). False once the reader has gone away.
    pub fn push(&self, line: String) -> bool {
        let Ok(mut s) = self.shared.state.lock() else {
            return false;
        };
        if s.closed {
            return false;
        }
        if s.lines.len() == BOUND {
            s.lines.pop_front();
            s.dropped += 1;
        }
        s.lines.push_back(line);
        self.shared.wake.notify_one();
        true
    }

    /// Lines waiting now (for tests and the benchmark).
    pub fn pending(&self) -> usize {
        self.shared.state.lock().map_or(0, |s| s.lines.len())
    }

    /// No more lines: lets the writer write what is queued, waiting at most `grace`
    /// for a stalled reader (the process then exits without it).
    pub fn finish(mut self, grace: Duration) {
        if let Ok(mut s) = self.shared.state.lock() {
            s.finished = true;
        }
        self.shared.wake.notify_one();
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
    shared: &Shared,
    mut out: Box<dyn Write + Send>,
    notice: &dyn Fn(u64) -> String,
) {
    loop {
        let (lines, dropped, finished) = {
            let Ok(mut s) = shared.state.lock() else {
                return;
            };
            while s.lines.is_empty() && !s.finished {
                s = match shared.wake.wait(s) {
                    Ok(s) => s,
                    Err(_) => return,
                };
            }
            (
                std::mem::take(&mut s.lines),
                std::mem::take(&mut s.dropped),
                s.finished,
            )
        };
        let mut ok = true;
        if dropped > 0 {
            ok &= out.write_all(notice(dropped).as_bytes()).is_ok();
        }
        for line in &lines {
            ok = ok && out.write_all(line.as_bytes()).is_ok();
        }
        ok = ok && out.flush().is_ok();
        if !ok {
            if let Ok(mut s) = shared.state.lock() {
                s.closed = true;
            }
            return;
        }
        if finished && lines.is_empty() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_stalled_reader_keeps_the_newest_lines_and_hears_how_many_were_dropped() {
        let open = Arc::new((Mutex::new(false), Condvar::new()));
        let got = Arc::new(Mutex::new(Vec::new()));
        let gate = Gate {
            open: Arc::clone(&open),
            got: Arc::clone(&got),
        };
        let q = OutputQueue::start(Box::new(gate), |n| format!("DROPPED {n}\n"));
        // The writer takes the first line and blocks writing it; the rest queue up.
        assert!(q.push("0\n".into()));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while q.pending() > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never took a line"
            );
            std::thread::yield_now();
        }
        let total = BOUND + 500;
        for i in 1..total {
            assert!(q.push(format!("{i}\n")));
        }
        assert_eq!(q.pending(), BOUND, "bounded");
        *open.0.lock().expect("lock") = true;
        open.1.notify_all();
        q.finish(Duration::from_secs(10));
        let text = String::from_utf8(got.lock().expect("lock").clone()).expect("utf8");
        let lines: Vec<&str> = text.lines().collect();
        let dropped_line = lines
            .iter()
            .find(|l| l.starts_with("DROPPED "))
            .expect("a notice");
        let dropped: usize = dropped_line["DROPPED ".len()..].parse().expect("n");
        // The oldest waiting lines went; everything is accounted for.
        assert_eq!(dropped, total - 1 - BOUND);
        assert_eq!(lines.len() - 1 + dropped, total, "{dropped}");
        assert_eq!(lines.last(), Some(&(total - 1).to_string().as_str()));
    }
}
