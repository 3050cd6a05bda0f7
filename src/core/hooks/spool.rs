//! The hand-over from `maestro hook` to the running maestro: one JSON line per event,
//! appended to `<data dir>/hooks/<project key>.jsonl` (owner-only), followed by the hooks
//! source. A file, not a socket, so a hook never waits on maestro and an event that
//! comes while no maestro runs is still there when one starts. Bounded: a spool past
//! [`MAX_SPOOL`] starts over (its reader notices the shrink and reads from the top).

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::core::hooks::event::HookEvent;
use crate::core::paths::{self, ProjectKey};
use crate::core::safe_fs;

/// The spool's size past which the next event starts it over.
pub const MAX_SPOOL: u64 = 1024 * 1024;
/// The most one read takes in.
const READ_CHUNK: u64 = 1024 * 1024;

/// The folder of every project's spool.
pub fn spool_dir() -> Option<PathBuf> {
    paths::data_dir().map(|d| d.join("hooks"))
}

/// A project's spool file.
pub fn spool_path(project: &ProjectKey) -> Option<PathBuf> {
    spool_dir().map(|d| d.join(format!("{}.jsonl", project.key)))
}

/// Appends one event as one `write` of a whole line (`O_APPEND`, so concurrent hooks never
/// interleave). The line starts with a newline of its own: a line a failed write left
/// half-written (a full disk) is ended there and skipped by the reader, instead of
/// swallowing this event. A short write is not retried, so it never splits an event.
pub fn append(path: &Path, event: &HookEvent) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut line = vec![b'\n'];
    line.extend(serde_json::to_vec(event).map_err(std::io::Error::other)?);
    line.push(b'\n');
    let file = safe_fs::open_append(path, 0o600)?;
    if file.metadata()?.len() > MAX_SPOOL {
        file.set_len(0)?;
    }
    let written = (&file).write(&line)?;
    if written < line.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            "the event was cut short (is the disk full?)",
        ));
    }
    Ok(())
}

/// Follows one spool: each call returns the events appended since the last.
#[derive(Debug)]
pub struct SpoolReader {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
}

impl SpoolReader {
    /// A reader of what is appended from now on (what the spool holds is skipped).
    pub fn at_end(path: PathBuf) -> Self {
        let offset = std::fs::metadata(&path).map_or(0, |m| m.len());
        Self {
            offset,
            ..Self::new(path)
        }
    }

    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            offset: 0,
            partial: Vec::new(),
        }
    }

    /// The complete lines appended since the last call, as events (a line that is not
    /// one is skipped). A file that shrank was started over: it is read from the top.
    pub fn read_new(&mut self) -> Vec<HookEvent> {
        let Ok((mut file, meta)) = safe_fs::open_regular(&self.path) else {
            return Vec::new();
        };
        if meta.len() < self.offset {
            self.offset = 0;
            self.partial.clear();
        }
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err()
            || (&mut file)
                .take(READ_CHUNK)
                .read_to_end(&mut bytes)
                .is_err()
        {
            return Vec::new();
        }
        self.offset += bytes.len() as u64;
        self.partial.extend_from_slice(&bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        complete
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .filter_map(|l| serde_json::from_slice::<HookEvent>(l).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: i64) -> HookEvent {
        HookEvent::from_claude(
            &serde_json::json!({"session_id": "s1", "hook_event_name": "Stop"}),
            n,
        )
        .unwrap()
    }

    #[test]
    fn appended_events_are_read_once_in_order_and_a_restart_is_followed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hooks/k.jsonl");
        let mut reader = SpoolReader::new(path.clone());
        assert!(reader.read_new().is_empty(), "no spool yet");
        append(&path, &event(1)).unwrap();
        append(&path, &event(2)).unwrap();
        let got: Vec<i64> = reader.read_new().iter().map(|e| e.at_ms).collect();
        assert_eq!(got, [1, 2]);
        assert!(reader.read_new().is_empty());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Garbage and a half-written line: skipped, and the half waits for its end.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"not json\n{\"event\":")
            .unwrap();
        assert!(reader.read_new().is_empty());
        // Started over by a writer: read from the top.
        std::fs::write(&path, "").unwrap();
        append(&path, &event(3)).unwrap();
        let got: Vec<i64> = reader.read_new().iter().map(|e| e.at_ms).collect();
        assert_eq!(got, [3]);
    }

    #[test]
    fn a_full_spool_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.jsonl");
        std::fs::write(&path, vec![b'x'; MAX_SPOOL as usize + 10]).unwrap();
        append(&path, &event(9)).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() < 1000);
    }

    #[test]
    fn a_symlink_planted_at_the_spool_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, "keep").unwrap();
        let path = dir.path().join("k.jsonl");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(append(&path, &event(1)).is_err());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }
}
