//! What a step's processes may take, by construction: a slot each (a cap per run and
//! one for all pipelines together), their captured output cut to its last part, every
//! line cut to a length, and background output handed over through a bounded queue (a
//! process nobody reads waits on its pipe instead of filling maestro's memory).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

/// The longest line of a step's output kept whole (longer lines are cut, marked `…`).
pub const MAX_LINE: usize = 8 * 1024;
/// Lines of a background step's output waiting for a `watch` step.
pub const LINE_QUEUE: usize = 1024;

/// A count of live step processes with a ceiling.
#[derive(Debug)]
pub struct ProcessSlots {
    live: AtomicUsize,
    max: usize,
    what: &'static str,
}

impl ProcessSlots {
    pub fn new(max: usize, what: &'static str) -> Arc<Self> {
        Arc::new(Self {
            live: AtomicUsize::new(0),
            max,
            what,
        })
    }

    /// A slot, or why there is none (the step fails with that reason).
    pub fn take(self: &Arc<Self>) -> Result<Slot, NoSlot> {
        let taken = self
            .live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Slot(Arc::clone(self))),
            Err(_) => Err(NoSlot {
                max: self.max,
                what: self.what,
            }),
        }
    }

    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }
}

/// No slot is free: the step is not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{max} step processes are running {what} (the most allowed; `[pipelines] max_processes` and `max_processes_per_run` set it); this one was not started"
)]
pub struct NoSlot {
    max: usize,
    what: &'static str,
}

/// One live step process; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot(Arc<ProcessSlots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A step process's two slots: its run's and the global one.
pub fn take_slots(run: &Arc<ProcessSlots>, all: &Arc<ProcessSlots>) -> Result<[Slot; 2], NoSlot> {
    Ok([run.take()?, all.take()?])
}

/// Everything a stream gives until it closes, keeping only the last `max` bytes; the
/// number of bytes cut from the front comes with it.
pub async fn read_tail(mut stream: impl AsyncRead + Unpin, max: usize) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut cut = 0u64;
    let mut buf = vec![0; 64 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                kept.extend_from_slice(&buf[..n]);
                // Drop the front in large steps, not on every read.
                if kept.len() > max.saturating_mul(2).max(64 * 1024) {
                    let excess = kept.len() - max;
                    kept.drain(..excess);
                    cut += excess as u64;
                }
            }
        }
    }
    if kept.len() > max {
        let excess = kept.len() - max;
        kept.drain(..excess);
        cut += excess as u64;
    }
    (kept, cut)
}

/// Captured output as text: what was cut is said first, and every line is bounded.
pub fn captured_text(bytes: &[u8], cut: u64) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len().min(1 << 20));
    if cut > 0 {
        out.push_str(&format!("[maestro: the first {cut} bytes were cut]\n"));
    }
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&cap_line(line));
    }
    out
}

/// A line of at most [`MAX_LINE`] bytes (cut on a character boundary, marked `…`).
pub fn cap_line(line: &str) -> std::borrow::Cow<'_, str> {
    if line.len() <= MAX_LINE {
        return line.into();
    }
    let mut end = MAX_LINE;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end]).into()
}

/// Sends each line of a stream (at most [`MAX_LINE`] bytes kept of each) until it
/// closes or nobody listens. A full queue makes this wait, and so the process.
pub async fn forward_lines(
    stream: Option<impl AsyncRead + Unpin>,
    tx: &mpsc::Sender<Option<String>>,
) {
    let Some(s) = stream else { return };
    let mut reader = tokio::io::BufReader::new(s);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut long = false;
        // Read up to the newline, keeping at most MAX_LINE bytes of it.
        loop {
            let Ok(buf) = reader.fill_buf().await else {
                return;
            };
            if buf.is_empty() {
                if line.is_empty() && !long {
                    return;
                }
                break;
            }
            let (take, done) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i, Some(i + 1)),
                None => (buf.len(), None),
            };
            let room = MAX_LINE.saturating_sub(line.len());
            long |= take > room;
            line.extend_from_slice(&buf[..take.min(room)]);
            let used = done.unwrap_or(buf.len());
            reader.consume(used);
            if done.is_some() {
                break;
            }
        }
        let mut text = String::from_utf8_lossy(&line).into_owned();
        if long {
            text.push('…');
        }
        if tx.send(Some(text)).await.is_err() {
            return;
        }
    }
}

/// A bounded queue for a background step's lines.
pub fn line_queue() -> (mpsc::Sender<Option<String>>, mpsc::Receiver<Option<String>>) {
    mpsc::channel(LINE_QUEUE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_tail_is_kept_and_the_cut_counted() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let (kept, cut) = read_tail(&data[..], 1000).await;
        assert_eq!(kept.len(), 1000);
        assert_eq!(cut, 299_000);
        assert_eq!(kept, data[299_000..]);
        let text = captured_text(b"a\nb", 5);
        assert_eq!(text, "[maestro: the first 5 bytes were cut]\na\nb");
    }

    #[tokio::test]
    async fn long_lines_are_cut_and_the_queue_is_bounded() {
        let long = "x".repeat(MAX_LINE * 3);
        let input = format!("{long}\nshort\n");
        let (tx, mut rx) = line_queue();
        forward_lines(Some(input.as_bytes()), &tx).await;
        drop(tx);
        let first = rx.recv().await.flatten().expect("line");
        assert_eq!(first.len(), MAX_LINE + '…'.len_utf8());
        assert_eq!(rx.recv().await.flatten().as_deref(), Some("short"));
    }

    #[test]
    fn slots_run_out_and_come_back() {
        let slots = ProcessSlots::new(2, "in this run");
        let a = slots.take().expect("one");
        let _b = slots.take().expect("two");
        let err = slots.take().expect_err("full").to_string();
        assert!(err.contains("max_processes"), "{err}");
        drop(a);
        assert!(slots.take().is_ok());
    }
}
