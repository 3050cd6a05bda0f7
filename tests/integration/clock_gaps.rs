//! Time that stops: maestro and its writers stopped together (`SIGSTOP`), a wall clock that jumps
//! (libfaketime, as over a suspend: the monotonic clock does not move). Nothing is
//! declared stale, stalled or dead on an age that includes the gap; a Conductor that
//! really died meanwhile is still recovered; silence after the resume is still judged.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;

use crate::common::{Running, Scratch, event};
use crate::souffleur::{Rig, confirmed};

/// A Conductor and a Musician that heartbeat (and the Musician logs a line) every 0.5 s
/// while not paused, with their clock `offset_s` ahead (a suspend moves their clock too).
struct Writers {
    paused: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    offset_s: Arc<AtomicI64>,
    thread: Option<JoinHandle<()>>,
}

impl Writers {
    fn start(db: PathBuf, temp: Option<PathBuf>) -> Self {
        let paused = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let offset_s = Arc::new(AtomicI64::new(0));
        let (p, s, o) = (paused.clone(), stop.clone(), offset_s.clone());
        let thread = std::thread::spawn(move || {
            let conn = rusqlite::Connection::open(&db).unwrap();
            conn.busy_timeout(Duration::from_secs(5)).unwrap();
            let mut n = 0;
            while !s.load(Ordering::SeqCst) {
                if !p.load(Ordering::SeqCst) {
                    let offset = format!("{:+} seconds", o.load(Ordering::SeqCst));
                    conn.execute(
                        "UPDATE orchestration_tasks SET last_heartbeat = datetime('now', ?1)
                         WHERE task_id IN ('task-00', 'task-01')",
                        [&offset],
                    )
                    .unwrap();
                    if let Some(temp) = &temp {
                        n += 1;
                        append(
                            &temp.join("task-01-status"),
                            &format!("step {n} [ctx: 20%]\n"),
                        );
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Self {
            paused,
            stop,
            offset_s,
            thread: Some(thread),
        }
    }

    fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }
}

impl Drop for Writers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Everything maestro said that is a judgement on an age.
fn judgements(seen: &[String]) -> Vec<String> {
    seen.iter()
        .filter(|l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| {
                matches!(event(&v), "stale" | "anomaly" | "watchdog" | "recovery")
                    && !(event(&v) == "watchdog" && v["reason"] == "CONDUCTOR_COMPLETE")
            })
        })
        .cloned()
        .collect()
}

/// maestro and every writer stopped for 9 s, resumed together (`seconds` away).
fn pause_everything(m: &Running, writers: &Writers, seconds: u64) {
    writers.pause(true);
    m.signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_secs(seconds));
    m.signal(Signal::SIGCONT);
    writers.pause(false);
}

/// A state change the test makes: once maestro has reported it, everything before it
/// has been reported too.
fn marker(m: &mut Running, s: &Scratch, state: &str) {
    s.set_task("task-02", state);
    m.wait_json("the marker", |v| {
        event(v) == "task" && v["task_id"] == "task-02" && v["state"] == state
    });
}

#[test]
fn a_pause_of_maestro_and_its_writers_is_no_stall_and_no_staleness() {
    let s = Scratch::new();
    s.set_task("task-00", "reviewing");
    s.set_task("task-01", "working");
    let writers = Writers::start(s.db(), Some(s.temp()));
    let mut m = s.headless(&[
        "--stall-after",
        "4s",
        "--task-stale-after",
        "4s",
        "--conductor-stale-after",
        "4s",
    ]);
    marker(&mut m, &s, "watching");
    pause_everything(&m, &writers, 9);
    let gap = m.wait_json("the gap", |v| event(v) == "clock");
    assert_eq!(gap["kind"], "pause", "{gap}");
    assert!(gap["seconds"].as_u64().unwrap() >= 8, "{gap}");
    // Past the moment every timer was overdue, and one more second of writing.
    std::thread::sleep(Duration::from_secs(1));
    marker(&mut m, &s, "needs_review");
    assert_eq!(judgements(&m.seen), Vec::<String>::new());

    // Silence for a full interval after a resume is still judged.
    writers.pause(true);
    let s_pause = m.wait_json("staleness after silence", |v| event(v) == "stale");
    assert!(s_pause["age_s"].as_u64().unwrap() >= 4, "{s_pause}");
    m.wait_json("the stall after silence", |v| {
        event(v) == "anomaly" && v["anomaly"] == "stalled" && v["task_id"] == "task-01"
    });
}

/// The Souffleur role with a 4 s Conductor threshold and a 4 s watcher threshold.
fn quick_rig() -> Rig {
    let rig = Rig::new(None);
    let cfg = rig.home.path().join("config.toml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("conductor_stale_after = \"4s\"\nwatcher_stale_after = \"4s\"\n");
    std::fs::write(&cfg, text).unwrap();
    rig
}

#[test]
fn a_paused_souffleur_does_not_kill_a_live_conductor() {
    let rig = quick_rig();
    let writers = Writers::start(rig.scratch.db(), None);
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    pause_everything(&m, &writers, 9);
    m.wait_json("the gap", |v| event(v) == "clock" && v["kind"] == "pause");
    // The teammate's and the watcher's checks have all come round since.
    std::thread::sleep(Duration::from_secs(3));
    marker(&mut m, &rig.scratch, "needs_review");
    assert_eq!(judgements(&m.seen), Vec::<String>::new());
}

#[test]
fn a_conductor_that_dies_during_a_pause_is_recovered_at_once() {
    let mut rig = quick_rig();
    let writers = Writers::start(rig.scratch.db(), None);
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    writers.pause(true);
    m.signal(Signal::SIGSTOP);
    rig.conductor.kill().unwrap();
    rig.conductor.wait().unwrap();
    std::thread::sleep(Duration::from_secs(6));
    m.signal(Signal::SIGCONT);
    let w = m.wait_json("the death", |v| event(v) == "watchdog");
    assert_eq!(w["reason"], "CONDUCTOR_DEAD:pid", "{w}");
    let r = m.wait_json("the recovery", |v| event(v) == "recovery");
    assert_eq!(r["status"], "started", "{r}");
}

#[test]
fn a_conductor_silent_a_full_interval_after_the_resume_is_dead_by_heartbeat() {
    let rig = quick_rig();
    let writers = Writers::start(rig.scratch.db(), None);
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    writers.pause(true);
    m.signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_secs(6));
    m.signal(Signal::SIGCONT);
    let gap = m.wait_json("the gap", |v| event(v) == "clock");
    let resumed = std::time::Instant::now();
    let w = m.wait_json("the death", |v| event(v) == "watchdog");
    assert_eq!(w["reason"], "CONDUCTOR_DEAD:heartbeat", "{w} after {gap}");
    assert!(
        resumed.elapsed() >= Duration::from_secs(3),
        "judged {:?} after the resume: the gap counted",
        resumed.elapsed()
    );
}

