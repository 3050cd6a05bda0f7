//! `maestro usage` on a fixture home: Claude Code's transcripts and running-session
//! files written by hand, each mapping rule and each counting rule with known totals.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use serde_json::Value;

use crate::common::{Scratch, assert_success, maestro};

fn line(v: &Value) -> String {
    format!("{v}\n")
}

fn user(sid: &str, cwd: &str, ts: &str, prompt: &str) -> String {
    line(&serde_json::json!({
        "type": "user", "sessionId": sid, "cwd": cwd, "timestamp": ts, "isSidechain": false,
        "message": {"role": "user", "content": prompt}
    }))
}

#[allow(clippy::too_many_arguments)]
fn assistant(
    sid: &str,
    ts: &str,
    id: &str,
    req: &str,
    model: &str,
    side: bool,
    usage: &Value,
) -> String {
    line(&serde_json::json!({
        "type": "assistant", "sessionId": sid, "timestamp": ts, "isSidechain": side,
        "requestId": req,
        "message": {"id": id, "model": model, "role": "assistant", "content": [], "usage": usage}
    }))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn usage_maps_every_rule_and_counts_by_the_usage_tools_rules() {
    let s = Scratch::new();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let cwd = root.to_str().unwrap();
    let home = tempfile::tempdir().unwrap();
    let projects = home.path().join(".claude/projects/-fixture");
    let sonnet = "claude-sonnet-4-5-20250929";
    let u = serde_json::json!({"input_tokens": 3, "cache_creation_input_tokens": 5120, "cache_read_input_tokens": 14032, "output_tokens": 210});

    // task-01, rule 2: its first prompt names it, in this project.
    let mut t1 = user(
        "s-one",
        cwd,
        "2026-11-20T14:02:11.120Z",
        "/musician task-01",
    );
    t1 += &assistant(
        "s-one",
        "2026-11-20T14:02:15.407Z",
        "m1",
        "r1",
        sonnet,
        false,
        &u,
    );
    // The same response's second line: not counted again.
    t1 += &assistant(
        "s-one",
        "2026-11-20T14:02:15.911Z",
        "m1",
        "r1",
        sonnet,
        false,
        &u,
    );
    // A sidechain response (billed, not the context).
    t1 += &assistant(
        "s-one",
        "2026-11-20T14:03:00.000Z",
        "m2",
        "r2",
        sonnet,
        true,
        &serde_json::json!({"input_tokens": 100, "output_tokens": 50}),
    );
    // A synthetic line carries nothing.
    t1 += &assistant(
        "s-one",
        "2026-11-20T14:03:01.000Z",
        "m3",
        "r3",
        "<synthetic>",
        false,
        &u,
    );
    t1 += &line(
        &serde_json::json!({"type": "system", "subtype": "compact_boundary", "sessionId": "s-one", "timestamp": "2026-11-20T14:04:00.000Z", "compactMetadata": {"trigger": "auto", "preTokens": 150_000}}),
    );
    t1 += &assistant(
        "s-one",
        "2026-11-20T14:05:00.000Z",
        "m4",
        "r4",
        sonnet,
        false,
        &serde_json::json!({"input_tokens": 10, "cache_read_input_tokens": 39990, "output_tokens": 5}),
    );
    // Half a line at the end: still being written, not counted.
    t1 += r#"{"type":"assistant","sessionId":"s-one","requestId":"r5","message":{"id":"m5","usage":{"input_tokens":999"#;
    write(&projects.join("s-one.jsonl"), &t1);
    // A subagent of the same session in its own file: billed.
    write(
        &projects.join("agent-a1.jsonl"),
        &assistant(
            "s-one",
            "2026-11-20T14:03:30.000Z",
            "m9",
            "r9",
            sonnet,
            true,
            &serde_json::json!({"input_tokens": 7, "output_tokens": 3}),
        ),
    );
    // And one in Claude Code 2.1's layout, `<session id>/subagents/`, with its meta file.
    write(
        &projects.join("s-one/subagents/agent-b2.jsonl"),
        &assistant(
            "s-one",
            "2026-11-20T14:03:40.000Z",
            "m10",
            "r10",
            sonnet,
            true,
            &serde_json::json!({"input_tokens": 11, "output_tokens": 2}),
        ),
    );
    write(
        &projects.join("s-one/subagents/agent-b2.meta.json"),
        r#"{"agentType":"general-purpose","description":"look","toolUseId":"toolu_9","spawnDepth":1}"#,
    );
    // task-01-fix is another task: its prompt does not name task-01.
    write(
        &projects.join("s-fix.jsonl"),
        &user(
            "s-fix",
            cwd,
            "2026-11-20T15:00:00.000Z",
            "/musician task-01-fix",
        ),
    );

    // task-00, rule 3: the session id the database holds.
    let mut t0 = user(
        "s-cond",
        "/elsewhere",
        "2026-11-20T13:00:00.000Z",
        "/conductor",
    );
    t0 += &assistant(
        "s-cond",
        "2026-11-20T13:00:05.000Z",
        "c1",
        "q1",
        "claude-opus-4-5-20251101",
        false,
        &serde_json::json!({"input_tokens": 1000, "output_tokens": 100}),
    );
    write(&projects.join("s-cond.jsonl"), &t0);
    s.set_task("task-00", "watching");
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET session_id = 's-cond' WHERE task_id = 'task-00'",
            [],
        )
        .unwrap();

    // task-02, rule 1: a claude process below its window, with a running-session file.
    let (mut window, claude_pid) = crate::common::claude_window(&s, "task-02");
    write(
        &home
            .path()
            .join(format!(".claude/sessions/{claude_pid}.json")),
        &serde_json::json!({"pid": claude_pid, "sessionId": "s-proc", "cwd": "/other"}).to_string(),
    );
    let mut t2 = user("s-proc", "/other", "2026-11-20T16:00:00.000Z", "hello");
    t2 += &assistant(
        "s-proc",
        "2026-11-20T16:00:01.000Z",
        "p1",
        "pq1",
        "claude-haiku-4-5-20251001",
        false,
        &serde_json::json!({"input_tokens": 2000, "output_tokens": 1000}),
    );
    write(&projects.join("s-proc.jsonl"), &t2);
    s.set_task("task-01", "working");
    s.set_task("task-02", "working");
    s.set_task("task-03", "working");

    let out = maestro()
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["usage", "--json", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    let _ = window.kill();
    let _ = window.wait();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = |task: &str| {
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["task_id"] == task)
            .cloned()
            .unwrap_or_else(|| panic!("no row for {task}: {v}"))
    };
    let one = row("task-01");
    assert_eq!(one["session_id"], "s-one");
    assert_eq!(one["found_by"], "transcript");
    // 19,365 (one response) + 150 (sidechain) + 40,005 (after the compaction) + 10 (subagent
    // file beside it) + 13 (subagent file in 2.1's layout).
    assert_eq!(
        one["total_tokens"],
        19_365 + 150 + 40_005 + 10 + 13,
        "{one}"
    );
    assert_eq!(one["input_tokens"], 3 + 100 + 10 + 7 + 11);
    assert_eq!(one["output_tokens"], 210 + 50 + 5 + 3 + 2);
    assert_eq!(one["cache_write_tokens"], 5120);
    assert_eq!(one["cache_read_tokens"], 14_032 + 39_990);
    assert_eq!(one["compactions"], 1);
    assert_eq!(one["activity"], "working", "{one}");
    assert_eq!(one["context_tokens"], 40_000);
    assert_eq!(one["context_percent"], 20.0);
    let expected = (131.0 * 3.0 + 270.0 * 15.0 + 5120.0 * 3.75 + 54_022.0 * 0.30) / 1e6;
    assert!(
        (one["cost_usd"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{one}"
    );
    let cond = row("task-00");
    assert_eq!(
        (cond["session_id"].as_str(), cond["found_by"].as_str()),
        (Some("s-cond"), Some("database"))
    );
    assert!(
        (cond["cost_usd"].as_f64().unwrap() - (1000.0 * 5.0 + 100.0 * 25.0) / 1e6).abs() < 1e-12
    );
    let two = row("task-02");
    assert_eq!(
        (two["session_id"].as_str(), two["found_by"].as_str()),
        (Some("s-proc"), Some("process"))
    );
    assert_eq!(two["total_tokens"], 3000);
    // task-03 has none, and says why; the -fix session belongs to no task here.
    assert!(
        v["missing"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["task_id"] == "task-03")
    );
    assert!(
        !v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["session_id"] == "s-fix")
    );
    assert_eq!(v["total"]["sessions"], 3);
    assert_eq!(v["total"]["total_tokens"], 59_543 + 1100 + 3000);
    assert!(v["prices"].as_str().unwrap().contains("list prices"));
}

/// `[sessions.prices]` replaces a model family's list prices; the output says which
/// table it used.
#[test]
fn configured_prices_replace_the_list_prices_and_are_named() {
    let s = Scratch::new();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let projects = home.path().join(".claude/projects/-fixture");
    let mut t = user(
        "s1",
        root.to_str().unwrap(),
        "2026-11-20T14:00:00.000Z",
        "/musician task-01",
    );
    t += &assistant(
        "s1",
        "2026-11-20T14:00:01.000Z",
        "m1",
        "r1",
        "claude-sonnet-4-5-20250929",
        false,
        &serde_json::json!({"input_tokens": 1_000_000, "output_tokens": 1_000_000}),
    );
    write(&projects.join("s1.jsonl"), &t);
    s.set_task("task-01", "working");
    let config = s.root().join("maestro.toml");
    std::fs::write(
        &config,
        "[sessions.prices]\n\"claude-sonnet-4\" = { input = 1, output = 2, cache_write = 0, cache_read = 0 }\n",
    )
    .unwrap();
    let out = maestro()
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["usage", "--json", "--config"])
        .arg(&config)
        .arg("--project")
        .arg(s.root())
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["sessions"][0]["cost_usd"], 3.0, "{v}");
    assert!(
        v["prices"]
            .as_str()
            .unwrap()
            .contains("configuration's prices for claude-sonnet-4"),
        "{v}"
    );
}

