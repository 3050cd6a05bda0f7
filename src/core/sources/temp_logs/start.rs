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

/// Skims `[tail.offset, size)` up to its last lines ([`history`]) and moves the tail's
/// offset there (`skip_partial`: the history begins part-way into a line, passed over): whether anything was sent, or `None` when no line starts in the part
/// read first (the loop reads it as before).
pub(super) fn skim_history(
    file: &File,
    tail: &mut Tail,
    (size, skip_partial): (u64, bool),
    kind: LogKind,
    max_line: usize,
    scratch: &mut Vec<u8>,
    out: &mut impl FnMut(history::Piece),
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
    history::skim(file, (start, stop), kind, max_line, scratch, &mut |piece| {
        sent = true;
        out(piece);
    })?;
    tail.offset = stop;
    let back = stop.min(FINGERPRINT as u64);
    let mut last = vec![0; usize::try_from(back).unwrap_or(FINGERPRINT)];
    file.read_exact_at(&mut last, stop - back)?;
    tail.last_bytes = last;
    Ok(Some(sent))
}

pub(super) fn piece_event(
    task: &TaskId,
    kind: LogKind,
    piece: history::Piece,
    initial_mtime: Option<std::time::SystemTime>,
) -> CoreEvent {
    match piece {
        history::Piece::Skipped(lines) => CoreEvent::LogSkipped {
            task: task.clone(),
            kind,
            lines,
        },
        history::Piece::Lines(lines) => CoreEvent::LogLines {
            task: task.clone(),
            kind,
            lines,
            initial_mtime,
        },
    }
}
