//! The live session source through the real binary, on a fixture home: a transcript
//! that appears late, grows (half lines included), waits on a tool, ends its turn,
//! crosses a budget, is replaced and is removed; a task without a session is said once.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{Running, Scratch, event, maestro};
use crate::metrics::value;

fn user_prompt(cwd: &str, prompt: &str) -> String {
    format!(
        "{}\n",
        json!({"type": "user", "sessionId": "s-live", "cwd": cwd, "timestamp": "2026-11-24T10:00:00.000Z",
               "isSidechain": false, "message": {"role": "user", "content": prompt}})
    )
}

/// One response of `output` Sonnet output tokens ($15 per million).
fn response(n: u32, output: u64, content: &Value, stop: &str) -> String {
    format!(
        "{}\n",
        json!({"type": "assistant", "sessionId": "s-live", "timestamp": "2026-11-24T10:00:05.000Z",
               "isSidechain": false, "requestId": format!("r{n}"),
               "message": {"id": format!("m{n}"), "model": "claude-sonnet-4-5-20250929", "role": "assistant",
                           "content": content, "stop_reason": stop,
                           "usage": {"input_tokens": 0, "output_tokens": output}}})
    )
}

fn tool_result(is_error: bool, text: &str) -> String {
    format!(
        "{}\n",
        json!({"type": "user", "sessionId": "s-live", "timestamp": "2026-11-24T10:00:09.000Z", "isSidechain": false,
               "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": is_error, "content": text}]}})
    )
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn session_event(status: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| event(v) == "session" && v["status"] == status && v["task_id"] == "task-01"
}

