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
//!
//! A cursor is given only for an entry in the journal. Without one (none kept, or it
//! cannot be written: a full disk, a read-only file, its lock held by a stopped maestro
//! past a bound) an event has none, and the journal's trouble is news
//! ([`Journal::take_news`]) the hub tells at once. What could not be kept is held and
//! kept as soon as it can be, marked `replayed` (unkept.rs), so nothing told meanwhile
//! is told again as new. A journal deleted, cut short or replaced under maestro is
//! followed by a new one with a new id.

mod file;
mod place;
pub mod read;
mod unkept;

use std::collections::HashMap;
use std::path::Path;

use time::OffsetDateTime;

pub use file::MAX_BYTES;
use file::{Entry, JournalFile};

/// Where a happening stands in the journal: its cursor and whether an earlier run (of
/// any maestro) told it already.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Told {
    /// `None`: the event is not in the journal (none is kept, or it could not be
    /// written), so it has no place to resume from.
    pub cursor: Option<Cursor>,
    pub replayed: bool,
    /// This process told it already in this run (a fact read again: a database
    /// replaced by a copy of itself): not to be told again.
    pub repeat: bool,
    /// The JSON line as this run journaled it (none for a restatement or without a
    /// journal): the printed form, built once.
    pub line: Option<std::sync::Arc<str>>,
    /// Told with a null cursor while the journal could not keep it: the key its entry
    /// gets when it is kept later (marked `replayed`), so a reader that printed it
    /// passes that entry by ([`read::Follower::next_keyed`]).
    pub held: Option<(u64, u64)>,
}

/// A place in a project's journal: the journal's id and an entry's sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cursor {
    pub journal: u64,
    pub seq: u64,
}

impl Cursor {
    /// Reads a cursor printed by maestro; the error says what to do.
    pub fn parse(text: &str) -> Result<Self, CursorError> {
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
            let text = text.to_owned();
            if old && text.len() > 1 {
                CursorError::OfTheLedger { text }
            } else {
                CursorError::NotACursor { text }
            }
        })
    }
}

/// A `--after` that names no place in a journal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    #[error(
        "{text:?} is a cursor of maestro's older ledger, before the journal: it names a time, not a place. Start once without --after and keep the new `cursor` fields."
    )]
    OfTheLedger { text: String },
    #[error(
        "{text:?} is not a cursor maestro printed (they look like \"3f9c2a7d1e5b4c60-1042\"); pass the `cursor` field of a JSON event as it was printed."
    )]
    NotACursor { text: String },
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
    /// The journal its entry is in.
    journal: u64,
    /// This process told it in this run.
    mine: bool,
}

impl Fact {
    /// This fact told again: its first time and cursor. `journal` is the journal's id
    /// now, `kept` whether it is kept in a file, `run_start` where this run began in it.
    fn restated(
        &mut self,
        now: OffsetDateTime,
        (journal, kept, run_start): (u64, bool, u64),
    ) -> (OffsetDateTime, Told) {
        let first = OffsetDateTime::from_unix_timestamp_nanos(self.first_ns).unwrap_or(now);
        let repeat = std::mem::replace(&mut self.mine, true);
        // A place in a journal since replaced is no place to resume from.
        let cursor = (self.journal == journal && kept).then_some(Cursor {
            journal: self.journal,
            seq: self.seq,
        });
        // Journal 0: its entry was never written.
        let told = Told {
            cursor,
            replayed: self.journal != 0 && (self.journal != journal || self.seq < run_start),
            repeat,
            line: None,
            held: None,
        };
        (first, told)
    }
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
    /// Why the last write failed, while writes fail.
    failing: Option<String>,
    /// What to tell about the journal itself.
    news: Vec<String>,
    /// What was told while the journal could not keep it, to be kept when it can.
    unkept: unkept::Unkept,
    /// A journal that could not be opened at start: where, and when to try again.
    retry: Option<(std::path::PathBuf, std::time::Instant)>,
}

impl Journal {
    /// A journal of this run only (no data directory, the demo, a test): nothing is
    /// kept, so no event has a cursor, and nothing is a replay.
    pub fn in_memory() -> Self {
        Self {
            file: None,
            id: file::new_id(Path::new("memory")),
            facts: HashMap::new(),
            last_seq: 0,
            run_start: 1,
            failing: None,
            news: Vec::new(),
            unkept: unkept::Unkept::default(),
            retry: None,
        }
    }

