//! Reading the journal from a place (`--after CURSOR`): the cursor checked against the
//! journal (another journal's, or a place past its end, is refused with the reason), a
//! gap said when the journal no longer holds the entries just after it, then every
//! entry after it in order, and those appended later as they come (by any maestro).

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::Cursor;
use super::file::parse_entry_at;
use super::place::{header_chain, header_id, place};

/// A reader of the journal after a cursor.
#[derive(Debug)]
pub struct Follower {
    /// The journal's name as configured; `path` is where it is now ([`place`]).
    base: PathBuf,
    path: PathBuf,
    file: File,
    ino: (u64, u64),
    /// The journal followed (a new one under the name is followed from its start).
    id: u64,
    /// A new journal replaced the one followed since the last call: its id.
    replaced_by: Option<u64>,
    /// Bytes read so far (whole lines).
    end: u64,
    /// The last entry handed out: only later ones are handed out.
    after: u64,
}

/// What the journal holds before the first entry a reader gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// Entries cut from the front of the journal between the cursor and its oldest;
    /// `None` when the cursor is of a journal this one replaced (how many is not known).
    pub count: Option<u64>,
    /// The place just before the oldest entry kept.
    pub before: Cursor,
}

/// Opens the journal at `path` for a reader resuming after `cursor`: refused with the
/// reason when the cursor is not one of this journal's places.
/// Why a reader cannot resume after a cursor; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error(
        "this project has no journal yet, so cursor {cursor} is not one of its places (it is another project's, or from a journal since removed). Start without --after."
    )]
    NoJournal { cursor: Cursor },
    #[error("cannot read this project's journal: {0}")]
    Unreadable(#[source] crate::core::safe_fs::Refused),
    #[error(transparent)]
    Read(#[from] std::io::Error),
    #[error(
        "{} is not a journal maestro wrote (no header); remove it and maestro starts a new one",
        .path.display()
    )]
    NotAJournal { path: std::path::PathBuf },
    #[error(
        "cursor {cursor} belongs to journal {:016x}, not to this project's ({id:016x}): it is another project's, or from a journal since removed. Start without --after.",
        .cursor.journal
    )]
    OtherJournal { cursor: Cursor, id: u64 },
    #[error(
        "cursor {cursor} is past the end of this project's journal, which goes to {id:016x}-{last}: no maestro printed it. Pass a cursor maestro printed, or start without --after."
    )]
    PastTheEnd { cursor: Cursor, id: u64, last: u64 },
}

pub fn follow_after(base: &Path, cursor: Cursor) -> Result<(Follower, Option<Gap>), ResumeError> {
    let path = &place(base);
    let (file, meta) = crate::core::safe_fs::open_regular(path).map_err(|e| {
        if e.is_missing() {
            ResumeError::NoJournal { cursor }
        } else {
            ResumeError::Unreadable(e)
        }
    })?;
    let mut follower = Follower {
        base: base.to_path_buf(),
        path: path.clone(),
        ino: (meta.dev(), meta.ino()),
        file,
        id: 0,
        replaced_by: None,
        end: 0,
        after: 0,
    };
    let (id, chain, entries) = follower.scan()?;
    if id != cursor.journal {
        // A journal this one replaced (deleted, cut, replaced under maestro): its
        // cursors resume here, from the start, after a gap of unknown size.
        if !chain.contains(&cursor.journal) {
            return Err(ResumeError::OtherJournal { cursor, id });
        }
        follower.id = id;
        follower.end = 0;
        let before = Cursor {
            journal: id,
            seq: 0,
        };
        return Ok((
            follower,
            Some(Gap {
                count: None,
                before,
            }),
        ));
    }
    let last = entries.last().copied().unwrap_or(0);
    if cursor.seq > last {
        return Err(ResumeError::PastTheEnd { cursor, id, last });
    }
    let first = entries.first().copied().unwrap_or(last + 1);
    let gap = (cursor.seq + 1 < first).then(|| Gap {
        count: Some(first - cursor.seq - 1),
        before: Cursor {
            journal: id,
            seq: first - 1,
        },
    });
    follower.after = cursor.seq;
    follower.id = id;
    follower.end = 0;
    Ok((follower, gap))
}

