//! The Conductor's side with the real Claude Code (2.1.328) against the scripted model, in
//! a session tied as the Conductor (`/conductor`) with `--replace-pollers`: its looping
//! database watcher is stopped within three cycles and `maestro conductor watch` runs
//! in its place without a prompt, keeps task-00's heartbeat and exits on a review; a
//! Sentinel report (maestro's, reporting to the database) reaches the model once, with
//! its next tool call while it works, or through its watcher while it waits.

use std::path::Path;

use serde_json::Value;

use super::replace_pollers::{
    ONE, Rig, agent, command_in, conn, finish, heartbeat_age_s, refusals, three_cycles,
    tool_results,
};
use super::{ModelServer, Reply};
use crate::common::{event, wait_until};

fn set_state(db: &rusqlite::Connection, task: &str, state: &str) {
    db.execute(
        "UPDATE orchestration_tasks SET state = ?2 WHERE task_id = ?1",
        [task, state],
    )
    .unwrap();
}

/// Every text the model was sent, in the last request (its whole history).
fn last_request_text(server: &ModelServer) -> String {
    server
        .requests()
        .last()
        .map(Value::to_string)
        .unwrap_or_default()
}

#[test]
fn the_conductors_database_watcher_is_stopped_and_conductor_watch_takes_its_duty() {
    let name = "the_conductors_database_watcher_is_stopped_and_conductor_watch_takes_its_duty";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let db = conn(rig.root());
    db.execute(
        "UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-10 minutes') WHERE task_id = 'task-00'",
        [],
    )
    .unwrap();
    let read = "sqlite3 comms.db \"SELECT task_id, state FROM orchestration_tasks WHERE state IN ('needs_review', 'error', 'complete')\"";
    let watcher = three_cycles(
        &[Reply::bash("sleep 1", ONE), Reply::bash(read, ONE)],
        Reply::relay(ONE),
    );
    let server = ModelServer::start(vec![
        (
            "CON-7W",
            vec![
                Reply::tool(
                    "Agent",
                    agent("CW-3L: watch the database for state changes", false),
                    ONE,
                ),
                Reply::text("waiting for the watcher", ONE),
                Reply::run_named(ONE),
                Reply::text("handled", ONE),
            ],
        ),
        ("CW-3L", watcher),
    ]);
    let tools = ["--allowedTools", "Bash(sleep:*)", "Bash(sqlite3:*)"];
    let session = rig.start("/conductor CON-7W", &server, &tools);
    wait_until("conductor watch refreshes task-00's heartbeat", || {
        heartbeat_age_s(&db, "task-00") < 30.0
    });
    set_state(&db, "task-03", "needs_review");
    let (code, out) = finish(session);
    assert_eq!(code, 0, "{out}");
    let said = refusals(&server);
    assert_eq!(said.len(), 1, "one stop, at the third look: {said:?}");
    assert!(
        command_in(&said[0]).contains("conductor watch"),
        "{}",
        said[0]
    );
    let ran = tool_results(&server, false);
    assert!(
        ran.iter()
            .any(|r| r.contains("task-03") && r.contains("needs_review")),
        "conductor watch ran without a prompt and named the review: {ran:?}"
    );
}

#[test]
fn a_sentinel_report_reaches_the_conductor_once_working_or_waiting() {
    let name = "a_sentinel_report_reaches_the_conductor_once_working_or_waiting";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let mut reporting = rig.watch(&["--report-to-db"]);
    let status = rig.root().join("temp/task-03-status");
    std::fs::write(&status, "step 1 started [ctx: 20%]\n").unwrap();
    let gate = |n: u32| format!("while [ ! -e gate-{n} ]; do sleep 0.05; done; echo gate {n}");
    let maestro = shlex::try_quote(env!("CARGO_BIN_EXE_maestro"))
        .unwrap()
        .into_owned();
    let server = ModelServer::start(vec![(
        "CON-4R",
        vec![
            Reply::bash("echo first call", ONE),
            Reply::bash(&gate(1), ONE),
            Reply::bash("echo after the report", ONE),
            Reply::bash(&format!("{maestro} conductor watch"), ONE),
            Reply::text("done", ONE),
        ],
    )]);
    let tools = ["--allowedTools", "Bash"];
    let session = rig.start("/conductor CON-4R", &server, &tools);
    // Working: a report written while it makes tool calls comes with the next one.
    wait_until("the gated call", || {
        tool_results(&server, false)
            .iter()
            .any(|r| r.contains("first call"))
    });
    append(
        &status,
        "step 2 self-correction: FIRST-SC rewrote the parser\n",
    );
    reporting.wait_json("the first report", |v| {
        event(v) == "anomaly" && v["detail"].as_str().is_some_and(|d| d.contains("FIRST-SC"))
    });
    wait_until("the report in comms.db", || {
        sentinel_reports(rig.root()) >= 1
    });
    std::fs::write(rig.root().join("gate-1"), "").unwrap();
    // Waiting: the watcher it runs exits with the next report.
    wait_until("conductor watch waiting", || {
        crate::common::walk(&rig.data.path().join("maestro/watchers"))
            .iter()
            .any(|p| {
                p.ends_with("task-00.background") && std::fs::metadata(p).is_ok_and(|m| m.len() > 0)
            })
    });
    append(
        &status,
        "step 3 self-correction: SECOND-SC reverted the cache\n",
    );
    let (code, out) = finish(session);
    assert_eq!(code, 0, "{out}");
    let history = last_request_text(&server);
    assert_eq!(
        history.matches("hook additional context").count(),
        1,
        "the first report came once, as additional context: {history}"
    );
    assert_eq!(history.matches("FIRST-SC").count(), 1, "once: {history}");
    let ran = tool_results(&server, false);
    let watched: Vec<&String> = ran.iter().filter(|r| r.contains("SECOND-SC")).collect();
    assert_eq!(
        watched.len(),
        1,
        "the watcher exited with the second report: {ran:?}"
    );
    assert!(
        !watched[0].contains("FIRST-SC"),
        "not told again: {}",
        watched[0]
    );
    assert!(watched[0].contains("from sentinel"), "{}", watched[0]);
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

fn sentinel_reports(root: &Path) -> i64 {
    conn(root)
        .query_row(
            "SELECT count(*) FROM orchestration_messages WHERE from_session = 'sentinel' AND task_id = 'task-00'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}
