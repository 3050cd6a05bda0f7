//! Where the project's journal is and how its files are opened, locked and named: the
//! name or a place beside it ([`place`]), opened never through a symlink and never
//! blocking, locked within a bound (a stopped maestro holds up no other), the header
//! line that names a journal and the ones it replaced, and the side file that
//! remembers them.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::fcntl::OFlag;

/// The header's first word.
pub(super) const MAGIC: &str = "#maestro-journal";

/// Opens a file of the journal's for reading and appending: created 0600, never
/// through a symlink, never blocking on a FIFO; anything but a regular file refused.
pub(super) fn open_own(path: &Path) -> io::Result<File> {
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
pub(super) const LOCK_WAIT: Duration = Duration::from_millis(300);

/// Takes the exclusive lock within `wait`; past it, an error that says why.
pub(super) fn lock_within(file: &File, wait: Duration) -> io::Result<()> {
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

pub(super) fn lock(file: &File) -> io::Result<()> {
    lock_within(file, LOCK_WAIT)
}

pub(super) fn unlock(file: &File) {
    let _ = rustix::fs::flock(file, rustix::fs::FlockOperation::Unlock);
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
pub(super) fn header_replaces(line: &[u8]) -> Option<u64> {
    header_chain(line).first().copied()
}

/// The most journals a header names before it.
pub(super) const MAX_CHAIN: usize = 16;

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
pub(super) fn header(id: u64, chain: &[u64]) -> String {
    if chain.is_empty() {
        return format!("{MAGIC} 1 {id:016x}\n");
    }
    let ids: Vec<String> = chain.iter().map(|c| format!("{c:016x}")).collect();
    format!("{MAGIC} 1 {id:016x} replaces={}\n", ids.join(","))
}

/// Where the journal named `base` is: the last of `journal.tsv`, `journal.2.tsv`, …
/// that holds a regular file, or else the first that holds nothing. A directory, FIFO
/// or symlink under a name is passed by, never followed, opened or removed. The names
/// are read from the folder (one listing), with no bound on how many are taken: a
/// journal always has a place, so its cursors stay usable.
pub fn place(base: &Path) -> PathBuf {
    let stem = base
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let ext = base.extension().map(|e| e.to_string_lossy().into_owned());
    let name_of = |n: u64| match (n, &ext) {
        (1, _) => base.to_path_buf(),
        (n, Some(ext)) => base.with_file_name(format!("{stem}.{n}.{ext}")),
        (n, None) => base.with_file_name(format!("{stem}.{n}")),
    };
    // The number a folder entry's name gives it (`journal.tsv` 1, `journal.5.tsv` 5).
    let number = |name: &str| -> Option<u64> {
        let middle = match &ext {
            Some(ext) => name
                .strip_prefix(stem.as_str())?
                .strip_suffix(&format!(".{ext}"))?,
            None => name.strip_prefix(stem.as_str())?,
        };
        if middle.is_empty() {
            return Some(1);
        }
        let n = middle.strip_prefix('.')?;
        (!n.starts_with('0'))
            .then(|| n.parse::<u64>().ok())
            .flatten()
            .filter(|n| *n >= 2)
    };
    let dir = base
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut taken = std::collections::BTreeSet::new();
    let mut file = None;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Some(n) = entry.file_name().to_str().and_then(number) else {
            continue;
        };
        taken.insert(n);
        // `file_type` is the entry's own (a symlink is a symlink, never followed).
        if entry.file_type().is_ok_and(|t| t.is_file()) && file.is_none_or(|f| n > f) {
            file = Some(n);
        }
    }
    // One past as many names as are taken is always free.
    let free = (1..=taken.len() as u64 + 1)
        .find(|n| !taken.contains(n))
        .unwrap_or(1);
    name_of(file.unwrap_or(free))
}

/// The side file beside the journal's name (its lock, and the ids of its journals).
pub(super) fn side_path(base: &Path) -> PathBuf {
    let mut name = base.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// The journals the project had, newest first, as the side file remembers them.
pub(super) fn remembered_chain(base: &Path) -> Vec<u64> {
    let text = crate::core::safe_fs::read_regular(&side_path(base), 4096).unwrap_or_default();
    header_chain(format!("{MAGIC} 1 0 {}", String::from_utf8_lossy(&text).trim()).as_bytes())
}

/// Remembers `id` and the journals before it in the side file (best effort: a journal
/// without it only loses the chain of one deleted while no maestro ran).
pub(super) fn remember_chain(base: &Path, id: u64, chain: &[u64]) {
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

/// An exclusive lock on `<journal>.lock` beside the journal, held while a maestro decides
/// what the journal's name holds now (a file it can lock whatever the name holds).
pub(super) struct SideLock(File);

impl SideLock {
    pub(super) fn take(journal: &Path) -> io::Result<Self> {
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