#[test]
fn a_late_transcript_is_followed_through_growth_replacement_and_removal() {
    let s = Scratch::new();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let cwd = root.to_str().unwrap().to_owned();
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join(".claude/projects/-fixture");
    std::fs::create_dir_all(&folder).unwrap();
    let config = s.root().join("maestro.toml");
    std::fs::write(&config, "[budget]\ntask_usd = 1.0\n").unwrap();
    s.set_task("task-01", "working");
    s.set_task("task-02", "working");
    s.set_task("task-03", "watching");

    let port = crate::metrics::free_port();
    let mut cmd = maestro();
    cmd.env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args([
            "--no-tui",
            "--json",
            "--metrics",
            &port.to_string(),
            "--config",
        ])
        .arg(&config)
        .arg("--project")
        .arg(s.root());
    let mut m = Running::spawn(cmd);
    // A started task without a session is said once, with why; a task still
    // `watching` (not claimed) is not.
    let missing = m.wait_json("task-02's missing session", |v| {
        event(v) == "session" && v["status"] == "missing" && v["task_id"] == "task-02"
    });
    assert!(
        missing["detail"].as_str().unwrap().contains("task-02"),
        "{missing}"
    );

    // The transcript appears after start, its first line still half written.
    let transcript = folder.join("s-live.jsonl");
    let prompt = user_prompt(&cwd, "/musician task-01");
    let (a, b) = prompt.split_at(30);
    append(&transcript, a);
    append(&transcript, b);
    let bash = json!([{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cargo test -q"}}]);
    append(&transcript, &response(1, 30_000, &bash, "tool_use"));
    // The same response's second line is not counted again.
    append(&transcript, &response(1, 30_000, &bash, "tool_use"));
    let found = m.wait_json("task-01's session found", session_event("found"));
    assert_eq!(found["session_id"], "s-live");
    assert_eq!(found["found_by"], "transcript");
    // Found as soon as its first prompt was read: the response may come with it or
    // in the next event (a change of activity, told at once).
    let found = if found["total_tokens"] == 30_000 {
        found
    } else {
        m.wait_json("the first response", |v| {
            event(v) == "session" && v["task_id"] == "task-01" && v["total_tokens"] == 30_000
        })
    };
    assert_eq!(found["activity"], "waiting", "{found}");
    assert_eq!(found["tool"]["name"], "Bash");
    assert_eq!(found["tool"]["argument"], "cargo test -q");
    assert!(
        (found["cost_usd"].as_f64().unwrap() - 0.45).abs() < 1e-9,
        "{found}"
    );

    // The tool's result comes back as an error, then the turn ends: idle, with the
    // error kept. $0.87 crosses 80 % of the task's $1 budget.
    append(&transcript, &tool_result(true, "error: 3 tests failed"));
    append(
        &transcript,
        &response(
            2,
            28_000,
            &json!([{"type": "text", "text": "Tests fail."}]),
            "end_turn",
        ),
    );
    let idle = m.wait_json("idle after the end of the turn", |v| {
        session_event("activity")(v) && v["activity"] == "idle"
    });
    assert_eq!(idle["last_error"], "error: 3 tests failed");
    let budget = m.wait_json("the 80 % budget event", |v| event(v) == "budget");
    assert_eq!(
        (&budget["task_id"], &budget["budget"], &budget["level"]),
        (&json!("task-01"), &json!("task_usd"), &json!(80))
    );

    // The same figures for Prometheus.
    let t1 = [("task", "task-01")];
    crate::metrics::scrape_until(port, "session metrics", |sc| {
        value(
            sc,
            "maestro_session_tokens_total",
            &[t1[0], ("kind", "output")],
        ) == Some(58_000.0)
            && value(
                sc,
                "maestro_task_context_percent",
                &[t1[0], ("source", "transcript")],
            ) == Some(0.0)
            && value(
                sc,
                "maestro_budget_used_ratio",
                &[t1[0], ("budget", "task_usd")],
            )
            .is_some_and(|r| (r - 0.87).abs() < 1e-9)
            && value(sc, "maestro_source_up", &[("source", "sessions")]) == Some(1.0)
    });

    // Replaced by another file at the same path: counted again from its start.
    let next = folder.join("s-live.next");
    std::fs::write(
        &next,
        user_prompt(&cwd, "/musician task-01")
            + &response(
                7,
                1_000,
                &json!([{"type": "text", "text": "again"}]),
                "end_turn",
            ),
    )
    .unwrap();
    std::fs::rename(&next, &transcript).unwrap();
    m.wait_json("the replaced transcript's figures", |v| {
        event(v) == "session" && v["task_id"] == "task-01" && v["total_tokens"] == 1_000
    });

    // Removed: lost.
    std::fs::remove_file(&transcript).unwrap();
    let lost = m.wait_json("the session lost", session_event("lost"));
    assert_eq!(lost["session_id"], "s-live");

    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.rest();
    let missing_again = m
        .seen
        .iter()
        .filter(|l| l.contains("\"missing\"") && l.contains("task-02"))
        .count();
    assert_eq!(missing_again, 1, "said once");
    assert!(
        !m.seen
            .iter()
            .any(|l| l.contains("\"missing\"") && l.contains("task-03")),
        "a task not yet claimed has no session to miss"
    );
}

#[test]
fn without_claude_code_the_source_says_it_waits_and_reports_no_missing_sessions() {
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    s.set_task("task-01", "working");
    let mut cmd = maestro();
    cmd.env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["--no-tui", "--json", "--project"])
        .arg(s.root());
    let mut m = Running::spawn(cmd);
    let waiting = m.wait_json("the sessions source waiting", |v| {
        event(v) == "source" && v["source"] == "sessions"
    });
    assert_eq!(waiting["status"], "waiting");
    assert!(
        waiting["detail"]
            .as_str()
            .unwrap()
            .contains(".claude/projects")
    );
    // Claude Code's folder appears later: followed from then on.
    let folder = home.path().join(".claude/projects/-p");
    std::fs::create_dir_all(&folder).unwrap();
    let watching = m.wait_json("the sessions source watching", |v| {
        event(v) == "source" && v["source"] == "sessions" && v["status"] == "watching"
    });
    assert!(watching["detail"].as_str().unwrap().contains("projects"));
}

/// Without a database, a task known by its log files has its session found too.
#[test]
fn without_a_database_a_task_known_by_its_files_gets_its_session() {
    let s = Scratch::without_db();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join(".claude/projects/-fixture");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("s-live.jsonl"),
        user_prompt(root.to_str().unwrap(), "/musician task-04")
            + &response(1, 1_000, &json!([]), "end_turn"),
    )
    .unwrap();
    let mut cmd = maestro();
    cmd.env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["--no-tui", "--json", "--project"])
        .arg(s.root());
    let mut m = Running::spawn(cmd);
    s.append("task-04-status", "bootstrap started [ctx: 3%]\n");
    let found = m.wait_json("task-04's session", |v| {
        event(v) == "session" && v["status"] == "found" && v["task_id"] == "task-04"
    });
    assert_eq!(found["total_tokens"], 1_000);
    assert_eq!(found["activity"], "idle");
}

