//! A log's history, skimmed at start.
//!
//! The Sentinel judges a line by three needles: `self-correction` and `[ctx:` in a
//! status log, `High:` opening a deviations line. So the bytes already in a file when
//! maestro starts are searched for those with memchr before any line is made. A Musician
//! writes `[ctx: N%]` on nearly every line, so its value is read where it stands
//! (no `String`, no allocation): the line becomes one only when the Sentinel reports it
//! (a self-correction, a rise past the spike threshold over the value before, a
//! `High:`); the others are counted, and their last context values and last such line
//! handed on ([`Piece::Context`]) for the sparkline, the forecast and the next
//! comparison. The last [`TAIL_LINES`] lines are read whole by the caller (the Log
//! pane's tail and the stall clock's last entry). The anomalies found are the ones
//! reading every line would find, at the same positions (a test holds them equal).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use memchr::memmem;

use crate::core::domain::words::{Mark, word};
use crate::core::domain::{AnomalyKind, LogKind};
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

/// Whether the Sentinel could find anything in this line of a `kind` log (the marks
/// of its table).
pub use crate::core::domain::words::matters;

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

/// What a skim keeps whole besides the needles' lines: lines are cut as the line
/// assembler cuts them (the source's [`Reading`]), and a context value rising by more
/// than the Sentinel's spike threshold over the one before is a line it reports.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub reading: crate::core::sources::Reading,
    pub sentinel: crate::core::sentinel::SentinelSettings,
}

/// Context values kept from a run of counted lines: enough for the sparkline's history
/// and the forecast's window, which only ever look at the last ones.
const VALUES_KEPT: usize = 64;

/// Skims `[start, stop)` of `file`, both line starts, handing `out` the pieces in
/// order. A status log's `[ctx: N%]` is read where it stands: the line is only counted
/// and its value handed on, unless it is a spike, holds a self-correction, or is longer
/// than the cap.
pub fn skim(
    file: &File,
    (start, stop): (u64, u64),
    kind: LogKind,
    limits: Limits,
    buf: &mut Vec<u8>,
    out: &mut impl FnMut(Piece),
) -> io::Result<()> {
    let finder = Needles::new(kind);
    let mut assembler = LineAssembler::new(limits.reading.max_line);
    let mut walk = Walk {
        limits,
        prev_ctx: None,
        pieces: Pieces::default(),
    };
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
            pos = long_line(file, (pos, stop), &mut assembler, kind, &mut walk, out)?;
            continue;
        };
        let region = &chunk[..=last];
        match kind {
            LogKind::Status => walk.status_region((region, pos), &finder, &mut assembler, out),
            LogKind::Deviations => {
                walk.deviations_region((region, pos), &finder, &mut assembler, out);
            }
        }
        pos += region.len() as u64;
    }
    walk.pieces.finish(out);
    Ok(())
}

/// A skim's state from one chunk to the next.
struct Walk {
    limits: Limits,
    /// The last context value the Sentinel will have seen.
    prev_ctx: Option<u8>,
    pieces: Pieces,
}

fn newlines(bytes: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', bytes).count() as u64
}

impl Walk {
    /// A status log's whole lines (`region`, read from byte `base` of its file): each
    /// holding a needle is looked at, the rest counted.
    fn status_region(
        &mut self,
        (region, base): (&[u8], u64),
        needles: &Needles,
        assembler: &mut LineAssembler,
        out: &mut impl FnMut(Piece),
    ) {
        let correction_mark = word(AnomalyKind::SelfCorrection).mark;
        let mut corrections = needles.hits(correction_mark, region).peekable();
        let mut markers = needles.hits(Mark::ContextStamp, region).peekable();
        let mut at = 0;
        loop {
            let next = match (corrections.peek(), markers.peek()) {
                (None, None) => break,
                (Some(c), Some(m)) => *c.min(m),
                (Some(h), None) | (None, Some(h)) => *h,
            };
            let line_start = memchr::memrchr(b'\n', &region[at..next]).map_or(at, |i| at + i + 1);
            let line_end =
                memchr::memchr(b'\n', &region[next..]).map_or(region.len(), |i| next + i + 1);
            let mut correction = false;
            while corrections.next_if(|h| *h < line_end).is_some() {
                correction = true;
            }
            let mut marker = None;
            while let Some(h) = markers.next_if(|h| *h < line_end) {
                marker = Some(h - line_start);
            }
            self.pieces.skip(newlines(&region[at..line_start]));
            self.status_line(
                (&region[line_start..line_end], base + line_start as u64),
                correction,
                marker,
                assembler,
                out,
            );
            at = line_end;
        }
        self.pieces.skip(newlines(&region[at..]));
    }

