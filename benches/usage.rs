//! `maestro usage` against ccusage 18 on the same 200 MB of transcripts in Claude Code
//! 2.1's layout (each session's subagents in `<session>/subagents/`), shaped like what
//! the real program writes: tool results (most of the bytes) with the tool's own copy
//! in `toolUseResult`, responses written one line per content block with the same
//! usage, attachments and queue lines. Both must give the same totals, token for token
//! and cent for cent; the speeds are printed side by side, each the median of several
//! runs after one to warm up (`MAESTRO_RUNS`, `CCUSAGE_RUNS`).
//!
//! Two shapes of corpus, each compared: many sessions (20 of about 10 MB) and a few
//! long ones (8 of about 30 MB, a user with a few long sessions), subagents beside each.
//!
//! `cargo bench --bench usage` (`USAGE_BENCH_MB=50` for smaller corpora,
//! `USAGE_BENCH_KEEP=1` to keep the first for a profiler). ccusage is
//! found through `MAESTRO_TEST_CCUSAGE` or the test tools' cache (`.ci/run` installs it);
//! without it only maestro is timed.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const AGENTS_PER_SESSION: usize = 3;

fn main() {
    let mb: u64 = std::env::var("USAGE_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    // Many small sessions, then a few large ones (8 × 30 MB at the default size).
    for (sessions, mb) in [(20, mb), (8, mb * 6 / 5)] {
        println!("== {sessions} sessions ==");
        compare(sessions, mb);
    }
}

/// One corpus of `sessions` sessions and `mb` MB: maestro timed, then ccusage, totals
/// held equal.
fn compare(sessions: usize, mb: u64) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir(root.join("temp")).unwrap();
    support::init(&root);
    let home = tempfile::tempdir().unwrap();
    let corpus = Corpus::write(&root, home.path(), mb * 1_000_000, sessions);
    println!(
        "corpus: {:.0} MB in {} files ({sessions} sessions, {} subagents), {} responses",
        corpus.bytes as f64 / 1e6,
        corpus.files,
        sessions * AGENTS_PER_SESSION,
        corpus.responses
    );

    let (secs, ours) = timed(
        MAESTRO_RUNS,
        Command::new(support::exe())
            .env("HOME", home.path())
            .env_remove("CLAUDE_CONFIG_DIR")
            .args(["usage", "--json", "--project"])
            .arg(&root),
    );
    let ours = &ours["total"];
    assert_eq!(ours["total_tokens"], corpus.tokens, "maestro's total");
    let mine = corpus.bytes as f64 / 1e6 / secs.median;
    println!("maestro usage: {secs}, median {mine:.0} MB/s");

    live_source_at_start(&root, home.path(), corpus.bytes, sessions);
    // `USAGE_BENCH_KEEP=1` keeps the first corpus, `=8` the one of 8 sessions.
    let keep = std::env::var("USAGE_BENCH_KEEP").ok();
    if keep.as_deref() == Some("1") || keep.as_deref() == Some(&sessions.to_string()) {
        println!(
            "kept for profiling: HOME={} maestro usage --project {}",
            home.path().display(),
            root.display()
        );
        std::mem::forget(home);
        std::mem::forget(dir);
        std::process::exit(0);
    }
    let Some(ccusage) = ccusage() else {
        println!("ccusage not found (MAESTRO_TEST_CCUSAGE or `bash .ci/run`): not compared");
        return;
    };
    let (their_secs, theirs) = timed(
        CCUSAGE_RUNS,
        Command::new(ccusage)
            .args(["session", "--json", "--offline"])
            .env("CLAUDE_CONFIG_DIR", home.path().join(".claude"))
            .env("HOME", home.path()),
    );
    let theirs = &theirs["totals"];
    for (a, b) in [
        ("input_tokens", "inputTokens"),
        ("output_tokens", "outputTokens"),
        ("cache_write_tokens", "cacheCreationTokens"),
        ("cache_read_tokens", "cacheReadTokens"),
    ] {
        assert_eq!(ours[a], theirs[b], "{a}: maestro {ours} ccusage {theirs}");
    }
    let cents = |v: &serde_json::Value| (v.as_f64().unwrap() * 100.0).round() as i64;
    assert_eq!(cents(&ours["cost_usd"]), cents(&theirs["totalCost"]));
    let them = corpus.bytes as f64 / 1e6 / their_secs.median;
    println!(
        "ccusage 18 session: {their_secs}, median {them:.0} MB/s; maestro is {:.1}x (medians); totals equal ({} tokens, {:.2} USD)",
        mine / them,
        corpus.tokens,
        ours["cost_usd"].as_f64().unwrap()
    );
}

