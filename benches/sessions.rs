//! `maestro usage` on a large transcript: how fast a 100 MB transcript is counted and
//! how much memory that takes (it is streamed, never held whole). Run with
//! `cargo bench --bench sessions`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::process::Command;
use std::time::Instant;

fn main() {
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
}