impl Follower {
    /// The journal's id and every entry's sequence number, in order; the read position
    /// is left at the end.
    fn scan(&mut self) -> Result<(u64, Vec<u64>, Vec<u64>), ResumeError> {
        let mut id = None;
        let mut chain = Vec::new();
        let mut seqs = Vec::new();
        for line in self.read_lines()? {
            if let Some(h) = header_id(&line) {
                id = Some(h);
                chain = header_chain(&line);
            } else if let Some((e, _)) = parse_entry_at(&line) {
                seqs.push(e.seq);
            }
        }
        let id = id.ok_or_else(|| ResumeError::NotAJournal {
            path: self.path.clone(),
        })?;
        Ok((id, chain, seqs))
    }

    /// A new journal that replaced the one followed (deleted, cut short or replaced
    /// under maestro), once: what the old one held after the reader's place may be lost.
    pub fn take_replaced(&mut self) -> Option<u64> {
        self.replaced_by.take()
    }

    /// The entries appended since the last call that come after the reader's place, as
    /// (sequence number, JSON line), in order. A journal cut and renamed meanwhile is
    /// opened again and read from its start (what was handed out already is skipped); a
    /// new journal under the name is read from its start ([`Self::take_replaced`]). Only
    /// whole entries whose JSON is one whole object are handed out.
    pub fn next_entries(&mut self) -> Vec<(u64, String)> {
        self.next_keyed()
            .into_iter()
            .map(|(seq, _, json)| (seq, json))
            .collect()
    }

    /// [`Self::next_entries`] with each entry's key (its slot and fingerprint), which a
    /// reader matches against what it printed with a null cursor ([`super::Told::held`]).
    pub fn next_keyed(&mut self) -> Vec<(u64, (u64, u64), String)> {
        let moved = std::fs::symlink_metadata(&self.path)
            .map_or(true, |meta| (meta.dev(), meta.ino()) != self.ino);
        if moved
            && let place = place(&self.base)
            && let Ok((file, meta)) = crate::core::safe_fs::open_regular(&place)
            && (meta.dev(), meta.ino()) != self.ino
            && self.continues_in(&file)
        {
            self.path = place;
            self.file = file;
            self.ino = (meta.dev(), meta.ino());
            self.end = 0;
        } else if self.file.metadata().is_ok_and(|m| m.len() < self.end) {
            // Cut short in place: read again from the top (nothing handed out twice).
            self.end = 0;
        }
        let mut out = Vec::new();
        for line in self.read_lines().unwrap_or_default() {
            if let Some(id) = header_id(&line) {
                if id != self.id && self.id != 0 {
                    self.replaced_by = Some(id);
                    self.after = 0;
                }
                self.id = id;
                continue;
            }
            let Some((e, json_at)) = parse_entry_at(&line) else {
                continue;
            };
            if e.seq <= self.after {
                continue;
            }
            let json = &line[json_at..];
            if json == super::CARRIED.as_bytes() {
                // A fact carried over from a journal this one replaced: no event.
                self.after = e.seq;
                continue;
            }
            if serde_json::from_slice::<serde::de::IgnoredAny>(json).is_err() {
                continue;
            }
            self.after = e.seq;
            if let Ok(json) = String::from_utf8(json.to_vec()) {
                out.push((e.seq, (e.slot, e.fingerprint), json));
            }
        }
        out
    }

    /// Whether the file now under the name goes on from the journal followed: the same
    /// journal (cut by its bound, renamed over) or a new one whose header names it.
    /// Anything else (another project's journal, a stranger's file put there) is not
    /// read: the project's maestros replace it, and the reader follows what they make.
    fn continues_in(&self, file: &File) -> bool {
        if self.id == 0 {
            return true;
        }
        let mut head = [0u8; 4096];
        let n = file.read_at(&mut head, 0).unwrap_or(0);
        let first = head[..n].split(|b| *b == b'\n').next().unwrap_or_default();
        header_id(first).is_some_and(|id| id == self.id || header_chain(first).contains(&self.id))
    }

    /// Whole lines from the read position to the end as it is now (its size read first).
    fn read_lines(&mut self) -> std::io::Result<Vec<Vec<u8>>> {
        let size = self.file.metadata()?.len();
        if size <= self.end {
            return Ok(Vec::new());
        }
        let want = (size - self.end).min(super::MAX_BYTES * 2);
        let mut buf = vec![0; usize::try_from(want).unwrap_or(usize::MAX)];
        let mut n = 0;
        while n < buf.len() {
            match self.file.read_at(&mut buf[n..], self.end + n as u64) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        buf.truncate(n);
        let Some(last) = memchr::memrchr(b'\n', &buf) else {
            return Ok(Vec::new());
        };
        self.end += last as u64 + 1;
        Ok(buf[..last]
            .split(|b| *b == b'\n')
            .map(<[u8]>::to_vec)
            .collect())
    }
}