/// The dashboard's session source on the same corpus: from start to every task's
/// session `found` with its figures (process start included).
fn live_source_at_start(root: &Path, home: &Path, bytes: u64, sessions: usize) {
    let mut cmd = Command::new(support::exe());
    cmd.env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["--no-tui", "--json", "--project"])
        .arg(root);
    let start = Instant::now();
    let (mut child, lines) = support::spawn_stamped(cmd);
    let mut found = 0;
    let mut last = start;
    while found < sessions {
        let (at, l) = lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap();
        if l.contains(r#""status":"found""#) {
            found += 1;
            last = at;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let secs = (last - start).as_secs_f64();
    println!(
        "live session source at start: all {sessions} sessions found with their figures after {secs:.3} s, {:.0} MB/s",
        bytes as f64 / 1e6 / secs
    );
}

/// Runs of each command timed (after one not timed): the machine is shared and noisy,
/// so the medians are compared.
const MAESTRO_RUNS: usize = 7;
const CCUSAGE_RUNS: usize = 3;

/// Seconds over several runs.
struct Spread {
    min: f64,
    median: f64,
    max: f64,
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.3} / {:.3} / {:.3} s (min / median / max)",
            self.min, self.median, self.max
        )
    }
}

/// The command run once to warm up, then `runs` times: its times and its JSON output.
fn timed(runs: usize, cmd: &mut Command) -> (Spread, serde_json::Value) {
    let mut output = None;
    let mut secs = Vec::new();
    for run in 0..=runs {
        let start = Instant::now();
        let out = cmd.output().unwrap();
        let elapsed = start.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if run > 0 {
            secs.push(elapsed);
        }
        output = Some(out.stdout);
    }
    secs.sort_by(f64::total_cmp);
    let spread = Spread {
        min: secs[0],
        median: secs[secs.len() / 2],
        max: secs[secs.len() - 1],
    };
    (spread, serde_json::from_slice(&output.unwrap()).unwrap())
}

fn ccusage() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MAESTRO_TEST_CCUSAGE") {
        return Some(PathBuf::from(p));
    }
    let p = directories::BaseDirs::new()?
        .cache_dir()
        .join("maestro-test-tools/node_modules/.bin/ccusage");
    p.is_file().then_some(p)
}

/// What was written, and what it adds up to.
struct Corpus {
    bytes: u64,
    files: usize,
    responses: u64,
    tokens: u64,
}

/// Text as a tool returns it: code lines with quotes, tabs and newlines to escape.
fn file_text(n: usize, len: usize) -> String {
    let mut s = String::with_capacity(len + 80);
    let mut i = 0;
    while s.len() < len {
        s.push_str(&format!(
            "    let value_{i} = \"item {n}\".to_owned(); // see {{\"key\": {i}}}\n\tif x < {i} {{ return; }}\n"
        ));
        i += 1;
    }
    s
}

impl Corpus {
    fn write(root: &Path, home: &Path, bytes: u64, sessions: usize) -> Self {
        let folder = home.join(".claude/projects/-bench");
        std::fs::create_dir_all(&folder).unwrap();
        let conn = rusqlite::Connection::open(root.join("comms.db")).unwrap();
        let mut c = Corpus {
            bytes: 0,
            files: 0,
            responses: 0,
            tokens: 0,
        };
        // Each session gets its share; a subagent a tenth of its parent's.
        let per_session = bytes / sessions as u64;
        let per_agent = per_session / 10;
        let per_main = per_session - per_agent * AGENTS_PER_SESSION as u64;
        for t in 1..=sessions {
            let task = format!("task-{t:02}");
            conn.execute(
                "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'working', datetime('now'))",
                [&task],
            )
            .unwrap();
            let session = format!("5e55{t:04}-0000-4000-8000-00000000{t:04}");
            let main = folder.join(format!("{session}.jsonl"));
            c.session_file(&main, &session, root, &task, false, per_main, t);
            let agents = folder.join(&session).join("subagents");
            std::fs::create_dir_all(&agents).unwrap();
            for a in 0..AGENTS_PER_SESSION {
                let file = agents.join(format!("agent-a{t:04}{a:012}.jsonl"));
                c.session_file(
                    &file,
                    &session,
                    root,
                    &task,
                    true,
                    per_agent,
                    1000 + t * 10 + a,
                );
            }
        }
        c
    }

