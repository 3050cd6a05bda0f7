//! The journal's file: `<data dir>/events/<project key>/journal.tsv`, opened like the
//! rest of maestro's own files (never through a symlink, never a FIFO or a device, its
//! size read before it is read, mode 0600), a header naming the journal's id, then one
//! entry a line: `seq  slot  fingerprint  first-time-ns  json`. Hashes and maestro's own
//! JSON only: outside text reaches it escaped, and no line holds a raw newline.
//!
//! Appends hold an exclusive `flock`; one past [`MAX_BYTES`] cuts the file to its newest
//! half (written to a fresh file made with `O_EXCL` beside it, then renamed over), and a
//! maestro that finds the name on another file opens that one when it is that cut (the
//! same id, entries as far as this one read). Anything else under the name (nothing: the
//! journal deleted; another journal's or an older copy; the file cut short) starts a new
//! journal with a new id, so no cursor ever names two events; the caller is told why.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use nix::fcntl::OFlag;

/// A journal larger than this is cut to its newest half (small in unit tests, so the
/// cut is exercised).
#[cfg(not(test))]
pub const MAX_BYTES: u64 = 32 << 20;
#[cfg(test)]
pub const MAX_BYTES: u64 = 64 << 10;
/// The header's first word.
const MAGIC: &str = "#maestro-journal";

/// One entry's key fields (its JSON stays in the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub seq: u64,
    /// 0 for a happening with no identity.
    pub slot: u64,
    pub fingerprint: u64,
    pub first_ns: i128,
}

/// The open journal file and how far this process has read it.
#[derive(Debug)]
pub struct JournalFile {
    /// The journal's name as configured (`journal.tsv`).
    base: PathBuf,
    /// Where it is now: the name, or one beside it when something that is not a file
    /// (a directory, a FIFO, a symlink) took the name ([`place`]).
    path: PathBuf,
    /// The lock was not had within [`LOCK_WAIT`] last time: tried once, not waited for,
    /// until it is had again.
    stuck: bool,
    file: File,
    /// The file's (device, inode) once learnt: what the name must hold.
    file_id: Option<(u64, u64)>,
    id: u64,
    /// Bytes read (and indexed) so far: whole lines only.
    end: u64,
    /// The file's size at the last read (past `end`: a line torn by a killed writer).
    size: u64,
    /// The highest sequence number read or written.
    max_seq: u64,
    /// Why a new journal was started under the name since the caller last asked.
    restarted: Option<String>,
    /// This process started it (not a sibling): it hands the new journal what it knew.
    started_here: bool,
    /// The journal this one replaced, as its header says (a new journal's).
    replaces: Option<u64>,
    /// Every journal before it that its header names, newest first (the chain whose
    /// cursors still resume here).
    chain: Vec<u64>,
    /// The journal this process left for the one it has now (started or followed): a
    /// sibling that raced it to replace the same one is followed, not fought.
    predecessor: Option<u64>,
}

/// A new journal's id: different for every journal made, so a cursor of a removed
/// journal or another project is told apart.
pub fn new_id(path: &Path) -> u64 {
    let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
    let mut seed = path.as_os_str().as_encoded_bytes().to_vec();
    seed.extend_from_slice(&now.to_le_bytes());
    seed.extend_from_slice(&std::process::id().to_le_bytes());
    crate::core::paths::fnv1a(&seed) | 1
}

/// Opens a file of the journal's for reading and appending: created 0600, never
/// through a symlink, never blocking on a FIFO; anything but a regular file refused.
fn open_own(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    Ok(file)
}

/// How long a maestro waits for the journal's lock before it gives up on this entry: a
/// sibling stopped (SIGSTOP, a debugger) while holding it holds up no one longer.
const LOCK_WAIT: Duration = Duration::from_millis(300);

/// Takes the exclusive lock within `wait`; past it, an error that says why.
fn lock_within(file: &File, wait: Duration) -> io::Result<()> {
    use rustix::fs::FlockOperation::NonBlockingLockExclusive;
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match rustix::fs::flock(file, NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let left = wait.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "its lock is held by another maestro of this project that does not let go (stopped or frozen)",
            ));
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(Duration::from_millis(16));
    }
}

fn lock(file: &File) -> io::Result<()> {
    lock_within(file, LOCK_WAIT)
}

fn unlock(file: &File) {
    let _ = rustix::fs::flock(file, rustix::fs::FlockOperation::Unlock);
}

