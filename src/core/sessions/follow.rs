//! Follows one transcript file as it grows: only the bytes appended since the last
//! read are read, a half-written last line waits for its newline, and a file that was
//! truncated or replaced (another inode at the path) is counted again from its start.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::core::safe_fs;
use crate::core::sessions::prices::PriceTable;
use crate::core::sessions::tally::Tally;

/// Bytes read at a time.
const CHUNK: usize = 256 * 1024;
/// A line longer than this (a tool result holding a whole file can be large) is
/// skipped rather than held: it carries no usage worth the memory.
const MAX_LINE: usize = 32 * 1024 * 1024;

/// What a read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// New complete lines were counted.
    Grew,
    /// Nothing new.
    Same,
    /// The file was truncated or replaced and was counted again from its start.
    Restarted(&'static str),
    /// The file cannot be read (gone, a link, not a regular file): why.
    Gone(String),
}

#[derive(Debug)]
pub struct Follower {
    pub path: PathBuf,
    /// A subagent's file counts only when its first line is of this session.
    only: Option<String>,
    /// The first line said it belongs to another session: ignored.
    foreign: bool,
    identity: Option<(u64, u64)>,
    offset: u64,
    partial: Vec<u8>,
    /// The current line passed [`MAX_LINE`]: bytes are dropped until its newline.
    overflowed: bool,
    pub tally: Tally,
}

impl Follower {
    pub fn new(path: &Path, only: Option<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            only,
            foreign: false,
            identity: None,
            offset: 0,
            partial: Vec::new(),
            overflowed: false,
            tally: Tally::new(),
        }
    }

    /// Whether this (subagent) file turned out to belong to another session.
    pub fn is_foreign(&self) -> bool {
        self.foreign
    }

    /// Reads what was appended since the last read.
    pub fn read(&mut self, prices: &PriceTable) -> Outcome {
        let (mut file, meta) = match safe_fs::open_regular(&self.path) {
            Ok(f) => f,
            Err(e) => return Outcome::Gone(e.to_string()),
        };
        let identity = (meta.dev(), meta.ino());
        let mut outcome = Outcome::Same;
        if self.identity.is_some_and(|old| old != identity) {
            self.restart();
            outcome = Outcome::Restarted("replaced");
        } else if meta.len() < self.offset {
            self.restart();
            outcome = Outcome::Restarted("truncated");
        }
        self.identity = Some(identity);
        if meta.len() == self.offset {
            return outcome;
        }
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return outcome;
        }
        let mut buf = vec![0; CHUNK];
        let mut grew = false;
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            self.offset += n as u64;
            grew |= self.feed(&buf[..n], prices);
            if self.foreign {
                break;
            }
        }
        if grew && outcome == Outcome::Same {
            Outcome::Grew
        } else {
            outcome
        }
    }

    /// Asks the kernel to read the unread part of the file ahead, in the background,
    /// when it is more than a chunk and not in memory already: the pages the machine
    /// let go of (a transcript not read for a while) come in while other files are
    /// counted. The file's length (0 when it cannot be opened).
    fn read_ahead(&self) -> u64 {
        let Ok((file, meta)) = safe_fs::open_regular(&self.path) else {
            return 0;
        };
        let unread = meta.len().saturating_sub(self.offset);
        if unread > CHUNK as u64
            && !is_cached(&file, self.offset, meta.len())
            && let (Ok(from), Ok(len)) = (i64::try_from(self.offset), i64::try_from(unread))
        {
            // Advice only: a kernel that does not take it costs nothing.
            let _ = nix::fcntl::posix_fadvise(
                &file,
                from,
                len,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_WILLNEED,
            );
        }
        meta.len()
    }

    fn restart(&mut self) {
        self.offset = 0;
        self.partial.clear();
        self.overflowed = false;
        self.foreign = false;
        self.tally = Tally::new();
    }

    /// Counts the complete lines of a chunk; true if any was counted.
    fn feed(&mut self, mut chunk: &[u8], prices: &PriceTable) -> bool {
        let mut any = false;
        while let Some(nl) = memchr::memchr(b'\n', chunk) {
            let (head, rest) = (&chunk[..nl], &chunk[nl + 1..]);
            chunk = rest;
            if self.overflowed {
                self.overflowed = false;
                self.partial.clear();
                continue;
            }
            if self.partial.is_empty() {
                self.line(head, prices);
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(head);
                self.line(&line, prices);
            }
            any = true;
        }
        if !self.overflowed {
            if self.partial.len() + chunk.len() > MAX_LINE {
                self.partial.clear();
                self.overflowed = true;
            } else {
                self.partial.extend_from_slice(chunk);
            }
        }
        any
    }

    fn line(&mut self, line: &[u8], prices: &PriceTable) {
        if self.foreign {
            return;
        }
        if let Some(session) = &self.only
            && self.tally.session_id.is_none()
            && !line.trim_ascii().is_empty()
        {
            let belongs = serde_json::from_slice::<serde_json::Value>(line)
                .ok()
                .is_some_and(|v| v["sessionId"] == session.as_str());
            if !belongs {
                self.foreign = true;
                return;
            }
        }
        self.tally.feed_bytes(line, prices);
    }
}

