//! The project's journal: what maestro told, written before anyone is told it.
//!
//! Every happening that has a printed form (an anomaly, a message, a task's state, a
//! wait, a source's news, …) is appended to the journal as one line, its JSON as first
//! printed, *before* the hub hands it to a presenter: a maestro killed at any moment has
//! either not told it (and tells it as news next time) or journaled it (and `--after`
//! prints it from the journal). A `write`, no `fsync`: a killed process loses nothing
//! written; a power loss can lose the last entries the kernel had not written out.
//!
//! A cursor is a place in the journal: the journal's id and an entry's sequence number,
//! which grows by one per entry, never with the clock. Facts (an anomaly's line, a
//! message id, a task's state, a stale stamp, a wait's start) are keyed by an
//! [`Identity`], hashed: re-deriving one after a restart finds its entry, and says it
//! again with its first time and cursor, marked `replayed`.
//!
//! Several maestros of one project share the journal: each append holds an exclusive
//! `flock` on the file, and first reads what the others appended since, so a fact one of
//! them told is not told as new by another and one event has one cursor.

mod file;
pub mod read;

use std::collections::HashMap;
use std::path::Path;

use time::OffsetDateTime;

pub use file::MAX_BYTES;
use file::{Entry, JournalFile};

/// Where a happening stands in the journal: its cursor and whether an earlier run (of
/// any maestro) told it already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Told {
    pub cursor: Cursor,
    pub replayed: bool,
    /// The JSON line as this run journaled it (none for a restatement or without a
    /// journal): the printed form, built once.
    pub line: Option<std::sync::Arc<str>>,
}

/// A place in a project's journal: the journal's id and an entry's sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cursor {
    pub journal: u64,
    pub seq: u64,
}

impl Cursor {
    /// Reads a cursor printed by maestro; the error says what to do.
    pub fn parse(text: &str) -> Result<Self, String> {
        let parsed = text.split_once('-').and_then(|(id, seq)| {
            let id_ok = id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit());
            let seq_ok =
                !seq.is_empty() && seq.len() <= 20 && seq.bytes().all(|b| b.is_ascii_digit());
            (id_ok && seq_ok).then(|| {
                Some(Self {
                    journal: u64::from_str_radix(id, 16).ok()?,
                    seq: seq.parse().ok()?,
                })
            })?
        });
        parsed.ok_or_else(|| {
            let old = text.starts_with('c') && text[1..].bytes().all(|b| b.is_ascii_digit());
            if old && text.len() > 1 {
                format!(
                    "{text:?} is a cursor of maestro's older ledger, before the journal: it names a time, not a place. Start once without --after and keep the new `cursor` fields."
                )
            } else {
                format!(
                    "{text:?} is not a cursor maestro printed (they look like \"3f9c2a7d1e5b4c60-1042\"); pass the `cursor` field of a JSON event as it was printed."
                )
            }
        })
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}-{}", self.journal, self.seq)
    }
}

/// What identifies a told fact: the `slot` it fills and its content there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub slot: String,
    pub fingerprint: String,
}

impl Identity {
    pub fn new(slot: impl Into<String>, fingerprint: impl Into<String>) -> Self {
        Self {
            slot: slot.into(),
            fingerprint: fingerprint.into(),
        }
    }
}

/// A fact as the journal holds it: which content fills its slot, and where.
#[derive(Debug, Clone, Copy)]
struct Fact {
    fingerprint: u64,
    seq: u64,
    first_ns: i128,
}

/// The project's journal, as this run knows it.
#[derive(Debug)]
pub struct Journal {
    file: Option<JournalFile>,
    id: u64,
    /// Slot → the fact that fills it now.
    facts: HashMap<u64, Fact>,
    last_seq: u64,
    /// Entries before this were told before this run began.
    run_start: u64,
}

impl Journal {
    /// A journal of this run only (no data directory, the demo, a test): cursors still
    /// grow by one, and nothing is a replay.
    pub fn in_memory() -> Self {
        Self {
            file: None,
            id: file::new_id(Path::new("memory")),
            facts: HashMap::new(),
            last_seq: 0,
            run_start: 1,
        }
    }

