//! Anomaly → the first step of the pipeline it triggers. A self-correction line is
//! appended; the clock stops at the `iteration` event the triggered run reports right
//! before its first step starts (read from maestro's stdout, so the figure holds the
//! detection and the way back through the hub too: an upper bound). The time to the
//! `anomaly` event itself is printed beside it. Run with `cargo bench --bench triggers`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

const SAMPLES: usize = 300;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("temp")).unwrap();
    std::fs::create_dir_all(root.join(".maestro/sentinels")).unwrap();
    support::init(root);
    rusqlite::Connection::open(root.join("comms.db"))
        .unwrap()
        .execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('task-01', 'working', datetime('now'))",
            [],
        )
        .unwrap();
    std::fs::write(
        root.join(".maestro/sentinels/on-anomaly.json"),
        r#"{"trigger": {"type": "event", "event": "anomaly", "filter": "$event.kind == 'self-correction'"},
            "steps": [{"type": "emit", "event": "seen", "data": "$event.task_id"}],
            "safety": {"maxIterations": 1}}"#,
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(support::exe());
    cmd.env("XDG_DATA_HOME", data.path())
        .args(["--no-tui", "--json", "--project"])
        .arg(root);
    let (mut child, rx) = support::spawn_stamped(cmd);
    let next = |pred: &dyn Fn(&str) -> bool| loop {
        let (at, line) = rx.recv_timeout(Duration::from_secs(20)).unwrap();
        if pred(&line) {
            return at;
        }
    };
    next(&|l| l.contains("\"task_id\":\"task-01\""));
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(root.join("temp/task-01-status"))
        .unwrap();
    let mut to_anomaly = Vec::with_capacity(SAMPLES);
    let mut to_step = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let t0 = Instant::now();
        writeln!(log, "step {i} self-correction: sample {i}").unwrap();
        let anomaly = next(&|l| l.contains("\"event\":\"anomaly\""));
        let first_step = next(&|l| l.contains("\"status\":\"iteration\""));
        to_anomaly.push(anomaly.saturating_duration_since(t0));
        to_step.push(first_step.saturating_duration_since(t0));
        next(&|l| l.contains("\"status\":\"completed\""));
    }
    let _ = child.kill();
    let _ = child.wait();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (name, mut times) in [
        ("line appended -> anomaly event", to_anomaly),
        (
            "line appended -> first step of the triggered pipeline",
            to_step,
        ),
    ] {
        times.sort();
        println!(
            "{name}: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n={SAMPLES})",
            ms(times[SAMPLES / 2]),
            ms(times[SAMPLES * 99 / 100]),
            ms(times[SAMPLES - 1])
        );
    }
}