/// libfaketime, when Debian's `faketime` is installed: the wall clock of maestro and of
/// the Conductor jumps 10 minutes while the monotonic clock does not.
pub fn faketime_lib() -> Option<PathBuf> {
    let found = [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists());
    if found.is_none() {
        eprintln!("skipped: libfaketime is not installed (apt-get install faketime)");
    }
    found
}

#[test]
fn a_suspend_that_moves_the_wall_clock_does_not_kill_a_live_conductor() {
    let Some(lib) = faketime_lib() else { return };
    let rig = quick_rig();
    let writers = Writers::start(rig.scratch.db(), None);
    let spec = rig.home.path().join("faketime");
    std::fs::write(&spec, "+0\n").unwrap();
    let mut cmd = rig.command(&[
        "souffleur",
        &format!("PID:{} SESSION_ID:5f2e1c3a-session", rig.conductor.id()),
        "--no-tui",
        "--json",
    ]);
    cmd.env("LD_PRELOAD", &lib)
        .env("FAKETIME_TIMESTAMP_FILE", &spec)
        .env("FAKETIME_NO_CACHE", "1")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    let mut m = Running::spawn(cmd);
    confirmed(&mut m);
    // The suspend: both stop, the wall clock moves on 10 minutes, both resume.
    writers.pause(true);
    m.signal(Signal::SIGSTOP);
    std::fs::write(&spec, "+600\n").unwrap();
    writers.offset_s.store(600, Ordering::SeqCst);
    m.signal(Signal::SIGCONT);
    std::thread::sleep(Duration::from_secs(1));
    writers.pause(false);
    let gap = m.wait_json("the gap", |v| event(v) == "clock");
    assert!(
        ["suspend", "step"].contains(&gap["kind"].as_str().unwrap()),
        "{gap}"
    );
    assert!(gap["seconds"].as_u64().unwrap() >= 590, "{gap}");
    std::thread::sleep(Duration::from_secs(5));
    marker(&mut m, &rig.scratch, "needs_review");
    assert_eq!(judgements(&m.seen), Vec::<String>::new());
    let clocks = m
        .seen
        .iter()
        .filter(|l| l.contains("\"event\":\"clock\""))
        .count();
    assert_eq!(clocks, 1, "one jump, one clock event: {:?}", m.seen);
}

/// A schedule runs once after a pause, not once per interval it missed.
#[test]
fn a_schedule_runs_once_after_a_pause_not_once_per_missed_interval() {
    let rig = crate::common::PipelineRig::new();
    rig.define(
        "tick",
        &serde_json::json!({
            "trigger": {"type": "schedule", "intervalMs": 1000},
            "steps": [{"type": "command", "command": "true"}],
            "loop": {"type": "once"},
            "safety": {"maxIterations": 1}
        }),
    );
    let mut m = rig.host();
    let started =
        |v: &Value| event(v) == "pipeline" && v["name"] == "tick" && v["status"] == "started";
    m.wait_json("a first run", started);
    // About seven intervals missed.
    m.signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_secs(8));
    m.signal(Signal::SIGCONT);
    // Everything said from the resume on (none of it read yet).
    let before = m.seen.len();
    m.wait_json("the gap", |v| event(v) == "clock");
    m.wait_json("the run after the gap", started);
    m.wait_json("the next run", started);
    let runs = m.seen[before..]
        .iter()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| started(&v)))
        .count();
    assert_eq!(
        runs,
        2,
        "one run for the gap, then the schedule: {:?}",
        &m.seen[before..]
    );
}
