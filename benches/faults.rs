//! How fast maestro sees again after the faults a real run produces: the time from the
//! end of a fault (a `maestro init` returning, a file removed, a folder created) to the
//! `source` event that says so, on the release binary, headless. Also the memory of a
//! headless maestro whose reader never reads while 200,000 anomalies arrive; a 1 GiB
//! log present at start.
//! Run with `cargo bench --bench faults`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{exe, init};

const SAMPLES: usize = 20;

struct Headless {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
}

impl Headless {
    fn start(root: &Path) -> Self {
        let mut cmd = Command::new(exe());
        cmd.args(["--no-tui", "--json", "--project"]).arg(root);
        let (child, lines) = support::spawn_stamped(cmd);
        Self { child, lines }
    }

    /// When the next `source` event of this status arrived.
    fn source(&self, source: &str, status: &str) -> Instant {
        loop {
            let (at, line) = self.lines.recv_timeout(Duration::from_secs(20)).unwrap();
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if v["event"] == "source" && v["source"] == source && v["status"] == status {
                return at;
            }
        }
    }

    /// When the next line matching `pred` arrived.
    fn next_matching(&self, pred: impl Fn(&str) -> bool) -> Instant {
        loop {
            let (at, line) = self.lines.recv_timeout(Duration::from_secs(60)).unwrap();
            if pred(&line) {
                return at;
            }
        }
    }
}

impl Drop for Headless {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn main() {
    let mut times: std::collections::BTreeMap<&str, Vec<Duration>> =
        std::collections::BTreeMap::new();
    let mut record = |name, d| times.entry(name).or_default().push(d);
    for _ in 0..SAMPLES {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("temp")).unwrap();
        let m = Headless::start(root);
        m.source("database", "waiting");
        init(root);
        let t0 = Instant::now();
        record(
            "comms.db created after start -> appeared",
            m.source("database", "appeared")
                .saturating_duration_since(t0),
        );
        std::fs::remove_file(root.join("comms.db")).unwrap();
        let t0 = Instant::now();
        record(
            "comms.db removed -> removed",
            m.source("database", "removed")
                .saturating_duration_since(t0),
        );
        init(root);
        let t0 = Instant::now();
        record(
            "comms.db created again -> replaced",
            m.source("database", "replaced")
                .saturating_duration_since(t0),
        );
        std::fs::remove_dir_all(root.join("temp")).unwrap();
        let t0 = Instant::now();
        record(
            "temp/ removed -> waiting",
            m.source("temp", "waiting").saturating_duration_since(t0),
        );
        std::fs::create_dir(root.join("temp")).unwrap();
        let t0 = Instant::now();
        record(
            "temp/ created again -> watching",
            m.source("temp", "watching").saturating_duration_since(t0),
        );
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (name, mut v) in times {
        v.sort();
        println!(
            "{name}: p50 {:.2} ms, max {:.2} ms (n={SAMPLES})",
            ms(v[v.len() / 2]),
            ms(v[v.len() - 1])
        );
    }
    stalled_reader();
    huge_log_at_start();
}

/// A 1 GiB status log present at start: when the database's task is printed, and how
/// long a line appended one second after start takes to be reported.
fn huge_log_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project_with_one_task(root);
    let path = root.join("temp/task-01-status");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let chunk = "step 1 started: a line of history [ctx: 10%]\n".repeat(1 << 14);
        let mut written = 0u64;
        while written < 1 << 30 {
            f.write_all(chunk.as_bytes()).unwrap();
            written += chunk.len() as u64;
        }
    }
    let m = Headless::start(root);
    let start = Instant::now();
    let task = m.next_matching(|l| l.contains("\"event\":\"task\"") && l.contains("task-01"));
    while start.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let appended = Instant::now();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"step 2 self-correction: a late line\n")
        .unwrap();
    let reported = m.next_matching(|l| l.contains("a late line"));
    println!(
        "1 GiB log at start: the database's task printed after {:.3} s; a line appended 1 s after start reported {:.2} ms after it was written",
        task.saturating_duration_since(start).as_secs_f64(),
        reported.saturating_duration_since(appended).as_secs_f64() * 1000.0
    );
}

/// RSS of a headless maestro whose stdout is never read while anomalies pour in.
fn stalled_reader() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    project_with_one_task(root);
    let mut child = Command::new(exe())
        .args(["--no-tui", "--json", "--project"])
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rss = |pid: u32| support::vm_kb(pid, "VmHWM:");
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(root.join("temp/task-01-status"))
        .unwrap();
    let mut peaks = Vec::new();
    for round in 0..10 {
        let mut batch = String::new();
        for i in 0..20_000 {
            batch.push_str(&format!("step {i} self-correction: round {round}\n"));
        }
        log.write_all(batch.as_bytes()).unwrap();
        // Let the round be taken in before the peak is read.
        std::thread::sleep(Duration::from_secs(1));
        peaks.push(rss(child.id()));
    }
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "stalled reader, 200,000 anomalies: peak RSS after each 20,000: {} kB",
        peaks
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
}

/// A project with `temp/`, `comms.db` and task-01 working.
fn project_with_one_task(root: &Path) {
    std::fs::create_dir(root.join("temp")).unwrap();
    init(root);
    let conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    conn.execute(
        "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('task-01', 'working', datetime('now'))",
        [],
    )
    .unwrap();
}
