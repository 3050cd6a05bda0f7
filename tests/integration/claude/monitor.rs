//! A subagent that polls through Claude Code's `Monitor` tool: one call, then a model
//! request for each line its command prints. With the real Claude Code (2.1.328): a
//! monitor that prints the same row of comms.db again and again is stopped by its third
//! event (its shell ended, the Musician's session told what to run instead); one whose
//! rows change runs to its end. `maestro usage` finds the same poller, in the same role.

use serde_json::{Value, json};

use super::guard_cases::usage_roles;
use super::replace_pollers::{ONE, Rig, agent, finish};
use super::{ModelServer, Reply};
use crate::common::event;

/// The Musician's session launches one subagent, which starts a monitor running
/// `command` and answers each of its events; both have replies to spare.
fn session(rig: &Rig, command: &str) -> (i32, String, ModelServer) {
    let mut main = vec![Reply::tool(
        "Agent",
        agent("MON-2S: keep an eye on task-03's state for me", false),
        ONE,
    )];
    main.extend((0..12).map(|i| Reply::text(&format!("noted {i}"), ONE)));
    let mut watcher = vec![Reply::tool(
        "Monitor",
        json!({"description": "task-03 state", "timeout_ms": 30000, "command": command}),
        ONE,
    )];
    watcher.extend((0..12).map(|i| Reply::text(&format!("still watching {i}"), ONE)));
    let server = ModelServer::start(vec![("MON-1M", main), ("MON-2S", watcher)]);
    let tools = ["--allowedTools", "Monitor", "Bash(sqlite3:*)"];
    let child = rig.start("/musician task-03 MON-1M", &server, &tools);
    let (code, out) = finish(child);
    (code, out, server)
}

/// The monitor events the subagent was handed (its transcript's notification lines).
fn events_seen(rig: &Rig) -> usize {
    rig.subagent_files()
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .collect::<Vec<_>>()
        })
        .filter(|v| v["origin"]["kind"] == "task-notification")
        .filter(|v| {
            v["message"]["content"]
                .as_str()
                .is_some_and(|c| c.contains("<event>"))
        })
        .count()
}

/// Every text the model was sent, joined (a request body's JSON).
fn sent(server: &ModelServer) -> String {
    server
        .requests()
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_monitor_printing_the_same_row_is_stopped_by_its_third_event() {
    let name = "a_monitor_printing_the_same_row_is_stopped_by_its_third_event";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let mut m = rig.watch(&[]);
    let command = "while true; do sqlite3 comms.db \"select state from orchestration_tasks where task_id='task-03'\"; sleep 2; done";
    let (code, out, server) = session(&rig, command);
    assert_eq!(code, 0, "{out}");
    // Stopped at the third: no fourth event reached the model (the monitor would have
    // printed fifteen before its 30 s deadline).
    assert_eq!(events_seen(&rig), 3);
    // The session was told what to run in its place.
    let sent = sent(&server);
    assert!(sent.contains("maestro stopped your subagent"), "{sent}");
    assert!(sent.contains("musician watch task-03"), "{sent}");
    let seen = m.wait_json("the stop", |v| event(v) == "poller_replaced");
    assert_eq!(
        (seen["at"].as_str(), seen["role"].as_str()),
        (Some("loop"), Some("musician-watcher")),
        "{seen}"
    );
    assert_eq!(usage_roles(&rig), ["musician-watcher"]);
}

#[test]
fn a_monitor_whose_rows_change_runs_to_its_end() {
    let name = "a_monitor_whose_rows_change_runs_to_its_end";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    // Each row differs (the step beside the state): news every time.
    let command = "for step in one two three four five; do sqlite3 comms.db \"select '$step', state from orchestration_tasks where task_id='task-03'\"; sleep 0.5; done";
    let (code, out, server) = session(&rig, command);
    assert_eq!(code, 0, "{out}");
    assert_eq!(events_seen(&rig), 5);
    assert!(!sent(&server).contains("maestro stopped"));
    assert!(usage_roles(&rig).is_empty());
}