impl JournalFile {
    /// Opens the journal (made with a new id when there is none) and reads its entries.
    pub fn open(base: &Path) -> io::Result<(Self, Vec<Entry>)> {
        if let Some(dir) = base.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let path = place(base);
        let file = open_own(&path)?;
        let mut journal = Self {
            base: base.to_path_buf(),
            path,
            stuck: false,
            file,
            file_id: None,
            id: 0,
            end: 0,
            size: 0,
            max_seq: 0,
            restarted: None,
            started_here: false,
            replaces: None,
            chain: Vec::new(),
            predecessor: None,
        };
        lock(&journal.file)?;
        let read = journal.read_start();
        unlock(&journal.file);
        let entries = read?;
        Ok((journal, entries))
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The header (written when the file is new) and every entry.
    fn read_start(&mut self) -> io::Result<Vec<Entry>> {
        if self.file.metadata()?.len() == 0 {
            // A journal made where none was: the ones the project had before (deleted
            // while no maestro ran) are named, so their cursors resume here.
            self.id = new_id(&self.path);
            self.chain = remembered_chain(&self.base);
            self.file.write_all(header(self.id, &self.chain).as_bytes())?;
            remember_chain(&self.base, self.id, &self.chain);
        }
        let entries = self.read_new()?;
        if self.id == 0 {
            return Err(io::Error::other(
                "it does not start with a journal's header (remove it and maestro starts a new journal)",
            ));
        }
        Ok(entries)
    }

    /// Why a new journal was started under the name, once.
    pub fn take_restart(&mut self) -> Option<String> {
        self.restarted.take()
    }

    /// Whether this process started the new journal it is on (once).
    pub fn take_started_here(&mut self) -> bool {
        std::mem::take(&mut self.started_here)
    }

    /// Takes the lock for one append, and learns the file's size. A file no longer named
    /// (a maestro that cut the journal renamed a new one over it; the journal deleted or
    /// replaced) is left for the file the name holds now, or for a new journal; a file
    /// cut short under its name starts a new journal. One `lstat` while the name holds
    /// this process's file (an `fstat` too when it does not): this runs before every
    /// event is printed.
    pub fn lock(&mut self) -> io::Result<Guard<'_>> {
        let wait = if self.stuck { Duration::ZERO } else { LOCK_WAIT };
        let had = lock_within(&self.file, wait);
        self.stuck = had.is_err();
        had?;
        match self.named() {
            Ok(Named::Whole) => return Ok(Guard { journal: self }),
            Ok(_) => unlock(&self.file),
            Err(e) => {
                unlock(&self.file);
                return Err(e);
            }
        }
        // Settled by one maestro of the project at a time (the others then find its new
        // journal under the name, and follow it). The side lock first, then the file's,
        // as everywhere: no two maestros wait on each other.
        let settling = SideLock::take(&self.base)?;
        lock(&self.file)?;
        if let Err(e) = self.settle() {
            unlock(&self.file);
            return Err(e);
        }
        drop(settling);
        Ok(Guard { journal: self })
    }

    /// Under both locks: the name looked at again, and followed or replaced.
    fn settle(&mut self) -> io::Result<()> {
        // Something that is not a file under the name: the journal goes beside it.
        let place = place(&self.base);
        let taken = std::fs::symlink_metadata(&self.path).is_ok_and(|m| !m.is_file());
        if place != self.path {
            self.path = place;
            self.file_id = None;
        }
        match self.named()? {
            Named::Whole => return Ok(()),
            Named::CutShort => {
                return self.start_new("the journal was cut short under maestro (truncated)");
            }
            Named::Gone if taken => {
                return self.start_new(
                    "something that is not a file (a directory, a FIFO or a symlink) took the journal's name",
                );
            }
            Named::Gone => return self.start_new("the journal was deleted while maestro ran"),
            Named::Other => {}
        }
        // Another file under the name: a sibling's cut of this journal is followed.
        let file = open_own(&self.path)?;
        lock(&file)?;
        let old = self.swap_file(file);
        unlock(&old);
        let (id, end, max_seq) = (self.id, self.end, self.max_seq);
        self.end = 0;
        self.id = 0;
        self.replaces = None;
        self.size = self.file.metadata()?.len();
        let entries = self.read_to_size()?;
        let newest = entries.iter().map(|e| e.seq).max().unwrap_or(0);
        if self.id == id && newest >= max_seq {
            // Re-read from its top: the caller indexes what it holds again.
            self.end = 0;
            self.max_seq = max_seq;
            return Ok(());
        }
        // A new journal of another maestro's: it replaced this one, or the same one this
        // replaced (both saw it go). An older copy of this one (its own id) is neither.
        if self.id != id
            && self.replaces.is_some()
            && (self.replaces == Some(id) || self.replaces == self.predecessor)
        {
            self.predecessor = self.replaces;
            self.restarted = Some(format!(
                "another maestro started a new journal {:016x} at {} in place of {id:016x}; a cursor of the old one resumes at the new one's start, after a gap",
                self.id,
                self.path.display()
            ));
            self.end = 0;
            self.max_seq = 0;
            return Ok(());
        }
        self.id = id;
        self.end = end;
        self.max_seq = max_seq;
        self.start_new(
            "the journal was replaced by another file (an older copy, or another project's journal)",
        )
    }

