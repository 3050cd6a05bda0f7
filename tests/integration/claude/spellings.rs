//! Pollers in the spellings a review tried, run by the real Claude Code (2.1.328) with
//! the scripted model, each a subagent: in a Musician's session over comms.db, and in
//! the Conductor's over the logs while a maestro reports (the Sentinel's duty). Each is
//! stopped within three cycles, whatever spells its wait or its read (`watch -n` fails
//! at once without a terminal, as it does in Claude Code's Bash tool: the loop is the
//! same). Not here: `ps -p`, a Souffleur's watcher's read, whose launch is refused by
//! its verbatim prompt before it can loop.

use serde_json::{Value, json};

use super::replace_pollers::{ONE, Rig, agent, finish, three_cycles};
use super::{ModelServer, Reply};

/// Three cycles of `calls`, then the subagent's last word.
fn cycle(calls: &[Reply]) -> Vec<Reply> {
    three_cycles(calls, Reply::relay(ONE))
}

fn bash(command: &str) -> Reply {
    Reply::bash(command, ONE)
}

/// Runs `pollers` as subagents of sessions started with `prompt`, four to a session (a
/// session ends within the tests' deadline); each one's own transcript must hold its stop.
fn each_is_stopped(rig: &Rig, prompt: &str, pollers: &[(&str, Vec<Reply>)], extra: &[&str]) {
    for four in pollers.chunks(4) {
        four_are_stopped(rig, prompt, four, extra);
    }
    // `maestro usage` reads the transcripts by the same rule: each one a poller.
    let usage = rig.rig.usage();
    let sessions = usage["sessions"].as_array().expect("sessions");
    let found: usize = sessions
        .iter()
        .map(|s| s["pollers"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(found, pollers.len(), "{usage}");
}

fn four_are_stopped(rig: &Rig, prompt: &str, pollers: &[(&str, Vec<Reply>)], extra: &[&str]) {
    let marker = prompt.rsplit(' ').next().unwrap();
    let mut main: Vec<Reply> = pollers
        .iter()
        .map(|(m, _)| {
            Reply::tool(
                "Agent",
                agent(&format!("{m}: keep an eye on things"), false),
                ONE,
            )
        })
        .collect();
    main.push(Reply::text("done", ONE));
    let mut script = vec![(marker, main)];
    script.extend(pollers.iter().map(|(m, r)| (*m, r.clone())));
    let server = ModelServer::start(script);
    let mut tools = vec![
        "--allowedTools",
        "Bash",
        "Read",
        "Grep",
        "Glob",
        "mcp__sqlite__query",
    ];
    tools.extend(extra);
    let (code, out) = finish(rig.start(prompt, &server, &tools));
    assert_eq!(code, 0, "{out}");
    // Each transcript read once.
    let texts: Vec<String> = rig
        .subagent_files()
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .collect();
    let mut unstopped = Vec::new();
    for (m, _) in pollers {
        let stopped = texts
            .iter()
            .find(|t| t.contains(&format!("{m}: keep an eye")))
            .is_some_and(|t| t.contains("stopped this subagent"));
        if !stopped {
            unstopped.push(*m);
        }
    }
    assert!(unstopped.is_empty(), "not stopped: {unstopped:?}");
}

#[test]
fn a_musicians_pollers_in_any_spelling_are_stopped() {
    let name = "a_musicians_pollers_in_any_spelling_are_stopped";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    super::replace_pollers::conn(rig.root())
        .execute(
            "UPDATE orchestration_tasks SET last_heartbeat = datetime('now')",
            [],
        )
        .unwrap();
    std::fs::write(
        rig.root().join("check_msgs.sh"),
        "sqlite3 comms.db \"SELECT task_id, state FROM orchestration_tasks\"\n",
    )
    .unwrap();
    let read = || bash("sqlite3 comms.db 'select state from orchestration_tasks'");
    let out = rig.root().join("poll.out");
    let stand_in = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/comms-link/server.js");
    let mcp = json!({"mcpServers": {"sqlite": {"command": "node",
        "args": [stand_in, rig.root().join("comms.db")]}}});
    let pollers: Vec<(&str, Vec<Reply>)> = vec![
        ("SP-1B", cycle(&[bash("/bin/sleep 1"), bash("sqlite3 comms.db 'SELECT STATE FROM ORCHESTRATION_TASKS'")])),
        ("SP-2H", cycle(&[bash("sleep 1; sh check_msgs.sh")])),
        ("SP-3N", cycle(&[bash("sqlite3 comms.db \"SELECT id FROM orchestration_messages WHERE task_id = 'task-03'\"")])),
        ("SP-4T", cycle(&[bash("T=1; sleep $T"), read()])),
        ("SP-5Q", cycle(&[bash("sleep \"1\""), read()])),
        ("SP-6P", cycle(&[bash("python3 -c 'import time; time.sleep(1)'"), read()])),
        ("SP-7L", cycle(&[bash("perl -e 'sleep 1'"), read()])),
        ("SP-8N", cycle(&[bash("node -e 'setTimeout(() => {}, 1000)'"), read()])),
        ("SP-9R", cycle(&[bash("bash -c 'read -t 1 < <(sleep 2)'; true"), read()])),
        ("SP-10C", cycle(&[bash("sleep 1"), bash("cp comms.db copy.db && sqlite3 copy.db 'select task_id, state from orchestration_tasks'")])),
        ("SP-11W", cycle(&[bash("sleep 1"), bash("echo a"), bash("echo b"), bash("pwd"), read()])),
        (
            "SP-12G",
            [
                bash(&format!("sqlite3 comms.db 'select task_id, state from orchestration_tasks' > {}", out.display())),
                Reply::tool(
                "Bash",
                json!({"command": format!("for i in 1 2 3 4 5 6 7 8; do sqlite3 comms.db 'select task_id, state from orchestration_tasks' > {}; sleep 0.5; done", out.display()), "run_in_background": true}),
                ONE,
            )]
            .into_iter()
            .chain(cycle(&[bash("sleep 1"), bash(&format!("cat {}", out.display()))]))
            .collect(),
        ),
        ("SP-14P", cycle(&[bash("ping -c 2 -i 0.5 127.0.0.1 > /dev/null; true"), read()])),
        ("SP-15V", cycle(&[bash("timeout 2 watch -n 1 -t true > /dev/null 2>&1; true"), read()])),
        ("SP-13M", cycle(&[bash("sleep 1"), Reply::tool("mcp__sqlite__query", json!({"sql": "select task_id, state from orchestration_tasks"}), ONE)])),
        // A heartbeat's age, computed by the poller from the clock: new each cycle.
        ("SP-16A", cycle(&[bash("sleep 1"), bash("sqlite3 comms.db \"SELECT task_id, CAST((julianday('now') - julianday(last_heartbeat)) * 86400000 AS INTEGER) FROM orchestration_tasks\"")])),
        // The same row appended to a file and the file read back whole: longer each cycle.
        ("SP-17G", cycle(&[bash("sleep 1"), bash("sqlite3 comms.db 'select task_id, state from orchestration_tasks' >> grow.log; cat grow.log")])),
        // A backoff: each wait longer than the last.
        ("SP-18B", [bash("sleep 1"), read(), bash("sleep 2"), read(), bash("sleep 3"), read(), Reply::relay(ONE)].into_iter().collect()),
    ];
    let config = mcp.to_string();
    each_is_stopped(
        &rig,
        "/musician task-03 MUS-9S",
        &pollers,
        &["--mcp-config", &config],
    );
}

#[test]
fn the_conductors_reads_of_the_logs_in_any_spelling_are_stopped_while_a_maestro_reports() {
    let name =
        "the_conductors_reads_of_the_logs_in_any_spelling_are_stopped_while_a_maestro_reports";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    std::fs::write(rig.root().join("temp/task-03-status"), "step 1 started\n").unwrap();
    let _reporting = rig.watch(&["--report-to-db"]);
    let read_tool = |tool: &str, input: Value| Reply::tool(tool, input, ONE);
    let pollers: Vec<(&str, Vec<Reply>)> = vec![
        (
            "CL-1D",
            cycle(&[bash("sleep 1"), bash("cd temp && tail -n 5 task-03-status")]),
        ),
        ("CL-2L", cycle(&[bash("sleep 1"), bash("ls temp")])),
        (
            "CL-3Q",
            cycle(&[bash("sleep 1"), bash("tail \"temp/task-03-status\"")]),
        ),
        (
            "CL-4R",
            cycle(&[
                bash("sleep 1"),
                read_tool("Read", json!({"file_path": "./temp/task-03-status"})),
            ]),
        ),
        (
            "CL-5G",
            cycle(&[
                bash("sleep 1"),
                read_tool("Grep", json!({"pattern": "step", "path": "temp"})),
            ]),
        ),
        (
            "CL-6B",
            cycle(&[
                bash("sleep 1"),
                read_tool("Glob", json!({"pattern": "temp/*"})),
            ]),
        ),
        (
            "CL-7T",
            cycle(&[bash("timeout 1 tail -f temp/task-03-status; true")]),
        ),
    ];
    each_is_stopped(&rig, "/conductor CON-5L", &pollers, &[]);
}
