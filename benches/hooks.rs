//! Claude Code's hooks: the wall time of `maestro hook` as Claude Code runs it (spawn,
//! event on stdin, exit), and the time from the hook's start to the running maestro's
//! `needs_you` event. Goals: p99 ≤ 20 ms and ≤ 50 ms. Run with `cargo bench --bench hooks`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SAMPLES: usize = 200;

/// Runs `maestro hook --project root` with `event` on stdin; returns its wall time.
fn run_hook(root: &std::path::Path, data: &std::path::Path, event: &serde_json::Value) -> Duration {
    run_hook_with(root, data, event, &[])
}

/// [`run_hook`] with more flags (`--replace-pollers`).
fn run_hook_with(
    root: &std::path::Path,
    data: &std::path::Path,
    event: &serde_json::Value,
    flags: &[&str],
) -> Duration {
    let t0 = Instant::now();
    let mut child = Command::new(support::exe())
        .env("XDG_DATA_HOME", data)
        .arg("hook")
        .args(flags)
        .arg("--project")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(event.to_string().as_bytes()).unwrap();
    drop(stdin);
    child.wait().unwrap();
    t0.elapsed()
}

fn report(name: &str, mut times: Vec<Duration>) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    times.sort();
    println!(
        "{name}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (n={})",
        ms(support::percentile(&times, 50.0)),
        ms(support::percentile(&times, 99.0)),
        ms(times[times.len() - 1]),
        times.len()
    );
}

/// The poller guard's cost on an ordinary call: a subagent's `Read` and a main
/// session's `Bash`, before and after (the look kept), with `--replace-pollers` and
/// without, interleaved.
fn guard_cost(root: &std::path::Path, data: &std::path::Path) {
    let subagent = serde_json::json!({
        "session_id": "bench-g1", "hook_event_name": "PreToolUse", "cwd": root,
        "transcript_path": "/nowhere/bench-g1.jsonl", "permission_mode": "default",
        "agent_id": "a0b1c2d3", "agent_type": "general-purpose",
        "tool_name": "Read", "tool_input": {"file_path": root.join("src/main.rs")},
    });
    let main_bash = serde_json::json!({
        "session_id": "bench-g1", "hook_event_name": "PreToolUse", "cwd": root,
        "transcript_path": "/nowhere/bench-g1.jsonl", "permission_mode": "default",
        "tool_name": "Bash", "tool_input": {"command": "cargo test"},
    });
    // What each call did, as the guard keeps it (a 20 kB result to hash).
    let after = |pre: &serde_json::Value| {
        let mut post = pre.clone();
        post["hook_event_name"] = "PostToolUse".into();
        post["tool_response"] = serde_json::json!({"stdout": "x".repeat(20_000), "stderr": ""});
        post["duration_ms"] = 40.into();
        post
    };
    let events = [
        subagent.clone(),
        after(&subagent),
        main_bash.clone(),
        after(&main_bash),
    ];
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for i in 0..SAMPLES {
        let event = &events[i % events.len()];
        with.push(run_hook_with(root, data, event, &["--replace-pollers"]));
        without.push(run_hook_with(root, data, event, &[]));
    }
    report("ordinary call, hook without the guard", without);
    report("ordinary call, hook with --replace-pollers", with);
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("temp")).unwrap();
    support::init(root);
    let conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    conn.execute(
        "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat, session_id) VALUES ('task-03', 'working', datetime('now'), 'bench-s3')",
        [],
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let ask = serde_json::json!({
        "session_id": "bench-s3", "hook_event_name": "PermissionRequest", "cwd": root,
        "transcript_path": "/nowhere/bench-s3.jsonl", "permission_mode": "default",
        "tool_name": "Bash", "tool_input": {"command": "cargo publish", "description": "Publish the crate"},
    });
    let went_on = serde_json::json!({
        "session_id": "bench-s3", "hook_event_name": "PostToolUse", "cwd": root,
        "tool_name": "Bash", "tool_input": {"command": "cargo publish"},
        "tool_response": {"stdout": "x".repeat(20_000)},
    });

    // The hook alone, no maestro running (its wall time does not depend on one).
    let alone: Vec<Duration> = (0..SAMPLES)
        .map(|i| run_hook(root, data.path(), if i % 2 == 0 { &ask } else { &went_on }))
        .collect();
    report(
        "maestro hook wall time (spawn, 0.2-20 kB event on stdin, exit)",
        alone,
    );
    guard_cost(root, data.path());

    // Through a running maestro: the hook's start to the needs_you event.
    let mut cmd = Command::new(support::exe());
    cmd.env("XDG_DATA_HOME", data.path())
        .args(["--no-tui", "--json", "--project"])
        .arg(root);
    let (mut maestro, lines) = support::spawn_stamped(cmd);
    let wait_for = |event: &str| -> Instant {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let (at, line) = lines
                .recv_timeout(end.saturating_duration_since(Instant::now()))
                .expect("maestro said nothing in time");
            if line.contains(&format!("\"event\":\"{event}\"")) {
                return at;
            }
        }
    };
    wait_for("task");
    // What the spool held (the first phase's events) is read at start: let it settle.
    std::thread::sleep(Duration::from_millis(500));
    while lines.try_recv().is_ok() {}
    let mut through = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let t0 = Instant::now();
        run_hook(root, data.path(), &ask);
        through.push(wait_for("needs_you") - t0);
        run_hook(root, data.path(), &went_on);
        wait_for("needs_you_cleared");
    }
    report("hook start -> needs_you event (maestro --no-tui)", through);
    let _ = maestro.kill();
    let _ = maestro.wait();
}
