//! Turns appended bytes into complete lines, however the writer split them.
//!
//! The unfinished tail of a file is held until its newline arrives, but never more than
//! `max_line` bytes of it: a runaway line is cut (and marked) instead of growing memory.
//! Bytes that are not UTF-8 are decoded lossily, so a reader never fails on them.

/// Marker appended to a line that was longer than the cap.
pub const TRUNCATED_MARK: &str = " […]";

#[derive(Debug)]
pub struct LineAssembler {
    pending: Vec<u8>,
    max_line: usize,
    /// The current line passed the cap: drop bytes until its newline.
    overflowed: bool,
}

impl LineAssembler {
    pub fn new(max_line: usize) -> Self {
        Self {
            pending: Vec::new(),
            max_line: max_line.max(1),
            overflowed: false,
        }
    }

    /// Feeds a chunk; complete lines are pushed onto `out` (without `\n` or `\r\n`).
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<String>) {
        while !chunk.is_empty() {
            if let Some(nl) = memchr::memchr(b'\n', chunk) {
                self.push_capped(&chunk[..nl]);
                out.push(self.take_line());
                chunk = &chunk[nl + 1..];
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
    }

    fn push_capped(&mut self, bytes: &[u8]) {
        let room = self.max_line.saturating_sub(self.pending.len());
        if bytes.len() > room {
            self.pending.extend_from_slice(&bytes[..room]);
            self.overflowed = true;
        } else {
            self.pending.extend_from_slice(bytes);
        }
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
            line.push_str(TRUNCATED_MARK);
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        assert_eq!(out[0].len(), 1000 + TRUNCATED_MARK.len());
        assert!(out[0].ends_with(TRUNCATED_MARK));
        assert_eq!(out[1], "next");
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
