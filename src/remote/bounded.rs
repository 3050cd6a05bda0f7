//! Reading what a host sends with a bound on every byte: frames of at most
//! [`MAX_FRAME`], never read whole into memory past it; a line that is not UTF-8 is
//! skipped, not a reason to drop the link; and the last [`STDERR_KEPT`] bytes of ssh's
//! stderr, however much it writes.

use tokio::io::{AsyncRead, AsyncReadExt};

/// The longest frame a host may send.
pub const MAX_FRAME: usize = 1 << 20;
/// The bytes of ssh's stderr kept to explain a failure.
pub const STDERR_KEPT: usize = 4096;
/// Read at most this much at a time.
const CHUNK: usize = 64 * 1024;

/// One thing read from the host.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    Line(String),
    /// A line that is not UTF-8 (skipped; its length).
    NotUtf8(usize),
}

#[derive(Debug)]
pub enum ReadError {
    /// A frame passed [`MAX_FRAME`] without ending.
    TooLong,
    Io(std::io::Error),
}

/// Splits what comes into frames; cancel-safe (all state is here, a read either
/// landed in the buffer or did not happen).
pub struct FrameReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: Vec::new(),
            scanned: 0,
        }
    }

    /// The next frame, `None` at the end of the stream (a partial last line is not a
    /// frame).
    pub async fn next(&mut self) -> Result<Option<Frame>, ReadError> {
        loop {
            if let Some(at) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let end = self.scanned + at;
                let line: Vec<u8> = self.buf.drain(..=end).take(end).collect();
                self.scanned = 0;
                // A bounded buffer's capacity is given back after a large frame.
                if self.buf.capacity() > 4 * CHUNK && self.buf.len() < CHUNK {
                    self.buf.shrink_to(CHUNK);
                }
                return Ok(Some(match String::from_utf8(line) {
                    Ok(text) => Frame::Line(text),
                    Err(e) => Frame::NotUtf8(e.as_bytes().len()),
                }));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > MAX_FRAME {
                return Err(ReadError::TooLong);
            }
            self.buf.reserve(CHUNK);
            let room = (MAX_FRAME + 1 - self.buf.len()).min(CHUNK);
            let mut chunk = (&mut self.inner).take(room as u64);
            let n = chunk.read_buf(&mut self.buf).await.map_err(ReadError::Io)?;
            if n == 0 {
                return Ok(None);
            }
        }
    }
}

/// The last [`STDERR_KEPT`] bytes a stream wrote, read until it ends.
pub async fn keep_tail<R: AsyncRead + Unpin>(mut inner: R, kept: &std::sync::Mutex<Vec<u8>>) {
    let mut chunk = vec![0u8; CHUNK];
    while let Ok(n) = inner.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let mut k = kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        k.extend_from_slice(&chunk[..n]);
        if k.len() > STDERR_KEPT {
            let cut = k.len() - STDERR_KEPT;
            k.drain(..cut);
        }
    }
}

/// Distinct tasks and sessions one remote project may name: past them, what names a
/// new one is refused (said once), so no host can grow this maestro without limit.
pub const MAX_TASKS: usize = 10_000;
pub const MAX_SESSIONS: usize = 10_000;

/// The tasks and sessions a remote project has named, and whether a refusal was said.
#[derive(Debug, Default)]
pub struct Caps {
    tasks: std::collections::HashSet<String>,
    sessions: std::collections::HashSet<String>,
    said: bool,
}

