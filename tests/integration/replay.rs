//! `maestro replay`: a recorded demo run played again, and projects that left damage.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{Running, Scratch, maestro};

/// A data directory of its own, so the event log is this test's alone.
struct Data(tempfile::TempDir);

impl Data {
    fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }

    fn maestro(&self) -> std::process::Command {
        let mut cmd = maestro();
        cmd.env("XDG_DATA_HOME", self.0.path());
        cmd
    }

    /// The one project's event log.
    fn event_log(&self) -> PathBuf {
        let events = self.0.path().join("maestro/events");
        let project = std::fs::read_dir(&events).unwrap().next().unwrap().unwrap();
        project.path().join("events.jsonl")
    }
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// (task, anomaly, ts) of every anomaly event.
fn anomalies(events: &[Value]) -> Vec<(String, String, time::OffsetDateTime)> {
    let rfc = time::format_description::well_known::Rfc3339;
    events
        .iter()
        .filter(|v| v["event"] == "anomaly")
        .map(|v| {
            (
                v["task_id"].as_str().unwrap().to_owned(),
                v["anomaly"].as_str().unwrap().to_owned(),
                time::OffsetDateTime::parse(v["ts"].as_str().unwrap(), &rfc).unwrap(),
            )
        })
        .collect()
}

fn record_demo(data: &Data, project: &Path) -> Vec<Value> {
    let mut cmd = data.maestro();
    cmd.args(["demo", "--no-tui", "--json", "--speed", "20", "--project"])
        .arg(project);
    let mut live = Running::spawn(cmd);
    let lines = live.rest();
    assert_eq!(live.child.wait().unwrap().code(), Some(0));
    lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn replay(data: &Data, project: &Path, extra: &[&str]) -> std::process::Output {
    data.maestro()
        .args(["replay", "--no-tui", "--json", "--project"])
        .arg(project)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn a_recorded_demo_replays_with_the_same_anomalies_at_the_same_moments() {
    let data = Data::new();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("demo");
    let live = anomalies(&record_demo(&data, &project));
    assert!(live.len() >= 4, "the demo raises all four: {live:?}");

    let out = replay(&data, &project, &[]);
    crate::common::assert_success(&out);
    let events = json_lines(&out.stdout);
    assert_eq!(events[0]["event"], "source");
    assert_eq!(events[0]["source"], "replay");
    assert_eq!(events[0]["status"], "loaded");
    assert!(
        events[0]["detail"].as_str().unwrap().contains("event log"),
        "{}",
        events[0]
    );
    let replayed = anomalies(&events);
    let kinds = |v: &[(String, String, time::OffsetDateTime)]| -> Vec<(String, String)> {
        v.iter().map(|(t, k, _)| (t.clone(), k.clone())).collect()
    };
    assert_eq!(kinds(&replayed), kinds(&live));
    // Same moments: the replay clock is the run's clock, to the timer's millisecond
    // (the live stall fired when this busy machine's timer woke it).
    for ((task, kind, was), (_, _, now)) in live.iter().zip(&replayed) {
        let off = (*now - *was).abs();
        assert!(
            off < time::Duration::milliseconds(50),
            "{task} {kind}: live {was}, replayed {now}"
        );
    }
    // The task and message events are the run's too.
    let count = |evs: &[Value], e: &str| evs.iter().filter(|v| v["event"] == e).count();
    let recorded = record_count(&data);
    assert!(count(&events, "message") >= 10);
    assert!(recorded > 20, "{recorded} inputs recorded");

    // The headroom check reads the time forecast from the recording (the file has no
    // times). At 20x, task-01's values span a few seconds: a burst, no trend (a trend
    // needs 20 s, core::forecast), so none is made. A task never recorded gets none.
    let out = data
        .maestro()
        .args(["task", "headroom", "task-01", "--json", "--project"])
        .arg(&project)
        .output()
        .unwrap();
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(h["forecast"].is_null(), "{h}");
    let other = Scratch::new();
    other.append("task-01-status", "step 1 [ctx: 10%]\nstep 2 [ctx: 30%]\n");
    let out = data
        .maestro()
        .args(["task", "headroom", "task-01", "--json", "--project"])
        .arg(other.root())
        .output()
        .unwrap();
    let h: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(h["forecast"].is_null(), "{h}");

    // Thresholds on the command line judge the replay instead: no stall under 1 h.
    let out = replay(&data, &project, &["--stall-after", "1h"]);
    let rejudged = kinds(&anomalies(&json_lines(&out.stdout)));
    let without_stalls: Vec<(String, String)> = kinds(&replayed)
        .into_iter()
        .filter(|(_, k)| k != "stalled")
        .collect();
    assert_eq!(rejudged, without_stalls);
    let out = replay(&data, &project, &["--report-to-db"]);
    assert_eq!(out.status.code(), Some(2), "a replay writes nothing");

    // doctor says where the runs are kept.
    let out = data
        .maestro()
        .args(["doctor", "--project"])
        .arg(&project)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("`maestro replay` plays it"), "{text}");

    // --from: only what happened from there on is printed.
    let from = replayed[1].2;
    let stamp = from
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let out = replay(&data, &project, &["--from", &stamp]);
    crate::common::assert_success(&out);
    let later = anomalies(&json_lines(&out.stdout));
    assert_eq!(kinds(&later), kinds(&replayed[1..]));
}

fn record_count(data: &Data) -> usize {
    std::fs::read_to_string(data.event_log())
        .unwrap()
        .lines()
        .count()
}

#[test]
fn a_damaged_event_log_says_what_it_left_out_and_replays_the_rest() {
    let data = Data::new();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("demo");
    let live = anomalies(&record_demo(&data, &project));
    let log = data.event_log();
    let mut text = std::fs::read(&log).unwrap();
    // A line of garbage in the middle, and a last line cut short by a crash.
    let middle = text.len() / 2;
    let cut = middle + text[middle..].iter().position(|b| *b == b'\n').unwrap() + 1;
    text.splice(cut..cut, b"\xff\xfe not an event\n".iter().copied());
    text.extend_from_slice(b"{\"t\":\"2026-11-22T14:00:00Z\",\"ev\":\"li");
    std::fs::write(&log, text).unwrap();

    let out = data
        .maestro()
        .args(["replay", "--no-tui", "--project"])
        .arg(&project)
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("REPLAY: ") && text.contains("1 line is damaged"),
        "{text}"
    );
    assert!(text.contains("cut short"), "{text}");
    let reports = text.matches("SENTINEL: ").count();
    assert_eq!(reports, live.len(), "the rest replays: {text}");
}

