//! `maestro hooks install --replace-pollers` with the real Claude Code: the skills'
//! verbatim poller launches from the sessions that hold their roles run no subagent; a
//! Musician's watcher is stopped in its loop and its prompt refused at its next launch;
//! the reason the model reads names the command to run instead, and that command, run
//! as written from the project in a shell with no terminal, does the poller's job.
//! Ordinary and near-miss subagents run and are not counted; without the flag nothing is
//! refused. (`guard.rs`: pollers in other words and languages.)

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{ModelServer, Reply, Usage};
use crate::common::{Running, event};

pub(super) const ONE: Usage = Usage {
    input: 100,
    output: 10,
    cache_write: 0,
    cache_read: 0,
};

/// The Musician's background watcher, written from its watcher protocol.
const MUSICIAN_WATCHER: &str = "Background watcher (WATCH-8K). Every 15 seconds: query orchestration_messages for new messages from the Conductor to this task with id > last_seen; check the task\u{2019}s last_heartbeat and refresh it when older than 60 seconds. Exit as soon as a new message arrives.";
/// The Sentinel protocol's launch prompt, its task list filled in.
pub(super) const SENTINEL: &str = "You are the Sentinel \u{2014} a monitoring teammate watching Musicians' progress logs for anomalies.\n\n**Active tasks to monitor:** task-03 (SENT-2P)\n\n**Your job:** Read the following files every ~10 seconds:\n- `temp/task-{NN}-status` for each active task\n- `temp/task-{NN}-deviations` for each active task\n\nContinue until I message you to shut down";
/// The Souffleur skill's self-monitor prompt, verbatim.
const TEAMMATE: &str = "You are the Souffleur's self-monitor. Your job is to ensure the\nbackground watcher is alive by checking the Souffleur's heartbeat. (TEAM-4M)\n\n**Initial wait:** Sleep ~360 seconds before your first check.";

pub(super) fn agent(prompt: &str, background: bool) -> Value {
    let mut input =
        json!({"description": "watch", "prompt": prompt, "subagent_type": "general-purpose"});
    if background {
        input["run_in_background"] = json!(true);
    }
    input
}

/// A project (with `task`'s row), hooks installed (with `--replace-pollers` or not), and
/// a data directory shared by the hooks and the maestro watching it.
pub(super) struct Rig {
    pub(super) rig: super::Rig,
    pub(super) data: tempfile::TempDir,
}

impl Rig {
    pub(super) fn new(task: &str, replace: bool) -> Self {
        let rig = super::Rig::new(task);
        let data = tempfile::tempdir().unwrap();
        let mut install = crate::common::maestro();
        install
            .env("XDG_DATA_HOME", data.path())
            .args(["hooks", "install", "--project"])
            .arg(&rig.root);
        if replace {
            install.arg("--replace-pollers");
        }
        crate::common::assert_success(&install.output().unwrap());
        Self { rig, data }
    }

    pub(super) fn root(&self) -> &Path {
        &self.rig.root
    }

    /// `maestro --no-tui --json` on the project, with more flags, once it has started.
    pub(super) fn watch(&self, extra: &[&str]) -> Running {
        let mut m = Running::spawn({
            let mut c = crate::common::maestro();
            c.env("HOME", self.rig.home.path())
                .env_remove("CLAUDE_CONFIG_DIR")
                .env("XDG_DATA_HOME", self.data.path())
                .args(["--no-tui", "--json", "--project"])
                .arg(self.root())
                .args(extra);
            c
        });
        m.wait_json("started", |v| {
            event(v) == "task" && v["task_id"] == "task-00"
        });
        m
    }