impl Caps {
    /// Whether an input may go on. `Err(Some(text))` the first time one is refused (for
    /// an `error` event), `Err(None)` after.
    pub fn admit(
        &mut self,
        input: &crate::core::event_log::input::Input,
    ) -> Result<(), Option<String>> {
        use crate::core::event_log::input::Input;
        use crate::core::sessions::figures::SessionReport;
        let (tasks, session): (Vec<&str>, Option<&str>) = match input {
            Input::Lines { task, .. } | Input::Reset { task, .. } | Input::History { task, .. } => {
                (vec![task.as_str()], None)
            }
            Input::Tasks { set, .. } => (set.iter().map(|r| r.task_id.as_str()).collect(), None),
            Input::Session { report } => match report {
                SessionReport::Found(f) | SessionReport::Update(f) => {
                    (vec![f.task_id.as_str()], Some(f.session_id.as_str()))
                }
                SessionReport::Lost {
                    task_id,
                    session_id,
                    ..
                } => (vec![task_id.as_str()], Some(session_id.as_str())),
                SessionReport::Missing { task_id, .. } => (vec![task_id.as_str()], None),
                SessionReport::Folder { .. } => (Vec::new(), None),
            },
            _ => (Vec::new(), None),
        };
        let new_tasks = tasks.iter().filter(|t| !self.tasks.contains(**t)).count();
        let new_session = session.is_some_and(|s| !self.sessions.contains(s));
        if self.tasks.len() + new_tasks > MAX_TASKS
            || (new_session && self.sessions.len() >= MAX_SESSIONS)
        {
            if self.said {
                return Err(None);
            }
            self.said = true;
            return Err(Some(format!(
                "the host names more than {MAX_TASKS} tasks or {MAX_SESSIONS} sessions; what names a new one is refused (is [remote] maestro a maestro?)"
            )));
        }
        self.tasks.extend(tasks.into_iter().map(str::to_owned));
        if let Some(s) = session {
            self.sessions.insert(s.to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_cannot_name_tasks_without_limit() {
        use crate::core::event_log::input::Input;
        let lines = |i: usize| Input::Lines {
            task: format!("task-{i:06}"),
            kind: "status".into(),
            lines: vec!["x".into()],
            mtime: None,
        };
        let mut caps = Caps::default();
        for i in 0..MAX_TASKS {
            assert_eq!(caps.admit(&lines(i)), Ok(()));
        }
        // A known task goes on; a new one is refused, said once.
        assert_eq!(caps.admit(&lines(7)), Ok(()));
        let said = caps.admit(&lines(MAX_TASKS)).expect_err("refused");
        assert!(said.is_some_and(|t| t.contains("more than 10000 tasks")));
        assert_eq!(caps.admit(&lines(MAX_TASKS + 1)), Err(None));
        // Counted lines name a task too.
        let skipped = Input::History {
            task: format!("task-{:06}", MAX_TASKS + 2),
            kind: "status".into(),
            pieces: vec![crate::core::event::HistoryPiece::Skipped(5)],
            mtime: None,
        };
        assert_eq!(caps.admit(&skipped), Err(None));
        assert_eq!(caps.tasks.len(), MAX_TASKS);
    }

    #[tokio::test]
    async fn frames_lines_and_bad_bytes_and_a_bound() {
        let input: &[u8] = b"one\ntw\xffo\nthree\npartial";
        let mut r = FrameReader::new(input);
        assert_eq!(r.next().await.unwrap(), Some(Frame::Line("one".into())));
        assert_eq!(r.next().await.unwrap(), Some(Frame::NotUtf8(4)));
        assert_eq!(r.next().await.unwrap(), Some(Frame::Line("three".into())));
        assert_eq!(r.next().await.unwrap(), None);

        // Past the bound without a newline: an error, with at most one chunk more read.
        let endless = tokio::io::repeat(b'x');
        let mut r = FrameReader::new(endless);
        assert!(matches!(r.next().await, Err(ReadError::TooLong)));
        assert!(r.buf.len() <= MAX_FRAME + 1, "{}", r.buf.len());
    }

    #[tokio::test]
    async fn only_the_tail_of_stderr_is_kept() {
        let kept = std::sync::Mutex::new(Vec::new());
        let mut text = vec![b'a'; 5 * CHUNK];
        text.extend_from_slice(b"\nthe last word");
        keep_tail(&text[..], &kept).await;
        let k = kept.lock().unwrap();
        assert_eq!(k.len(), STDERR_KEPT);
        assert!(k.ends_with(b"the last word"));
    }
}