#[test]
fn a_project_without_an_event_log_is_rebuilt_from_its_files_and_damage_is_named() {
    let s = Scratch::new();
    let data = Data::new();
    s.set_task("task-01", "working");
    s.append("task-01-status", "step 1 started [ctx: 10%]\n");
    s.append(
        "task-01-status",
        "step 1 self-correction: rewrote the lexer [ctx: 12%]\nstep 2 half a li",
    );
    s.append("task-01-deviations", "High: skipped the migration\n");
    nix::unistd::mkfifo(
        &s.temp().join("task-02-status"),
        nix::sys::stat::Mode::S_IRWXU,
    )
    .unwrap();

    let out = replay(&data, s.root(), &[]);
    crate::common::assert_success(&out);
    let events = json_lines(&out.stdout);
    let notes: Vec<&str> = events
        .iter()
        .filter(|v| v["source"] == "replay" && v["status"] == "incomplete")
        .map(|v| v["detail"].as_str().unwrap())
        .collect();
    let notes = notes.join("\n");
    assert!(
        notes.contains("task-02-status is not a regular file"),
        "{notes}"
    );
    assert!(notes.contains("partial line"), "{notes}");
    assert!(notes.contains("are not judged"), "{notes}");
    // The two files' lines interleave by estimated moments: compare as a set.
    let mut kinds: Vec<String> = anomalies(&events).into_iter().map(|(_, k, _)| k).collect();
    kinds.sort();
    assert_eq!(kinds, ["high-deviation", "self-correction"], "{events:?}");

    // A database that is not one: said, and the logs still replay.
    std::fs::write(s.db(), vec![0x42u8; 4096]).unwrap();
    let out = replay(&data, s.root(), &[]);
    crate::common::assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cannot be read")
            && text.contains("task states and messages are not recovered"),
        "{text}"
    );
    assert!(text.contains("self-correction"), "{text}");
}

#[test]
fn nothing_to_replay_and_a_missing_event_log_are_clear_errors() {
    let data = Data::new();
    let s = Scratch::without_db();
    std::fs::remove_dir_all(s.temp()).ok();
    let out = replay(&data, s.root(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nothing to replay"), "{err}");

    let out = replay(&data, s.root(), &["--source", "log"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no event log") && err.contains("--source files"),
        "{err}"
    );

    let s = Scratch::new();
    s.append("task-01-status", "step 1\n");
    let out = replay(&data, s.root(), &["--from", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("+5m"));
}

/// A data directory that cannot hold the event log: maestro says so once on stderr,
/// with the fix, and watches as always; the journal it cannot keep either is said once
/// in the stream (an `error`), and no event has a cursor `--after` would refuse.
#[test]
fn a_run_that_cannot_be_recorded_says_so_and_goes_on() {
    let s = Scratch::new();
    let blocked = tempfile::NamedTempFile::new().unwrap();
    let mut cmd = maestro();
    cmd.env("XDG_DATA_HOME", blocked.path())
        .args(["--no-tui", "--json", "--project"])
        .arg(s.root());
    let mut m = Running::spawn(cmd);
    m.wait_json("the tasks", |v| {
        v["event"] == "task" && v["task_id"] == "task-00"
    });
    s.set_task("task-01", "working");
    m.wait_json("task-01", |v| {
        v["event"] == "task" && v["task_id"] == "task-01"
    });
    s.append("task-01-deviations", "High: dropped a table\n");
    m.wait_json("the anomaly", |v| v["event"] == "anomaly");
    m.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(m.wait_exit(), 0);
    let errors: Vec<&String> = m
        .seen
        .iter()
        .filter(|l| l.contains("\"event\":\"error\""))
        .collect();
    assert!(
        errors.len() == 1 && errors[0].contains("cannot use the journal"),
        "{:?}",
        m.seen
    );
    assert!(
        m.seen.iter().all(|l| l.contains("\"cursor\":null")),
        "no cursor of a journal that is not kept: {:?}",
        m.seen
    );
    let mut err = String::new();
    std::io::Read::read_to_string(&mut m.child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(
        err.matches("not recorded for `maestro replay`").count(),
        1,
        "{err}"
    );
    assert!(err.contains("event_log_mib = 0"), "{err}");
}

/// maestro started in a folder with no orchestration (no comms.db, no temp/) records
/// nothing: no event log is left behind for it.
#[test]
fn a_folder_without_an_orchestration_is_not_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut c = maestro();
    c.env("XDG_DATA_HOME", data.path())
        .args(["--no-tui", "--json", "--project"])
        .arg(dir.path());
    let mut m = crate::common::Running::spawn(c);
    m.wait_json("it runs", |v| {
        v["event"] == "source" && v["source"] == "database"
    });
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    assert!(
        !data.path().join("maestro/events").exists(),
        "an event log was started for an empty folder"
    );
}
