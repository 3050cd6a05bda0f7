//! What the logs hold when following starts: a large history is skimmed ([`history`])
//! from its start to its last lines, which the follower then reads whole before it goes
//! on with what is appended.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::{FINGERPRINT, HISTORY_KEPT, READ_CHUNK, Tail};
use crate::core::domain::{LogKind, TaskId};
use crate::core::event::{CoreEvent, FolderStatus};
use crate::core::sources::history;

/// The `source` note for a log read from its last part only.
pub(super) fn history_note(path: &Path, len: u64) -> CoreEvent {
    CoreEvent::LogFolder(FolderStatus::Watching(format!(
        "{} holds {:.1} MB: only its last {} MiB were read (anomalies before that are not reported)",
        path.display(),
        len as f64 / 1e6,
        HISTORY_KEPT / (1024 * 1024)
    )))
}

/// Where a large log seen for the first time is read from: its last [`HISTORY_KEPT`]
/// bytes, passing over the line they begin part-way into (`true`). When those bytes hold
/// no newline at all they are the end of one line still being written: it is read from
/// its own start instead (`false`), so it is told, cut, as it would be in a file that
/// grew to it.
pub(super) fn window(file: &File, size: u64) -> (u64, bool) {
    let from = size.saturating_sub(HISTORY_KEPT);
    let mut buf = vec![0; READ_CHUNK];
    let mut at = from;
    while at < size {
        match file.read_at(&mut buf, at) {
            Ok(0) | Err(_) => break,
            Ok(n) if memchr::memchr(b'\n', &buf[..n]).is_some() => return (from, true),
            Ok(n) => at += n as u64,
        }
    }
    // One line: back to the newline before it (or the file's start).
    let mut end = from;
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let len = usize::try_from(end - start).unwrap_or(buf.len());
        let Ok(n) = file.read_at(&mut buf[..len], start) else {
            return (from, true);
        };
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n]) {
            return (start + i as u64 + 1, false);
        }
        end = start;
    }
    (0, false)
}

/// Skims `[tail.offset, size)` up to its last lines ([`history`]), handing `out` the
/// pieces a batch at a time, and moves the tail's offset there. `skip_partial`: the
/// history begins part-way into a line, which is passed over. Returns whether anything
/// was sent, or `None` when no line starts in the part read first (the follower reads
/// it as before).
pub(super) fn skim_history(
    file: &File,
    tail: &mut Tail,
    (size, skip_partial): (u64, bool),
    kind: LogKind,
    limits: history::Limits,
    scratch: &mut Vec<u8>,
    out: &mut impl FnMut(Vec<history::Piece>),
) -> std::io::Result<Option<bool>> {
    let mut start = tail.offset;
    if skip_partial {
        // A history read from its last part begins at the first whole line there.
        let mut probe = vec![0; READ_CHUNK];
        let n = file.read_at(&mut probe, start)?;
        match memchr::memchr(b'\n', &probe[..n]) {
            Some(i) => start += i as u64 + 1,
            None => return Ok(None),
        }
    }
    let stop = history::tail_start(file, start, size)?;
    let mut sent = false;
    // Pieces go out a batch at a time: one event for a typical history, not one per
    // line judged (the hub and the recorder pay per event).
    let mut batch = Vec::new();
    let mut lines = 0;
    history::skim(file, (start, stop), kind, limits, scratch, &mut |piece| {
        if let history::Piece::Lines(l) = &piece {
            lines += l.lines.len();
        }
        batch.push(piece);
        if lines >= BATCH_LINES {
            sent = true;
            lines = 0;
            out(std::mem::take(&mut batch));
        }
    })?;
    if !batch.is_empty() {
        sent = true;
        out(batch);
    }
    tail.offset = stop;
    let back = stop.min(FINGERPRINT as u64);
    let mut last = vec![0; usize::try_from(back).unwrap_or(FINGERPRINT)];
    file.read_exact_at(&mut last, stop - back)?;
    tail.last_bytes = last;
    Ok(Some(sent))
}

/// Lines judged per history event, at most (a little over).
const BATCH_LINES: usize = 1024;

/// One batch of a history, as the hub takes it.
pub(super) fn history_event(
    task: &TaskId,
    kind: LogKind,
    pieces: Vec<history::Piece>,
    initial_mtime: Option<std::time::SystemTime>,
) -> CoreEvent {
    CoreEvent::LogHistory {
        task: task.clone(),
        kind,
        pieces,
        initial_mtime,
    }
}
