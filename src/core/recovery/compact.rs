//! Following a session transcript (`.jsonl`) for the `compact_boundary` line that says
//! a `/compact` finished. The follower starts at a baseline line count and is running
//! before the compaction window is launched, so the boundary cannot be missed.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::core::error::OwnFileError;
use crate::core::sources::lines::LineAssembler;

/// Whether a transcript line is the compaction boundary. Lines that are not JSON are
/// skipped, not errors.
pub fn is_compact_boundary(line: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line)
        .is_ok_and(|v| v["type"] == "system" && v["subtype"] == "compact_boundary")
}

/// Byte offset just after the first `lines` complete lines (the baseline).
pub fn offset_after_lines(path: &Path, lines: usize) -> std::io::Result<u64> {
    let data = std::fs::read(path)?;
    if lines == 0 {
        return Ok(0);
    }
    let mut seen = 0;
    for (i, b) in data.iter().enumerate() {
        if *b == b'\n' {
            seen += 1;
            if seen == lines {
                return Ok(i as u64 + 1);
            }
        }
    }
    Ok(data.len() as u64)
}

pub fn count_lines(path: &Path) -> std::io::Result<usize> {
    Ok(memchr::memchr_iter(b'\n', &std::fs::read(path)?).count())
}

/// A running follower; `wait` resolves when a boundary line appears.
pub struct BoundaryWatch {
    found: mpsc::Receiver<()>,
    _watcher: Option<notify::RecommendedWatcher>,
}

impl BoundaryWatch {
    /// Starts following `path` after its first `baseline` lines.
    pub fn start(path: PathBuf, baseline: usize) -> Result<Self, OwnFileError> {
        let offset =
            offset_after_lines(&path, baseline).map_err(OwnFileError::doing("read", &path))?;
        let (wake_tx, mut wake_rx) = mpsc::unbounded_channel::<()>();
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let name = path.file_name().map(std::ffi::OsStr::to_os_string);
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok_and(|e| e.paths.iter().any(|p| p.file_name() == name.as_deref())) {
                let _ = wake_tx.send(());
            }
        })
        .and_then(|mut w| w.watch(&dir, RecursiveMode::NonRecursive).map(|()| w))
        .ok();
        let polling = watcher.is_none();
        let (found_tx, found) = mpsc::channel(1);
        tokio::spawn(async move {
            let mut offset = offset;
            let mut assembler = LineAssembler::new(1 << 20);
            loop {
                let path = path.clone();
                let read = tokio::task::spawn_blocking(move || read_from(&path, offset)).await;
                if let Ok(Ok((bytes, next))) = read {
                    offset = next;
                    let mut lines = Vec::new();
                    assembler.feed(&bytes, &mut lines);
                    if lines.iter().any(|l| is_compact_boundary(l)) {
                        let _ = found_tx.send(()).await;
                        return;
                    }
                }
                // Without a kernel watch, look again every half second.
                let woke = if polling {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    true
                } else {
                    wake_rx.recv().await.is_some()
                };
                if !woke || found_tx.is_closed() {
                    return;
                }
            }
        });
        Ok(Self {
            found,
            _watcher: watcher,
        })
    }

    /// True if the boundary appeared within `timeout`.
    pub async fn wait(mut self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.found.recv())
            .await
            .is_ok_and(|r| r.is_some())
    }
}

fn read_from(path: &Path, offset: u64) -> std::io::Result<(Vec<u8>, u64)> {
    let mut f = std::fs::File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    let next = offset + buf.len() as u64;
    Ok((buf, next))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn boundary_lines_are_recognised_and_junk_skipped() {
        assert!(is_compact_boundary(
            r#"{"type":"system","subtype":"compact_boundary","uuid":"x"}"#
        ));
        assert!(!is_compact_boundary(
            r#"{"type":"user","subtype":"compact_boundary"}"#
        ));
        assert!(!is_compact_boundary("not json {"));
        assert!(!is_compact_boundary(""));
    }

    #[tokio::test]
    async fn only_lines_after_the_baseline_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        // An old boundary before the baseline must not count.
        std::fs::write(
            &path,
            "{\"type\":\"system\",\"subtype\":\"compact_boundary\"}\n{\"type\":\"user\"}\n",
        )
        .unwrap();
        let baseline = count_lines(&path).unwrap();
        let watch = BoundaryWatch::start(path.clone(), baseline).unwrap();
        let writer = {
            let path = path.clone();
            tokio::spawn(async move {
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .unwrap();
                f.write_all(b"garbage line\n{\"type\":\"system\",\"subt")
                    .unwrap();
                f.write_all(b"ype\":\"compact_boundary\"}\n").unwrap();
            })
        };
        assert!(watch.wait(Duration::from_secs(10)).await);
        writer.await.unwrap();

        let quiet = BoundaryWatch::start(path.clone(), count_lines(&path).unwrap()).unwrap();
        assert!(!quiet.wait(Duration::from_millis(200)).await);
    }
}
