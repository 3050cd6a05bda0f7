//! A log's history, skimmed at start.
//!
//! The Sentinel judges a line by three needles: `self-correction` and `[ctx:` in a
//! status log, `High:` opening a deviations line. So the bytes already in a file when
//! maestro starts are searched for those with memchr before any line is made: only the
//! lines holding one become `String`s (in order, so context values still follow each
//! other), the lines between are only counted, and the last [`TAIL_LINES`] lines are
//! read whole by the caller (the Log pane's tail and the stall clock's last entry). The
//! anomalies found are the ones reading every line would find, at the same positions.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use memchr::memmem;

use crate::core::domain::LogKind;
use crate::core::sources::lines::LineAssembler;

/// Bytes read at a time.
const CHUNK: usize = 1 << 20;
/// The history's last lines, read whole.
pub const TAIL_LINES: usize = 256;
/// How far back from the end the tail's start is looked for.
const TAIL_SEARCH: u64 = 1 << 20;
/// Bytes read at a time, going back from the end, to find the tail's start.
const TAIL_BLOCK: u64 = 64 * 1024;
/// A history shorter than this is read whole: skimming it would save nothing.
pub const SKIM_OVER: u64 = 256 * 1024;
/// Lines per `Lines` piece.
const LINES_PER_PIECE: usize = 1024;

/// What a skim hands on, in file order: counted lines, and the lines that matter.
pub use crate::core::event::HistoryPiece as Piece;

/// Whether the Sentinel could find anything in this line of a `kind` log.
pub fn matters(kind: LogKind, line: &str) -> bool {
    match kind {
        LogKind::Status => line.contains("self-correction") || line.contains("[ctx:"),
        LogKind::Deviations => line.starts_with("High:"),
    }
}

/// Where the last [`TAIL_LINES`] complete lines before `end` begin, searching at most
/// [`TAIL_SEARCH`] bytes back from `end` and never before `start` (a line start).
/// Bytes after the last newline are an unfinished line, left to the caller.
pub fn tail_start(file: &File, start: u64, end: u64) -> io::Result<u64> {
    let limit = end.saturating_sub(TAIL_SEARCH).max(start);
    let mut buf = vec![0; usize::try_from(TAIL_BLOCK).unwrap_or(1 << 16)];
    // The last newline ends the last complete line; the one TAIL_LINES before it
    // ends the line just before the tail. Blocks are read going back until it is seen.
    let mut seen = 0;
    let mut block_end = end;
    let mut earliest = None;
    while block_end > limit {
        let from = block_end.saturating_sub(TAIL_BLOCK).max(limit);
        let chunk = &mut buf[..usize::try_from(block_end - from).unwrap_or(0)];
        file.read_exact_at(chunk, from)?;
        for i in memchr::memrchr_iter(b'\n', chunk) {
            if seen == TAIL_LINES {
                return Ok(from + i as u64 + 1);
            }
            seen += 1;
            earliest = Some(from + i as u64 + 1);
        }
        block_end = from;
    }
    // Fewer lines than that in the window: the tail is all of it when the window
    // reaches back to `start`, else it begins after the window's first newline.
    Ok(if limit == start {
        start
    } else {
        earliest.unwrap_or(start)
    })
}

/// Skims `[start, stop)` of `file`, both line starts, handing `out` the pieces in
/// order. Lines are cut at `max_line` as the line assembler cuts them.
pub fn skim(
    file: &File,
    (start, stop): (u64, u64),
    kind: LogKind,
    max_line: usize,
    buf: &mut Vec<u8>,
    out: &mut impl FnMut(Piece),
) -> io::Result<()> {
    let finder = Needles::new(kind);
    let mut assembler = LineAssembler::new(max_line);
    let mut pieces = Pieces::default();
    if buf.len() < CHUNK {
        buf.resize(CHUNK, 0);
    }
    let mut pos = start;
    while pos < stop {
        let want = usize::try_from(stop - pos).unwrap_or(CHUNK).min(CHUNK);
        file.read_exact_at(&mut buf[..want], pos)?;
        let chunk = &buf[..want];
        // Only whole lines are judged here; the rest is read again with the next chunk.
        let Some(last) = memchr::memrchr(b'\n', chunk) else {
            // One line longer than a chunk: through the assembler, which caps it.
            pos = long_line(file, pos, stop, &mut assembler, kind, &mut pieces, out)?;
            continue;
        };
        let region = &chunk[..=last];
        let mut at = 0;
        for line_start in finder.line_starts(region) {
            if line_start < at {
                continue;
            }
            pieces.skip(memchr::memchr_iter(b'\n', &region[at..line_start]).count() as u64);
            let end = memchr::memchr(b'\n', &region[line_start..])
                .map_or(region.len(), |i| line_start + i + 1);
            let mut made = Vec::with_capacity(1);
            assembler.feed(&region[line_start..end], &mut made);
            for line in made {
                pieces.line(line, out);
            }
            at = end;
        }
        pieces.skip(memchr::memchr_iter(b'\n', &region[at..]).count() as u64);
        pos += region.len() as u64;
    }
    pieces.finish(out);
    Ok(())
}

/// A line longer than a chunk, from `pos`: returns where the next line starts.
fn long_line(
    file: &File,
    mut pos: u64,
    stop: u64,
    assembler: &mut LineAssembler,
    kind: LogKind,
    pieces: &mut Pieces,
    out: &mut impl FnMut(Piece),
) -> io::Result<u64> {
    let mut buf = vec![0; CHUNK];
    let mut made = Vec::with_capacity(1);
    while pos < stop && made.is_empty() {
        let want = usize::try_from(stop - pos).unwrap_or(CHUNK).min(CHUNK);
        file.read_exact_at(&mut buf[..want], pos)?;
        let take = memchr::memchr(b'\n', &buf[..want]).map_or(want, |i| i + 1);
        assembler.feed(&buf[..take], &mut made);
        pos += take as u64;
    }
    for line in made {
        if matters(kind, &line) {
            pieces.line(line, out);
        } else {
            pieces.skip(1);
        }
    }
    Ok(pos)
}

