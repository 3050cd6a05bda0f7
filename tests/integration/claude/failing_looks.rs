//! A poller whose look fails each time (`grep -q … && echo READY` on a log without the
//! word yet): Claude Code reports such a call with `PostToolUseFailure`, not
//! `PostToolUse`, and the guard counts it as a look all the same: stopped by its third.

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