    /// `claude -p PROMPT` with the hooks and `extra` flags, started; the caller waits.
    pub(super) fn start(&self, prompt: &str, server: &ModelServer, extra: &[&str]) -> Child {
        let claude = super::claude_or_skip("replace_pollers").expect("checked by the caller");
        let mut cmd = super::claude_command(&claude, self.rig.home.path(), server, self.root());
        cmd.env("XDG_DATA_HOME", self.data.path())
            .args(["-p", prompt, "--model", "claude-sonnet-4-5"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    }

    /// Runs `claude -p PROMPT` with the hooks, to its end; the server, for its requests.
    pub(super) fn session(&self, prompt: &str, script: Vec<(&str, Vec<Reply>)>) -> ModelServer {
        let server = ModelServer::start(script);
        // A poller's own calls run; a command maestro names has no rule of its own.
        let tools = ["--allowedTools", "Bash(sleep:*)", "Bash(sqlite3:*)"];
        let (code, out) = finish(self.start(prompt, &server, &tools));
        assert_eq!(code, 0, "{out}");
        server
    }

    /// The subagent transcripts Claude Code wrote for this home (`subagents/*.jsonl`;
    /// their `.meta.json` beside them aside).
    pub(super) fn subagent_files(&self) -> Vec<PathBuf> {
        crate::common::walk(&self.rig.home.path().join(".claude/projects"))
            .into_iter()
            .filter(|p| p.components().any(|c| c.as_os_str() == "subagents"))
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect()
    }
}

/// The error `tool_result`s the model was sent: the hook's refusals as it read them.
pub(super) fn refusals(server: &ModelServer) -> Vec<String> {
    tool_results(server, true)
}

/// The refusals that stopped a subagent in its loop.
pub(super) fn stops(server: &ModelServer) -> Vec<String> {
    refusals(server)
        .into_iter()
        .filter(|r| r.contains("maestro stopped this subagent"))
        .collect()
}

/// The `tool_result`s the model was sent, errors or the calls that ran, each once.
pub(super) fn tool_results(server: &ModelServer, errors: bool) -> Vec<String> {
    let mut out = Vec::new();
    for r in server.requests() {
        for m in r["messages"].as_array().into_iter().flatten() {
            for block in m["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" && (block["is_error"] == true) == errors {
                    let text = match &block["content"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    if !out.contains(&text) {
                        out.push(text);
                    }
                }
            }
        }
    }
    out
}

/// A subagent's poll loop as a model runs it: `calls` three times over, then `last`.
pub(super) fn three_cycles(calls: &[Reply], last: Reply) -> Vec<Reply> {
    let mut out: Vec<Reply> = calls
        .iter()
        .cycle()
        .take(3 * calls.len())
        .cloned()
        .collect();
    out.push(last);
    out
}

/// The one command in backticks in a refusal.
pub(super) fn command_in(reason: &str) -> String {
    let parts: Vec<&str> = reason.split('`').collect();
    assert!(parts.len() >= 3, "no command in backticks: {reason}");
    parts[1].to_owned()
}

/// `command` run as a Bash tool runs it in the background: `sh -c`, from the project, no
/// terminal, its own session.
fn run_in_background(command: &str, cwd: &Path, data: &Path) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env("XDG_DATA_HOME", data)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    c.spawn().unwrap()
}

pub(super) use crate::common::wait_until;

/// The child's exit and stdout, within the deadline.
pub(super) fn finish(child: std::process::Child) -> (i32, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = child.id();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(crate::common::DEADLINE) else {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(-(pid as i32)),
            nix::sys::signal::Signal::SIGKILL,
        );
        panic!("the named command did not end");
    };
    let out = out.unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

pub(super) fn heartbeat_age_s(conn: &rusqlite::Connection, task: &str) -> f64 {
    conn.query_row(
        "SELECT (julianday('now') - julianday(last_heartbeat)) * 86400 FROM orchestration_tasks WHERE task_id = ?1",
        [task],
        |r| r.get(0),
    )
    .unwrap()
}

pub(super) fn conn(root: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(root.join("comms.db")).unwrap();
    c.busy_timeout(Duration::from_secs(5)).unwrap();
    c
}

/// A Musician's watcher is the Musician's own writing: its launch runs, its loop is
/// stopped, and the same prompt launched again in that session is refused up front.
#[test]
fn a_musicians_watcher_is_stopped_in_its_loop_and_refused_at_its_next_launch() {
    let name = "a_musicians_watcher_is_stopped_in_its_loop_and_refused_at_its_next_launch";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let mut m = rig.watch(&[]);
    let server = rig.session(
        "/musician task-03 MUS-7R",
        vec![
            (
                "MUS-7R",
                vec![
                    Reply::tool("Agent", agent(MUSICIAN_WATCHER, true), ONE),
                    Reply::text("waiting for the watcher", ONE),
                    Reply::tool("Agent", agent(MUSICIAN_WATCHER, true), ONE),
                    Reply::text("done", ONE),
                ],
            ),
            (
                "WATCH-8K",
                three_cycles(
                    &[
                        Reply::bash("sleep 1", ONE),
                        Reply::bash(
                            "sqlite3 comms.db 'SELECT id FROM orchestration_messages'",
                            ONE,
                        ),
                    ],
                    Reply::relay(ONE),
                ),
            ),
        ],
    );
    // One subagent ran (the first launch); the second launch started none.
    assert_eq!(rig.subagent_files().len(), 1, "{:?}", rig.subagent_files());
    let said = refusals(&server);
    assert_eq!(said.len(), 2, "the loop's stop, then the launch: {said:?}");
    assert!(said[0].contains("stopped this subagent"), "{}", said[0]);
    assert!(said[1].contains("caught polling"), "{}", said[1]);
    for reason in &said {
        assert!(
            command_in(reason).ends_with("musician watch task-03 --join"),
            "{reason}"
        );
    }
    let first = m.wait_json("the stop", |v| event(v) == "poller_replaced");
    assert_eq!(first["at"], "loop", "{first}");
    let second = m.wait_json("the refusal", |v| event(v) == "poller_replaced");
    assert_eq!(second["at"], "launch", "{second}");
    assert_eq!(second["role"], "musician-watcher", "{second}");

    // The watcher the guard stopped is not a poller doctor warns about.
    let out = crate::common::maestro()
        .env("HOME", rig.rig.home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .env("XDG_DATA_HOME", rig.data.path())
        .args(["doctor", "--json", "--project"])
        .arg(rig.root())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warned = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["check"] == "pollers");
    assert!(!warned, "a stopped poller is not warned about: {report}");
}

#[test]
fn the_sentinel_is_refused_only_while_a_maestro_reports_to_the_database() {
    let name = "the_sentinel_is_refused_only_while_a_maestro_reports_to_the_database";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-03", true);
    let script = |marker: &'static str| {
        vec![
            (
                marker,
                vec![
                    Reply::tool("Agent", agent(SENTINEL, false), ONE),
                    Reply::text("sentinel up", ONE),
                ],
            ),
            ("SENT-2P", vec![Reply::text("no anomalies", ONE)]),
        ]
    };
    // No maestro reports: the LLM Sentinel runs, as before.
    let server = rig.session("/conductor COND-1A", script("COND-1A"));
    assert!(refusals(&server).is_empty(), "{:?}", refusals(&server));
    assert_eq!(rig.subagent_files().len(), 1, "the Sentinel ran");

    // With one reporting, it is refused and the reason says why.
    let mut m = rig.watch(&["--report-to-db"]);
    let server = rig.session("/conductor COND-2B", script("COND-2B"));
    let said = refusals(&server);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("report_to_db"), "{}", said[0]);
    assert_eq!(rig.subagent_files().len(), 1, "no second Sentinel ran");
    let seen = m.wait_json("the refusal", |v| event(v) == "poller_replaced");
    assert_eq!(seen["role"], "sentinel", "{seen}");
    assert!(seen["command"].is_null(), "{seen}");
}

