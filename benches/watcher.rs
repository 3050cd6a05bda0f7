//! `maestro musician watch`: the time from a message's commit by another process to the
//! watcher printing it, and to the watcher's exit (the LLM watcher it replaces polls
//! every 15 s), and the idle cost of a waiting watcher. Run with
//! `cargo bench --bench watcher`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SAMPLES: usize = 100;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("temp")).unwrap();
    let exe = support::exe();
    support::init(root);
    let conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    conn.execute(
        "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('task-03', 'working', datetime('now'))",
        [],
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let spawn = || -> Child {
        let child = Command::new(exe)
            .env("XDG_DATA_HOME", data.path())
            .args(["musician", "watch", "task-03", "--project"])
            .arg(root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        attached(data.path(), child.id());
        child
    };
    let mut printed = Vec::with_capacity(SAMPLES);
    let mut exited = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let mut child = spawn();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let t0 = Instant::now();
        conn.execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-03', 'task-00', ?1, 'instruction')",
            [format!("sample {i}")],
        )
        .unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        printed.push(t0.elapsed());
        child.wait().unwrap();
        exited.push(t0.elapsed());
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for (name, mut times) in [
        ("message commit -> watcher prints it", printed),
        ("message commit -> watcher exit", exited),
    ] {
        times.sort();
        println!(
            "{name}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (n={SAMPLES})",
            ms(times[SAMPLES / 2]),
            ms(times[SAMPLES * 99 / 100]),
            ms(times[SAMPLES - 1])
        );
    }
    println!("the LLM watcher it replaces polls every 15 s: 7.5 s on average, 15 s at worst");

    let mut idle = spawn();
    let before = support::cpu_ticks(idle.id());
    let period = Duration::from_secs(10);
    std::thread::sleep(period);
    let ticks = support::cpu_ticks(idle.id()) - before;
    let rss = support::vm_kb(idle.id(), "VmRSS:");
    println!(
        "idle watcher over {}s: {ticks} CPU ticks ({:.2}% of a core), RSS {rss} kB",
        period.as_secs(),
        ticks as f64 / 100.0 / period.as_secs_f64() * 100.0
    );
    let _ = idle.kill();
    let _ = idle.wait();
}

/// Waits until a watcher file names `pid` (the watcher holds its claim and listens).
fn attached(data: &Path, pid: u32) {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let dir = data.join("maestro/watchers");
        let found = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|project| {
                std::fs::read_to_string(project.path().join("task-03.background"))
                    .is_ok_and(|t| t.trim() == pid.to_string())
            });
        if found {
            return;
        }
        assert!(Instant::now() < end, "the watcher never attached");
        std::thread::yield_now();
    }
}
