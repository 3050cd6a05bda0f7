//! The poller guard with the real Claude Code: a subagent is judged by its calls and by
//! who launched it. Ordinary work in a Musician's session runs, whatever it talks about;
//! pollers in other words and other languages (over `sqlite3`, the comms-link MCP tool,
//! `temp/`) are stopped at their third look, and the command maestro names instead runs
//! in the caller's session without a permission prompt and takes the duty.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use super::replace_pollers::{
    ONE, Rig, agent, command_in, conn, heartbeat_age_s, refusals, tool_results, wait_until,
};
use super::{ModelServer, Reply};
use crate::common::event;

/// What the poller's own calls need to run in the default permission mode (the named
/// maestro command is not among them: the guard's `allow` is what lets it run).
const POLLER_TOOLS: &[&str] = &[
    "--allowedTools",
    "Bash(sleep:*)",
    "Bash(sqlite3:*)",
    "Bash(cat:*)",
    "Bash(ls:*)",
    "Bash(echo:*)",
    "Read",
    "mcp__comms-link__query",
    "mcp__comms-link__execute",
];

const COUNT: &str =
    "sleep 1; sqlite3 -cmd '.timeout 5000' comms.db 'select count(*) from orchestration_messages'";
const HEARTBEAT: &str = "sqlite3 -cmd '.timeout 5000' comms.db \"update orchestration_tasks SET last_heartbeat = datetime('now') WHERE task_id = 'task-03'\"";

/// A French watcher over `sqlite3`: no English word of the skills in it.
const FRENCH_WATCHER: &str = "FR-7W: Surveille la base toutes les quelques secondes : attends, lis les nouveaux messages du chef d'orchestre pour cette tâche, rafraîchis notre battement de cœur, recommence.";
/// A watcher in plain words over the comms-link MCP server.
const PLAIN_WATCHER: &str = "MCP-4L: Keep an eye on things for me: look at what the lead wrote to us, take a short break, and look again, until something new shows up.";
/// The Sentinel in Spanish, over `temp/`.
const SPANISH_SENTINEL: &str = "ES-5S: Eres el centinela: lee los registros de progreso de los músicos cada pocos segundos y avísame de cualquier problema.";

/// The French watcher's calls: wait and read, three times over; the third read (the same
/// look, nothing new, time passing) is refused, then it hands on what it was told.
fn french_watcher_calls() -> Vec<Reply> {
    let read = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-03'\"";
    super::replace_pollers::three_cycles(
        &[Reply::bash("sleep 1", ONE), Reply::bash(read, ONE)],
        Reply::relay(ONE),
    )
}