    /// What happened to the journal itself since the last call (it cannot be written,
    /// it is written again, a new one replaced it), to be told as it happens.
    pub fn take_news(&mut self) -> Vec<String> {
        std::mem::take(&mut self.news)
    }

    /// Opens (or starts) the journal at `path`. One that cannot be opened (a FIFO, a
    /// symlink, no room) still gives cursors for this run; the problem comes back to be
    /// said once.
    pub fn open(path: &Path) -> (Self, Option<String>) {
        match JournalFile::open(path) {
            Ok((file, entries)) => {
                let mut journal = Self::in_memory();
                journal.adopt(file, entries);
                (journal, None)
            }
            Err(e) => {
                let said = format!(
                    "cannot use the journal {}: {e}; events are printed with a null cursor, and kept (marked replayed) once it can be written",
                    path.display()
                );
                let mut journal = Self::in_memory();
                // What was told before is known even when nothing can be added.
                if let Ok((id, entries)) = JournalFile::read_only(path) {
                    journal.id = id;
                    journal.index(entries);
                    journal.run_start = journal.last_seq + 1;
                }
                journal.news.push(said.clone());
                journal.failing = Some(e.to_string());
                journal.retry = Some((path.to_path_buf(), std::time::Instant::now()));
                (journal, Some(said))
            }
        }
    }

    /// Goes on with `file`: its id, and what it holds (told before this run).
    fn adopt(&mut self, file: JournalFile, entries: Vec<Entry>) {
        self.id = file.id();
        self.file = Some(file);
        self.index(entries);
        self.run_start = self.last_seq + 1;
    }

    /// A journal that could not be opened at start is tried again, once a second.
    fn reopen(&mut self) {
        let Some((path, at)) = &mut self.retry else {
            return;
        };
        if at.elapsed() < std::time::Duration::from_secs(1) {
            return;
        }
        *at = std::time::Instant::now();
        if let Ok((file, entries)) = JournalFile::open(path) {
            self.retry = None;
            self.adopt(file, entries);
        }
    }

    /// This journal's id (the first half of its cursors).
    pub fn id(&self) -> u64 {
        self.id
    }

    fn index(&mut self, entries: Vec<Entry>) {
        index(&mut self.facts, &mut self.last_seq, self.id, entries);
    }

