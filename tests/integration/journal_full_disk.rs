//! The journal on a full disk: said once, no cursor refused or reused, and the `gap`
//! written once there is room counts every event let go.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{Running, Scratch, event};
use crate::journal_faults::{append, journal_of, json_lines, marker, resumes_after, running, stop};

/// A small tmpfs of the test's own, unmounted when dropped.
pub struct Tmpfs(pub tempfile::TempDir);

impl Tmpfs {
    /// `None`, saying why, where a tmpfs cannot be mounted (not root, no `mount`).
    pub fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("skipped: cannot mount a tmpfs here (needs root and mount)");
            return None;
        }
        Some(Self(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).output();
    }
}

/// Fills the file system at `dir` to the last byte.
pub fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = vec![b'x'; 4096];
    while f.write_all(&block).is_ok() {}
    while f.write_all(b"x").is_ok() {}
    path
}

/// A maestro whose data folder is a small tmpfs of its own, told a first marker, then
/// the disk filled to its last byte.
struct FullDisk {
    disk: Tmpfs,
    s: Scratch,
    m: Running,
    /// task-03's status log.
    log: PathBuf,
    /// The file that fills the disk (removed to give room back).
    filler: PathBuf,
}

impl FullDisk {
    /// `None`, saying why, where a tmpfs cannot be mounted.
    fn new(size: &str) -> Option<Self> {
        let disk = Tmpfs::mount(size)?;
        let (s, mut m) = running(disk.0.path());
        let log = s.temp().join("task-03-status");
        marker(&mut m, &log, "BEFORE");
        let filler = fill(disk.0.path());
        Some(Self {
            disk,
            s,
            m,
            log,
            filler,
        })
    }
}

#[test]
fn a_full_disk_under_the_journal_is_said_and_no_cursor_is_refused_or_reused() {
    let Some(FullDisk {
        disk,
        s,
        mut m,
        log,
        filler,
    }) = FullDisk::new("2m")
    else {
        return;
    };
    let data = disk.0.path();
    // The journal's last page may still have room: events until one cannot be kept.
    let kept_on = (1..200)
        .map(|i| marker(&mut m, &log, &format!("FULL-{i}")))
        .take_while(|v| v["cursor"].is_string())
        .count();
    assert!(kept_on < 199, "the journal never filled");
    let not_kept = marker(&mut m, &log, "FULL-LAST");
    assert!(
        not_kept["cursor"].is_null(),
        "no cursor for what is not kept: {not_kept}"
    );
    std::fs::remove_file(&filler).unwrap();
    let back = marker(&mut m, &log, "BACK-1");
    assert!(back["cursor"].is_string(), "{back}");
    let lines = stop(m);
    let printed = json_lines(&lines);
    one_failure_said_once(&printed);
    // Every cursor printed names its event in the journal, and no other.
    let text = std::fs::read_to_string(journal_of(data)).unwrap();
    let mut seen = std::collections::HashMap::new();
    for v in printed.iter().filter(|v| v["cursor"].is_string()) {
        let cursor = v["cursor"].as_str().unwrap();
        let seq = cursor.split('-').nth(1).unwrap();
        let entry = text
            .lines()
            .find(|l| l.split('\t').next() == Some(seq))
            .unwrap_or_else(|| panic!("cursor {cursor} is not in the journal"));
        assert!(entry.contains(cursor), "{entry}");
        assert!(
            seen.insert(cursor.to_owned(), v.clone()).is_none(),
            "{cursor} twice"
        );
    }
    // A reader resuming from before the full disk gets only whole JSON.
    let first = printed
        .iter()
        .find_map(|v| v["cursor"].as_str())
        .unwrap()
        .to_owned();
    let after = resumes_after(&s, data, &first, "AFTER-ALL");
    json_lines(&after);
}

/// A disk nearly full: long events are refused while the short line saying so still
/// fits. That is one failure: said once, its end said once, once everything held is
/// kept (not a "written again" at each short line that fits).
#[test]
fn a_nearly_full_disk_is_one_failure_not_one_per_write() {
    let Some(FullDisk {
        disk: _disk,
        s: _project,
        mut m,
        log,
        filler,
    }) = FullDisk::new("2m")
    else {
        return;
    };
    let long = "y".repeat(3000);
    for i in 0..6 {
        marker(&mut m, &log, &format!("LONG-{i}-{long}"));
    }
    std::fs::remove_file(&filler).unwrap();
    let back = marker(&mut m, &log, "BACK-1");
    assert!(back["cursor"].is_string(), "{back}");
    let lines = stop(m);
    one_failure_said_once(&json_lines(&lines));
}

/// The journal's failure said once and its end once, among `printed` (a nearly full
/// disk that takes a short line and refuses the next is not a failure per write).
fn one_failure_said_once(printed: &[Value]) {
    let errors = || {
        printed
            .iter()
            .filter(|v| event(v) == "error")
            .collect::<Vec<_>>()
    };
    let said = |what| errors_saying(printed, what);
    assert_eq!(said("cannot write the journal"), 1, "said: {:?}", errors());
    assert_eq!(
        said("the journal is written again"),
        1,
        "said: {:?}",
        errors()
    );
}

/// How many `error` events among `printed` say `what`.
pub fn errors_saying(printed: &[Value], what: &str) -> usize {
    printed
        .iter()
        .filter(|v| event(v) == "error")
        .filter(|v| v["detail"].as_str().is_some_and(|d| d.contains(what)))
        .count()
}

/// What a journal's text says of the events it let go: the sum of its `gap` counts, and
/// how many events were kept later (`replayed`).
pub fn gaps_and_kept_later(text: &str) -> (usize, usize) {
    let kept_later = text
        .lines()
        .filter(|l| l.contains("\"replayed\":true"))
        .count();
    let counted: u64 = text
        .lines()
        .filter_map(|l| l.find('{').map(|i| &l[i..]))
        .filter_map(|j| serde_json::from_str::<Value>(j).ok())
        .filter(|v| event(v) == "gap")
        .map(|g| g["count"].as_u64().unwrap_or_default())
        .sum();
    (counted as usize, kept_later)
}

/// Twelve thousand events told while the disk under the journal is full: maestro holds
/// the newest ten thousand and lets the oldest go; once the disk has room, the journal's
/// `gap` counts every one let go (not the few let go after its first failed write).
#[test]
fn the_gap_after_a_full_disk_counts_every_event_let_go() {
    let Some(FullDisk {
        disk,
        s: _project,
        mut m,
        log,
        filler,
    }) = FullDisk::new("24m")
    else {
        return;
    };
    let data = disk.0.path();
    let mut bulk = String::new();
    for i in 0..12_000 {
        bulk.push_str(&format!("BULK-{i} self-correction: held\n"));
    }
    append(&log, &bulk);
    marker(&mut m, &log, "FULL-END");
    std::fs::remove_file(&filler).unwrap();
    let back = marker(&mut m, &log, "BACK-1");
    assert!(back["cursor"].is_string(), "{back}");
    let lines = stop(m);
    let not_kept = json_lines(&lines)
        .iter()
        .filter(|v| v["cursor"].is_null())
        .count();
    assert!(not_kept > 10_000, "{not_kept} events told without a cursor");
    let text = std::fs::read_to_string(journal_of(data)).unwrap();
    let (counted, kept_later) = gaps_and_kept_later(&text);
    assert_eq!(
        counted,
        not_kept - kept_later,
        "told {not_kept} without a cursor, kept {kept_later} later"
    );
}
