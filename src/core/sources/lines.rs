//! Turns appended bytes into complete lines, however the writer split them.
//!
//! The unfinished tail of a file is held until its newline arrives, but never more than
//! `max_line` bytes of it: a runaway line is cut (and marked) instead of growing memory.
//! Bytes that are not UTF-8 are decoded lossily, so a reader never fails on them.

/// Marker appended to a line that was longer than the cap.
pub const TRUNCATED_MARK: &str = " […]";

/// Of a line past the cap, the end kept beside its start (a Musician's `[ctx: N%]`
/// closes its line).
const KEPT_END: usize = 256;
/// What the Sentinel looks for anywhere in a line (its table's `Anywhere` marks): said
/// even when it was cut away.
fn cut_marks() -> impl Iterator<Item = &'static str> {
    use crate::core::domain::words::{Mark, WORDS};
    WORDS.iter().filter_map(|w| match w.mark {
        Mark::Anywhere(word) => Some(word),
        _ => None,
    })
}

#[derive(Debug)]
pub struct LineAssembler {
    pending: Vec<u8>,
    max_line: usize,
    /// The current line passed the cap: its middle is dropped until its newline.
    overflowed: bool,
    /// The last [`KEPT_END`] bytes of what was dropped of the current line.
    dropped_end: Vec<u8>,
    /// The mark of [`cut_marks`] among the dropped bytes, if one was.
    dropped_mark: Option<&'static str>,
    /// Lines cut so far (the source says so).
    cut_lines: u64,
    /// Where the current line starts in its file (with [`Self::feed_at`]).
    line_start: u64,
    /// The next byte fed starts a line.
    at_line_start: bool,
}

impl LineAssembler {
    pub fn new(max_line: usize) -> Self {
        Self {
            pending: Vec::new(),
            max_line: max_line.max(1),
            overflowed: false,
            dropped_end: Vec::new(),
            dropped_mark: None,
            cut_lines: 0,
            line_start: 0,
            at_line_start: true,
        }
    }

    /// Lines longer than the cap so far: each kept as its start, `[…]` and its end.
    pub fn cut_lines(&self) -> u64 {
        self.cut_lines
    }