    /// Tells one happening: a fact the journal holds keeps its first time and cursor
    /// (`replayed` when it was told before this run; `repeat` when this process told it
    /// already); anything else is appended, its printed form made by `line` for its
    /// cursor, before this returns. An entry that cannot be written has no cursor.
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
        self.reopen();
        // Out of `self` while it is locked, so the guard borrows the file alone.
        let mut file = self.file.take();
        let told = self.tell_in(file.as_mut(), now, key, line);
        self.file = file;
        told
    }

    /// Whether events wait to be kept (or the journal to be opened): then
    /// [`Self::keep_held`] is worth calling, about once a second, with no news to tell.
    pub fn holds(&self) -> bool {
        !self.unkept.is_empty() || self.retry.is_some()
    }

    /// Keeps what waits to be kept, if the journal can take it now (no event needed).
    pub fn keep_held(&mut self, now: OffsetDateTime) {
        self.reopen();
        let mut file = self.file.take();
        if let Some(mut guard) = self.lock_and_read(file.as_mut()) {
            self.keep_unkept(&mut guard, now);
            if self.unkept.is_empty() {
                self.caught_up();
            }
        }
        self.file = file;
    }

    /// A write succeeded with nothing left waiting: a failure said before is over.
    /// Said here, not at the first write that fits (a nearly full disk takes a short
    /// line and refuses the next: that is one failure, not many).
    fn caught_up(&mut self) {
        if let Some(why) = self.failing.take() {
            self.news.push(format!(
                "the journal is written again (it failed: {why}); events from here on have cursors"
            ));
        }
    }

    fn tell_in(
        &mut self,
        file: Option<&mut JournalFile>,
        now: OffsetDateTime,
        key: Option<(u64, u64)>,
        line: impl FnOnce(Cursor) -> String,
    ) -> (OffsetDateTime, Told) {
        let kept = file.is_some();
        let mut lock = self.lock_and_read(file);
        if let Some((slot, fingerprint)) = key
            && let Some(fact) = self.facts.get_mut(&slot)
            && fact.fingerprint == fingerprint
        {
            return fact.restated(now, (self.id, kept, self.run_start));
        }
        if let Some(guard) = &mut lock {
            self.keep_unkept(guard, now);
        }
        // Older events still wait: this one waits behind them (the journal keeps the
        // order they were told in), and the failure stays one, not one per write.
        if !self.unkept.is_empty() {
            lock = None;
        }
        let seq = self.last_seq + 1;
        let cursor = Cursor {
            journal: self.id,
            seq,
        };
        let (slot, fingerprint) = key.unwrap_or((0, 0));
        let first_ns = now.unix_timestamp_nanos();
        let entry = Entry {
            seq,
            slot,
            fingerprint,
            first_ns,
        };
        // Built when it can be kept now, or later (a journal there is, or will be).
        let json: Option<std::sync::Arc<str>> =
            (kept || self.retry.is_some()).then(|| line(cursor).into());
        let text = match (lock.as_mut(), &json) {
            (Some(guard), Some(json)) => Self::append(
                guard,
                (&mut self.failing, &mut self.news),
                &entry,
                json.clone(),
            ),
            _ => None,
        };
        drop(lock);
        let held = match (&text, json) {
            (None, Some(json)) => Some(self.unkept.hold(entry, json)),
            _ => None,
        };
        if text.is_some() {
            self.last_seq = seq;
            self.caught_up();
        }
        if slot != 0 {
            self.facts.insert(
                slot,
                Fact {
                    fingerprint,
                    seq,
                    first_ns,
                    journal: if text.is_some() { self.id } else { 0 },
                    mine: true,
                },
            );
            bound(&mut self.facts);
        }
        let told = Told {
            cursor: text.is_some().then_some(cursor),
            replayed: false,
            repeat: false,
            line: text,
            held,
        };
        (now, told)
    }

    /// The journal's lock, with what the other maestros appended since read (and a new
    /// journal under the name followed); `None` when it cannot be had (said once).
    fn lock_and_read<'f>(&mut self, file: Option<&'f mut JournalFile>) -> Option<file::Guard<'f>> {
        let mut guard = match file.map(JournalFile::lock) {
            Some(Ok(guard)) => guard,
            Some(Err(e)) => {
                Self::failed(&mut self.failing, &mut self.news, &e);
                return None;
            }
            None => return None,
        };
        if let Some(why) = guard.take_restart() {
            // Facts of the journal left behind, as it was when left.
            let salvaged = guard.take_salvaged();
            let (old, mut old_last) = (self.id, self.last_seq);
            index(&mut self.facts, &mut old_last, old, salvaged);
            self.id = guard.id();
            self.last_seq = 0;
            self.news.push(why);
            if guard.take_started_here() {
                carry(&mut guard, &mut self.facts, &mut self.last_seq, self.id);
            }
        }
        let entries = guard.read_new();
        index(&mut self.facts, &mut self.last_seq, self.id, entries);
        Some(guard)
    }

    /// Writes what was told while the journal could not keep it, oldest first, each
    /// with its own cursor and marked `replayed`; what another maestro kept meanwhile
    /// (the same fact) is passed by. Stops at the first write that fails.
    fn keep_unkept(&mut self, guard: &mut file::Guard<'_>, now: OffsetDateTime) {
        if self.unkept.is_empty() {
            return;
        }
        let dropped = self.unkept.dropped();
        if dropped > 0 {
            let ts = now
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default();
            let at = (0, 0, now.unix_timestamp_nanos());
            let line = |cursor| unkept::dropped_line(&ts, dropped, cursor);
            if self.append_next(guard, at, line).is_none() {
                return;
            }
            self.unkept.said_dropped(dropped);
        }
        while let Some(held) = self.unkept.front() {
            let (e, json) = (held.entry, held.json.clone());
            let known = self
                .facts
                .get(&e.slot)
                .is_some_and(|f| f.fingerprint == e.fingerprint && f.journal != 0);
            if !known {
                let at = (e.slot, e.fingerprint, e.first_ns);
                let line = |cursor| unkept::kept_line(&json, cursor);
                let Some(seq) = self.append_next(guard, at, line) else {
                    return;
                };
                self.facts.insert(
                    e.slot,
                    Fact {
                        fingerprint: e.fingerprint,
                        seq,
                        first_ns: e.first_ns,
                        journal: self.id,
                        mine: true,
                    },
                );
            }
            self.unkept.pop();
        }
    }

    /// Appends an entry (`slot`, `fingerprint`, first time) at the next place, its line
    /// made for that cursor: the place, once written.
    fn append_next(
        &mut self,
        guard: &mut file::Guard<'_>,
        (slot, fingerprint, first_ns): (u64, u64, i128),
        line: impl FnOnce(Cursor) -> String,
    ) -> Option<u64> {
        let cursor = Cursor {
            journal: self.id,
            seq: self.last_seq + 1,
        };
        let entry = Entry {
            seq: cursor.seq,
            slot,
            fingerprint,
            first_ns,
        };
        let json = line(cursor).into();
        Self::append(guard, (&mut self.failing, &mut self.news), &entry, json)?;
        self.last_seq = cursor.seq;
        Some(cursor.seq)
    }

    /// Appends one entry: its line when it was written; a failure said once (its end is
    /// said once nothing waits any more: [`Self::caught_up`]).
    fn append(
        guard: &mut file::Guard<'_>,
        (failing, news): (&mut Option<String>, &mut Vec<String>),
        entry: &Entry,
        json: std::sync::Arc<str>,
    ) -> Option<std::sync::Arc<str>> {
        match guard.append(entry, &json) {
            Ok(()) => Some(json),
            Err(e) => {
                Self::failed(failing, news, &e);
                None
            }
        }
    }

    /// A write or lock of the journal failed: said once, until one succeeds again.
    fn failed(failing: &mut Option<String>, news: &mut Vec<String>, e: &std::io::Error) {
        if failing.is_none() {
            news.push(format!(
                "cannot write the journal ({e}): events are printed with a null cursor, which --after cannot resume from, until it can be written again"
            ));
        }
        *failing = Some(e.to_string());
    }
}

