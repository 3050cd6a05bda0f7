//! The journal against its own file and against big logs: a status log past the start-up
//! read (8 MiB) is not retold after a restart; a journal deleted, truncated, replaced,
//! read-only or on a full disk is noticed, said on stdout, and never gives a cursor that
//! `--after` refuses or that later names another event; comms.db replaced by a copy of
//! itself tells no message twice.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{Running, Scratch, event, maestro};

/// `maestro --no-tui --json` on `s` with its own data folder, `--after` when given.
fn headless(s: &Scratch, data: &Path, after: Option<&str>) -> Running {
    let mut cmd: Command = maestro();
    cmd.env("XDG_DATA_HOME", data)
        .args(["--no-tui", "--json", "--project"])
        .arg(s.root());
    if let Some(c) = after {
        cmd.args(["--after", c]);
    }
    Running::spawn(cmd)
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn stop(mut m: Running) -> Vec<String> {
    m.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = m.rest();
    let _ = m.wait_exit();
    std::mem::take(&mut m.seen)
}

/// The anomalies among `lines`, by their detail.
fn anomalies(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| event(v) == "anomaly")
        .map(|v| v["detail"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The last cursor printed among `lines`.
fn last_cursor(lines: &[String]) -> String {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["cursor"].as_str().map(str::to_owned))
        .next_back()
        .expect("a cursor")
}

/// A marker anomaly appended now, and the reader waited for until it says it: what it
/// printed before is everything it had to catch up on.
fn marker(m: &mut Running, log: &Path, name: &str) -> Value {
    append(log, &format!("{name} self-correction: marker\n"));
    m.wait_json(name, |v| {
        event(v) == "anomaly" && v["detail"].as_str().is_some_and(|d| d.contains(name))
    })
}

#[test]
fn a_status_log_past_the_start_up_read_is_not_retold_when_resumed() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let data = tempfile::tempdir().unwrap();
    let log = s.temp().join("task-03-status");
    append(&log, "step 0 started [ctx: 40%]\n");
    let mut m = headless(&s, data.path(), None);
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-03"
    });
    // 110,000 lines (about 9.2 MB), a self-correction in every 500.
    let mut text = String::new();
    for i in 1..=110_000u32 {
        if i % 500 == 0 {
            text.push_str(&format!(
                "step {i} self-correction: retried the flaky part of the plan [ctx: 40%]\n"
            ));
        } else {
            text.push_str(&format!(
                "step {i} agent returned fine, moving on to the next part of the plan [ctx: 40%]\n"
            ));
        }
        if text.len() > 1 << 20 {
            append(&log, &text);
            text.clear();
        }
    }
    append(&log, &text);
    assert!(std::fs::metadata(&log).unwrap().len() > 9_000_000);
    marker(&mut m, &log, "FIRST-M1");
    let first = stop(m);
    assert_eq!(anomalies(&first).len(), 221, "220 and the marker");
    let after = last_cursor(&first);

    // Resumed after the last cursor: nothing of the log is told again.
    let mut m = headless(&s, data.path(), Some(&after));
    marker(&mut m, &log, "SECOND-M2");
    let second = stop(m);
    assert_eq!(
        anomalies(&second),
        ["SECOND-M2 self-correction: marker"],
        "{second:?}"
    );

    // 300 more plain lines, and again.
    let plain: String = (0..300)
        .map(|i| format!("step x{i} agent returned fine [ctx: 40%]\n"))
        .collect();
    append(&log, &plain);
    let mut m = headless(&s, data.path(), Some(&last_cursor(&second)));
    marker(&mut m, &log, "THIRD-M3");
    let third = stop(m);
    assert_eq!(
        anomalies(&third),
        ["THIRD-M3 self-correction: marker"],
        "{third:?}"
    );
}

/// The journal file of a project in `data`.
fn journal_of(data: &Path) -> PathBuf {
    crate::common::walk(&data.join("maestro/events"))
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "journal.tsv"))
        .expect("a journal")
}
