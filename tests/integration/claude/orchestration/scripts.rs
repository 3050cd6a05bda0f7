//! The scripted Musicians: what each session's model asks its Bash tool to run.

use super::super::{Reply, Usage};

pub(super) const ONE: Usage = Usage {
    input: 60,
    output: 6,
    cache_write: 0,
    cache_read: 0,
};
pub(super) const TASKS: [&str; 3] = ["task-01", "task-02", "task-03"];

/// A write as a Musician makes it: `sqlite3`, waiting its turn for the database's lock
/// (five sessions and maestro write it at once).
pub(super) fn sql(statement: &str) -> String {
    format!("sqlite3 -cmd '.timeout 5000' comms.db \"{statement}\"")
}

pub(super) fn set_state(task: &str, state: &str) -> String {
    sql(&format!(
        "update orchestration_tasks SET state = '{state}', last_heartbeat = datetime('now') WHERE task_id = '{task}'"
    ))
}

pub(super) fn ask_review(task: &str, what: &str) -> String {
    sql(&format!(
        "update orchestration_tasks SET state = 'needs_review', last_heartbeat = datetime('now') WHERE task_id = '{task}'; insert into orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-00', '{task}', '{what} of {task} ready', 'review_request')"
    ))
}

pub(super) fn fail(task: &str, why: &str) -> String {
    sql(&format!(
        "update orchestration_tasks SET state = 'error', last_error = '{why}', last_heartbeat = datetime('now') WHERE task_id = '{task}'"
    ))
}

pub(super) fn log(task: &str, line: &str) -> String {
    format!("echo '{line}' >> temp/{task}-status")
}

/// What befalls a Musician in the run (each task one, drawn from the seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Killed in a long step after its checkpoint, while working.
    Dies,
    /// Hits the same error twice before its checkpoint (each answered by a fix).
    Errs,
    /// Asks for a context handoff after its checkpoint and waits to be replaced.
    HandsOff,
}

/// A Musician's whole life: work, checkpoint review, work, final review, complete, with
/// what befalls it on the way.
pub(super) fn musician(task: &str, fate: Fate) -> Vec<Reply> {
    let mut calls = vec![
        set_state(task, "working"),
        log(task, "step 1 started [ctx: 10%]"),
    ];
    if fate == Fate::Errs {
        for _ in 0..2 {
            calls.extend([
                fail(task, "tests fail"),
                format!("maestro musician watch {task} --pause"),
                set_state(task, "working"),
            ]);
        }
    }
    calls.extend([
        ask_review(task, "checkpoint"),
        format!("maestro musician watch {task} --pause"),
        set_state(task, "working"),
        log(task, "step 2 started [ctx: 20%]"),
    ]);
    // A long step (Claude Code refuses a standalone `sleep 300`).
    let long_step = || "timeout 300 tail -f /dev/null || true".to_owned();
    match fate {
        Fate::Dies => calls.push(long_step()),
        Fate::HandsOff => calls.extend([
            log(task, "context at 70%, preparing handoff [ctx: 70%]"),
            fail(task, "context_exhaustion_warning"),
            long_step(),
        ]),
        Fate::Errs => {}
    }
    calls.extend([
        ask_review(task, "final review"),
        format!("maestro musician watch {task} --pause"),
        set_state(task, "complete"),
    ]);
    session_of(&calls)
}

/// A session that runs `calls` in turn, then says it is done.
pub(super) fn session_of(calls: &[String]) -> Vec<Reply> {
    let mut replies: Vec<Reply> = calls.iter().map(|c| Reply::bash(c, ONE)).collect();
    replies.push(Reply::text("done", ONE));
    replies
}

/// The relaunched Musician: it picks up from the handoff and finishes.
pub(super) fn relaunched(task: &str) -> Vec<Reply> {
    let calls = [
        set_state(task, "working"),
        log(task, "step 3 started [ctx: 5%]"),
        ask_review(task, "final review"),
        format!("maestro musician watch {task} --pause"),
        set_state(task, "complete"),
    ];
    session_of(&calls)
}
