//! The LLM pollers, through the real program: a Conductor that launches the Sentinel
//! protocol's prompt as a subagent, and an ordinary subagent beside it; a Musician that
//! launches a watcher, and ordinary subagents that speak of heartbeats and polling.
//! `maestro usage` names as pollers the subagents whose calls looped (the same look, the
//! same result, time passing), token for token as their files bill them; never one for
//! its prompt's words.

use serde_json::{Value, json};

use super::{ModelServer, Reply, Usage};

const PARENT: Usage = Usage {
    input: 900,
    output: 30,
    cache_write: 400,
    cache_read: 2000,
};
const POLLER: Usage = Usage {
    input: 300,
    output: 11,
    cache_write: 50,
    cache_read: 700,
};
const ORDINARY: Usage = Usage {
    input: 120,
    output: 5,
    cache_write: 0,
    cache_read: 0,
};

/// The Sentinel protocol's launch prompt, its task list filled in (with the script's
/// marker, so the model server knows the subagent).
const SENTINEL_PROMPT: &str = "You are the Sentinel — a monitoring teammate watching Musicians' progress logs for anomalies.\n\n**Active tasks to monitor:** task-01, task-02 (SENT-5X)\n\n**Your job:** Read the following files every ~10 seconds:\n- `temp/task-{NN}-status` for each active task\n- `temp/task-{NN}-deviations` for each active task\n\nContinue until I message you to shut down";

/// A subagent's loop as a model runs it: `calls` three times over, then `last` (each
/// response billed `usage`).
fn looping(calls: &[&str], last: &str, usage: Usage) -> Vec<Reply> {
    let calls: Vec<Reply> = calls.iter().map(|c| Reply::bash(c, usage)).collect();
    super::replace_pollers::three_cycles(&calls, Reply::text(last, usage))
}

/// What the poller subagents may run in print mode.
const LOOP_TOOLS: &[&str] = &[
    "--allowedTools",
    "Bash(sleep:*)",
    "Bash(cat:*)",
    "Bash(sqlite3:*)",
];

fn agent(description: &str, prompt: &str) -> Value {
    json!({"description": description, "prompt": prompt, "subagent_type": "general-purpose"})
}

/// The subagent files the real program wrote, with their usage summed from their lines.
fn run(task: &str, prompt: &str, script: Vec<(&str, Vec<Reply>)>) -> (super::Rig, Value) {
    let claude = super::claude_or_skip("pollers").expect("checked by the caller");
    let rig = super::Rig::new(task);
    let server = ModelServer::start(script);
    let out = super::print(
        &claude,
        rig.home.path(),
        &server,
        &rig.root,
        prompt,
        LOOP_TOOLS,
    );
    crate::common::assert_success(&out);
    let usage = rig.usage();
    (rig, usage)
}

