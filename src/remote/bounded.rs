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

#[cfg(test)]
mod tests {
    use super::*;

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
