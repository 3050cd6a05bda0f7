//! A log file read by line number, as `less` reads it: an index of where every
//! [`STRIDE`]th line starts, grown as the file grows, and lines read from the nearest
//! mark on demand. Memory is the index (8 bytes per 256 lines) and the lines asked for,
//! whatever the file's size. Lines come out as the log source makes them (cut at
//! `max_line`, decoded lossily), so they compare equal to the lines it sent.

pub mod job;

use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::core::safe_fs;
use crate::core::sources::lines::LineAssembler;

/// Lines between two marks of the index.
pub const STRIDE: u64 = 256;
const CHUNK: usize = 1 << 20;

/// How far a [`LineIndex::refresh_some`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Indexing {
    pub restarted: bool,
    /// The whole file is indexed.
    pub done: bool,
    pub scanned: u64,
    pub size: u64,
}

#[derive(Debug, Clone)]
pub struct LineIndex {
    path: PathBuf,
    max_line: usize,
    /// (device, inode) of the file indexed.
    identity: Option<(u64, u64)>,
    /// Bytes looked at so far (the index knows every newline before this).
    scanned: u64,
    /// Complete lines seen so far.
    lines: u64,
    /// `marks[k]`: where line `k * STRIDE` starts.
    marks: Vec<u64>,
}

impl LineIndex {
    /// An index of `path`, empty until [`Self::refresh`].
    pub fn new(path: &Path, max_line: usize) -> Self {
        Self {
            path: path.to_owned(),
            max_line,
            identity: None,
            scanned: 0,
            lines: 0,
            marks: vec![0],
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Complete lines in the file when last refreshed.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Reads what was appended since the last refresh; a file replaced or truncated is
    /// indexed afresh. Returns whether the index started over. Never follows a final
    /// symlink, never blocks on a FIFO (`safe_fs::open_regular`).
    pub fn refresh(&mut self) -> io::Result<bool> {
        let mut restarted = false;
        loop {
            let step = self.refresh_some(u64::MAX)?;
            restarted |= step.restarted;
            if step.done {
                return Ok(restarted);
            }
        }
    }

    /// [`Self::refresh`] reading at most about `budget` bytes: a caller that must stay
    /// responsive indexes a large file over several calls.
    pub fn refresh_some(&mut self, budget: u64) -> io::Result<Indexing> {
        let (file, meta) = safe_fs::open_regular(&self.path).map_err(io::Error::other)?;
        let identity = Some((meta.dev(), meta.ino()));
        let restarted = identity != self.identity || meta.len() < self.scanned;
        if restarted {
            self.identity = identity;
            self.scanned = 0;
            self.lines = 0;
            self.marks = vec![0];
        }
        let mut buf = vec![0; CHUNK];
        let stop = self.scanned.saturating_add(budget).min(meta.len());
        while self.scanned < stop {
            let n = file.read_at(&mut buf, self.scanned)?;
            if n == 0 {
                break;
            }
            for at in memchr::memchr_iter(b'\n', &buf[..n]) {
                self.lines += 1;
                if self.lines.is_multiple_of(STRIDE) {
                    self.marks.push(self.scanned + at as u64 + 1);
                }
            }
            self.scanned += n as u64;
        }
        Ok(Indexing {
            restarted,
            done: self.scanned >= meta.len(),
            scanned: self.scanned,
            size: meta.len(),
        })
    }

    /// Up to `n` complete lines from line `from` (0-based), as the log source makes them.
    pub fn read(&self, from: u64, n: usize) -> io::Result<Vec<String>> {
        let mut out = Vec::with_capacity(n);
        if from >= self.lines || n == 0 {
            return Ok(out);
        }
        let want = (self.lines - from).min(n as u64);
        let (file, _) = safe_fs::open_regular(&self.path).map_err(io::Error::other)?;
        let mark = usize::try_from(from / STRIDE).unwrap_or(usize::MAX);
        let mut pos = self.marks.get(mark).copied().unwrap_or(0);
        let mut skip = from % STRIDE;
        let mut assembler = LineAssembler::new(self.max_line);
        let mut buf = vec![0; CHUNK.min(64 * 1024)];
        while (out.len() as u64) < want && pos < self.scanned {
            let len = usize::try_from(self.scanned - pos).map_or(buf.len(), |l| l.min(buf.len()));
            let got = file.read_at(&mut buf[..len], pos)?;
            if got == 0 {
                break;
            }
            let mut chunk = &buf[..got];
            pos += got as u64;
            // The lines before `from` in this stride are passed over without being made.
            while skip > 0 {
                if let Some(i) = memchr::memchr(b'\n', chunk) {
                    chunk = &chunk[i + 1..];
                    skip -= 1;
                } else {
                    chunk = &[];
                    break;
                }
            }
            if skip == 0 {
                assembler.feed(chunk, &mut out);
            }
        }
        out.truncate(usize::try_from(want).unwrap_or(usize::MAX));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_by_number_across_marks_and_appends() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("task-01-status");
        let text = (0..1000).fold(String::new(), |mut s, i| {
            s.push_str(&format!("line {i}\n"));
            s
        });
        std::fs::write(&path, &text).expect("write");
        let mut index = LineIndex::new(&path, 4096);
        assert!(index.refresh().expect("refresh"));
        assert_eq!(index.lines(), 1000);
        assert_eq!(index.read(0, 2).expect("read"), ["line 0", "line 1"]);
        assert_eq!(
            index.read(255, 3).expect("read"),
            ["line 255", "line 256", "line 257"]
        );
        assert_eq!(index.read(998, 10).expect("read"), ["line 998", "line 999"]);
        // An unfinished line is not a line yet; appends are indexed on.
        std::fs::write(&path, format!("{text}line 1000\nline 10")).expect("write");
        assert!(!index.refresh().expect("refresh"));
        assert_eq!(index.lines(), 1001);
        assert_eq!(index.read(1000, 5).expect("read"), ["line 1000"]);
        // A truncated file is indexed afresh.
        std::fs::write(&path, "new 0\n").expect("write");
        assert!(index.refresh().expect("refresh"));
        assert_eq!(index.read(0, 5).expect("read"), ["new 0"]);
    }

    #[test]
    fn a_large_file_is_indexed_over_several_calls() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("task-01-status");
        let text = (0..300_000).fold(String::new(), |mut s, i| {
            s.push_str(&format!("line {i}\n"));
            s
        });
        std::fs::write(&path, &text).expect("write");
        let mut index = LineIndex::new(&path, 4096);
        let mut calls = 0;
        while !index.refresh_some(1 << 20).expect("refresh").done {
            calls += 1;
        }
        assert!(calls >= 2, "{calls}");
        assert_eq!(index.lines(), 300_000);
        assert_eq!(index.read(123_456, 1).expect("read"), ["line 123456"]);
    }

    #[test]
    fn a_symlink_is_not_followed() {
        let dir = tempfile::tempdir().expect("dir");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "private\n").expect("write");
        let link = dir.path().join("task-01-status");
        std::os::unix::fs::symlink(&secret, &link).expect("symlink");
        assert!(LineIndex::new(&link, 4096).refresh().is_err());
    }
}
