//! Conductor death → `CONDUCTOR_DEAD` event latency for the Souffleur role, at the
//! seed's cadence (60 s polls after a 240 s wait) and at a fast one (200 ms). The
//! death is seen through a pidfd, so the cadence should not matter; the seed's LLM
//! watcher polls `kill -0` every 60 s (30 s on average, 60 s at worst).
//! Run with `cargo bench --bench souffleur`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SAMPLES: usize = 20;
const SESSION: &str = "bench-session";

fn main() {
    for (name, initial, poll) in [
        ("seed cadence (240s wait, 60s poll)", "240s", "60s"),
        ("fast cadence (200ms wait, 200ms poll)", "200ms", "200ms"),
    ] {
        let mut times: Vec<Duration> = (0..SAMPLES).map(|_| one_death(initial, poll)).collect();
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "death -> CONDUCTOR_DEAD:pid, {name}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (n={SAMPLES})",
            ms(times[SAMPLES / 2]),
            ms(times[SAMPLES * 99 / 100]),
            ms(times[SAMPLES - 1])
        );
    }
    println!(
        "seed's LLM watcher (kill -0 every 60 s): 30000 ms on average, 60000 ms at worst, before its LLM turn"
    );
}

/// A fresh project, role and Conductor; returns the time from SIGKILL to the event line.
fn one_death(initial: &str, poll: &str) -> Duration {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().join("proj");
    std::fs::create_dir_all(root.join("temp")).unwrap();
    let exe = support::exe();
    support::init(&root);
    support::conductor_started(&root);
    let transcripts = home.path().join(".claude/projects/p");
    std::fs::create_dir_all(&transcripts).unwrap();
    std::fs::write(transcripts.join(format!("{SESSION}.jsonl")), "{}\n").unwrap();
    // Stub windows and export, so the recovery that follows runs without side effects.
    let bin = home.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, body) in [
        ("kitty", "exec sleep 30\n"),
        ("claude_export", "echo export\n"),
    ] {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[souffleur]\ninitial_wait = \"{initial}\"\npoll = \"{poll}\"\nkill_grace = \"100ms\"\nclaude_projects_dir = \"{0}/.claude/projects\"\nexport_dir = \"{0}\"\n",
            home.path().display()
        ),
    )
    .unwrap();
    let mut conductor = Command::new("sleep").arg("600").spawn().unwrap();
    let mut role = Command::new(exe)
        .args([
            "souffleur",
            &format!("PID:{} SESSION_ID:{SESSION}", conductor.id()),
            "--no-tui",
            "--json",
            "--project",
        ])
        .arg(&root)
        .arg("--config")
        .arg(home.path().join("config.toml"))
        .env("HOME", home.path())
        .env("XDG_DATA_HOME", home.path().join("data"))
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(role.stdout.take().unwrap()).lines();
    // Watching once the row is confirmed.
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("\"task_id\":\"souffleur\"") && line.contains("\"state\":\"confirmed\"") {
            break;
        }
    }
    // The watcher starts right after confirmation; give it a moment to open its pidfd.
    std::thread::sleep(Duration::from_millis(100));
    let killed = Instant::now();
    conductor.kill().unwrap();
    let mut seen = None;
    for line in lines.by_ref() {
        if line.unwrap().contains("CONDUCTOR_DEAD:pid") {
            seen = Some(killed.elapsed());
            break;
        }
    }
    let _ = conductor.wait();
    let _ = role.kill();
    let _ = role.wait();
    // A stub window the recovery may have opened ends by itself after 30 s.
    seen.expect("CONDUCTOR_DEAD:pid was reported")
}