/// Claude Code's default model here (`claude-opus-5-5`) has no list price: its cost is
/// unknown and said so, with the configuration line that fixes it, never `$0.00`.
#[test]
fn a_model_without_a_price_is_unknown_and_named_with_its_fix() {
    let s = Scratch::new();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let projects = home.path().join(".claude/projects/-fixture");
    let mut t = user(
        "s1",
        root.to_str().unwrap(),
        "2026-11-20T14:00:00.000Z",
        "/musician task-01",
    );
    t += &assistant(
        "s1",
        "2026-11-20T14:00:01.000Z",
        "m1",
        "r1",
        "claude-opus-5-5",
        false,
        &serde_json::json!({"input_tokens": 1200, "output_tokens": 30}),
    );
    write(&projects.join("s1.jsonl"), &t);
    s.set_task("task-01", "working");
    let run = |args: &[&str]| {
        maestro()
            .env("COLUMNS", "200")
            .env("HOME", home.path())
            .env_remove("CLAUDE_CONFIG_DIR")
            .args(args)
            .arg("--project")
            .arg(s.root())
            .output()
            .unwrap()
    };
    let out = run(&["usage"]);
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("$0.00"), "{text}");
    let total = text.lines().find(|l| l.starts_with("TOTAL")).unwrap();
    assert!(total.contains("unknown"), "{total}");
    assert!(
        text.contains("no list price for claude-opus-5-5")
            && text.contains("[sessions.prices] \"claude-opus-5-5\" = { input ="),
        "{text}"
    );
    let out = run(&["usage", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["total"]["cost_usd"], Value::Null, "{v}");
    assert_eq!(v["total"]["total_tokens"], 1230);
    assert_eq!(
        v["total"]["unpriced_models"],
        serde_json::json!(["claude-opus-5-5"])
    );
    assert_eq!(
        v["sessions"][0]["unpriced_models"],
        serde_json::json!(["claude-opus-5-5"])
    );
    let out = run(&["doctor"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("claude-opus-5-5 (sessions of task-01) has no list price"),
        "{said}"
    );
}

/// On an 80-column terminal every line of `maestro usage` fits, two lines per session;
/// `--wide` prints the one-line table whatever the width.
#[test]
fn usage_fits_80_columns_and_wide_prints_everything() {
    let s = Scratch::new();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let projects = home.path().join(".claude/projects/-fixture");
    let mut t = user(
        "s-long-session-id",
        root.to_str().unwrap(),
        "2026-11-20T14:00:00.000Z",
        "/musician task-01",
    );
    t += &assistant(
        "s-long-session-id",
        "2026-11-20T14:00:01.000Z",
        "m1",
        "r1",
        "claude-sonnet-4-5-20250929",
        false,
        &serde_json::json!({"input_tokens": 123_456, "output_tokens": 7_890, "cache_creation_input_tokens": 45_678, "cache_read_input_tokens": 9_876_543}),
    );
    write(&projects.join("s-long-session-id.jsonl"), &t);
    s.set_task("task-01", "working");
    s.set_task("task-02", "working");
    let run = |columns: &str, extra: &[&str]| {
        let out = maestro()
            .env("COLUMNS", columns)
            .env("HOME", home.path())
            .env_remove("CLAUDE_CONFIG_DIR")
            .arg("usage")
            .args(extra)
            .arg("--project")
            .arg(s.root())
            .output()
            .unwrap();
        assert_success(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let narrow = run("80", &[]);
    for line in narrow.lines() {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line:?}",
            line.chars().count()
        );
    }
    assert!(narrow.contains("claude-sonnet-4-5-20250929"), "{narrow}");
    assert!(
        narrow.contains("9876543"),
        "the breakdown is there: {narrow}"
    );
    assert!(
        narrow
            .lines()
            .any(|l| l.contains("without a session found") && l.contains("task-02"))
            || narrow.contains("task-02: no session found"),
        "{narrow}"
    );
    let wide = run("80", &["--wide"]);
    assert!(
        wide.lines()
            .any(|l| l.contains("CACHE WRITE") && l.contains("LAST ACTIVITY")),
        "{wide}"
    );
}

/// Tasks without a session are said in one line per reason, not a paragraph each; a
/// session id reads whole or ends in `…`.
#[test]
fn tasks_without_a_session_are_folded_into_one_line() {
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    for i in 1..=11 {
        s.set_task(&format!("task-{i:02}"), "working");
    }
    let out = maestro()
        .env("COLUMNS", "80")
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .arg("usage")
        .arg("--project")
        .arg(s.root())
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("without a session found").count(), 1, "{text}");
    // The Conductor's task-00 has none either.
    assert!(
        text.contains("12 tasks without a session found (task-00, task-01"),
        "{text}"
    );
    assert!(!text.contains("task-03: no session found"), "{text}");
}

