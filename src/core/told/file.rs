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

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use std::time::Duration;

use super::place::{
    LOCK_WAIT, MAGIC, MAX_CHAIN, SideLock, header, header_chain, header_id, header_replaces, lock,
    lock_within, open_own, place, remember_chain, remembered_chain, unlock,
};

/// A journal larger than this is cut to its newest half (small in unit tests, so the
/// cut is exercised).
#[cfg(not(test))]
pub const MAX_BYTES: u64 = 32 << 20;
#[cfg(test)]
pub const MAX_BYTES: u64 = 64 << 10;
/// How many bytes before its place a maestro checks are still what it read.
const TAIL: usize = 16;

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
    /// The last bytes before `end` (up to [`TAIL`]): a file cut and written again past
    /// this process's place holds other bytes there.
    tail: Vec<u8>,
    /// The file's size at the last read (past `end`: a line torn by a killed writer).
    size: u64,
    /// The highest sequence number read or written.
    max_seq: u64,
    /// Why a new journal was started under the name since the caller last asked.
    restarted: Option<String>,
    /// This process started it (not a sibling): it hands the new journal what it knew.
    started_here: bool,
    /// The entries of a journal cut short, read again from its top before it was left.
    salvaged: Vec<Entry>,
    /// The journal this one replaced, as its header says (a new journal's).
    replaces: Option<u64>,
    /// Every journal before it that its header names, newest first (the chain whose
    /// cursors still resume here).
    chain: Vec<u64>,
    /// The journal this process left for the one it has now (started or followed): a
    /// sibling that raced it to replace the same one is followed, not fought.
    predecessor: Option<u64>,
    /// A new journal this process started, still beside the name: it is renamed over
    /// the name when the lock is let go, after the facts it carries are in (a maestro
    /// killed in between leaves the cut journal, never a new one without them).
    fresh: Option<PathBuf>,
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
        let mut journal = Self::on(base, path, file);
        lock(&journal.file)?;
        let read = journal.read_start();
        unlock(&journal.file);
        let entries = read?;
        Ok((journal, entries))
    }

    /// A journal file not yet read.
    fn on(base: &Path, path: PathBuf, file: File) -> Self {
        Self {
            base: base.to_path_buf(),
            path,
            stuck: false,
            file,
            file_id: None,
            id: 0,
            end: 0,
            tail: Vec::new(),
            size: 0,
            max_seq: 0,
            restarted: None,
            started_here: false,
            salvaged: Vec::new(),
            replaces: None,
            chain: Vec::new(),
            predecessor: None,
            fresh: None,
        }
    }

    /// The id and entries of a journal that cannot be written (a read-only file or file
    /// system): what was told before is known, though nothing can be added.
    pub fn read_only(base: &Path) -> io::Result<(u64, Vec<Entry>)> {
        let path = place(base);
        let (file, _) = crate::core::safe_fs::open_regular(&path).map_err(io::Error::other)?;
        let mut journal = Self::on(base, path, file);
        let entries = journal.read_new()?;
        Ok((journal.id, entries))
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// The header (written when the file is new) and every entry.
    fn read_start(&mut self) -> io::Result<Vec<Entry>> {
        let made = self.file.metadata()?.len() == 0;
        if made {
            // A journal made where none was: the ones the project had before (deleted
            // while no maestro ran) are named, so their cursors resume here.
            self.id = new_id(&self.path);
            self.chain = remembered_chain(&self.base);
            self.file
                .write_all(header(self.id, &self.chain).as_bytes())?;
            remember_chain(&self.base, self.id, &self.chain);
        }
        let entries = self.read_new()?;
        if self.id == 0 {
            return Err(io::Error::other(
                "it does not start with a journal's header (remove it and maestro starts a new journal)",
            ));
        }
        // A journal an older maestro made: remembered now, so a cursor of it still
        // resumes if it is deleted while no maestro runs.
        if !made && remembered_chain(&self.base).first() != Some(&self.id) {
            remember_chain(&self.base, self.id, &self.chain);
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
        let wait = if self.stuck {
            Duration::ZERO
        } else {
            LOCK_WAIT
        };
        let had = lock_within(&self.file, wait);
        self.stuck = had.is_err();
        had?;
        match self.named() {
            Ok(Named::Whole) => {
                return Ok(Guard {
                    journal: self,
                    settling: None,
                });
            }
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
        // Held until a new journal is under the name (the guard's drop).
        Ok(Guard {
            journal: self,
            settling: Some(settling),
        })
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
                // What a maestro that had not read as far appended past the cut is read
                // too (from the top: the old place means nothing now), so the new
                // journal is handed those facts and tells none of them again as new.
                self.end = 0;
                self.tail.clear();
                self.salvaged = self.read_new().unwrap_or_default();
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
        let tail = std::mem::take(&mut self.tail);
        self.end = 0;
        self.id = 0;
        self.replaces = None;
        self.size = self.file.metadata()?.len();
        let entries = self.read_to_size()?;
        let newest = entries.iter().map(|e| e.seq).max().unwrap_or(0);
        if self.id == id && newest >= max_seq {
            // Re-read from its top: the caller indexes what it holds again.
            self.end = 0;
            self.tail.clear();
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
            self.tail.clear();
            self.max_seq = 0;
            return Ok(());
        }
        self.id = id;
        self.end = end;
        self.tail = tail;
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

    /// Whether the file still holds what this process read, as far as it read: at
    /// least as long, and the same last bytes before its place (a file cut short and
    /// then written again past that place by another maestro is caught here too).
    fn whole_or_cut(&self) -> Named {
        if self.size < self.end {
            return Named::CutShort;
        }
        let mut now = [0; TAIL];
        let now = &mut now[..self.tail.len()];
        let at = self.end - self.tail.len() as u64;
        match read_at_most(&self.file, now, at) {
            Ok(n) if n == self.tail.len() && *now == *self.tail => Named::Whole,
            // Unreadable: no evidence of a cut.
            Err(_) => Named::Whole,
            Ok(_) => Named::CutShort,
        }
    }

    /// `bytes` now end at `end`: the last of them kept as the tail.
    fn keep_tail(&mut self, bytes: &[u8]) {
        self.tail
            .extend_from_slice(&bytes[bytes.len().saturating_sub(TAIL)..]);
        let extra = self.tail.len().saturating_sub(TAIL);
        self.tail.drain(..extra);
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
        // Beside the name until the guard lets go: see `fresh`.
        let fresh = self
            .path
            .with_extension(format!("new.{}", std::process::id()));
        let _ = std::fs::remove_file(&fresh);
        let file = open_own(&fresh)?;
        (&file).write_all(header.as_bytes())?;
        remember_chain(&self.base, id, &chain);
        self.chain = chain;
        lock(&file)?;
        self.fresh = Some(fresh);
        let old = self.swap_file(file);
        unlock(&old);
        let old_id = self.id;
        self.predecessor = Some(old_id);
        self.id = id;
        self.end = header.len() as u64;
        self.tail.clear();
        self.keep_tail(header.as_bytes());
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
        self.keep_tail(&buf[..=last]);
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

/// The journal locked for one append; unlocked when dropped.
pub struct Guard<'a> {
    journal: &'a mut JournalFile,
    /// The side lock, while this process settles the journal's name.
    settling: Option<SideLock>,
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

    /// What the journal left behind held when it was cut short (once).
    pub fn take_salvaged(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.journal.salvaged)
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
            j.tail.clear();
            j.size = j.end;
        }
        if let Err(e) = j.file.write_all(line.as_bytes()) {
            // Under the lock the file ends where this process last wrote: cut back there.
            let _ = j.file.set_len(j.end);
            return Err(e);
        }
        j.end += line.len() as u64;
        j.keep_tail(line.as_bytes());
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
        j.tail.clear();
        j.keep_tail(&text);
        j.size = j.end;
        Ok(())
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let j = &mut *self.journal;
        if let Some(fresh) = j.fresh.take() {
            // The new journal, with the facts it carries, takes the name at once.
            let _ = j.file.sync_data();
            if std::fs::rename(&fresh, &j.path).is_err() {
                let _ = std::fs::remove_file(&fresh);
            }
            j.file_id = None;
        }
        unlock(&j.file);
        drop(self.settling.take());
    }
}
