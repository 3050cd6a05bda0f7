//! Reading a log: what was appended since the last read (a large history from its
//! last part, skimmed at start), in batches of whole lines, and a cut found by the last
//! bytes read no longer being where they were.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::{
    FINGERPRINT, HISTORY_KEPT, LINES_PER_EVENT, OpenLog, ReadNew, Tail, TempLogs, send_to, start,
};
use crate::core::event::CoreEvent;
use crate::core::sources::history;

impl TempLogs {
    /// Reads what was appended to the log since the tail's offset (a large history
    /// from its last part, skimmed at start), sending full batches of lines on the way.
    pub(super) fn read_new(
        &mut self,
        tail: &mut Tail,
        log: &OpenLog,
        file: &File,
        initial: bool,
    ) -> ReadNew {
        let mut read = ReadNew::default();
        // A large log seen for the first time (or started over) is read from its last
        // part, beginning at the first whole line there.
        let mut skip_partial = false;
        let fresh = tail.offset == 0;
        if fresh && log.size > HISTORY_KEPT {
            (tail.offset, skip_partial) = start::window(file, log.size);
            self.send(start::history_note(&log.path, log.size));
        }
        // What a file holds at start is skimmed: only the lines the Sentinel judges,
        // and its last lines, which the loop below reads whole.
        if fresh
            && initial
            && self.settings.skim_history
            && log.size - tail.offset > history::SKIM_OVER
        {
            let events = &self.events;
            match start::skim_history(
                file,
                tail,
                (log.size, skip_partial),
                log.kind,
                history::Limits {
                    reading: self.settings.reading,
                    sentinel: self.settings.sentinel,
                },
                &mut self.scratch,
                &mut |pieces| {
                    send_to(
                        events,
                        start::history_event(&log.task, log.kind, pieces, log.initial_mtime),
                    );
                },
            ) {
                Ok(Some(sent)) => {
                    skip_partial = false;
                    read.sent_lines = sent;
                }
                Ok(None) => {}
                Err(e) => read.error = Some(e),
            }
        }
        if read.error.is_none() {
            self.read_lines(tail, (log, file), skip_partial, &mut read);
        }
        read
    }

    /// Positioned reads up to the size seen at open: what is appended after that
    /// raises an event of its own, so an isolated line costs no read to learn the end
    /// was reached. A full buffer means a burst: it is read on to its end.
    fn read_lines(
        &mut self,
        tail: &mut Tail,
        (log, file): (&OpenLog, &File),
        mut skip_partial: bool,
        read: &mut ReadNew,
    ) {
        let mut full = false;
        while tail.offset < log.size || full {
            let n = match file.read_at(&mut self.buf, tail.offset) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    read.error = Some(e);
                    break;
                }
            };
            full = n == self.buf.len();
            let mut at = tail.offset;
            tail.offset += n as u64;
            remember_tail(&mut tail.last_bytes, &self.buf[..n]);
            let mut chunk = &self.buf[..n];
            if skip_partial {
                let Some(i) = memchr::memchr(b'\n', chunk) else {
                    continue;
                };
                chunk = &chunk[i + 1..];
                at += i as u64 + 1;
                skip_partial = false;
            }
            tail.assembler
                .feed_at(chunk, at, &mut read.lines, &mut read.starts);
            if read.lines.len() >= LINES_PER_EVENT {
                self.send(CoreEvent::LogLines {
                    task: log.task.clone(),
                    kind: log.kind,
                    lines: std::mem::take(&mut read.lines),
                    starts: std::mem::take(&mut read.starts),
                    initial_mtime: log.initial_mtime,
                });
                read.sent_lines = true;
                if self.outbox_full() {
                    read.more = true;
                    break;
                }
            }
        }
    }

    /// Says what went wrong reading the log, then sends the lines read.
    pub(super) fn report_read(&self, log: OpenLog, read: ReadNew, first_cut: bool, initial: bool) {
        if let Some(e) = read.error {
            self.fail_about(
                Some(&log.task),
                format!("cannot read {}: {e}", log.path.display()),
            );
        }
        if first_cut {
            // Said once a log: a line past the cap is judged on what was kept.
            self.fail_about(
                Some(&log.task),
                format!(
                    "{} has a line over {} KiB: it is kept as its start, […] and its end, with any self-correction in the cut middle said after […]; [logs] max_line sets the cap",
                    log.path.display(),
                    self.settings.reading.max_line / 1024
                ),
            );
        }
        // At start, even an empty file is reported: its mtime starts the stall clock.
        if !read.lines.is_empty() || (initial && !read.sent_lines) {
            self.send(CoreEvent::LogLines {
                task: log.task,
                kind: log.kind,
                lines: read.lines,
                starts: read.starts,
                initial_mtime: log.initial_mtime,
            });
        }
    }
}

/// Whether the bytes just before `offset` are still the ones read there last time.
pub(super) fn still_matches(file: &File, offset: u64, last: &[u8]) -> bool {
    if last.is_empty() {
        return true;
    }
    let mut now = [0u8; FINGERPRINT];
    let now = &mut now[..last.len()];
    file.read_exact_at(now, offset - last.len() as u64)
        .is_ok_and(|()| now == last)
}

pub(super) fn remember_tail(last: &mut Vec<u8>, chunk: &[u8]) {
    if chunk.len() >= FINGERPRINT {
        last.clear();
        last.extend_from_slice(&chunk[chunk.len() - FINGERPRINT..]);
    } else {
        last.extend_from_slice(chunk);
        let excess = last.len().saturating_sub(FINGERPRINT);
        last.drain(..excess);
    }
}
