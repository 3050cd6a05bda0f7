//! The loop rule through `maestro hook --replace-pollers`, as Claude Code runs it (a
//! `PreToolUse` and a `PostToolUse` a call): a loop is stopped only in a session whose
//! role is recorded; the main session's own loop and an untied subagent's are seen, not
//! stopped, and `doctor` names them; a prompt's words tie no role; the named command
//! joins the task's running watcher instead of ending it.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Running, Scratch, maestro};

const READ: &str = "sqlite3 comms.db 'SELECT id, message FROM orchestration_messages'";

/// The hook's answer to one event.
fn hook(s: &Scratch, data: &Path, event: &Value) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_maestro"))
        .args(["hook", "--replace-pollers", "--project"])
        .arg(s.root())
        .env("XDG_DATA_HOME", data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(event.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the hook exits 0");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Three reads of comms.db by `agent` (none: the session's own calls) of `session`, each
/// a second long: the answers to their `PreToolUse`s.
fn three_reads(
    s: &Scratch,
    data: &Path,
    session: &str,
    transcript: &Path,
    agent: Option<&str>,
) -> Vec<String> {
    let event = |name: &str| {
        let mut v = json!({
            "session_id": session, "transcript_path": transcript, "cwd": s.root(),
            "hook_event_name": name, "tool_name": "Bash", "tool_input": {"command": READ},
            "tool_response": {"stdout": "", "stderr": ""}, "duration_ms": 1000,
        });
        if let Some(a) = agent {
            v["agent_id"] = json!(a);
            v["agent_type"] = json!("general-purpose");
        }
        v
    };
    (0..3)
        .map(|_| {
            let answer = hook(s, data, &event("PreToolUse"));
            if answer.is_empty() {
                hook(s, data, &event("PostToolUse"));
            }
            answer
        })
        .collect()
}

fn transcript(s: &Scratch, name: &str, first_prompt: &str) -> std::path::PathBuf {
    let path = s.root().join(format!("{name}.jsonl"));
    let line = json!({"type": "user", "message": {"role": "user", "content": first_prompt}});
    std::fs::write(&path, format!("{line}\n")).unwrap();
    path
}

#[test]
fn a_loop_is_stopped_only_where_a_role_is_recorded_and_the_rest_are_seen() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let data = tempfile::tempdir().unwrap();
    // Tied by the database: task-03's row records the session.
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET session_id = 's-tied' WHERE task_id = 'task-03'",
            [],
        )
        .unwrap();
    let plain = transcript(&s, "plain", "carry on");
    let tied = three_reads(&s, data.path(), "s-tied", &plain, Some("a1"));
    assert!(tied[..2].iter().all(String::is_empty), "{tied:?}");
    assert!(
        tied[2].contains("\"deny\"") && tied[2].contains("musician watch task-03 --join"),
        "{tied:?}"
    );
    // Words that hold a role's name tie nothing: seen, not stopped.
    for (name, words) in [
        (
            "conductor-words",
            "Fix the flaky test in src/conductor/plan.rs",
        ),
        (
            "musician-words",
            "Update skills/musician/SKILL with the notes from task-03",
        ),
    ] {
        let t = transcript(&s, name, words);
        let answers = three_reads(&s, data.path(), name, &t, Some("a2"));
        assert!(answers.iter().all(String::is_empty), "{name}: {answers:?}");
    }
    // The session's own loop: never stopped.
    let own = three_reads(&s, data.path(), "s-tied", &plain, None);
    assert!(own.iter().all(String::is_empty), "{own:?}");
    let out = maestro()
        .env("XDG_DATA_HOME", data.path())
        .args(["doctor", "--json", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let loops = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "loops")
        .unwrap_or_else(|| panic!("no loops check: {report}"));
    let detail = loops["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("3 poll loops seen and not stopped"),
        "{detail}"
    );
    for who in [
        "session conductor-words (subagent a2)",
        "session musician-words (subagent a2)",
        "session s-tied (its own calls)",
    ] {
        assert!(detail.contains(who), "{who}: {detail}");
    }
}

/// The command the guard names joins the task's running watcher: it says so and exits
/// 6, and the running one goes on (it is not replaced).
#[test]
fn the_named_watch_command_joins_a_running_watcher() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let data = tempfile::tempdir().unwrap();
    let watch = |extra: &[&str]| {
        let mut c = maestro();
        c.env("XDG_DATA_HOME", data.path())
            .args(["musician", "watch", "task-03", "--project"])
            .arg(s.root())
            .args(extra);
        c
    };
    let mut first = Running::spawn(watch(&["--json"]));
    let file = data.path().join("maestro/watchers");
    crate::common::wait_until("the first watcher's claim", || {
        crate::common::walk(&file).iter().any(|p| {
            p.ends_with("task-03.background")
                && std::fs::read_to_string(p)
                    .is_ok_and(|t| t.trim() == first.child.id().to_string())
        })
    });
    let out = watch(&["--join", "--json"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["event"], "watched");
    assert_eq!(said["pid"], first.child.id());
    assert!(
        first.child.try_wait().unwrap().is_none(),
        "the first watcher still runs"
    );
    // It still does its duty: a message reaches it.
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-03', 'task-00', 'go on', 'instruction')",
            [],
        )
        .unwrap();
    let told = first.wait_json("the message", |v| v["event"] == "message");
    assert_eq!(told["message"]["message"], "go on");
    assert_eq!(first.wait_exit(), 0);
}

/// A poller the guard stopped is told once: not again by a maestro resumed after a
/// `kill -9`, and only as a replay by a plain restart.
#[test]
fn a_stopped_poller_is_told_once_across_a_kill() {
    use crate::common::event;
    use crate::journal_faults::headless;
    let s = Scratch::new();
    s.set_task("task-03", "working");
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET session_id = 's-tied' WHERE task_id = 'task-03'",
            [],
        )
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut m = headless(&s, data.path(), None);
    m.wait_json("the task", |v| {
        event(v) == "task" && v["task_id"] == "task-03"
    });
    let plain = transcript(&s, "plain", "carry on");
    let answers = three_reads(&s, data.path(), "s-tied", &plain, Some("a1"));
    assert!(answers[2].contains("\"deny\""), "{answers:?}");
    let told = m.wait_json("the stop", |v| event(v) == "poller_replaced");
    let cursor = told["cursor"].as_str().expect("kept").to_owned();
    m.signal(nix::sys::signal::Signal::SIGKILL);
    m.wait_exit();
    // Resumed after it: a later anomaly comes, the stop does not.
    let mut resumed = headless(&s, data.path(), Some(&cursor));
    s.append("task-03-status", "step 9 self-correction: after the kill\n");
    resumed.wait_json("the anomaly", |v| event(v) == "anomaly");
    resumed.signal(nix::sys::signal::Signal::SIGKILL);
    resumed.wait_exit();
    assert!(
        !resumed.seen.iter().any(|l| l.contains("poller_replaced")),
        "{:#?}",
        resumed.seen
    );
    // A plain restart restates it, marked.
    let mut again = headless(&s, data.path(), None);
    let restated = again.wait_json("the stop again", |v| event(v) == "poller_replaced");
    assert_eq!(restated["replayed"], true, "{restated}");
}