    /// Feeds a chunk; complete lines are pushed onto `out` (without `\n` or `\r\n`).
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<String>) {
        self.feed_inner(chunk, 0, out, None);
    }

    /// [`Self::feed`] for a chunk that starts at byte `at` of its file: each line's
    /// start in the file is pushed onto `starts` beside it (an anomaly's place, whatever
    /// a later read starts from).
    pub fn feed_at(&mut self, chunk: &[u8], at: u64, out: &mut Vec<String>, starts: &mut Vec<u64>) {
        self.feed_inner(chunk, at, out, Some(starts));
    }

    fn feed_inner(
        &mut self,
        mut chunk: &[u8],
        mut at: u64,
        out: &mut Vec<String>,
        mut starts: Option<&mut Vec<u64>>,
    ) {
        while !chunk.is_empty() {
            if self.at_line_start {
                self.line_start = at;
                self.at_line_start = false;
            }
            if let Some(nl) = memchr::memchr(b'\n', chunk) {
                self.push_capped(&chunk[..nl]);
                out.push(self.take_line());
                if let Some(starts) = starts.as_deref_mut() {
                    starts.push(self.line_start);
                }
                self.at_line_start = true;
                chunk = &chunk[nl + 1..];
                at += nl as u64 + 1;
            } else {
                self.push_capped(chunk);
                chunk = &[];
            }
        }
    }

    /// Bytes of an unfinished line currently held.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Forgets an unfinished line (the file was truncated or replaced).
    pub fn reset(&mut self) {
        self.pending.clear();
        self.pending.shrink_to(self.max_line.min(4096));
        self.overflowed = false;
        self.dropped_end.clear();
        self.dropped_mark = None;
        self.at_line_start = true;
    }

    fn push_capped(&mut self, bytes: &[u8]) {
        let room = self.max_line.saturating_sub(self.pending.len());
        if bytes.len() > room {
            self.pending.extend_from_slice(&bytes[..room]);
            self.overflowed = true;
            self.drop_bytes(&bytes[room..]);
        } else {
            self.pending.extend_from_slice(bytes);
        }
    }

    /// Past the cap: only the end is kept, and whether a mark went by (looked for
    /// across the seam with the bytes dropped before).
    fn drop_bytes(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.dropped_mark.is_none() {
            let seam = self.dropped_end.len().saturating_sub(32);
            let mut window = self.dropped_end[seam..].to_vec();
            window.extend_from_slice(&bytes[..bytes.len().min(64)]);
            self.dropped_mark = cut_marks().find(|m| {
                memchr::memmem::find(bytes, m.as_bytes()).is_some()
                    || memchr::memmem::find(&window, m.as_bytes()).is_some()
            });
        }
        self.dropped_end
            .extend_from_slice(&bytes[bytes.len().saturating_sub(KEPT_END)..]);
        let extra = self.dropped_end.len().saturating_sub(KEPT_END);
        self.dropped_end.drain(..extra);
    }

    fn take_line(&mut self) -> String {
        let mut bytes = std::mem::take(&mut self.pending);
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
        let mut line = match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        if std::mem::take(&mut self.overflowed) {
            self.cut_lines += 1;
            line.push_str(TRUNCATED_MARK);
            if let Some(mark) = self.dropped_mark.take() {
                // The mark the Sentinel reads, kept where the middle was cut.
                line.push(' ');
                line.push_str(mark);
                line.push_str(" […]");
            }
            let mut end = std::mem::take(&mut self.dropped_end);
            if end.last() == Some(&b'\r') {
                end.pop();
            }
            if !end.is_empty() {
                line.push(' ');
                line.push_str(&String::from_utf8_lossy(&end));
            }
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_line_knows_where_it_starts_in_its_file() {
        let mut a = LineAssembler::new(8);
        let (mut out, mut starts) = (Vec::new(), Vec::new());
        a.feed_at(b"ab\ncd", 100, &mut out, &mut starts);
        a.feed_at(b"e\nlong line past the cap\n\n", 105, &mut out, &mut starts);
        assert_eq!(out.len(), 4);
        assert_eq!(starts, [100, 103, 107, 130]);
    }

    fn assemble(chunks: &[&[u8]], cap: usize) -> (Vec<String>, usize) {
        let mut a = LineAssembler::new(cap);
        let mut out = Vec::new();
        for c in chunks {
            a.feed(c, &mut out);
        }
        (out, a.pending_len())
    }

    #[test]
    fn partial_lines_wait_for_their_newline() {
        let (lines, pending) = assemble(&[b"step 1 sta", b"rted\nstep 2", b"\r\n", b"tail"], 1024);
        assert_eq!(lines, ["step 1 started", "step 2"]);
        assert_eq!(pending, 4);
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let (lines, _) = assemble(&[b"bad \xff\xfe byte\n"], 1024);
        assert_eq!(lines, ["bad \u{fffd}\u{fffd} byte"]);
    }

    #[test]
    fn a_huge_line_costs_at_most_the_cap() {
        let mut a = LineAssembler::new(1000);
        let mut out = Vec::new();
        let block = vec![b'x'; 64 * 1024];
        for _ in 0..320 {
            // 20 MB in all
            a.feed(&block, &mut out);
            assert!(a.pending_len() <= 1000);
        }
        a.feed(b"\nnext\n", &mut out);
        assert_eq!(out.len(), 2);
        // Its start, the mark, and its end.
        assert_eq!(out[0].len(), 1000 + TRUNCATED_MARK.len() + 1 + KEPT_END);
        assert!(out[0].contains(TRUNCATED_MARK));
        assert_eq!(out[1], "next");
        assert_eq!(a.cut_lines(), 1);
    }

    /// What the Sentinel reads in a line is not lost past the cap: a `self-correction`
    /// in the dropped middle (even split between two reads) is said after the mark, and
    /// the `[ctx: N%]` that ends the line is kept.
    #[test]
    fn a_cut_line_keeps_its_end_and_says_a_mark_it_dropped() {
        let mut a = LineAssembler::new(100);
        let mut out = Vec::new();
        a.feed(&[b'a'; 5000], &mut out);
        a.feed(b"step 9 self-cor", &mut out);
        a.feed(b"rection: retried", &mut out);
        a.feed(&[b'b'; 5000], &mut out);
        a.feed(b" done [ctx: 47%]\n", &mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].starts_with(&"a".repeat(100)), "{}", out[0]);
        assert!(out[0].contains(" […] self-correction […] "), "{}", out[0]);
        assert!(out[0].ends_with(" done [ctx: 47%]"), "{}", out[0]);
        // Nothing dropped holds a mark: none is said.
        a.feed(&[b'c'; 5000], &mut out);
        a.feed(b"\n", &mut out);
        assert!(!out[1].contains("self-correction"), "{}", out[1]);
    }

    proptest! {
        /// The same lines come out however the bytes are split.
        #[test]
        fn chunking_does_not_change_lines(
            lines in proptest::collection::vec("[a-z0-9 %:\\[\\]é]{0,40}", 0..30),
            cuts in proptest::collection::vec(0usize..2000, 0..20),
        ) {
            let text: String = lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect();
            let bytes = text.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut start = 0;
            for c in cuts {
                chunks.push(&bytes[start..c]);
                start = c;
            }
            chunks.push(&bytes[start..]);
            let (out, pending) = assemble(&chunks, 4096);
            prop_assert_eq!(out, lines);
            prop_assert_eq!(pending, 0);
        }
    }
}