    /// What the journal's name holds now, against this process's file (its size learnt).
    /// While the name holds this process's file, one `lstat` tells both (the same inode,
    /// the same size); the file's own `fstat` is asked only when it does not.
    fn named(&mut self) -> io::Result<Named> {
        let named = std::fs::symlink_metadata(&self.path).ok();
        if let (Some(m), Some(id)) = (&named, self.file_id)
            && (m.dev(), m.ino()) == id
        {
            self.size = m.len();
            return Ok(self.whole_or_cut());
        }
        let meta = self.file.metadata()?;
        self.file_id = Some((meta.dev(), meta.ino()));
        self.size = meta.len();
        Ok(match named.map(|m| (m.dev(), m.ino())) {
            None => Named::Gone,
            Some(id) if meta.nlink() > 0 && id == (meta.dev(), meta.ino()) => self.whole_or_cut(),
            Some(_) => Named::Other,
        })
    }

    fn whole_or_cut(&self) -> Named {
        if self.size >= self.end {
            Named::Whole
        } else {
            Named::CutShort
        }
    }

    /// Goes on with `file` (its identity learnt at the next look); the old one back.
    fn swap_file(&mut self, file: File) -> File {
        self.file_id = None;
        std::mem::replace(&mut self.file, file)
    }

    /// A new journal under the name, with a new id: no cursor of the old one names any
    /// of its entries.
    fn start_new(&mut self, why: &str) -> io::Result<()> {
        let id = new_id(&self.path);
        // The id it replaces first, so the project's other maestros follow it; then the
        // ones before, so a cursor of any of them still resumes (after a gap).
        let mut chain = vec![self.id];
        chain.extend(self.chain.iter().copied().take(MAX_CHAIN - 1));
        let header = header(id, &chain);
        crate::core::safe_fs::write_atomic(&self.path, header.as_bytes(), 0o600)?;
        remember_chain(&self.base, id, &chain);
        self.chain = chain;
        let file = open_own(&self.path)?;
        lock(&file)?;
        let old = self.swap_file(file);
        unlock(&old);
        let old_id = self.id;
        self.predecessor = Some(old_id);
        self.id = id;
        self.end = header.len() as u64;
        self.size = self.end;
        self.max_seq = 0;
        self.started_here = true;
        self.restarted = Some(format!(
            "{why}: a new journal {id:016x} replaces {old_id:016x} at {}; a cursor of the old one resumes at the new one's start, after a gap",
            self.path.display()
        ));
        Ok(())
    }

    /// The whole lines appended since the last read, parsed (a torn or foreign line is
    /// skipped). The header, met at the start, sets the id.
    fn read_new(&mut self) -> io::Result<Vec<Entry>> {
        self.size = self.file.metadata()?.len();
        self.read_to_size()
    }

    /// [`Self::read_new`] up to the size last learnt.
    fn read_to_size(&mut self) -> io::Result<Vec<Entry>> {
        let size = self.size;
        if size <= self.end {
            return Ok(Vec::new());
        }
        // Never more than the bound and a half at once (a file grown by someone else).
        let want = (size - self.end).min(MAX_BYTES + MAX_BYTES / 2);
        let mut buf = vec![0; usize::try_from(want).unwrap_or(usize::MAX)];
        let n = read_at_most(&self.file, &mut buf, self.end)?;
        buf.truncate(n);
        let Some(last) = memchr::memrchr(b'\n', &buf) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for line in buf[..=last].split(|b| *b == b'\n') {
            if let Some(id) = header_id(line) {
                self.id = id;
                self.replaces = header_replaces(line);
                self.chain = header_chain(line);
            } else if let Some(e) = parse_entry(line) {
                self.max_seq = self.max_seq.max(e.seq);
                out.push(e);
            }
        }
        self.end += last as u64 + 1;
        Ok(out)
    }
}