/// One session, one task: a Musician's session that mentions task-00 is task-01's only,
/// the Conductor's own session (`/conductor`) is task-00's, and every total counts each
/// session once.
#[test]
fn each_session_is_listed_once_under_the_task_its_launch_names() {
    let s = Scratch::new();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let cwd = root.to_str().unwrap();
    let home = tempfile::tempdir().unwrap();
    let projects = home.path().join(".claude/projects/-fixture");
    let sessions = [
        (
            "s1",
            "/musician task-01 read the message from task-00 to task-01",
            1_000u64,
            230u64,
        ),
        ("s2", "/conductor plan the next phase", 5_000, 840),
        ("s3", "/musician task-03", 3_000, 1_000),
    ];
    for (i, (sid, prompt, input, output)) in sessions.iter().enumerate() {
        let mut t = user(sid, cwd, &format!("2026-11-20T14:0{i}:00.000Z"), prompt);
        t += &assistant(
            sid,
            &format!("2026-11-20T14:0{i}:01.000Z"),
            &format!("m{i}"),
            &format!("r{i}"),
            "claude-sonnet-4-5-20250929",
            false,
            &serde_json::json!({"input_tokens": input, "output_tokens": output}),
        );
        write(&projects.join(format!("{sid}.jsonl")), &t);
    }
    for task in ["task-00", "task-01", "task-03"] {
        s.set_task(task, "working");
    }
    let out = maestro()
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["usage", "--json", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    assert_success(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed: Vec<(String, String)> = v["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["task_id"].as_str().unwrap_or_default().to_owned(),
                x["session_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let mut want = vec![
        ("task-00".to_owned(), "s2".to_owned()),
        ("task-01".to_owned(), "s1".to_owned()),
        ("task-03".to_owned(), "s3".to_owned()),
    ];
    let mut got = listed.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{v}");
    let written: u64 = sessions.iter().map(|(_, _, i, o)| i + o).sum();
    let t = &v["total"];
    assert_eq!(
        t["input_tokens"].as_u64().unwrap() + t["output_tokens"].as_u64().unwrap(),
        written,
        "{t}"
    );
    assert_eq!(t["sessions"], 3, "{t}");
}

/// Every verb's `--json` escapes what a terminal would obey, as the headless stream
/// does: a transcript's model with C1 and bidi characters never reaches stdout raw from
/// `usage --json` (`\u` escapes, the same data for a JSON reader) or `doctor --json`.
#[test]
fn verbs_json_escapes_c1_and_bidi_characters() {
    let s = Scratch::new();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let projects = home.path().join(".claude/projects/-fixture");
    let hostile = "claude-\u{9b}31m-\u{202e}evil";
    let mut t = user(
        "s1",
        root.to_str().unwrap(),
        "2026-11-20T14:00:00.000Z",
        "/musician task-01",
    );
    t += &assistant(
        "s1",
        "2026-11-20T14:00:01.000Z",
        "m1",
        "r1",
        hostile,
        false,
        &serde_json::json!({"input_tokens": 1200, "output_tokens": 30}),
    );
    write(&projects.join("s1.jsonl"), &t);
    s.set_task("task-01", "working");
    for verb in ["usage", "doctor"] {
        let out = maestro()
            .env("HOME", home.path())
            .env_remove("CLAUDE_CONFIG_DIR")
            .args([verb, "--json", "--project"])
            .arg(s.root())
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.contains('\u{9b}') && !text.contains('\u{202e}'),
            "{verb}: raw control in {text}"
        );
        let v: Value = serde_json::from_str(&text).unwrap();
        // usage hands the data on (escaped); doctor's sentences show it as `·`.
        let kept = v.to_string().contains(hostile)
            || (verb == "doctor" && text.contains("claude-·31m-·evil"));
        assert!(kept, "{verb}: {v}");
    }
}