/// The most facts a new journal is handed from the one it replaced (the newest).
const MAX_CARRY: usize = 20_000;

/// The JSON of an entry that carries a fact over, not an event: readers pass it by.
pub const CARRIED: &str = "{}";

/// A new journal (the old one deleted, cut short or replaced under maestro) is handed
/// what this process knew was told, newest first up to [`MAX_CARRY`], as entries that
/// are facts, not events ([`CARRIED`]): a maestro started later finds them told, so
/// nothing told before the fault is told again as new.
fn carry(guard: &mut file::Guard<'_>, facts: &mut HashMap<u64, Fact>, last_seq: &mut u64, id: u64) {
    let mut told: Vec<(u64, Fact)> = facts
        .iter()
        .filter(|(_, f)| f.journal != 0)
        .map(|(slot, f)| (*slot, *f))
        .collect();
    told.sort_by_key(|(_, f)| std::cmp::Reverse(f.seq));
    told.truncate(MAX_CARRY);
    for (slot, fact) in told.into_iter().rev() {
        let entry = Entry {
            seq: *last_seq + 1,
            slot,
            fingerprint: fact.fingerprint,
            first_ns: fact.first_ns,
        };
        if guard.append(&entry, CARRIED).is_err() {
            return;
        }
        *last_seq = entry.seq;
        if let Some(f) = facts.get_mut(&slot) {
            f.journal = id;
            f.seq = entry.seq;
        }
    }
}

/// Facts indexed; past this the oldest half is forgotten (the journal itself is bounded
/// by [`MAX_BYTES`], so only a run of one long life gets here).
const MAX_FACTS: usize = 400_000;

fn index(facts: &mut HashMap<u64, Fact>, last_seq: &mut u64, journal: u64, entries: Vec<Entry>) {
    for e in entries {
        *last_seq = (*last_seq).max(e.seq);
        if e.slot != 0 {
            let mine = facts
                .get(&e.slot)
                .is_some_and(|f| f.mine && f.fingerprint == e.fingerprint);
            facts.insert(
                e.slot,
                Fact {
                    fingerprint: e.fingerprint,
                    seq: e.seq,
                    first_ns: e.first_ns,
                    journal,
                    mine,
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