#[test]
fn the_souffleurs_layers_run_no_subagent_and_its_watcher_command_reports_the_death() {
    let name = "the_souffleurs_layers_run_no_subagent_and_its_watcher_command_reports_the_death";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let rig = Rig::new("task-01", true);
    // A Conductor process to watch.
    let mut conductor = Command::new("sleep").arg("600").spawn().unwrap();
    let session = "0d6f3c2a-5b7e-4c1d-9a8f-3e2b1c0d9f4a";
    let watcher = format!(
        "Poll the Conductor's liveness every ~60 seconds using comms-link. (SOUF-W)\n\nConductor PID: {}\nConductor session ID: {session}\nAwaiting session ID: false\nWatcher mode: normal\n\n**Initial wait:** Sleep ~240 seconds before your first check.",
        conductor.id()
    );
    let server = rig.session(
        &format!(
            "/souffleur PID:{} SESSION_ID:{session} SOUF-9Z",
            conductor.id()
        ),
        vec![
            (
                "SOUF-9Z",
                vec![
                    Reply::tool("Agent", agent(&watcher, true), ONE),
                    Reply::tool("Agent", agent(TEAMMATE, false), ONE),
                    Reply::text("watching", ONE),
                ],
            ),
            ("SOUF-W", vec![Reply::text("CONDUCTOR_DEAD:pid", ONE)]),
            ("TEAM-4M", vec![Reply::text("watching the watcher", ONE)]),
        ],
    );
    assert!(
        rig.subagent_files().is_empty(),
        "{:?}",
        rig.subagent_files()
    );
    let said = refusals(&server);
    assert_eq!(said.len(), 2, "{said:?}");
    let command = command_in(&said[0]);
    assert!(
        command.contains(&format!(
            "souffleur --watcher PID:{} SESSION_ID:{session}",
            conductor.id()
        )),
        "{command}"
    );
    assert!(said[1].contains("Nothing to run"), "{}", said[1]);

    // The watcher command keeps the souffleur heartbeat fresh and reports the death.
    let db = conn(rig.root());
    db.execute(
        "UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-10 minutes') WHERE task_id = 'souffleur'",
        [],
    )
    .unwrap();
    let child = run_in_background(&command, rig.root(), rig.data.path());
    wait_until("the souffleur heartbeat refreshed", || {
        heartbeat_age_s(&db, "souffleur") < 30.0
    });
    conductor.kill().unwrap();
    conductor.wait().unwrap();
    let (code, out) = finish(child);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("CONDUCTOR_DEAD:pid (task count: "), "{out}");
    let usage = rig.rig.usage();
    assert_eq!(usage["total"]["pollers"]["count"], 0, "{usage}");
}