    /// One status line holding a needle (`line` ends in its newline; `marker`: where its
    /// last `[ctx:` starts).
    fn status_line(
        &mut self,
        (line, at): (&[u8], u64),
        correction: bool,
        marker: Option<usize>,
        assembler: &mut LineAssembler,
        out: &mut impl FnMut(Piece),
    ) {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let long = body.len() > self.limits.reading.max_line;
        let value = match marker {
            Some(at) if !long => crate::core::domain::context_percent_at(body, at),
            _ => None,
        };
        let spike = matches!((self.prev_ctx, value),
            (Some(before), Some(now)) if now > before && now - before > self.limits.sentinel.spike_threshold);
        if correction || spike || (marker.is_some() && long) {
            let (mut made, mut starts) = (Vec::with_capacity(1), Vec::with_capacity(1));
            assembler.feed_at(line, at, &mut made, &mut starts);
            for (line, start) in made.into_iter().zip(starts) {
                if let Some(v) = crate::core::domain::context_percent(&line) {
                    self.prev_ctx = Some(v);
                }
                self.pieces.line(line, start, out);
            }
            return;
        }
        self.pieces.skip(1);
        if let Some(v) = value {
            self.prev_ctx = Some(v);
            self.pieces.context(v, body);
        }
    }

    /// A deviations log's whole lines: those opening with `High:` are made whole.
    fn deviations_region(
        &mut self,
        (region, base): (&[u8], u64),
        needles: &Needles,
        assembler: &mut LineAssembler,
        out: &mut impl FnMut(Piece),
    ) {
        let mut at = 0;
        for line_start in needles.line_starts(region) {
            if line_start < at {
                continue;
            }
            self.pieces.skip(newlines(&region[at..line_start]));
            let end = memchr::memchr(b'\n', &region[line_start..])
                .map_or(region.len(), |i| line_start + i + 1);
            let (mut made, mut starts) = (Vec::with_capacity(1), Vec::with_capacity(1));
            let from = base + line_start as u64;
            assembler.feed_at(&region[line_start..end], from, &mut made, &mut starts);
            for (line, start) in made.into_iter().zip(starts) {
                self.pieces.line(line, start, out);
            }
            at = end;
        }
        self.pieces.skip(newlines(&region[at..]));
    }
}

/// A line longer than a chunk, from `pos`: returns where the next line starts.
fn long_line(
    file: &File,
    (mut pos, stop): (u64, u64),
    assembler: &mut LineAssembler,
    kind: LogKind,
    walk: &mut Walk,
    out: &mut impl FnMut(Piece),
) -> io::Result<u64> {
    let mut buf = vec![0; CHUNK];
    let (mut made, mut starts) = (Vec::with_capacity(1), Vec::with_capacity(1));
    while pos < stop && made.is_empty() {
        let want = usize::try_from(stop - pos).unwrap_or(CHUNK).min(CHUNK);
        file.read_exact_at(&mut buf[..want], pos)?;
        let take = memchr::memchr(b'\n', &buf[..want]).map_or(want, |i| i + 1);
        assembler.feed_at(&buf[..take], pos, &mut made, &mut starts);
        pos += take as u64;
    }
    for (line, start) in made.into_iter().zip(starts) {
        if matters(kind, &line) {
            if let Some(v) = crate::core::domain::context_percent(&line) {
                walk.prev_ctx = Some(v);
            }
            walk.pieces.line(line, start, out);
        } else {
            walk.pieces.skip(1);
        }
    }
    Ok(pos)
}

/// The needles of one kind of log, from the Sentinel's table: each found anywhere,
/// and kept where its mark says (a line-start mark only where it opens the line).
struct Needles {
    finders: Vec<(Mark, memmem::Finder<'static>)>,
}

impl Needles {
    fn new(kind: LogKind) -> Self {
        Self {
            finders: crate::core::domain::words::marks_in(kind)
                .filter_map(|m| m.needle().map(|n| (m, memmem::Finder::new(n.as_bytes()))))
                .collect(),
        }
    }

    /// Where `mark`'s needle is in `region`, in order (nowhere if the log has no such
    /// mark).
    fn hits<'r>(&'r self, mark: Mark, region: &'r [u8]) -> impl Iterator<Item = usize> + 'r {
        self.finders
            .iter()
            .filter(move |(m, _)| *m == mark)
            .flat_map(move |(_, f)| f.find_iter(region))
    }