    #[allow(clippy::too_many_arguments)]
    fn session_file(
        &mut self,
        path: &Path,
        session: &str,
        root: &Path,
        task: &str,
        sidechain: bool,
        bytes: u64,
        seed: usize,
    ) {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
        let cwd = root.display();
        let common = format!(
            r#""userType":"external","entrypoint":"cli","cwd":"{cwd}","sessionId":"{session}","version":"2.1.328","gitBranch":"main""#
        );
        let written = std::cell::Cell::new(0u64);
        let put = |f: &mut std::io::BufWriter<std::fs::File>, line: String| {
            f.write_all(line.as_bytes()).unwrap();
            f.write_all(b"\n").unwrap();
            written.set(written.get() + line.len() as u64 + 1);
        };
        put(
            &mut f,
            format!(
                r#"{{"type":"queue-operation","operation":"enqueue","timestamp":"2026-11-25T09:13:15.812Z","sessionId":"{session}","content":"/musician {task}"}}"#
            ),
        );
        put(
            &mut f,
            format!(
                r#"{{"parentUuid":null,"isSidechain":{sidechain},"type":"user","message":{{"role":"user","content":"/musician {task}"}},"uuid":"u0","timestamp":"2026-11-25T09:13:15.838Z","permissionMode":"default",{common}}}"#
            ),
        );
        put(
            &mut f,
            format!(
                r#"{{"parentUuid":"u0","isSidechain":{sidechain},"attachment":{{"type":"environment","snapshot":{{"workingDirectory":"{cwd}","platform":"linux","shell":"bash"}}}},"type":"attachment","uuid":"a0","timestamp":"2026-11-25T09:13:15.837Z","rendered":[{{"content":"<system-reminder>\n# Environment\n - Primary working directory: {cwd}\n</system-reminder>"}}],{common}}}"#
            ),
        );
        let mut n = 0usize;
        while written.get() < bytes {
            n += 1;
            let id = format!("msg_{seed:04}_{n:06}");
            let req = format!("req_{seed:04}_{n:06}");
            let tool = format!("toolu_{seed:04}_{n:06}");
            let (input, output) = (3 + (n % 7) as u64, 40 + (n % 300) as u64);
            let (write, read) = (100 + (n % 900) as u64, 20_000 + (n * 37 % 50_000) as u64);
            let usage = format!(
                r#"{{"input_tokens":{input},"cache_creation_input_tokens":{write},"cache_read_input_tokens":{read},"output_tokens":{output},"server_tool_use":{{"web_search_requests":0,"web_fetch_requests":0}},"service_tier":"standard","cache_creation":{{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":{write}}}}}"#
            );
            let ts = format!(
                "2026-11-25T{:02}:{:02}:{:02}.{:03}Z",
                10 + n / 3600 % 12,
                n / 60 % 60,
                n % 60,
                n % 1000
            );
            // One response, two lines (its text, then its tool call), the same usage.
            put(
                &mut f,
                format!(
                    r#"{{"parentUuid":"p{n}","isSidechain":{sidechain},"message":{{"id":"{id}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"text","text":"I will look at the parser next, then run the tests for step {n}."}}],"stop_reason":null,"stop_sequence":null,"usage":{usage}}},"requestId":"{req}","type":"assistant","uuid":"t{n}","timestamp":"{ts}",{common}}}"#
                ),
            );
            let (name, input_json) = if n.is_multiple_of(5) {
                let body = serde_json::to_string(&file_text(n, 1500)).unwrap();
                (
                    "Write",
                    format!(r#"{{"file_path":"{cwd}/src/m{n}.rs","content":{body}}}"#),
                )
            } else {
                (
                    "Read",
                    format!(r#"{{"file_path":"{cwd}/src/parser/m{n}.rs"}}"#),
                )
            };
            put(
                &mut f,
                format!(
                    r#"{{"parentUuid":"t{n}","isSidechain":{sidechain},"message":{{"id":"{id}","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{{"type":"tool_use","id":"{tool}","name":"{name}","input":{input_json}}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{usage}}},"requestId":"{req}","type":"assistant","uuid":"c{n}","timestamp":"{ts}",{common}}}"#
                ),
            );
            self.responses += 1;
            self.tokens += input + output + write + read;
            // The result, with the tool's own copy of it.
            let text = serde_json::to_string(&file_text(
                n,
                if n.is_multiple_of(10) {
                    12_000
                } else {
                    200 + (n * 131) % 2500
                },
            ))
            .unwrap();
            let error = n.is_multiple_of(17);
            put(
                &mut f,
                format!(
                    r#"{{"parentUuid":"c{n}","isSidechain":{sidechain},"type":"user","message":{{"role":"user","content":[{{"tool_use_id":"{tool}","type":"tool_result","content":{text},"is_error":{error}}}]}},"uuid":"r{n}","timestamp":"{ts}","toolUseResult":{{"type":"text","file":{{"filePath":"{cwd}/src/parser/m{n}.rs","content":{text},"numLines":80,"startLine":1,"totalLines":80}}}},{common}}}"#
                ),
            );
        }
        self.bytes += written.get();
        self.files += 1;
    }
}