/// Whether the first and last bytes from `from` to `len` are in memory: read without
/// waiting for the disk (`RWF_NOWAIT`). A file written lately is in memory whole, and
/// its first pages are the first the kernel lets go. The advice to read ahead walks
/// every page of the file (2 ms for 200 MB in memory), so it is asked only when a page
/// is missing; a kernel without the flag is answered "not cached".
fn is_cached(file: &std::fs::File, from: u64, len: u64) -> bool {
    let mut byte = [0u8; 1];
    [from, len.saturating_sub(1)].into_iter().all(|at| {
        let mut bufs = [std::io::IoSliceMut::new(&mut byte)];
        rustix::io::preadv2(file, &mut bufs, at, rustix::io::ReadWriteFlags::NOWAIT) == Ok(1)
    })
}

/// Reads every follower on a pool of threads sized to the cores, one file a job, the
/// largest files taken first so one big transcript does not finish last alone; each
/// file whose pages are not all in memory is handed to the kernel's read-ahead when
/// its length is taken.
pub fn read_all(followers: &mut [Follower], prices: &PriceTable) {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(followers.len());
    if workers <= 1 {
        for f in followers.iter_mut() {
            f.read(prices);
        }
        return;
    }
    let mut jobs: Vec<(u64, &mut Follower)> =
        followers.iter_mut().map(|f| (f.read_ahead(), f)).collect();
    jobs.sort_by_key(|(len, _)| std::cmp::Reverse(*len));
    let queue = std::sync::Mutex::new(jobs.into_iter().map(|(_, f)| f));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    // The lock is held only to take the next file, never while reading.
                    let next = queue
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .next();
                    let Some(f) = next else { break };
                    f.read(prices);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const LINE: &str = r#"{"type":"assistant","sessionId":"s1","requestId":"r1","message":{"id":"m1","model":"claude-sonnet-4-5","usage":{"input_tokens":10,"output_tokens":5}}}"#;

    #[test]
    fn half_lines_wait_and_a_truncated_or_replaced_file_is_counted_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s1.jsonl");
        let prices = PriceTable::default();
        let mut f = Follower::new(&path, None);
        assert!(matches!(f.read(&prices), Outcome::Gone(_)));
        let mut file = std::fs::File::create(&path).expect("create");
        let (a, b) = LINE.split_at(40);
        file.write_all(a.as_bytes()).expect("write");
        assert_eq!(f.read(&prices), Outcome::Same);
        assert_eq!(f.tally.tokens.total(), 0);
        writeln!(file, "{b}").expect("write");
        assert_eq!(f.read(&prices), Outcome::Grew);
        assert_eq!(f.tally.tokens.total(), 15);
        // The same response again is not counted twice.
        writeln!(file, "{LINE}").expect("write");
        assert_eq!(f.read(&prices), Outcome::Grew);
        assert_eq!(f.tally.tokens.total(), 15);
        // Truncated: counted again from the start.
        file.set_len(0).expect("truncate");
        assert_eq!(f.read(&prices), Outcome::Restarted("truncated"));
        assert_eq!(f.tally.tokens.total(), 0);
        // Replaced by another file: counted from its start.
        let other = dir.path().join("new");
        std::fs::write(&other, format!("{LINE}\n")).expect("write");
        std::fs::rename(&other, &path).expect("rename");
        assert_eq!(f.read(&prices), Outcome::Restarted("replaced"));
        assert_eq!(f.tally.tokens.total(), 15);
    }

    #[test]
    fn a_subagent_file_of_another_session_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("agent-1.jsonl");
        std::fs::write(&path, format!("{}\n", LINE.replace("s1", "s2"))).expect("write");
        let mut f = Follower::new(&path, Some("s1".into()));
        f.read(&PriceTable::default());
        assert!(f.is_foreign());
        assert_eq!(f.tally.tokens.total(), 0);
    }

    /// A file just written is in memory: no advice to read it ahead. One the kernel
    /// was told to drop (ext4, xfs and the like drop a clean page) is not.
    #[test]
    fn a_file_in_memory_is_not_read_ahead_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s1.jsonl");
        std::fs::write(&path, vec![b'x'; 3 * CHUNK]).expect("write");
        let file = std::fs::File::open(&path).expect("open");
        let len = 3 * CHUNK as u64;
        assert!(is_cached(&file, 0, len));
        file.sync_all().expect("sync");
        nix::fcntl::posix_fadvise(
            &file,
            0,
            0,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
        )
        .expect("fadvise");
        let mut byte = [0u8; 1];
        let mut bufs = [std::io::IoSliceMut::new(&mut byte)];
        let dropped =
            rustix::io::preadv2(&file, &mut bufs, 0, rustix::io::ReadWriteFlags::NOWAIT) != Ok(1);
        if dropped {
            assert!(!is_cached(&file, 0, len));
        } else {
            println!("this file system keeps its pages (tmpfs?): only the first half checked");
        }
    }
}