    /// Where the lines of `region` holding a needle start, in order, each once.
    fn line_starts(&self, region: &[u8]) -> Vec<usize> {
        let mut starts: Vec<usize> = Vec::new();
        for (mark, finder) in &self.finders {
            for hit in finder.find_iter(region) {
                let start = memchr::memrchr(b'\n', &region[..hit]).map_or(0, |i| i + 1);
                // A line-start mark (`High:`) counts only where it opens the line.
                if matches!(mark, Mark::LineStart(_)) && start != hit {
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

/// Gathers consecutive lines, and counts (with their context values) between them.
#[derive(Default)]
struct Pieces {
    skipped: u64,
    lines: Vec<String>,
    /// Where each kept line starts in its file.
    starts: Vec<u64>,
    /// Context values of the counted lines since the last line kept.
    values: Vec<u8>,
    /// The last counted line holding one.
    last_ctx_line: Vec<u8>,
}

impl Pieces {
    fn skip(&mut self, n: u64) {
        self.skipped += n;
    }

    fn context(&mut self, value: u8, line: &[u8]) {
        if self.values.len() == 2 * VALUES_KEPT {
            self.values.drain(..VALUES_KEPT);
        }
        self.values.push(value);
        self.last_ctx_line.clear();
        self.last_ctx_line.extend_from_slice(line);
    }

    fn line(&mut self, line: String, start: u64, out: &mut impl FnMut(Piece)) {
        if self.skipped > 0 || !self.values.is_empty() {
            self.flush_lines(out);
            self.counted(out);
        }
        self.lines.push(line);
        self.starts.push(start);
        if self.lines.len() >= LINES_PER_PIECE {
            self.flush_lines(out);
        }
    }

    fn flush_lines(&mut self, out: &mut impl FnMut(Piece)) {
        if !self.lines.is_empty() {
            out(Piece::Lines(crate::core::event::LineBatch {
                lines: std::mem::take(&mut self.lines),
                starts: std::mem::take(&mut self.starts),
            }));
        }
    }

    /// The lines counted since the last line kept, and their context values.
    fn counted(&mut self, out: &mut impl FnMut(Piece)) {
        if self.skipped > 0 {
            out(Piece::Skipped(std::mem::take(&mut self.skipped)));
        }
        if !self.values.is_empty() {
            let from = self.values.len().saturating_sub(VALUES_KEPT);
            let values = self.values.split_off(from);
            self.values.clear();
            let line = self
                .last_ctx_line
                .strip_suffix(b"\r")
                .unwrap_or(&self.last_ctx_line);
            out(Piece::Context {
                values,
                last_line: String::from_utf8_lossy(line).into_owned(),
            });
        }
    }

    fn finish(mut self, out: &mut impl FnMut(Piece)) {
        self.flush_lines(out);
        self.counted(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::time::Instant;

    use crate::core::domain::{Anomaly, TaskId, context_percent};
    use crate::core::sentinel::{Sentinel, SentinelSettings};

    fn file_of(text: &str) -> (tempfile::NamedTempFile, File) {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        f.write_all(text.as_bytes()).expect("write");
        let file = File::open(f.path()).expect("open");
        (f, file)
    }

    fn skimmed(text: &str, kind: LogKind) -> Vec<Piece> {
        let (_keep, file) = file_of(text);
        let mut out = Vec::new();
        let limits = Limits {
            reading: crate::core::sources::Reading {
                max_line: 4096,
                fallback_poll: std::time::Duration::from_secs(1),
            },
            sentinel: SentinelSettings {
                stall_after: std::time::Duration::from_secs(300),
                spike_threshold: 15,
            },
        };
        skim(
            &file,
            (0, text.len() as u64),
            kind,
            limits,
            &mut Vec::new(),
            &mut |p| {
                out.push(p);
            },
        )
        .expect("skim");
        out
    }

    fn sentinel() -> (Sentinel, TaskId) {
        let mut s = Sentinel::new(SentinelSettings {
            stall_after: std::time::Duration::from_secs(3600),
            spike_threshold: 15,
        });
        let task = TaskId::parse("task-01").expect("id");
        s.set_active(&task, true);
        (s, task)
    }

    /// What the Sentinel finds reading every line (the reference), and the context
    /// values in order.
    fn judged_whole(text: &str, kind: LogKind) -> (Vec<Anomaly>, Vec<u8>) {
        let (mut s, task) = sentinel();
        let mut lines = Vec::new();
        LineAssembler::new(4096).feed(text.as_bytes(), &mut lines);
        // The hub reads context values from status logs only.
        let values = match kind {
            LogKind::Status => lines.iter().filter_map(|l| context_percent(l)).collect(),
            LogKind::Deviations => Vec::new(),
        };
        (s.on_lines(&task, kind, &lines, Instant::now()), values)
    }

    /// The same from the skim's pieces, taken as the hub takes them.
    fn judged_skimmed(text: &str, kind: LogKind) -> (Vec<Anomaly>, Vec<u8>) {
        let (mut s, task) = sentinel();
        let mut found = Vec::new();
        let mut values = Vec::new();
        for piece in skimmed(text, kind) {
            match piece {
                Piece::Skipped(n) => s.skip(&task, kind, n),
                Piece::Context {
                    values: v,
                    last_line,
                } => {
                    s.set_context(&task, *v.last().expect("a value"), last_line);
                    values.extend(v);
                }
                Piece::Lines(batch) => {
                    if kind == LogKind::Status {
                        values.extend(batch.lines.iter().filter_map(|l| context_percent(l)));
                    }
                    found.extend(s.on_lines(&task, kind, &batch.lines, Instant::now()));
                }
            }
        }
        (found, values)
    }

    fn same_findings(text: &str, kind: LogKind) {
        let (whole, all_values) = judged_whole(text, kind);
        let (skim, some_values) = judged_skimmed(text, kind);
        let key = |a: &Anomaly| (a.kind, a.detail.clone(), a.spike, a.line.clone());
        assert_eq!(
            skim.iter().map(key).collect::<Vec<_>>(),
            whole.iter().map(key).collect::<Vec<_>>()
        );
        // Every value the sparkline and the forecast look at, in order.
        let keep = VALUES_KEPT.min(all_values.len());
        assert_eq!(
            &some_values[some_values.len() - keep..],
            &all_values[all_values.len() - keep..]
        );
    }

    /// A Musician's log: `[ctx: N%]` on every line, climbing a point or two, with jumps,
    /// self-corrections, two markers on a line, CRLF, lines past the cap, and text that
    /// is not one.
    #[test]
    fn a_skim_finds_what_reading_every_line_finds() {
        let mut text = String::new();
        let mut ctx = 5u32;
        for i in 0..60_000u32 {
            ctx = if i % 4_001 == 0 {
                5
            } else {
                (ctx + (i % 3)) % 101
            };
            let line = match i % 997 {
                0 => format!("step {i} compacted [ctx: {}%]", (ctx + 30) % 101),
                1 => format!("a self-correction: redo step {i} [ctx: {ctx}%]"),
                2 => format!("agent 1 [ctx: 3%] then [ctx: {ctx}%]"),
                3 => format!("{} [ctx: {ctx}%]", "y".repeat(5000)),
                4 => format!("broken marker [ctx: {ctx}] and [ctx: 1234%]"),
                5 => format!("step {i} agent 2 returned [ctx:\u{a0}{ctx}%]"),
                6 => format!("step {i} done [ctx: {ctx}%]\r"),
                _ => format!("step {i} agent {} launched [ctx: {ctx}%]", i % 4),
            };
            text.push_str(&line);
            text.push('\n');
        }
        let (whole, _) = judged_whole(&text, LogKind::Status);
        assert!(
            whole.len() > 100,
            "the test log raises anomalies: {}",
            whole.len()
        );
        same_findings(&text, LogKind::Status);
        let sparse = text.replace("[ctx:", "[cxt:");
        same_findings(&sparse, LogKind::Status);
        let deviations = text
            .replace("a self-correction", "High: x")
            .replace("step 1", "Low: y");
        same_findings(&deviations, LogKind::Deviations);
    }

    /// Lines that only count and carry a value make no string: a 1,000-line log of
    /// ordinary progress hands on counts and one context piece.
    #[test]
    fn ordinary_progress_lines_are_counted_not_made() {
        let mut text = String::new();
        for i in 0..1000 {
            text.push_str(&format!(
                "step {i} agent 1 launched [ctx: {}%]\n",
                10 + i / 100
            ));
        }
        let pieces = skimmed(&text, LogKind::Status);
        assert_eq!(
            pieces,
            [
                Piece::Skipped(1000),
                Piece::Context {
                    values: (936..1000)
                        .map(|i| 10 + u8::try_from(i / 100).expect("small"))
                        .collect(),
                    last_line: "step 999 agent 1 launched [ctx: 19%]".into(),
                }
            ]
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
                Piece::Lines(crate::core::event::LineBatch {
                    lines: vec![cut[0].clone()],
                    starts: vec![2],
                }),
                Piece::Skipped(3),
                Piece::Context {
                    values: vec![3],
                    last_line: "b [ctx: 3%]".into()
                },
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