#[test]
fn a_sentinel_launched_as_a_subagent_is_a_poller_and_an_ordinary_one_is_not() {
    if super::claude_or_skip("a_sentinel_launched_as_a_subagent_is_a_poller").is_none() {
        return;
    }
    let (rig, usage) = run(
        "task-00",
        "/conductor PARENT-S1",
        vec![
            (
                "PARENT-S1",
                vec![
                    Reply::tool("Agent", agent("sentinel", SENTINEL_PROMPT), PARENT),
                    Reply::tool(
                        "Agent",
                        agent("look around", "SUB-9Z: list the files"),
                        PARENT,
                    ),
                    Reply::text("both done", PARENT),
                ],
            ),
            (
                "SENT-5X",
                looping(
                    &["cat temp/task-01-status", "sleep 1"],
                    "no anomalies",
                    POLLER,
                ),
            ),
            ("SUB-9Z", vec![Reply::text("three files", ORDINARY)]),
        ],
    );
    let row = &usage["sessions"][0];
    assert_eq!(row["task_id"], "task-00", "{usage}");
    let pollers = row["pollers"].as_array().expect("pollers");
    assert_eq!(
        pollers.len(),
        1,
        "the ordinary subagent is no poller: {row}"
    );
    let p = &pollers[0];
    assert_eq!(p["role"], "sentinel");
    // Seven responses: three cycles of two calls, and its last word.
    assert_eq!(
        p["total_tokens"],
        7 * POLLER.total(),
        "token for token: {p}"
    );
    assert_eq!(p["input_tokens"], 7 * POLLER.input);
    assert_eq!(p["output_tokens"], 7 * POLLER.output);
    assert_eq!(p["cache_write_tokens"], 7 * POLLER.cache_write);
    assert_eq!(p["cache_read_tokens"], 7 * POLLER.cache_read);
    assert!(p["agent"].is_string() && p["cost_usd"].is_f64(), "{p}");
    let total = &usage["total"]["pollers"];
    assert_eq!(total["count"], 1, "{usage}");
    assert_eq!(total["total_tokens"], 7 * POLLER.total());
    // The session's bill still holds all three.
    assert_eq!(
        row["total_tokens"],
        3 * PARENT.total() + 7 * POLLER.total() + ORDINARY.total(),
        "{row}"
    );

    // Beside maestro's Sentinel reporting to the database, doctor names the session.
    let config = rig.root.join("report-to-db.toml");
    std::fs::write(&config, "[sentinel]\nreport_to_db = true\n").unwrap();
    let out = crate::common::maestro()
        .env("HOME", rig.home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["doctor", "--json", "--config"])
        .arg(&config)
        .arg("--project")
        .arg(&rig.root)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let session = row["session_id"].as_str().unwrap();
    let warned = report["checks"].as_array().unwrap().iter().any(|c| {
        c["check"] == "pollers"
            && c["level"] == "warning"
            && c["detail"].as_str().is_some_and(|d| {
                d.contains(session) && d.contains("LLM Sentinel") && d.contains("twice")
            })
    });
    assert!(warned, "{report}");
}

#[test]
fn a_musicians_watcher_is_a_poller_and_its_ordinary_subagents_are_not() {
    if super::claude_or_skip("a_musicians_watcher_is_a_poller").is_none() {
        return;
    }
    let watcher = "Background watcher for task-01 (WATCH-3Q): every 15 seconds query orchestration_messages for messages to task-01 with id > 0, and refresh the task's last_heartbeat when it is older than 60 seconds. Exit as soon as a new message is found.";
    // Ordinary work that speaks of heartbeats and polling: its calls never loop.
    let talker = "HB-2T: explain how our heartbeat polling works: poll every 15 seconds, refresh the heartbeat, check orchestration_messages for new messages";
    let read = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-01' AND id > 0\"";
    let (_rig, usage) = run(
        "task-01",
        "/musician task-01 MUS-2W",
        vec![
            (
                "MUS-2W",
                vec![
                    Reply::tool("Agent", agent("explain", talker), PARENT),
                    Reply::tool("Agent", agent("watcher", watcher), PARENT),
                    Reply::text("watching", PARENT),
                ],
            ),
            (
                "HB-2T",
                vec![
                    Reply::bash("cat README.md", ORDINARY),
                    Reply::bash("sleep 1", ORDINARY),
                    Reply::bash("sqlite3 comms.db .schema", ORDINARY),
                    Reply::text("it polls every 15 s and refreshes the heartbeat", ORDINARY),
                ],
            ),
            (
                "WATCH-3Q",
                looping(&["sleep 1", read], "message 7 arrived", POLLER),
            ),
        ],
    );
    let pollers = usage["sessions"][0]["pollers"]
        .as_array()
        .expect("pollers")
        .clone();
    assert_eq!(pollers.len(), 1, "only the one that looped: {usage}");
    assert_eq!(pollers[0]["role"], "musician-watcher");
    assert_eq!(pollers[0]["total_tokens"], 7 * POLLER.total());
}