    /// Opens (or starts) the journal at `path`. One that cannot be opened (a FIFO, a
    /// symlink, no room) still gives cursors for this run; the problem comes back to be
    /// said once.
    pub fn open(path: &Path) -> (Self, Option<String>) {
        match JournalFile::open(path) {
            Ok((file, entries)) => {
                let mut journal = Self {
                    id: file.id(),
                    file: Some(file),
                    facts: HashMap::new(),
                    last_seq: 0,
                    run_start: 1,
                };
                journal.index(entries);
                journal.run_start = journal.last_seq + 1;
                (journal, None)
            }
            Err(e) => (
                Self::in_memory(),
                Some(format!(
                    "cannot use the journal {}: {e}; this run's events are not kept for --after",
                    path.display()
                )),
            ),
        }
    }

    /// This journal's id (the first half of its cursors).
    pub fn id(&self) -> u64 {
        self.id
    }

    fn index(&mut self, entries: Vec<Entry>) {
        index(&mut self.facts, &mut self.last_seq, entries);
    }

    /// Tells one happening: a fact the journal holds keeps its first time and cursor
    /// (`replayed` when it was told before this run); anything else is appended, its
    /// printed form made by `line` for its cursor, before this returns.
    pub fn tell(
        &mut self,
        now: OffsetDateTime,
        identity: Option<&Identity>,
        line: impl FnOnce(Cursor) -> String,
    ) -> (OffsetDateTime, Told) {
        let key = identity.map(|id| {
            (
                crate::core::paths::fnv1a(id.slot.as_bytes()).max(1),
                crate::core::paths::fnv1a(id.fingerprint.as_bytes()),
            )
        });
        let journal = self.id;
        // Under the file's lock: what the other maestros appended first, then ours.
        let mut lock = self.file.as_mut().map(JournalFile::lock);
        if let Some(Ok(guard)) = &mut lock {
            index(&mut self.facts, &mut self.last_seq, guard.read_new());
        }
        if let Some((slot, fingerprint)) = key
            && let Some(fact) = self.facts.get(&slot).copied()
            && fact.fingerprint == fingerprint
        {
            let first = OffsetDateTime::from_unix_timestamp_nanos(fact.first_ns).unwrap_or(now);
            let told = Told {
                cursor: Cursor {
                    journal,
                    seq: fact.seq,
                },
                replayed: fact.seq < self.run_start,
                line: None,
            };
            return (first, told);
        }
        self.last_seq += 1;
        let seq = self.last_seq;
        let cursor = Cursor { journal, seq };
        let (slot, fingerprint) = key.unwrap_or((0, 0));
        let first_ns = now.unix_timestamp_nanos();
        let mut text = None;
        if let Some(Ok(guard)) = &mut lock {
            let entry = Entry {
                seq,
                slot,
                fingerprint,
                first_ns,
            };
            let json: std::sync::Arc<str> = line(cursor).into();
            guard.append(&entry, &json);
            text = Some(json);
        }
        drop(lock);
        if slot != 0 {
            self.facts.insert(
                slot,
                Fact {
                    fingerprint,
                    seq,
                    first_ns,
                },
            );
            bound(&mut self.facts);
        }
        (
            now,
            Told {
                cursor,
                replayed: false,
                line: text,
            },
        )
    }
}

/// Facts indexed; past this the oldest half is forgotten (the journal itself is bounded
/// by [`MAX_BYTES`], so only a run of one long life gets here).
const MAX_FACTS: usize = 400_000;

fn index(facts: &mut HashMap<u64, Fact>, last_seq: &mut u64, entries: Vec<Entry>) {
    for e in entries {
        *last_seq = (*last_seq).max(e.seq);
        if e.slot != 0 {
            facts.insert(
                e.slot,
                Fact {
                    fingerprint: e.fingerprint,
                    seq: e.seq,
                    first_ns: e.first_ns,
                },
            );
        }
    }
    bound(facts);
}

fn bound(facts: &mut HashMap<u64, Fact>) {
    if facts.len() <= MAX_FACTS {
        return;
    }
    let mut seqs: Vec<u64> = facts.values().map(|f| f.seq).collect();
    let (_, median, _) = seqs.select_nth_unstable(MAX_FACTS / 2);
    let keep_from = *median;
    facts.retain(|_, f| f.seq >= keep_from);
}

#[cfg(test)]
mod tests;
