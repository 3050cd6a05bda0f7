//! The guard's cases of this round, with the real Claude Code: a poller whose look fails
//! each time (`grep -q … && echo READY` on a log without the word yet: Claude Code reports
//! such a call with `PostToolUseFailure`, not `PostToolUse`) is stopped by its third look
//! all the same; a Conductor's poller over a status log and its inbox is given
//! `conductor watch`.

use super::guard::{end, poller_tools_with};
use super::replace_pollers::{ONE, Rig, agent, refusals};
use super::{ModelServer, Reply};
use crate::common::event;

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
    let said: Vec<String> = refusals(&server)
        .into_iter()
        .filter(|r| r.contains("maestro stopped this subagent"))
        .collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("conductor watch"), "{}", said[0]);
    let seen = m.wait_json("the stop", |v| event(v) == "poller_replaced");
    assert_eq!(seen["role"], "conductor-watcher", "{seen}");
}
