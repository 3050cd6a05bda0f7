//! The link beats: a host whose `maestro serve` stops (SIGSTOP, as a hung host or a
//! stuck disk would) while ssh stays connected is `down` within three beats, and its
//! silence is never taken for a dead Conductor or stale tasks.

use std::os::unix::process::CommandExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{Scratch, event};
use crate::remote::{sshd, watch_with};

#[test]
fn a_stopped_host_is_down_within_three_beats_and_accuses_nobody() {
    stopped_host_accuses_nobody(
        "a_stopped_host_is_down_within_three_beats_and_accuses_nobody",
        "10s",
    );
}

/// The same with staleness thresholds as short as the beat window (6 s): a heartbeat's
/// age is judged against the host's last word, so the silence before `link down` makes
/// nothing stale and no Conductor dead.
#[test]
fn thresholds_as_short_as_the_beat_window_accuse_nobody_either() {
    stopped_host_accuses_nobody(
        "thresholds_as_short_as_the_beat_window_accuse_nobody_either",
        "6s",
    );
}

fn stopped_host_accuses_nobody(test: &str, threshold: &str) {
    let Some(sshd) = sshd(test) else {
        return;
    };
    let project = Scratch::new();
    project.set_task("task-01", "working");
    // The host's participants are alive all along: their heartbeats are refreshed.
    let live = Arc::new(AtomicBool::new(true));
    let beating = {
        let (live, db) = (live.clone(), project.db());
        std::thread::spawn(move || {
            let conn = rusqlite::Connection::open(db).unwrap();
            conn.busy_timeout(Duration::from_secs(5)).unwrap();
            while live.load(Ordering::Relaxed) {
                conn.execute(
                    "UPDATE orchestration_tasks SET last_heartbeat = datetime('now')",
                    [],
                )
                .unwrap();
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    let mut m = watch_with(
        &sshd.config(None, "ssh_config"),
        &project,
        &[
            "--conductor-stale-after",
            threshold,
            "--task-stale-after",
            threshold,
        ],
    );
    m.wait_json("the link up", |v| event(v) == "link" && v["status"] == "up");
    let serve = serve_of(&project).expect("the host runs maestro serve");
    kill(Pid::from_raw(serve), Signal::SIGSTOP).unwrap();
    let beats = maestro::remote::wire::BEAT * maestro::remote::wire::SILENT_BEATS;
    let down = m.wait_json_within("the link down", beats + Duration::from_secs(3), |v| {
        event(v) == "link" && v["status"] != "up"
    });
    assert!(
        down["detail"].as_str().unwrap().contains("sent nothing"),
        "{down}"
    );
    // A new connection reaches a new `maestro serve`: up again, the host as it is.
    m.wait_json("the link up again", |v| {
        event(v) == "link" && v["status"] == "up"
    });
    project.append("task-01-status", "step 2 self-correction: marker\n");
    m.wait_json("the marker", |v| event(v) == "anomaly");
    let _ = kill(Pid::from_raw(serve), Signal::SIGKILL);
    let _ = kill(Pid::from_raw(serve), Signal::SIGCONT);
    live.store(false, Ordering::Relaxed);
    beating.join().unwrap();
    m.signal(Signal::SIGTERM);
    m.wait_exit();
    assert!(
        !m.seen
            .iter()
            .any(|l| l.contains("\"event\":\"stale\"") || l.contains("\"event\":\"watchdog\"")),
        "{:#?}",
        m.seen
    );
}

/// The `maestro serve` process of `project` on this machine (the "host").
fn serve_of(project: &Scratch) -> Option<i32> {
    let root = project.root().display().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_serve = args.iter().any(|a| *a == b"serve")
            && args.contains(&root.as_bytes())
            && !args.iter().any(|a| a.starts_with(b"ssh"));
        is_serve.then_some(pid)
    })
}

/// A host that says hello, sends half a frame and stops is down within three beats too:
/// the beat counts whole frames.
#[test]
fn half_a_frame_and_silence_is_down_within_three_beats() {
    let Some(sshd) = sshd("half_a_frame_and_silence_is_down_within_three_beats") else {
        return;
    };
    let project = Scratch::new();
    let script = crate::remote::hostile::hostile(
        &sshd,
        "stuck-maestro",
        "printf '{\"frame\":\"inp'\nexec sleep 120",
    );
    let mut m = crate::remote::watch(
        &sshd.config(Some(script.to_str().unwrap()), "ssh_config"),
        &project,
    );
    m.wait_json("the link up", |v| event(v) == "link" && v["status"] == "up");
    let beats = maestro::remote::wire::BEAT * maestro::remote::wire::SILENT_BEATS;
    let down = m.wait_json_within("the link down", beats + Duration::from_secs(3), |v| {
        event(v) == "link" && v["status"] == "down"
    });
    assert!(
        down["detail"].as_str().unwrap().contains("sent nothing"),
        "{down}"
    );
    m.signal(Signal::SIGTERM);
    m.wait_exit();
}

/// A reader here that stops for 10 s during a burst (`| { sleep 10; cat; }`) holds the
/// link back: that is this side's backlog, not the host's silence. No `link` down, no
/// reconnect; every anomaly of the burst arrives once.
#[test]
fn a_slow_reader_here_is_not_a_silent_host() {
    // Many logs, so the burst is many events: more than this side's queues hold.
    const TASKS: usize = 150;
    const LINES: usize = 400;
    let Some(sshd) = sshd("a_slow_reader_here_is_not_a_silent_host") else {
        return;
    };
    let project = Scratch::new();
    for t in 1..=TASKS {
        project.set_task(&format!("task-{t:03}"), "working");
    }
    let quote = |s: &str| shlex::try_quote(s).unwrap().into_owned();
    let line = format!(
        "{} --no-tui --json --config {} --project {} | {{ {} sleep 10; cat; }}",
        quote(env!("CARGO_BIN_EXE_maestro")),
        quote(&sshd.config(None, "ssh_config").display().to_string()),
        quote(&crate::remote::address(&project)),
        // Lines pass until the link is up; then the reader stops for 10 s.
        r#"while IFS= read -r l; do echo "$l"; case $l in *'"status":"up"'*) break;; esac; done;"#,
    );
    let mut sh = std::process::Command::new("sh");
    sh.arg("-c")
        .arg(&line)
        .env("XDG_DATA_HOME", crate::common::data_home())
        .process_group(0);
    let mut m = crate::common::Running::spawn(sh);
    m.wait_json("the link up", |v| event(v) == "link" && v["status"] == "up");
    let burst = (0..LINES).fold(String::new(), |mut b, i| {
        b.push_str(&format!("step {i} self-correction: retried\n"));
        b
    });
    for t in 1..=TASKS {
        project.append(&format!("task-{t:03}-status"), &burst);
    }
    let mut seen = 0;
    while seen < TASKS * LINES {
        m.wait_json("the burst", |v| event(v) == "anomaly");
        seen += 1;
    }
    let _ = kill(Pid::from_raw(-(m.child.id() as i32)), Signal::SIGTERM);
    let downs: Vec<&String> = m
        .seen
        .iter()
        .filter(|l| l.contains("\"event\":\"link\"") && !l.contains("\"status\":\"up\""))
        .collect();
    assert!(downs.is_empty(), "{downs:?}");
}
