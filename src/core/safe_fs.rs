//! Files written by someone else (a Musician, a clone, an attacker who can write into
//! the project) are opened the one careful way: never through a final symlink, never
//! blocking on a FIFO or a device, only when regular, and never read past a bound.
//! Files maestro writes are replaced atomically through an unpredictable temporary
//! name, so a planted symlink is replaced, never written through.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use nix::fcntl::OFlag;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("{0} does not exist")]
    Missing(String),
    #[error("{0} is a symbolic link; maestro does not follow links it did not make")]
    Symlink(String),
    #[error("{0} is not a regular file (a FIFO, socket, device or folder)")]
    NotRegular(String),
    #[error("{path} holds {size} bytes, more than the {max} allowed")]
    TooLarge { path: String, size: u64, max: u64 },
    #[error("cannot read {0}: {1}")]
    Io(String, std::io::Error),
}

impl Refused {
    pub fn is_missing(&self) -> bool {
        matches!(self, Self::Missing(_))
    }
}

/// Opens `path` for reading if it is a regular file reached without a final symlink,
/// without ever blocking (a FIFO would otherwise wait for a writer).
pub fn open_regular(path: &Path) -> Result<(File, Metadata), Refused> {
    let shown = || path.display().to_string();
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits())
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Refused::Missing(shown()),
            // O_NOFOLLOW on a symlink fails with ELOOP.
            _ if e.raw_os_error() == Some(nix::libc::ELOOP) => Refused::Symlink(shown()),
            // A device or socket may refuse the open itself.
            _ if e.raw_os_error() == Some(nix::libc::ENXIO) => Refused::NotRegular(shown()),
            _ => Refused::Io(shown(), e),
        })?;
    let meta = file.metadata().map_err(|e| Refused::Io(shown(), e))?;
    if !meta.is_file() {
        return Err(Refused::NotRegular(shown()));
    }
    Ok((file, meta))
}

/// The whole of a regular file of at most `max` bytes.
pub fn read_regular(path: &Path, max: u64) -> Result<Vec<u8>, Refused> {
    let (file, meta) = open_regular(path)?;
    let too_large = |size| Refused::TooLarge {
        path: path.display().to_string(),
        size,
        max,
    };
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    // The file may grow while it is read: never past the bound.
    file.take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| Refused::Io(path.display().to_string(), e))?;
    if out.len() as u64 > max {
        return Err(too_large(out.len() as u64));
    }
    Ok(out)
}

/// The last `max` bytes at most of a regular file, starting at a whole line when cut.
pub fn read_regular_tail(path: &Path, max: u64) -> Result<Vec<u8>, Refused> {
    use std::io::{Seek, SeekFrom};
    let (mut file, meta) = open_regular(path)?;
    let io = |e| Refused::Io(path.display().to_string(), e);
    let start = meta.len().saturating_sub(max);
    file.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut out = Vec::new();
    file.take(max).read_to_end(&mut out).map_err(io)?;
    if start > 0 {
        let cut = memchr::memchr(b'\n', &out).map_or(out.len(), |i| i + 1);
        out.drain(..cut);
    }
    Ok(out)
}

/// Replaces `path` with `bytes` atomically: a temporary file of an unpredictable name
/// in the same folder, synced, given `mode`, then renamed over `path` (a symlink at
/// `path` is replaced, never followed).
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(".maestro-")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Opens (creating with `mode`) a file of maestro's own for appending, refusing a
/// symlink planted at its name.
pub fn open_append(path: &Path, mode: u32) -> std::io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(mode)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
}

/// Creates (or opens) a file of maestro's own for reading and writing without
/// following a symlink at its name (lock files, the hold flag).
pub fn open_own(path: &Path, mode: u32) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
}

/// Creates `dir` and the folders above it that are missing, each with `mode` whatever
/// the umask allows beyond it (under umask 000 a plain `create_dir_all` makes 0777
/// folders anyone can plant files in).
pub fn create_dirs(dir: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
}

/// [`open_own`] of a lock file in maestro's data folder, its folder made first; the
/// error says which of the two failed, and where.
pub fn open_own_lock(path: &Path) -> Result<File, crate::core::error::OwnFileError> {
    use crate::core::error::OwnFileError;
    if let Some(dir) = path.parent() {
        create_dirs(dir, 0o700).map_err(OwnFileError::doing("create", dir))?;
    }
    open_own(path, 0o600).map_err(OwnFileError::doing("open", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_fifos_and_large_files_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "root only\n").expect("write");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&secret, &link).expect("symlink");
        assert!(matches!(
            read_regular(&link, 1024),
            Err(Refused::Symlink(_))
        ));
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        // Returns at once: no writer is waited for.
        assert!(matches!(
            read_regular(&fifo, 1024),
            Err(Refused::NotRegular(_))
        ));
        assert!(matches!(
            read_regular(&secret, 4),
            Err(Refused::TooLarge { size: 10, .. })
        ));
        assert_eq!(read_regular(&secret, 1024).expect("read"), b"root only\n");
        assert!(read_regular(&dir.path().join("none"), 1).is_err_and(|e| e.is_missing()));
    }

    #[test]
    fn an_atomic_write_replaces_a_planted_symlink_instead_of_following_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").expect("write");
        let path = dir.path().join("musician-task-01.pid");
        std::os::unix::fs::symlink(&victim, &path).expect("symlink");
        write_atomic(&path, b"4242\n", 0o644).expect("write");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "keep me");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "4242\n");
        assert!(!std::fs::symlink_metadata(&path).expect("meta").is_symlink());
    }

    #[test]
    fn the_tail_starts_at_a_whole_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("log");
        std::fs::write(&f, "first line\nsecond\nthird\n").expect("write");
        assert_eq!(read_regular_tail(&f, 10).expect("tail"), b"third\n");
        assert_eq!(read_regular_tail(&f, 100).expect("tail").len(), 24);
    }
}