/// [`POLLER_TOOLS`] and `more`.
pub(super) fn poller_tools_with(more: &[&'static str]) -> Vec<&'static str> {
    POLLER_TOOLS.iter().chain(more).copied().collect()
}

/// The session's end, within the deadline: its stdout.
pub(super) fn end(child: Child) -> String {
    let (code, out) = super::replace_pollers::finish(child);
    assert_eq!(code, 0, "{out}");
    out
}

fn stale(db: &rusqlite::Connection, task: &str) {
    db.execute(
        "UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-10 minutes') WHERE task_id = ?1",
        [task],
    )
    .unwrap();
}

fn insert_message(db: &rusqlite::Connection, text: &str) {
    db.execute(
        "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-03', 'task-00', ?1, 'instruction')",
        [text],
    )
    .unwrap();
}

#[test]
fn a_french_watcher_is_stopped_by_its_third_call_and_the_named_command_takes_its_duty() {
    let name = "a_french_watcher_is_stopped_by_its_third_call_and_the_named_command_takes_its_duty";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let port = crate::metrics::free_port();
    let mut m = rig.watch(&["--metrics", &port.to_string()]);
    let db = conn(rig.root());
    stale(&db, "task-03");
    let server = ModelServer::start(vec![
        (
            "MUS-8F",
            vec![
                Reply::tool("Agent", agent(FRENCH_WATCHER, false), ONE),
                Reply::text("waiting for the watcher", ONE),
                Reply::run_named(ONE),
                Reply::text("done", ONE),
            ],
        ),
        ("FR-7W", french_watcher_calls()),
    ]);
    // The default permission mode: the named command has no rule of its own.
    let session = rig.start("/musician task-03 MUS-8F", &server, POLLER_TOOLS);
    wait_until("the named command refreshes the heartbeat", || {
        heartbeat_age_s(&db, "task-03") < 30.0
    });
    insert_message(&db, "rebase on main (MSG-9)");
    end(session);

    let said = refusals(&server);
    assert_eq!(said.len(), 1, "one refusal, at the third look: {said:?}");
    let command = command_in(&said[0]);
    assert!(command.contains("musician watch task-03"), "{command}");
    assert!(said[0].contains("switches it off"), "{}", said[0]);
    // Its first two cycles ran; the third look was refused.
    let ran = tool_results(&server, false);
    assert!(
        ran.iter().any(|r| r.contains("MSG-9")),
        "the named command ran and printed the message: {ran:?}"
    );
    let seen = m.wait_json("the stop", |v| event(v) == "poller_replaced");
    assert_eq!(seen["role"], "musician-watcher", "{seen}");
    assert_eq!(seen["at"], "loop", "{seen}");
    assert_eq!(seen["task_id"], "task-03");
    crate::metrics::scrape_until(port, "the count", |s| {
        crate::metrics::value(
            s,
            "maestro_pollers_replaced_total",
            &[("role", "musician-watcher")],
        ) == Some(1.0)
    });
}

#[test]
fn a_plain_words_watcher_over_the_comms_link_mcp_tool_is_stopped() {
    let name = "a_plain_words_watcher_over_the_comms_link_mcp_tool_is_stopped";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    if Command::new("node").arg("--version").output().is_err() {
        eprintln!(
            "skipped {name}: node is not installed (it comes with npm, which installs claude)"
        );
        return;
    }
    let rig = Rig::new("task-03", true);
    let db = conn(rig.root());
    stale(&db, "task-03");
    let stand_in =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/comms-link/server.js");
    let mcp = json!({"mcpServers": {"comms-link": {"command": "node",
        "args": [stand_in, rig.root().join("comms.db")]}}});
    let query = |sql: &str| Reply::tool("mcp__comms-link__query", json!({ "sql": sql }), ONE);
    let server = ModelServer::start(vec![
        (
            "MUS-2M",
            vec![
                Reply::tool("Agent", agent(PLAIN_WATCHER, false), ONE),
                Reply::text("waiting for the watcher", ONE),
                Reply::run_named(ONE),
                Reply::text("done", ONE),
            ],
        ),
        (
            "MCP-4L",
            vec![
                query("SELECT id, message FROM orchestration_messages WHERE task_id = 'task-03'"),
                Reply::bash("sleep 1", ONE),
                query("SELECT id, message FROM orchestration_messages WHERE task_id = 'task-03'"),
                Reply::bash("sleep 1", ONE),
                query("SELECT id, message FROM orchestration_messages WHERE task_id = 'task-03'"),
                Reply::relay(ONE),
            ],
        ),
    ]);
    let mut extra = vec!["--mcp-config".to_owned(), mcp.to_string()];
    extra.extend(POLLER_TOOLS.iter().map(|s| (*s).to_owned()));
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let session = rig.start("/musician task-03 MUS-2M", &server, &extra);
    wait_until("the named command refreshes the heartbeat", || {
        heartbeat_age_s(&db, "task-03") < 30.0
    });
    insert_message(&db, "ship it (MSG-4)");
    end(session);
    let said = refusals(&server);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        command_in(&said[0]).contains("musician watch task-03"),
        "{}",
        said[0]
    );
    // The first query ran through the stand-in: the MCP tool was really called.
    let ran = tool_results(&server, false);
    assert!(ran.iter().any(|r| r.contains("MSG-4")), "{ran:?}");
}

/// The Spanish Sentinel's calls over `temp/`: read, wait, read, wait, read, then its end.
fn spanish_sentinel_calls() -> Vec<Reply> {
    vec![
        Reply::bash("cat temp/task-03-status", ONE),
        Reply::bash("sleep 1", ONE),
        Reply::bash("cat temp/task-03-status", ONE),
        Reply::bash("sleep 1", ONE),
        Reply::bash("cat temp/task-03-status", ONE),
        Reply::relay(ONE),
    ]
}

#[test]
fn a_spanish_sentinel_runs_its_loop_unless_a_maestro_reports_and_then_is_stopped() {
    let name = "a_spanish_sentinel_runs_its_loop_unless_a_maestro_reports_and_then_is_stopped";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    std::fs::write(rig.root().join("temp/task-03-status"), "step 1 started\n").unwrap();
    let script = |marker: &'static str| {
        vec![
            (
                marker,
                vec![
                    Reply::tool("Agent", agent(SPANISH_SENTINEL, false), ONE),
                    Reply::text("done", ONE),
                ],
            ),
            ("ES-5S", spanish_sentinel_calls()),
        ]
    };
    // No maestro reports: its duty would be undone, so its whole loop runs.
    let server = ModelServer::start(script("CON-1E"));
    end(rig.start("/conductor CON-1E", &server, POLLER_TOOLS));
    assert!(refusals(&server).is_empty(), "{:?}", refusals(&server));

    // One reports: stopped at its third look, nothing to run instead.
    let mut m = rig.watch(&["--report-to-db"]);
    let server = ModelServer::start(script("CON-2E"));
    end(rig.start("/conductor CON-2E", &server, POLLER_TOOLS));
    let said = refusals(&server);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("report"), "{}", said[0]);
    let seen = m.wait_json("the stop", |v| event(v) == "poller_replaced");
    assert_eq!(seen["role"], "sentinel", "{seen}");
    assert_eq!(seen["at"], "loop", "{seen}");
    assert!(seen["command"].is_null(), "{seen}");
}

