//! `maestro conductor watch`, the Conductor's message-watcher without an LLM, and the
//! promise both watchers keep across relaunches: each event told once, none missed
//! between one watcher and the next.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Stdio};
use std::time::Instant;

use crate::common::{DEADLINE, maestro};
use crate::musician::{Rig, finish};

/// `maestro conductor watch --json`, started and holding its claim.
pub(crate) fn conductor_watch(rig: &Rig) -> Child {
    let child = maestro()
        .env("XDG_DATA_HOME", rig.data.path())
        .args(["conductor", "watch", "--json", "--project"])
        .arg(rig.s.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rig.attached(child.id(), "background");
    child
}

pub(crate) fn lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub(crate) fn set(rig: &Rig, task: &str, state: &str, last_error: Option<&str>) {
    rig.s
        .conn()
        .execute(
            "UPDATE orchestration_tasks SET state = ?2, last_error = ?3, last_heartbeat = datetime('now') WHERE task_id = ?1",
            rusqlite::params![task, state, last_error],
        )
        .unwrap();
}

/// It keeps task-00's heartbeat fresh while it waits, and exits when task-03 enters
/// `needs_review`, naming it.
#[test]
fn the_conductor_watcher_keeps_the_heartbeat_and_exits_on_a_review() {
    let rig = Rig::new();
    rig.s
        .conn()
        .execute(
            "UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-10 minutes') WHERE task_id = 'task-00'",
            [],
        )
        .unwrap();
    let w = conductor_watch(&rig);
    let end = Instant::now() + DEADLINE;
    while rig.heartbeat_age("task-00") > 30.0 {
        assert!(
            Instant::now() < end,
            "task-00's heartbeat was never refreshed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    set(&rig, "task-03", "needs_review", None);
    let (code, out) = finish(w);
    assert_eq!(code, 0, "{out}");
    let got = lines(&out);
    assert_eq!(got.len(), 1, "{out}");
    assert_eq!(
        (
            got[0]["event"].as_str(),
            got[0]["task_id"].as_str(),
            got[0]["state"].as_str()
        ),
        (Some("state"), Some("task-03"), Some("needs_review"))
    );
    assert_eq!(got[0]["prev_state"], "working");
}

/// Three watchers in a row, events between them: each event is told once, by the first
/// watcher to run after it, and none is missed.
#[test]
fn conductor_watchers_in_a_row_tell_each_event_once() {
    let rig = Rig::new();
    let first = conductor_watch(&rig);
    set(&rig, "task-03", "needs_review", None);
    let (_, out) = finish(first);
    assert_eq!(lines(&out).len(), 1, "{out}");
    // No watcher runs: a context handoff request and a question come meanwhile.
    set(&rig, "task-04", "error", Some("context_exhaustion_warning"));
    rig.message("task-00", "task-04", "review_request", "which branch?");
    let second = conductor_watch(&rig);
    let (code, out) = finish(second);
    assert_eq!(code, 0, "{out}");
    let got = lines(&out);
    assert_eq!(got.len(), 2, "both, and not task-03 again: {out}");
    assert_eq!(got[0]["task_id"], "task-04");
    assert_eq!(got[0]["reason"], "context_exhaustion_warning");
    assert_eq!(got[1]["message"]["message"], "which branch?");
    // The third waits (nothing new), then tells only what came after it.
    let third = conductor_watch(&rig);
    set(&rig, "task-03", "complete", None);
    let (_, out) = finish(third);
    let got = lines(&out);
    assert_eq!(got.len(), 1, "{out}");
    assert_eq!(
        (got[0]["task_id"].as_str(), got[0]["state"].as_str()),
        (Some("task-03"), Some("complete"))
    );
}

/// A Conductor message posted between one `musician watch` and the next is told by the
/// next (it starts after the last message told, not at the highest id).
#[test]
fn a_message_between_two_musician_watchers_is_told_by_the_second() {
    let rig = Rig::new();
    let first = rig.spawn(&["task-03", "--json"]);
    rig.message("task-03", "task-00", "instruction", "first");
    let (_, out) = finish(first);
    assert!(out.contains("\"first\""), "{out}");
    rig.message("task-03", "task-00", "instruction", "between");
    // It may tell it before it is seen holding its claim: no wait for the claim here.
    let second = rig.cmd(&["task-03", "--json"]).spawn().unwrap();
    let (code, out) = finish(second);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["message"]["message"], "between");
}

/// `maestro hook --replace-pollers` for one `PostToolUse` of the Conductor's session
/// (its transcript's first prompt is `/conductor`): the `additionalContext` it hands
/// the model, if any.
pub(crate) fn post_tool_use(
    s: &crate::common::Scratch,
    transcript: &std::path::Path,
) -> Option<String> {
    use std::io::Write;
    let mut hook = maestro()
        .args(["hook", "--replace-pollers", "--project"])
        .arg(s.root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let event = serde_json::json!({"session_id": "c-1", "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "cwd": s.root(), "transcript_path": transcript});
    hook.stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    let out = hook.wait_with_output().unwrap();
    crate::common::assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next()?;
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["hookEventName"], "PostToolUse",
        "{v}"
    );
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .map(str::to_owned)
}

/// While maestro reports to the database, a report to the Conductor reaches its model
/// with its next tool call, once; the watcher it runs later does not tell it again, and
/// tells what came after.
#[test]
fn a_sentinel_report_reaches_a_working_conductor_once() {
    let s = crate::common::Scratch::new();
    s.set_task("task-03", "working");
    let mut reporting = s.headless(&["--report-to-db"]);
    reporting.wait_json("started", |v| crate::common::event(v) == "task");
    let transcript = s.root().join("conductor.jsonl");
    std::fs::write(
        &transcript,
        "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"/conductor plan phase 2\"}}\n",
    )
    .unwrap();
    assert_eq!(
        post_tool_use(&s, &transcript),
        None,
        "the first call starts the record"
    );
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-00', 'sentinel', 'Anomaly: self-correction\nTask: task-03', 'instruction')",
            [],
        )
        .unwrap();
    let told = post_tool_use(&s, &transcript).expect("the report, with the next tool call");
    assert!(told.contains("Anomaly: self-correction"), "{told}");
    assert!(told.contains("from \"sentinel\""), "{told}");
    assert_eq!(post_tool_use(&s, &transcript), None, "once");
    // The Conductor's watcher: not the report again, the next message only.
    let w = maestro()
        .args(["conductor", "watch", "--json", "--project"])
        .arg(s.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-00', 'task-03', 'done?', 'review_request')",
            [],
        )
        .unwrap();
    let (code, out) = finish(w);
    assert_eq!(code, 0, "{out}");
    let got = lines(&out);
    assert_eq!(got.len(), 1, "{out}");
    assert_eq!(got[0]["message"]["message"], "done?");
}