/// Mapping rules 1 and 3, live: a `claude` process below the task's window whose
/// running-session file names the session (its first prompt names no task), and the
/// Conductor's session id in the database.
#[test]
fn a_running_claude_process_and_the_database_session_id_map_live() {
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    let folder = home.path().join(".claude/projects/-elsewhere");
    std::fs::create_dir_all(&folder).unwrap();
    s.set_task("task-00", "reviewing");
    s.set_task("task-02", "working");
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET session_id = 's-cond' WHERE task_id = 'task-00'",
            [],
        )
        .unwrap();
    let line = |sid: &str, prompt: &str| {
        format!(
            "{}\n",
            json!({"type": "user", "sessionId": sid, "cwd": "/somewhere/else", "timestamp": "2026-11-24T10:00:00.000Z",
                   "isSidechain": false, "message": {"role": "user", "content": prompt}})
        )
    };
    std::fs::write(folder.join("s-cond.jsonl"), line("s-cond", "/conductor")).unwrap();
    std::fs::write(folder.join("s-proc.jsonl"), line("s-proc", "hello")).unwrap();
    let mut cmd = maestro();
    cmd.env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["--no-tui", "--json", "--project"])
        .arg(s.root());
    let mut m = Running::spawn(cmd);
    let cond = m.wait_json("the Conductor's session", |v| {
        event(v) == "session" && v["status"] == "found" && v["task_id"] == "task-00"
    });
    assert_eq!(
        (&cond["session_id"], &cond["found_by"]),
        (&json!("s-cond"), &json!("database"))
    );

    // A window whose `claude` writes its running-session file after maestro started.
    let (mut window, claude_pid) = crate::common::claude_window(&s, "task-02");
    let sessions = home.path().join(".claude/sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(
        sessions.join(format!("{claude_pid}.json")),
        json!({"pid": claude_pid, "sessionId": "s-proc", "cwd": "/somewhere/else"}).to_string(),
    )
    .unwrap();
    let proc = m.wait_json("task-02's session by its process", |v| {
        event(v) == "session" && v["status"] == "found" && v["task_id"] == "task-02"
    });
    let _ = window.kill();
    let _ = window.wait();
    assert_eq!(
        (&proc["session_id"], &proc["found_by"]),
        (&json!("s-proc"), &json!("process"))
    );
    // A subagent's file written later, in the folder both sessions share: billed to
    // the session its first line names.
    std::fs::write(
        folder.join("agent-a1.jsonl"),
        format!(
            "{}\n",
            json!({"type": "assistant", "sessionId": "s-proc", "isSidechain": true, "requestId": "ra",
                   "message": {"id": "ma", "model": "claude-sonnet-4-5", "content": [],
                               "usage": {"input_tokens": 0, "output_tokens": 500}}})
        ),
    )
    .unwrap();
    let billed = m.wait_json("the subagent's bill", |v| {
        event(v) == "session" && v["total_tokens"] == 500
    });
    assert_eq!(billed["task_id"], "task-02", "{billed}");
    // Claude Code 2.1 makes `<session id>/subagents/` while the session runs, with the
    // subagent's file (and its meta file) in it: followed, and billed to the session.
    let agents = folder.join("s-proc/subagents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("agent-b7.meta.json"),
        r#"{"agentType":"general-purpose"}"#,
    )
    .unwrap();
    std::fs::write(
        agents.join("agent-b7.jsonl"),
        format!(
            "{}\n",
            json!({"type": "assistant", "sessionId": "s-proc", "agentId": "b7", "isSidechain": true, "requestId": "rb",
                   "message": {"id": "mb", "model": "claude-sonnet-4-5", "content": [],
                               "usage": {"input_tokens": 20, "output_tokens": 30}}})
        ),
    )
    .unwrap();
    let billed = m.wait_json("the 2.1 subagent's bill", |v| {
        event(v) == "session" && v["total_tokens"] == 550
    });
    assert_eq!(billed["task_id"], "task-02", "{billed}");
}