#[test]
fn ordinary_work_in_a_musicians_session_runs_and_its_watcher_is_untouched() {
    let name = "ordinary_work_in_a_musicians_session_runs_and_its_watcher_is_untouched";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let db = conn(rig.root());
    db.execute(
        "INSERT OR IGNORE INTO orchestration_tasks (task_id, state) VALUES ('souffleur', 'working')",
        [],
    )
    .unwrap();
    stale(&db, "souffleur");
    // The task's real watcher, running.
    let mut watcher = {
        let mut c = crate::common::maestro();
        c.env("XDG_DATA_HOME", rig.data.path())
            .args(["musician", "watch", "task-03", "--project"])
            .arg(rig.root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let souffleur_prompt = "Poll the Conductor's liveness every ~60 seconds using comms-link.\n\nConductor PID: 4242\nConductor session ID: 0d6f3c2a-5b7e-4c1d-9a8f-3e2b1c0d9f4a\nAwaiting session ID: false\nWatcher mode: normal";
    let ordinary: Vec<(String, Vec<Reply>)> = vec![
        (
            "ORD-1: Review the watcher code in src/watch.rs and find race conditions in how it polls the heartbeat.".into(),
            vec![Reply::tool("Read", json!({"file_path": rig.root().join("README.md")}), ONE), Reply::text("no races", ONE)],
        ),
        (
            "ORD-2: Fix the bug where the heartbeat isn't refreshed when polling the messages table every 15 seconds.".into(),
            vec![Reply::bash("ls", ONE), Reply::bash("echo fixed", ONE), Reply::text("fixed", ONE)],
        ),
        (
            "ORD-3: Run the integration tests; the harness polls the server every 5 s.".into(),
            vec![Reply::bash("echo starting server", ONE), Reply::bash("sleep 1", ONE), Reply::bash("echo tests pass", ONE), Reply::bash("sleep 1", ONE), Reply::bash("echo all green", ONE), Reply::text("green", ONE)],
        ),
        (
            "ORD-4: Traduis en français : « the watcher refreshes the heartbeat every 15 seconds and exits on a new message ».".into(),
            vec![Reply::text("le veilleur rafraîchit le battement toutes les 15 secondes", ONE)],
        ),
        (
            format!("ORD-5: Review this prompt of the Souffleur's watcher for mistakes:\n\n{souffleur_prompt}"),
            vec![Reply::bash("cat temp/task-03-status", ONE), Reply::text("looks right", ONE)],
        ),
        (
            "ORD-6: Rename the app's entry point, then check for new messages twice.".into(),
            vec![
                Reply::tool("Write", json!({"file_path": rig.root().join("src/app.rs"), "content": "fn main() {}\n"}), ONE),
                Reply::bash(COUNT, ONE),
                Reply::bash(COUNT, ONE),
                Reply::text("renamed", ONE),
            ],
        ),
        (
            "ORD-7: Wait for the release build, keeping our heartbeat fresh meanwhile.".into(),
            vec![
                Reply::bash("echo build started", ONE),
                Reply::bash("sleep 1", ONE),
                Reply::bash(HEARTBEAT, ONE),
                Reply::bash("sleep 1", ONE),
                Reply::bash(HEARTBEAT, ONE),
                Reply::bash("sleep 1", ONE),
                Reply::bash("echo build finished", ONE),
                Reply::text("built", ONE),
            ],
        ),
        (
            "ORD-8: Add an index to the messages table and check the plan uses it.".into(),
            vec![
                Reply::bash("sqlite3 -cmd '.timeout 5000' comms.db .schema", ONE),
                Reply::tool("Write", json!({"file_path": rig.root().join("migration.sql"), "content": "CREATE INDEX IF NOT EXISTS m_task ON orchestration_messages(task_id);\n"}), ONE),
                Reply::bash("sqlite3 -cmd '.timeout 5000' comms.db < migration.sql", ONE),
                Reply::bash("echo restarted && sleep 1", ONE),
                Reply::bash("sqlite3 -cmd '.timeout 5000' comms.db 'EXPLAIN QUERY PLAN SELECT * FROM orchestration_messages WHERE task_id = 1'", ONE),
                Reply::text("indexed", ONE),
            ],
        ),
        (
            "ORD-9: Review task-03's progress against CI.".into(),
            vec![
                Reply::bash("cat temp/task-03-status", ONE),
                Reply::bash("sleep 1 && echo ci-green", ONE),
                Reply::bash("cat temp/task-03-status", ONE),
                Reply::text("on track", ONE),
            ],
        ),
    ];
    std::fs::create_dir_all(rig.root().join("src")).unwrap();
    std::fs::write(rig.root().join("README.md"), "# project\n").unwrap();
    std::fs::write(rig.root().join("temp/task-03-status"), "step 1\n").unwrap();
    let mut main = Vec::new();
    let mut script: Vec<(&str, Vec<Reply>)> = Vec::new();
    for (prompt, calls) in &ordinary {
        main.push(Reply::tool("Agent", agent(prompt, false), ONE));
        script.push((&prompt[..5], calls.clone()));
    }
    main.push(Reply::text("done", ONE));
    script.insert(0, ("MUS-0O", main));
    let server = ModelServer::start(script);
    let mut tools = POLLER_TOOLS.to_vec();
    // A migration's redirections and a background job need Bash whole.
    tools.extend(["Write", "Bash"]);
    end(rig.start("/musician task-03 MUS-0O", &server, &tools));
    let denied: Vec<String> = server
        .requests()
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_use")
        .map(|b| b["input"].to_string())
        .collect();
    assert!(
        refusals(&server).is_empty(),
        "{:?} among {denied:?}",
        refusals(&server)
    );
    assert_eq!(rig.subagent_files().len(), ordinary.len(), "each ran");
    // The task's watcher still runs (not displaced), the Souffleur's heartbeat is old.
    assert!(
        watcher.try_wait().unwrap().is_none(),
        "the task's watcher ended"
    );
    assert!(heartbeat_age_s(&db, "souffleur") > 300.0);
    let _ = watcher.kill();
    let _ = watcher.wait();
}

#[test]
fn a_damaged_database_means_no_refusal() {
    let name = "a_damaged_database_means_no_refusal";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    std::fs::write(rig.root().join("comms.db"), b"this is not a database").unwrap();
    let server = ModelServer::start(vec![
        (
            "MUS-5D",
            vec![
                Reply::tool("Agent", agent(FRENCH_WATCHER, false), ONE),
                Reply::text("done", ONE),
            ],
        ),
        ("FR-7W", french_watcher_calls()),
    ]);
    end(rig.start("/musician task-03 MUS-5D", &server, POLLER_TOOLS));
    assert!(
        refusals(&server).iter().all(|r| !r.contains("maestro")),
        "{:?}",
        refusals(&server)
    );
}

/// A `maestro` on PATH that is another program (a usage error, exit 2): the plugin's
/// hooks block nothing.
#[test]
fn a_foreign_maestro_on_path_blocks_nothing_under_the_plugin() {
    let name = "a_foreign_maestro_on_path_blocks_nothing_under_the_plugin";
    let Some(claude) = super::claude_or_skip(name) else {
        return;
    };
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/claude-plugin");
    let rig = super::Rig::new("task-03");
    let bin = rig.root.join(".bin");
    std::fs::create_dir_all(&bin).unwrap();
    let foreign = bin.join("maestro");
    std::fs::write(
        &foreign,
        "#!/bin/sh\necho 'usage: maestro [score]' >&2\nexit 2\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &foreign,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let server = ModelServer::start(vec![
        (
            "FOR-1",
            vec![
                Reply::tool("Agent", agent("SUB-1: list the files", false), ONE),
                Reply::bash("echo ran-FOR", ONE),
                Reply::text("done", ONE),
            ],
        ),
        (
            "SUB-1",
            vec![Reply::bash("ls", ONE), Reply::text("two files", ONE)],
        ),
    ]);
    let mut cmd = super::claude_command(&claude, rig.home.path(), &server, &rig.root);
    cmd.env("PATH", &path)
        .args([
            "-p",
            "/musician task-03 FOR-1",
            "--model",
            "claude-sonnet-4-5",
            "--plugin-dir",
        ])
        .arg(&plugin)
        .args(POLLER_TOOLS);
    let out = cmd.output().unwrap();
    crate::common::assert_success(&out);
    let said = refusals(&server);
    assert!(said.is_empty(), "{said:?}");
    let ran: Vec<Value> = server.requests();
    assert!(
        ran.iter().any(|r| r.to_string().contains("ran-FOR")),
        "the Bash call ran"
    );
}