#[test]
fn ordinary_and_near_miss_subagents_run_and_nothing_is_refused_without_the_flag() {
    let name = "ordinary_and_near_miss_subagents_run_and_nothing_is_refused_without_the_flag";
    if super::claude_or_skip(name).is_none() {
        return;
    }
    let near_miss = "README-3Q: update the README section on the background watcher: it reads orchestration_messages and refreshes last_heartbeat";
    let script = |marker: &'static str| {
        vec![
            (
                marker,
                vec![
                    Reply::tool("Agent", agent(near_miss, false), ONE),
                    Reply::tool("Agent", agent("ORD-6T: list the files", false), ONE),
                    Reply::text("done", ONE),
                ],
            ),
            ("README-3Q", vec![Reply::text("updated", ONE)]),
            ("ORD-6T", vec![Reply::text("three files", ONE)]),
        ]
    };
    let rig = Rig::new("task-03", true);
    let server = rig.session("/musician task-03 MUS-1C", script("MUS-1C"));
    assert!(refusals(&server).is_empty(), "{:?}", refusals(&server));
    assert_eq!(rig.subagent_files().len(), 2, "both ran");
    let usage = rig.rig.usage();
    assert_eq!(
        usage["total"]["pollers"]["count"], 0,
        "not billed as pollers: {usage}"
    );

    // Without the flag even a real poller's launch goes through.
    let plain = Rig::new("task-03", false);
    let server = plain.session(
        "/musician task-03 MUS-2D",
        vec![
            (
                "MUS-2D",
                vec![
                    Reply::tool("Agent", agent(MUSICIAN_WATCHER, false), ONE),
                    Reply::text("watching", ONE),
                ],
            ),
            (
                "WATCH-8K",
                three_cycles(
                    &[
                        Reply::bash("sleep 1", ONE),
                        Reply::bash(
                            "sqlite3 comms.db 'SELECT id FROM orchestration_messages'",
                            ONE,
                        ),
                    ],
                    Reply::text("message 7 arrived", ONE),
                ),
            ),
        ],
    );
    assert!(refusals(&server).is_empty(), "{:?}", refusals(&server));
    wait_until("the watcher's transcript", || {
        plain.subagent_files().len() == 1
    });
    let usage = plain.rig.usage();
    assert_eq!(usage["total"]["pollers"]["count"], 1, "{usage}");
}

/// The same hooks shipped as a Claude Code plugin (`assets/claude-plugin/`): `claude
/// plugin validate` accepts it, and loaded with `--plugin-dir` (maestro on PATH, no
/// settings file touched) it refuses the Souffleur's watcher from the Souffleur's session.
#[test]
fn the_plugin_validates_and_refuses_a_poller_when_loaded() {
    let name = "the_plugin_validates_and_refuses_a_poller_when_loaded";
    let Some(claude) = super::claude_or_skip(name) else {
        return;
    };
    let plugin = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/claude-plugin");
    let rig = super::Rig::new("task-03");
    let data = tempfile::tempdir().unwrap();
    let session = "0d6f3c2a-5b7e-4c1d-9a8f-3e2b1c0d9f4a";
    let watcher = format!(
        "Poll the Conductor's liveness every ~60 seconds using comms-link. (SOUF-P)\n\nConductor PID: 4242\nConductor session ID: {session}\nAwaiting session ID: false\nWatcher mode: normal"
    );
    let server = ModelServer::start(vec![
        (
            "SOU-3P",
            vec![
                Reply::tool("Agent", agent(&watcher, true), ONE),
                Reply::text("watching", ONE),
            ],
        ),
        ("SOUF-P", vec![Reply::text("CONDUCTOR_DEAD:pid", ONE)]),
    ]);
    let validate = super::claude_command(&claude, rig.home.path(), &server, &rig.root)
        .args(["plugin", "validate"])
        .arg(&plugin)
        .output()
        .unwrap();
    crate::common::assert_success(&validate);
    // `maestro` on PATH, as the plugin's hooks call it.
    let bin = rig.root.join(".bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_maestro"), bin.join("maestro")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = super::claude_command(&claude, rig.home.path(), &server, &rig.root);
    cmd.env("PATH", &path)
        .env("XDG_DATA_HOME", data.path())
        .args([
            "-p",
            &format!("/souffleur PID:4242 SESSION_ID:{session} SOU-3P"),
            "--model",
            "claude-sonnet-4-5",
        ])
        .arg("--plugin-dir")
        .arg(&plugin);
    let out = cmd.output().unwrap();
    crate::common::assert_success(&out);
    let said = refusals(&server);
    assert_eq!(said.len(), 1, "{said:?}");
    // maestro is on PATH: the command names it by name.
    assert_eq!(
        command_in(&said[0]),
        format!("maestro souffleur --watcher PID:4242 SESSION_ID:{session}")
    );
}
