//! Ordinary work the guard must let run, with the real Claude Code: a Conductor's
//! reviewer that checks its inbox between approvals it writes with `sqlite3` (each
//! approval is progress: the fourth check is no poll), and a subagent polling a
//! Musician's messages in a session whose prompt only speaks of `/musician task-03`
//! mid-sentence (no session is tied by a mention, so nothing names a Musician's watcher
//! there); and, the other way, `/conductor.` with a period after it is the Conductor's
//! launch. `maestro usage` ties and bills each session by the same rules.

use serde_json::Value;

use super::guard::{end, poller_tools_with};
use super::replace_pollers::{ONE, Rig, agent, refusals, stops};
use super::{ModelServer, Reply};

/// The pollers `maestro usage` finds in the rig's transcripts, the task of each session
/// it ties, and the tasks it found no session of.
fn usage_of(rig: &Rig) -> (usize, Vec<Value>, Vec<Value>) {
    let usage = rig.rig.usage();
    let sessions = usage["sessions"].as_array().cloned().unwrap_or_default();
    let pollers = sessions
        .iter()
        .map(|s| s["pollers"].as_array().map_or(0, Vec::len))
        .sum();
    let tasks = sessions.iter().map(|s| s["task_id"].clone()).collect();
    let missing = usage["missing"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["task_id"].clone())
        .collect();
    (pollers, tasks, missing)
}

const REVIEWER: &str =
    "REV-3A: Approve the three tasks waiting for review, checking my inbox before each approval.";

/// An inbox check (the same each time: nothing new arrives), then an approval written
/// the way the skill does it: the state moved and a message left, with `sqlite3`.
fn reviewer_calls() -> Vec<Reply> {
    let inbox = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-00' AND message_type = 'review_request'\"";
    let mut calls = Vec::new();
    for task in ["task-01", "task-02", "task-04"] {
        calls.push(Reply::bash(inbox, ONE));
        calls.push(Reply::bash(
            &format!(
                "sqlite3 comms.db \"UPDATE orchestration_tasks SET state = 'review_approved', last_heartbeat = datetime('now') WHERE task_id = '{task}' AND state = 'needs_review'; INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('{task}', 'task-00', 'Approved.', 'approval'); SELECT changes();\""
            ),
            ONE,
        ));
    }
    calls.push(Reply::bash(inbox, ONE));
    calls.push(Reply::text("all three approved", ONE));
    calls
}

#[test]
fn a_reviewer_approving_with_sqlite3_between_inbox_checks_runs_to_its_end() {
    let name = "a_reviewer_approving_with_sqlite3_between_inbox_checks_runs_to_its_end";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let db = rusqlite::Connection::open(rig.root().join("comms.db")).unwrap();
    for task in ["task-01", "task-02", "task-04"] {
        db.execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'needs_review', datetime('now'))",
            [task],
        )
        .unwrap();
    }
    let server = ModelServer::start(vec![
        (
            "CON-8R",
            vec![
                Reply::tool("Agent", agent(REVIEWER, false), ONE),
                Reply::text("done", ONE),
            ],
        ),
        ("REV-3A", reviewer_calls()),
    ]);
    end(rig.start("/conductor CON-8R", &server, &poller_tools_with(&[])));
    let said = refusals(&server);
    assert!(
        !said.iter().any(|r| r.contains("maestro")),
        "nothing refused: {said:?}"
    );
    let approved: i64 = db
        .query_row(
            "SELECT count(*) FROM orchestration_tasks WHERE state = 'review_approved'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(approved, 3, "the third approval was made");
    assert_eq!(usage_of(&rig).0, 0, "usage bills no poller");
}

const WATCHER: &str =
    "MW-6S: Keep checking task-03's messages from the Conductor until one arrives.";

#[test]
fn a_session_that_speaks_of_a_role_mid_sentence_is_tied_to_none() {
    let name = "a_session_that_speaks_of_a_role_mid_sentence_is_tied_to_none";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let look = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-03'\"";
    let mut calls: Vec<Reply> = (0..3)
        .flat_map(|_| [Reply::bash(look, ONE), Reply::bash("sleep 1", ONE)])
        .collect();
    calls.push(Reply::text("nothing yet", ONE));
    let server = ModelServer::start(vec![
        (
            "MEN-1X",
            vec![
                Reply::tool("Agent", agent(WATCHER, false), ONE),
                Reply::text("done", ONE),
            ],
        ),
        ("MW-6S", calls),
    ]);
    let prompt =
        "Explain what typing /musician task-03 would start, and keep an eye out meanwhile MEN-1X";
    end(rig.start(prompt, &server, &poller_tools_with(&[])));
    // A loop in a session of no role: seen, never stopped with a Musician's command.
    let said = refusals(&server);
    assert!(
        !said.iter().any(|r| r.contains("musician watch")),
        "no Musician's watcher named: {said:?}"
    );
    // `maestro usage` ties the session to no task either.
    let (_, tasks, missing) = usage_of(&rig);
    assert!(tasks.iter().all(|t| t != "task-03"), "{tasks:?}");
    assert!(missing.iter().any(|t| t == "task-03"), "{missing:?}");
}

const INBOX_WATCHER: &str = "INW-4P: Keep an eye on my inbox; tell me when something new comes.";

/// `/conductor.` (a period after the word) launches the Conductor: the session is the
/// Conductor's for the guard, which names `conductor watch` for its inbox poller, and for
/// `maestro usage`, which ties it to task-00 (one rule for both).
#[test]
fn a_conductor_prompt_with_a_period_is_the_conductors_for_both() {
    let name = "a_conductor_prompt_with_a_period_is_the_conductors_for_both";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let inbox = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-00'\"";
    let mut calls: Vec<Reply> = (0..3)
        .flat_map(|_| [Reply::bash(inbox, ONE), Reply::bash("sleep 1", ONE)])
        .collect();
    calls.push(Reply::relay(ONE));
    let server = ModelServer::start(vec![
        (
            "CP-5D",
            vec![
                Reply::tool("Agent", agent(INBOX_WATCHER, false), ONE),
                Reply::text("done", ONE),
            ],
        ),
        ("INW-4P", calls),
    ]);
    end(rig.start(
        "/conductor. Plan phase 2 CP-5D",
        &server,
        &poller_tools_with(&[]),
    ));
    let said = stops(&server);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("conductor watch"), "{}", said[0]);
    let (pollers, tasks, _) = usage_of(&rig);
    assert_eq!(pollers, 1);
    assert!(tasks.iter().any(|t| t == "task-00"), "{tasks:?}");
}