/// The needles of one kind of log.
struct Needles {
    kind: LogKind,
    finders: Vec<memmem::Finder<'static>>,
}

impl Needles {
    fn new(kind: LogKind) -> Self {
        let needles: &[&'static str] = match kind {
            LogKind::Status => &["self-correction", "[ctx:"],
            LogKind::Deviations => &["High:"],
        };
        Self {
            kind,
            finders: needles
                .iter()
                .map(|n| memmem::Finder::new(n.as_bytes()))
                .collect(),
        }
    }

    /// Where the lines of `region` holding a needle start, in order, each once.
    fn line_starts(&self, region: &[u8]) -> Vec<usize> {
        let mut starts: Vec<usize> = Vec::new();
        for finder in &self.finders {
            for hit in finder.find_iter(region) {
                let start = memchr::memrchr(b'\n', &region[..hit]).map_or(0, |i| i + 1);
                // `High:` counts only where it opens the line.
                if self.kind == LogKind::Deviations && start != hit {
                    continue;
                }
                starts.push(start);
            }
        }
        starts.sort_unstable();
        starts.dedup();
        starts
    }
}

/// Gathers consecutive lines and counts between them.
#[derive(Default)]
struct Pieces {
    skipped: u64,
    lines: Vec<String>,
}

impl Pieces {
    fn skip(&mut self, n: u64) {
        self.skipped += n;
    }

    fn line(&mut self, line: String, out: &mut impl FnMut(Piece)) {
        if self.skipped > 0 {
            if !self.lines.is_empty() {
                out(Piece::Lines(std::mem::take(&mut self.lines)));
            }
            out(Piece::Skipped(std::mem::take(&mut self.skipped)));
        }
        self.lines.push(line);
        if self.lines.len() >= LINES_PER_PIECE {
            out(Piece::Lines(std::mem::take(&mut self.lines)));
        }
    }

    fn finish(mut self, out: &mut impl FnMut(Piece)) {
        if !self.lines.is_empty() {
            out(Piece::Lines(std::mem::take(&mut self.lines)));
        }
        if self.skipped > 0 {
            out(Piece::Skipped(self.skipped));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(text: &str) -> (tempfile::NamedTempFile, File) {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        let file = File::open(f.path()).expect("open");
        (f, file)
    }

    /// What reading every line and keeping those that matter gives: the reference.
    fn every_line(text: &str, kind: LogKind) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut pieces = Pieces::default();
        for line in text.lines() {
            if matters(kind, line) {
                pieces.line(line.to_owned(), &mut |p| out.push(p));
            } else {
                pieces.skip(1);
            }
        }
        pieces.finish(&mut |p| out.push(p));
        out
    }

    fn skimmed(text: &str, kind: LogKind) -> Vec<Piece> {
        let (_keep, file) = file_of(text);
        let mut out = Vec::new();
        skim(
            &file,
            (0, text.len() as u64),
            kind,
            4096,
            &mut Vec::new(),
            &mut |p| {
                out.push(p);
            },
        )
        .expect("skim");
        out
    }

    #[test]
    fn a_skim_keeps_the_lines_the_sentinel_judges_at_their_positions() {
        let mut text = String::new();
        for i in 0..50_000 {
            match i % 997 {
                0 => text.push_str(&format!("step {i} done [ctx: {}%]\n", i % 100)),
                1 => text.push_str("a self-correction: redo [ctx: 5%]\n"),
                2 => text.push_str("High: not at the start of a status line\n"),
                _ => text.push_str("an ordinary line of progress, nothing to judge\n"),
            }
        }
        assert_eq!(
            skimmed(&text, LogKind::Status),
            every_line(&text, LogKind::Status)
        );
        let deviations = text.replace("a self-correction", "Low: x");
        assert_eq!(
            skimmed(&deviations, LogKind::Deviations),
            every_line(&deviations, LogKind::Deviations)
        );
    }

    #[test]
    fn a_line_longer_than_a_chunk_is_counted_once_and_cut_as_the_assembler_cuts() {
        let long = "x".repeat(CHUNK + 10);
        let text = format!("a\n{long} self-correction\nb [ctx: 3%]\nc\n{long}\n");
        let got = skimmed(&text, LogKind::Status);
        // The assembler keeps a cut line's start and end: its self-correction is judged.
        let mut cut = Vec::new();
        LineAssembler::new(4096).feed(format!("{long} self-correction\n").as_bytes(), &mut cut);
        assert!(cut[0].ends_with(" self-correction"), "{}", cut[0]);
        assert_eq!(
            got,
            [
                Piece::Skipped(1),
                Piece::Lines(vec![cut[0].clone(), "b [ctx: 3%]".into()]),
                Piece::Skipped(2),
            ]
        );
    }

    #[test]
    fn the_tail_starts_at_the_last_lines_of_the_file() {
        let text = (0..1000).fold(String::new(), |mut s, i| {
            s.push_str(&format!("line {i}\n"));
            s
        });
        let (_keep, file) = file_of(&text);
        let at = tail_start(&file, 0, text.len() as u64).expect("tail");
        assert_eq!(
            text[usize::try_from(at).expect("small")..].lines().count(),
            TAIL_LINES
        );
        assert!(text[usize::try_from(at).expect("small")..].starts_with("line 744\n"));
        let short = "a\nb\n";
        let (_keep, file) = file_of(short);
        assert_eq!(tail_start(&file, 0, 4).expect("tail"), 0);
    }
}
