//! What maestro has told about a project, across runs: each happening's `cursor`, and
//! whether it restates what an earlier run already told (`replayed`, with its first time).
//!
//! A cursor is the moment the happening was first told, in nanoseconds, made strictly
//! increasing within a run: `--after C` keeps what was first told after `C`, so what
//! happened while no maestro ran (found at start, told now) passes and a restatement
//! (told before, under its old cursor) does not. The identities of told facts (an
//! anomaly's line, a message id, a task's state, a wait's start) live beside the flight
//! recorder as `told.tsv`, one line per fact: `cursor  first-time  slot  fingerprint`,
//! hashes only, so no outside text is ever written there. A slot holds one fact at a
//! time (a task's state); a fact told again in the same slot is a restatement.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use time::OffsetDateTime;

/// Facts kept; past this the oldest are forgotten (and would be told as new again).
const MAX_FACTS: usize = 200_000;
/// A ledger file larger than this is compacted at start (one line per slot).
const COMPACT_AT: u64 = 8 << 20;

/// Where a happening stands among what was told: its cursor and whether an earlier run
/// told it already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    pub cursor: Cursor,
    pub replayed: bool,
}

/// An opaque position in a project's told history (`c` and nanoseconds since 1970).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cursor(i128);

impl Cursor {
    /// Reads a cursor printed by maestro; the error says what to do.
    pub fn parse(text: &str) -> Result<Self, String> {
        text.strip_prefix('c')
            .and_then(|n| n.parse::<i128>().ok())
            .filter(|n| *n >= 0)
            .map(Cursor)
            .ok_or_else(|| {
                format!(
                    "{text:?} is not a cursor maestro printed (they look like \"c1764089705123456789\"); pass the `cursor` field of a JSON event as it was printed."
                )
            })
    }

    fn at(at: OffsetDateTime) -> Self {
        Self(at.unix_timestamp_nanos())
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "c{}", self.0)
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

#[derive(Debug, Clone, Copy)]
struct Fact {
    fingerprint: u64,
    cursor: i128,
    first_ns: i128,
}

/// The project's told history, as this run knows it.
#[derive(Debug, Default)]
pub struct Ledger {
    path: Option<PathBuf>,
    file: Option<File>,
    facts: HashMap<u64, Fact>,
    /// The last cursor given; the next is strictly larger.
    last: i128,
    /// Facts with cursors below this were told by an earlier run.
    run_start: i128,
    /// Lines not written yet: the hub writes them a little later, never while a
    /// happening is on its way to the operator.
    pending: String,
}

impl Ledger {
    /// A ledger that remembers only this run (no data directory, a test).
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// Opens (or starts) the ledger at `path`. A ledger that cannot be read or written
    /// still gives cursors; the problem comes back to be told once.
    pub fn open(path: &Path, now: OffsetDateTime) -> (Self, Option<String>) {
        let mut ledger = Self {
            path: Some(path.to_path_buf()),
            ..Self::default()
        };
        let mut problem = None;
        if let Err(e) = ledger.load(path) {
            problem = Some(format!("cannot read {}: {e}", path.display()));
        }
        let now = Cursor::at(now).0;
        ledger.run_start = now.max(ledger.last + 1);
        ledger.last = ledger.run_start - 1;
        if std::fs::metadata(path).is_ok_and(|m| m.len() > COMPACT_AT) {
            ledger.compact();
        }
        match open_append(path) {
            Ok(f) => ledger.file = Some(f),
            Err(e) => {
                problem.get_or_insert(format!(
                    "cannot write {}: {e}; events are not marked as replayed after a restart",
                    path.display()
                ));
            }
        }
        (ledger, problem)
    }

    fn load(&mut self, path: &Path) -> std::io::Result<()> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for line in BufReader::new(file).split(b'\n') {
            let line = line?;
            // A line cut by a crash, or not ours: skipped.
            let Some((slot, fact)) = std::str::from_utf8(&line).ok().and_then(parse_line) else {
                continue;
            };
            self.last = self.last.max(fact.cursor);
            self.facts.insert(slot, fact);
        }
        Ok(())
    }

    /// Gives the next happening its cursor: `now` and a new cursor for news; for a fact
    /// an earlier run told, its first time and its old cursor.
    pub fn tell(
        &mut self,
        now: OffsetDateTime,
        identity: Option<&Identity>,
    ) -> (OffsetDateTime, Told) {
        if let Some(id) = identity {
            let slot = crate::core::paths::fnv1a(id.slot.as_bytes());
            let fingerprint = crate::core::paths::fnv1a(id.fingerprint.as_bytes());
            if let Some(fact) = self.facts.get(&slot)
                && fact.fingerprint == fingerprint
                && fact.cursor < self.run_start
            {
                let first = OffsetDateTime::from_unix_timestamp_nanos(fact.first_ns).unwrap_or(now);
                return (
                    first,
                    Told {
                        cursor: Cursor(fact.cursor),
                        replayed: true,
                    },
                );
            }
            let cursor = self.next(now);
            let fact = Fact {
                fingerprint,
                cursor,
                first_ns: now.unix_timestamp_nanos(),
            };
            self.facts.insert(slot, fact);
            self.append(slot, fact);
            self.bound();
            return (
                now,
                Told {
                    cursor: Cursor(cursor),
                    replayed: false,
                },
            );
        }
        (
            now,
            Told {
                cursor: Cursor(self.next(now)),
                replayed: false,
            },
        )
    }

    fn next(&mut self, now: OffsetDateTime) -> i128 {
        self.last = now.unix_timestamp_nanos().max(self.last + 1);
        self.last
    }

