//! Sessions: `maestro usage` on a 100 MB transcript (read speed, peak memory: it is
//! streamed, never held whole); the live source's latency from a line appended to a
//! transcript to the `session` event that carries it; and what 20 idle followed
//! sessions cost (CPU over 5 s, RSS). Run with `cargo bench --bench sessions`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    usage_on_a_large_transcript();
    live_latency_and_idle_cost();
}

/// 20 tasks, each with a transcript; then lines appended one at a time, each a tool
/// call on a new file (an activity change, told at once).
fn live_latency_and_idle_cost() {
    const TASKS: usize = 20;
    const SAMPLES: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(root.join("temp")).unwrap();
    support::init(&root);
    let conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join(".claude/projects/-bench");
    std::fs::create_dir_all(&folder).unwrap();
    for i in 1..=TASKS {
        conn.execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'working', datetime('now'))",
            [format!("task-{i:02}")],
        )
        .unwrap();
        let mut f = std::fs::File::create(folder.join(format!("s{i}.jsonl"))).unwrap();
        writeln!(
            f,
            r#"{{"type":"user","sessionId":"s{i}","cwd":"{}","timestamp":"2026-11-20T14:00:00.000Z","isSidechain":false,"message":{{"role":"user","content":"/musician task-{i:02}"}}}}"#,
            root.display()
        )
        .unwrap();
    }
    let mut cmd = Command::new(support::exe());
    cmd.env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args([
            "--no-tui",
            "--json",
            "--stall-after",
            "1h",
            "--task-stale-after",
            "1h",
        ])
        .args(["--conductor-stale-after", "1h", "--project"])
        .arg(&root);
    let (mut child, lines) = support::spawn_stamped(cmd);
    let mut found = 0;
    while found < TASKS {
        let (_, l) = lines.recv_timeout(Duration::from_secs(20)).unwrap();
        if l.contains(r#""status":"found""#) {
            found += 1;
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let (cpu, rss) = support::idle_cost(child.id(), Duration::from_secs(5));
    println!(
        "{TASKS} sessions followed, idle: CPU {cpu:.2} % of one core over 5 s, RSS {:.1} MB",
        rss as f64 / 1024.0
    );
    let mut samples = Vec::with_capacity(SAMPLES);
    for n in 0..SAMPLES {
        let i = 1 + (n * 7) % TASKS;
        let marker = format!("file-{n}.rs");
        let start = Instant::now();
        append_call(&folder.join(format!("s{i}.jsonl")), i, n, &marker);
        let end = start + Duration::from_secs(10);
        loop {
            let (at, l) = lines
                .recv_timeout(end.saturating_duration_since(Instant::now()))
                .expect("the session event did not arrive in time");
            if l.contains(&marker) {
                samples.push(at - start);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(10 + (n as u64 * 13) % 31));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "transcript line appended -> session event printed: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (n={SAMPLES})",
        ms(support::percentile(&samples, 50.0)),
        ms(support::percentile(&samples, 99.0)),
        ms(*samples.iter().max().unwrap())
    );
    let _ = child.kill();
    let _ = child.wait();
}

fn append_call(path: &Path, i: usize, n: usize, file: &str) {
    let line = format!(
        r#"{{"type":"assistant","sessionId":"s{i}","timestamp":"2026-11-20T14:00:01.000Z","isSidechain":false,"requestId":"r{n}","message":{{"id":"m{n}","model":"claude-sonnet-4-5-20250929","role":"assistant","content":[{{"type":"tool_use","id":"t{n}","name":"Edit","input":{{"file_path":"{file}"}}}}],"stop_reason":"tool_use","usage":{{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":20000,"output_tokens":50}}}}}}"#
    );
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(format!("{line}\n").as_bytes()).unwrap();
}

fn usage_on_a_large_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(root.join("temp")).unwrap();
    support::init(&root);
    let conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    conn.execute(
        "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('task-01', 'working', datetime('now'))",
        [],
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join(".claude/projects/-bench");
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("s-big.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(
        f,
        r#"{{"type":"user","sessionId":"s-big","cwd":"{}","timestamp":"2026-11-20T14:00:00.000Z","isSidechain":false,"message":{{"role":"user","content":"/musician task-01"}}}}"#,
        root.display()
    )
    .unwrap();
    let mut written = 0u64;
    let mut n = 0u64;
    let filler = "x".repeat(600);
    while written < 100_000_000 {
        let l = format!(
            r#"{{"type":"assistant","sessionId":"s-big","timestamp":"2026-11-20T14:00:01.000Z","isSidechain":false,"requestId":"r{n}","message":{{"id":"m{n}","model":"claude-sonnet-4-5-20250929","role":"assistant","content":[{{"type":"text","text":"{filler}"}}],"usage":{{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":20000,"output_tokens":50}}}}}}"#
        );
        f.write_all(l.as_bytes()).unwrap();
        f.write_all(b"\n").unwrap();
        written += l.len() as u64 + 1;
        n += 1;
    }
    drop(f);
    let before = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .unwrap()
        .max_rss();
    let start = Instant::now();
    let out = Command::new(support::exe())
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["usage", "--json", "--project"])
        .arg(&root)
        .output()
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total"]["total_tokens"], n * 20_153);
    let peak = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .unwrap()
        .max_rss()
        .max(before);
    println!(
        "maestro usage on a {:.0} MB transcript ({n} responses): {secs:.3} s, {:.0} MB/s; peak RSS {:.1} MB",
        written as f64 / 1e6,
        written as f64 / 1e6 / secs,
        peak as f64 / 1024.0
    );
    // The live source on the same file: from start to the `found` event with its
    // figures (the whole file read), and the process's peak RSS then.
    let mut cmd = Command::new(support::exe());
    cmd.env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["--no-tui", "--json", "--project"])
        .arg(&root);
    let start = Instant::now();
    let (mut child, lines) = support::spawn_stamped(cmd);
    let at = loop {
        let (at, l) = lines.recv_timeout(Duration::from_secs(60)).unwrap();
        if l.contains(r#""status":"found""#) {
            assert!(
                l.contains(&format!(r#""total_tokens":{}"#, n * 20_153)),
                "{l}"
            );
            break at;
        }
    };
    let secs = (at - start).as_secs_f64();
    let hwm = support::vm_kb(child.id(), "VmHWM:");
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "live session source, same transcript at start: found with its totals after {secs:.3} s (process start included), {:.0} MB/s; peak RSS {:.1} MB",
        written as f64 / 1e6 / secs,
        hwm as f64 / 1024.0
    );
}
