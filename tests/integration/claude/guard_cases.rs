//! The guard's cases of this round, with the real Claude Code: a poller whose look fails
//! each time (`grep -q … && echo READY` on a log without the word yet: Claude Code reports
//! such a call with `PostToolUseFailure`, not `PostToolUse`) is stopped by its third look
//! all the same; a Conductor's poller over a status log and its inbox is given
//! `conductor watch`; a helper script is judged by its source, a test by nothing it
//! prints. `maestro usage` finds the same pollers in the transcripts, in the same roles.

use super::guard::{end, poller_tools_with};
use super::replace_pollers::{ONE, Rig, agent, refusals, stops};
use super::{ModelServer, Reply};
use crate::common::event;

/// The roles `maestro usage` gives the pollers it finds in the rig's transcripts.
pub(super) fn usage_roles(rig: &Rig) -> Vec<String> {
    let usage = rig.rig.usage();
    usage["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["pollers"].as_array().cloned().unwrap_or_default())
        .map(|p| p["role"].as_str().unwrap_or_default().to_owned())
        .collect()
}

const WAITER: &str = "FL-3G: Wait until the progress log of task-03 says DONE, then tell me.";

fn waiter_calls() -> Vec<Reply> {
    let look = "grep -q DONE temp/task-03-status && echo READY";
    vec![
        Reply::bash(look, ONE),
        Reply::bash("sleep 1", ONE),
        Reply::bash(look, ONE),
        Reply::bash("sleep 1", ONE),
        Reply::bash(look, ONE),
        Reply::relay(ONE),
    ]
}

#[test]
fn a_poller_whose_looks_fail_is_stopped_by_its_third() {
    let name = "a_poller_whose_looks_fail_is_stopped_by_its_third";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    std::fs::write(rig.root().join("temp/task-03-status"), "step 1 started\n").unwrap();
    let mut m = rig.watch(&["--report-to-db"]);
    let server = ModelServer::start(vec![
        (
            "CON-3F",
            vec![
                Reply::tool("Agent", agent(WAITER, false), ONE),
                Reply::text("done", ONE),
            ],
        ),
        ("FL-3G", waiter_calls()),
    ]);
    let tools = poller_tools_with(&["Bash(grep:*)"]);
    end(rig.start("/conductor CON-3F", &server, &tools));
    // The failed looks come back as errors too: the guard's refusal is the third.
    let said = refusals(&server);
    let failed = said.iter().filter(|r| r.starts_with("Exit code 1")).count();
    let stopped: Vec<&String> = said
        .iter()
        .filter(|r| r.contains("maestro stopped this subagent"))
        .collect();
    assert_eq!(
        (failed, stopped.len()),
        (2, 1),
        "two looks ran, the third was refused: {said:?}"
    );
    let seen = m.wait_json("the stop", |v| event(v) == "poller_replaced");
    assert_eq!(seen["at"], "loop", "{seen}");
    // `maestro usage` finds the same poller in the transcript, in the same role.
    assert_eq!(usage_roles(&rig), [seen["role"].as_str().unwrap_or("?")]);
}

const INBOX_AND_LOG: &str = "INB-2C: Keep an eye on task-03's progress log and on my inbox; tell me when something new comes.";

/// The Conductor's subagent that reads a status log, then polls its inbox, each cycle:
/// stopped by its third look with `conductor watch` named (which tells the inbox and,
/// while a maestro reports, the Sentinel's reports), with no reporter running.
#[test]
fn a_conductors_log_and_inbox_poller_is_given_conductor_watch() {
    let name = "a_conductors_log_and_inbox_poller_is_given_conductor_watch";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    std::fs::write(rig.root().join("temp/task-03-status"), "step 1 started\n").unwrap();
    let mut m = rig.watch(&[]);
    let inbox = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-00' AND id > 0\"";
    let cycle = [
        Reply::bash("cat temp/task-03-status", ONE),
        Reply::bash(inbox, ONE),
        Reply::bash("sleep 1", ONE),
    ];
    let mut calls: Vec<Reply> = (0..3).flat_map(|_| cycle.clone()).collect();
    calls.push(Reply::relay(ONE));
    let server = ModelServer::start(vec![
        (
            "CON-7I",
            vec![
                Reply::tool("Agent", agent(INBOX_AND_LOG, false), ONE),
                Reply::text("done", ONE),
            ],
        ),
        ("INB-2C", calls),
    ]);
    end(rig.start("/conductor CON-7I", &server, &poller_tools_with(&[])));
    let said = stops(&server);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("conductor watch"), "{}", said[0]);
    let seen = m.wait_json("the stop", |v| event(v) == "poller_replaced");
    assert_eq!(seen["role"], "conductor-watcher", "{seen}");
    assert_eq!(usage_roles(&rig), ["conductor-watcher"]);
}

const HELPER_POLLER: &str =
    "HS-4P: Check my inbox with the helper every few seconds until something new comes.";
const FLAKY_TEST: &str = "FT-5T: Run the flaky state test until it passes, four runs at most.";

/// A Musician's two subagents: one polls its inbox through a helper script that prints
/// only `new messages: 0` (stopped by its third look: the script's source names
/// comms.db), the other runs a flaky test four times whose failure prints rows-like
/// text (runs to its end: a test's output is no look at the orchestration).
#[test]
fn a_helper_script_poller_is_stopped_and_a_flaky_test_printing_rows_runs() {
    let name = "a_helper_script_poller_is_stopped_and_a_flaky_test_printing_rows_runs";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    std::fs::write(
        rig.root().join("check_inbox.py"),
        "import sqlite3\nc = sqlite3.connect('comms.db')\nn = c.execute(\"select count(*) from orchestration_messages where task_id = 'task-03' and id > 999\").fetchone()[0]\nprint(f'new messages: {n}')\n",
    )
    .unwrap();
    std::fs::write(
        rig.root().join("flaky_test.py"),
        "print(\"AssertionError: [('task-03', 'working')] != [('task-03', 'complete')]\")\n",
    )
    .unwrap();
    let look = |command: &str, times: usize| {
        let mut calls = Vec::new();
        for i in 0..times {
            if i > 0 {
                calls.push(Reply::bash("sleep 1", ONE));
            }
            calls.push(Reply::bash(command, ONE));
        }
        calls.push(Reply::relay(ONE));
        calls
    };
    let server = ModelServer::start(vec![
        (
            "MUS-4H",
            vec![
                Reply::tool("Agent", agent(FLAKY_TEST, false), ONE),
                Reply::tool("Agent", agent(HELPER_POLLER, false), ONE),
                Reply::text("done", ONE),
            ],
        ),
        ("FT-5T", look("python3 flaky_test.py", 4)),
        ("HS-4P", look("python3 check_inbox.py", 3)),
    ]);
    let tools = poller_tools_with(&["Bash(python3:*)"]);
    end(rig.start("/musician task-03 MUS-4H", &server, &tools));
    let said = refusals(&server);
    assert_eq!(
        said.len(),
        1,
        "only the helper's third look refused: {said:?}"
    );
    assert!(
        said[0].contains("maestro stopped this subagent"),
        "{said:?}"
    );
    assert!(said[0].contains("musician watch"), "{said:?}");
    let ran = super::replace_pollers::tool_results(&server, false);
    assert!(ran.iter().any(|r| r.contains("AssertionError")), "{ran:?}");
    assert!(ran.iter().any(|r| r.contains("new messages: 0")), "{ran:?}");
    // `maestro usage` bills the helper's poller as one, and the flaky test as none.
    assert_eq!(usage_roles(&rig), ["musician-watcher"]);
}