    fn append(&mut self, slot: u64, fact: Fact) {
        if self.file.is_some() {
            self.pending.push_str(&format_line(slot, fact));
        }
    }

    /// Whether facts wait to be written.
    pub fn holds(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes the facts told since the last call, in one write.
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        if let Some(f) = &mut self.file
            && f.write_all(self.pending.as_bytes()).is_err()
        {
            // A full disk: this run goes on with what it remembers.
            self.file = None;
        }
        self.pending.clear();
    }

    /// Forgets the oldest half when the facts pass their bound.
    fn bound(&mut self) {
        if self.facts.len() <= MAX_FACTS {
            return;
        }
        let mut cursors: Vec<i128> = self.facts.values().map(|f| f.cursor).collect();
        let (_, median, _) = cursors.select_nth_unstable(MAX_FACTS / 2);
        let keep_from = *median;
        self.facts.retain(|_, f| f.cursor >= keep_from);
    }

    /// Rewrites the file with one line per slot (atomically; a failure keeps the old).
    fn compact(&mut self) {
        let Some(path) = self.path.clone() else {
            return;
        };
        self.bound();
        let tmp = path.with_extension("tsv.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            let mut all: Vec<_> = self.facts.iter().collect();
            all.sort_by_key(|(_, f)| f.cursor);
            let mut text = String::new();
            for (slot, fact) in all {
                text.push_str(&format_line(*slot, *fact));
            }
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        if write().is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

fn format_line(slot: u64, fact: Fact) -> String {
    format!(
        "{}\t{}\t{slot:016x}\t{:016x}\n",
        fact.cursor, fact.first_ns, fact.fingerprint
    )
}

fn parse_line(line: &str) -> Option<(u64, Fact)> {
    let mut parts = line.split('\t');
    let cursor = parts.next()?.parse().ok()?;
    let first_ns = parts.next()?.parse().ok()?;
    let slot = u64::from_str_radix(parts.next()?, 16).ok()?;
    let fingerprint = u64::from_str_radix(parts.next()?, 16).ok()?;
    parts.next().is_none().then_some((
        slot,
        Fact {
            fingerprint,
            cursor,
            first_ns,
        },
    ))
}

fn open_append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_764_000_000 + s).expect("time")
    }

    #[test]
    fn cursors_print_and_parse_and_strange_ones_are_refused() {
        let c = Cursor(1_764_089_705_123_456_789);
        assert_eq!(c.to_string(), "c1764089705123456789");
        assert_eq!(Cursor::parse(&c.to_string()), Ok(c));
        for bad in ["", "c", "1764", "c-5", "cx", "c1 2"] {
            let err = Cursor::parse(bad).expect_err(bad);
            assert!(err.contains("`cursor` field"), "{err}");
        }
    }

    #[test]
    fn a_restart_restates_with_the_first_time_and_cursor_and_tells_news_after_it() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("told.tsv");
        let anomaly = Identity::new("anomaly|task-01|1", "");
        let task = |state: &str| Identity::new("task|task-01", state);

        let (mut first, problem) = Ledger::open(&path, at(0));
        assert_eq!(problem, None);
        let (t_anomaly, told_anomaly) = first.tell(at(1), Some(&anomaly));
        assert_eq!((t_anomaly, told_anomaly.replayed), (at(1), false));
        let (_, told_working) = first.tell(at(2), Some(&task("working")));
        // Within a run nothing is a replay, and cursors only grow.
        let (_, unkeyed) = first.tell(at(2), None);
        assert!(unkeyed.cursor > told_working.cursor && told_working.cursor > told_anomaly.cursor);
        first.flush();
        drop(first);

        let (mut second, _) = Ledger::open(&path, at(100));
        let (t, again) = second.tell(at(101), Some(&anomaly));
        assert_eq!(
            (t, again.cursor),
            (at(1), told_anomaly.cursor),
            "first time, old cursor"
        );
        assert!(again.replayed);
        // The task moved while no maestro ran: news, after every old cursor.
        let (t, moved) = second.tell(at(102), Some(&task("complete")));
        assert_eq!(t, at(102));
        assert!(!moved.replayed && moved.cursor > unkeyed.cursor);
        second.flush();
        drop(second);

        // A third run sees the task's latest state as told.
        let (mut third, _) = Ledger::open(&path, at(200));
        assert!(third.tell(at(201), Some(&task("complete"))).1.replayed);
        assert!(!third.tell(at(202), Some(&task("working"))).1.replayed);
    }

    #[test]
    fn a_torn_or_foreign_line_is_skipped_and_a_clock_behind_still_gives_larger_cursors() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("told.tsv");
        let (mut run, _) = Ledger::open(&path, at(1000));
        let (_, told) = run.tell(at(1000), Some(&Identity::new("message|1", "")));
        run.flush();
        drop(run);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        f.write_all(b"garbage\n12\t3").expect("write");
        drop(f);
        // The wall clock went back an hour: cursors still come after the old ones.
        let (mut run, problem) = Ledger::open(&path, at(-3600));
        assert_eq!(problem, None);
        let (_, news) = run.tell(at(-3600), Some(&Identity::new("message|2", "")));
        assert!(news.cursor > told.cursor);
        assert!(
            run.tell(at(-3599), Some(&Identity::new("message|1", "")))
                .1
                .replayed
        );
    }

    #[test]
    fn facts_stay_bounded() {
        let mut ledger = Ledger::in_memory();
        for i in 0..(MAX_FACTS + 10) {
            ledger.tell(at(0), Some(&Identity::new(format!("message|{i}"), "")));
        }
        assert!(ledger.facts.len() <= MAX_FACTS);
    }
}