fn read_at_most(file: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The journal's id, from its header line.
pub fn header_id(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    let mut words = text.split(' ');
    (words.next()? == MAGIC && words.next()? == "1")
        .then(|| u64::from_str_radix(words.next()?, 16).ok())
        .flatten()
}

/// The journal a new journal's header says it replaces.
fn header_replaces(line: &[u8]) -> Option<u64> {
    header_chain(line).first().copied()
}

/// The most journals a header names before it.
const MAX_CHAIN: usize = 16;

/// Every journal a header names before it, newest first: `replaces=<id>[,<id>…]`.
pub fn header_chain(line: &[u8]) -> Vec<u64> {
    let Ok(text) = std::str::from_utf8(line) else {
        return Vec::new();
    };
    text.split(' ')
        .nth(3)
        .and_then(|w| w.strip_prefix("replaces="))
        .map(|list| {
            list.split(',')
                .map_while(|hex| u64::from_str_radix(hex, 16).ok())
                .take(MAX_CHAIN)
                .collect()
        })
        .unwrap_or_default()
}

/// A journal's header line: its id, and the journals it replaces (newest first).
fn header(id: u64, chain: &[u64]) -> String {
    if chain.is_empty() {
        return format!("{MAGIC} 1 {id:016x}\n");
    }
    let ids: Vec<String> = chain.iter().map(|c| format!("{c:016x}")).collect();
    format!("{MAGIC} 1 {id:016x} replaces={}\n", ids.join(","))
}

/// The most places tried beside the journal's name.
const MAX_PLACES: u32 = 8;

/// Where the journal named `base` is: the last of `journal.tsv`, `journal.2.tsv`, …
/// that holds a regular file, or else the first that holds nothing. A directory, FIFO
/// or symlink under a name is passed by, never followed, opened or removed.
pub fn place(base: &Path) -> PathBuf {
    let stem = base.file_stem().unwrap_or_default().to_string_lossy();
    let ext = base.extension().map(|e| e.to_string_lossy());
    let names = (1..=MAX_PLACES).map(|n| match (n, &ext) {
        (1, _) => base.to_path_buf(),
        (n, Some(ext)) => base.with_file_name(format!("{stem}.{n}.{ext}")),
        (n, None) => base.with_file_name(format!("{stem}.{n}")),
    });
    let mut free = None;
    let mut file = None;
    for name in names {
        match std::fs::symlink_metadata(&name) {
            Ok(m) if m.is_file() => file = Some(name),
            Err(e) if e.kind() == io::ErrorKind::NotFound && free.is_none() => free = Some(name),
            _ => {}
        }
    }
    file.or(free).unwrap_or_else(|| base.to_path_buf())
}

/// The side file beside the journal's name (its lock, and the ids of its journals).
fn side_path(base: &Path) -> PathBuf {
    let mut name = base.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// The journals the project had, newest first, as the side file remembers them.
fn remembered_chain(base: &Path) -> Vec<u64> {
    let text = crate::core::safe_fs::read_regular(&side_path(base), 4096).unwrap_or_default();
    header_chain(format!("{MAGIC} 1 0 {}", String::from_utf8_lossy(&text).trim()).as_bytes())
}

/// Remembers `id` and the journals before it in the side file (best effort: a journal
/// without it only loses the chain of one deleted while no maestro ran).
fn remember_chain(base: &Path, id: u64, chain: &[u64]) {
    let ids: Vec<String> = std::iter::once(id)
        .chain(chain.iter().copied().take(MAX_CHAIN - 1))
        .map(|c| format!("{c:016x}"))
        .collect();
    if let Ok(file) = open_own(&side_path(base))
        && file.set_len(0).is_ok()
    {
        let _ = (&file).write_all(format!("replaces={}\n", ids.join(",")).as_bytes());
    }
}

/// An entry's key fields, and where its JSON starts in the line.
pub fn parse_entry_at(line: &[u8]) -> Option<(Entry, usize)> {
    let mut at = 0;
    let mut field = || {
        let rest = line.get(at..)?;
        let len = memchr::memchr(b'\t', rest)?;
        let text = std::str::from_utf8(&rest[..len]).ok()?;
        at += len + 1;
        Some(text)
    };
    let seq = field()?.parse().ok()?;
    let slot = u64::from_str_radix(field()?, 16).ok()?;
    let fingerprint = u64::from_str_radix(field()?, 16).ok()?;
    let first_ns = field()?.parse().ok()?;
    (line.get(at) == Some(&b'{')).then_some((
        Entry {
            seq,
            slot,
            fingerprint,
            first_ns,
        },
        at,
    ))
}

fn parse_entry(line: &[u8]) -> Option<Entry> {
    parse_entry_at(line).map(|(e, _)| e)
}

/// What the journal's name holds, against the file a maestro has open.
enum Named {
    /// This file, at least as long as this process read it.
    Whole,
    /// This file, shorter than this process read it.
    CutShort,
    /// Nothing: the journal was deleted.
    Gone,
    /// Another file (a sibling's cut or new journal, or a replacement).
    Other,
}

/// An exclusive lock on `<journal>.lock` beside the journal, held while a maestro decides
/// what the journal's name holds now (a file it can lock whatever the name holds).
struct SideLock(File);

impl SideLock {
    fn take(journal: &Path) -> io::Result<Self> {
        let file = open_own(&side_path(journal))?;
        lock(&file)?;
        Ok(Self(file))
    }
}

impl Drop for SideLock {
    fn drop(&mut self) {
        unlock(&self.0);
    }
}

/// The journal locked for one append; unlocked when dropped.
pub struct Guard<'a> {
    journal: &'a mut JournalFile,
}

impl Guard<'_> {
    /// What the other maestros appended since this one last read.
    pub fn read_new(&mut self) -> Vec<Entry> {
        self.journal.read_to_size().unwrap_or_default()
    }

    /// This journal's id (it changes when a new journal was started under the name).
    pub fn id(&self) -> u64 {
        self.journal.id
    }

    /// Why a new journal was started under the name, once.
    pub fn take_restart(&mut self) -> Option<String> {
        self.journal.take_restart()
    }

    /// Whether this process started the new journal (once).
    pub fn take_started_here(&mut self) -> bool {
        self.journal.take_started_here()
    }

    /// Appends one entry (its JSON must be one line). A write that fails (a full disk, a
    /// read-only file) leaves nothing of the entry behind: the bytes it did write are
    /// cut off again, so no reader meets half a line.
    pub fn append(&mut self, e: &Entry, json: &str) -> io::Result<()> {
        let line = format!(
            "{}\t{:016x}\t{:016x}\t{}\t{}\n",
            e.seq,
            e.slot,
            e.fingerprint,
            e.first_ns,
            json.trim_end_matches('\n')
        );
        let j = &mut *self.journal;
        // Bytes past the last whole line (as the read under this lock saw the file) are
        // a line torn by a maestro killed while writing it: ended here, so ours starts a
        // line of its own.
        if j.size > j.end {
            j.file.write_all(b"\n")?;
            j.end = j.size + 1;
            j.size = j.end;
        }
        if let Err(e) = j.file.write_all(line.as_bytes()) {
            // Under the lock the file ends where this process last wrote: cut back there.
            let _ = j.file.set_len(j.end);
            return Err(e);
        }
        j.end += line.len() as u64;
        j.size = j.end;
        j.max_seq = j.max_seq.max(e.seq);
        if j.end > MAX_BYTES {
            let _ = self.cut();
        }
        Ok(())
    }

    /// Keeps the newest entries, up to half the bound, in a new file renamed over the
    /// journal's name; this process goes on with the new file, the lock held.
    fn cut(&mut self) -> io::Result<()> {
        let j = &mut *self.journal;
        let mut buf = vec![0; usize::try_from(j.end).unwrap_or(usize::MAX)];
        let n = read_at_most(&j.file, &mut buf, 0)?;
        buf.truncate(n);
        let keep_from = buf
            .len()
            .saturating_sub(usize::try_from(MAX_BYTES / 2).unwrap_or(0));
        let start =
            memchr::memchr(b'\n', &buf[keep_from..]).map_or(buf.len(), |i| keep_from + i + 1);
        let mut text = format!("{MAGIC} 1 {:016x}\n", j.id).into_bytes();
        text.extend_from_slice(&buf[start..]);
        crate::core::safe_fs::write_atomic(&j.path, &text, 0o600)?;
        let file = open_own(&j.path)?;
        lock(&file)?;
        unlock(&j.file);
        j.swap_file(file);
        j.end = text.len() as u64;
        j.size = j.end;
        Ok(())
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        unlock(&self.journal.file);
    }
}
