//! A whole orchestration left alone, with real Claude Code sessions, finishes. Three
//! Musicians (real `claude -p` sessions, scripted by the model server) each work, ask for
//! a checkpoint review, wait on `maestro musician watch --pause`, work on, ask for their
//! final review and complete. The Conductor is driven by `maestro conductor watch`: it
//! approves each review it is told and relaunches a Musician it is told is dead.
//!
//! Faults injected (maestro runs under umask 000 throughout); each task's fate is drawn
//! from a seed (`ORCH_SEED` replays a draw):
//! - one Musician hits the same error twice (each told, each answered with a fix);
//! - one asks for a context handoff: the first relaunch is killed (SIGKILL) while it
//!   holds the old session stopped, and nothing may stay stopped; the old session runs
//!   again and a second relaunch replaces it, or, had the first released its successor,
//!   the guardian ends the old one;
//! - one Musician's session is killed while it works: the watcher must tell it, and its
//!   relaunch, asked for twice at once from inside a Claude Code session (one runs, one
//!   is refused), brings a session of its own that finishes the task.
//!
//! Also: the shell of the first Conductor watcher is killed (the watcher must end with
//! it); twenty 1 MB messages flood the Conductor; the Souffleur fails. The poller guard
//! is on throughout.
//!
//! At the end: every task `complete`, one handoff for the killed task, each review,
//! error, death and message told once, no process left stopped, no session doubled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::replace_pollers::Rig;
use super::{ModelServer, Reply, Usage};
use crate::common::{RUN_AFTER_DASHES, wait_until};

const ONE: Usage = Usage {
    input: 60,
    output: 6,
    cache_write: 0,
    cache_read: 0,
};
const TASKS: [&str; 3] = ["task-01", "task-02", "task-03"];
/// The longest the whole orchestration may take.
const WHOLE: Duration = Duration::from_secs(240);

/// A write as a Musician makes it: `sqlite3`, waiting its turn for the database's lock
/// (five sessions and maestro write it at once).
fn sql(statement: &str) -> String {
    format!("sqlite3 -cmd '.timeout 5000' comms.db \"{statement}\"")
}

fn set_state(task: &str, state: &str) -> String {
    sql(&format!(
        "update orchestration_tasks SET state = '{state}', last_heartbeat = datetime('now') WHERE task_id = '{task}'"
    ))
}

fn ask_review(task: &str, what: &str) -> String {
    sql(&format!(
        "update orchestration_tasks SET state = 'needs_review', last_heartbeat = datetime('now') WHERE task_id = '{task}'; insert into orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-00', '{task}', '{what} of {task} ready', 'review_request')"
    ))
}

fn fail(task: &str, why: &str) -> String {
    sql(&format!(
        "update orchestration_tasks SET state = 'error', last_error = '{why}', last_heartbeat = datetime('now') WHERE task_id = '{task}'"
    ))
}

fn log(task: &str, line: &str) -> String {
    format!("echo '{line}' >> temp/{task}-status")
}

/// What befalls a Musician in the run (each task one, drawn from the seed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Killed in a long step after its checkpoint, while working.
    Dies,
    /// Hits the same error twice before its checkpoint (each answered by a fix).
    Errs,
    /// Asks for a context handoff after its checkpoint and waits to be replaced.
    HandsOff,
}

/// A Musician's whole life: work, checkpoint review, work, final review, complete, with
/// what befalls it on the way.
fn musician(task: &str, fate: Fate) -> Vec<Reply> {
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
fn session_of(calls: &[String]) -> Vec<Reply> {
    let mut replies: Vec<Reply> = calls.iter().map(|c| Reply::bash(c, ONE)).collect();
    replies.push(Reply::text("done", ONE));
    replies
}

/// The relaunched Musician: it picks up from the handoff and finishes.
fn relaunched(task: &str) -> Vec<Reply> {
    let calls = [
        set_state(task, "working"),
        log(task, "step 3 started [ctx: 5%]"),
        ask_review(task, "final review"),
        format!("maestro musician watch {task} --pause"),
        set_state(task, "complete"),
    ];
    session_of(&calls)
}

/// Everything a process of the orchestration needs: the scripted model, the test's home,
/// maestro's data, its configuration, and a PATH with maestro, the real claude and a
/// terminal that runs its command.
struct World {
    rig: Rig,
    env: Vec<(&'static str, String)>,
}

impl World {
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CLAUDECODE")
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(self.rig.root())
            .stdin(Stdio::null());
        c
    }

    /// maestro, run under umask 000 (what it makes must be private all the same).
    fn maestro(&self, args: &[&str]) -> Command {
        let mut c = self.command("/bin/sh");
        c.arg("-c")
            .arg("umask 000; exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_maestro"))
            .args(args)
            .arg("--project")
            .arg(self.rig.root());
        c
    }

    fn state(&self, task: &str) -> String {
        super::replace_pollers::conn(self.rig.root())
            .query_row(
                "SELECT state FROM orchestration_tasks WHERE task_id = ?1",
                [task],
                |r| r.get(0),
            )
            .unwrap()
    }
}

fn setup(claude: &Path, server: &ModelServer) -> World {
    let rig = Rig::new("task-01", true);
    let db = super::replace_pollers::conn(rig.root());
    for task in TASKS {
        db.execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'watching', datetime('now'))
             ON CONFLICT(task_id) DO UPDATE SET state = 'watching'",
            [task],
        )
        .unwrap();
    }
    let (bin, path) = super::real_claude_first(rig.root(), claude);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_maestro"), bin.join("maestro")).unwrap();
    crate::alive_actions::stub(&bin, "kitty", RUN_AFTER_DASHES);
    let config = rig.root().join("maestro.toml");
    std::fs::write(
        &config,
        "[launch]\nclaude = [\"claude\", \"-p\", \"--allowedTools\", \"Bash\", \"--model\", \"claude-sonnet-4-5\"]\nmusician_prompt = \"/musician {task} ORCH-R-{task}\"\n",
    )
    .unwrap();
    let mut env = super::claude_env(rig.rig.home.path(), server);
    env.extend([
        ("XDG_DATA_HOME", rig.data.path().display().to_string()),
        ("PATH", path),
        ("MAESTRO_CONFIG", config.display().to_string()),
        ("DISPLAY", ":99".to_owned()),
    ]);
    World { rig, env }
}

/// What the Conductor was told, and did.
#[derive(Default)]
struct Told {
    /// (task, state) as told, in order.
    states: Vec<(String, String)>,
    /// Message ids told.
    messages: Vec<i64>,
    relaunches: usize,
    refused_relaunches: usize,
    souffleur_failed: usize,
    /// Relaunches killed mid-proof.
    killed_mid_proof: usize,
}

/// One Conductor watcher run to its end: its JSON lines.
fn watch_once(world: &World, through_shell_killed: bool) -> Vec<Value> {
    if through_shell_killed {
        // Started by a shell that is killed while it waits: it must end too.
        let mut shell = world.command("/bin/sh");
        shell
            .arg("-c")
            .arg("\"$0\" conductor watch --json --project \"$1\" > /dev/null & echo $!; wait")
            .arg(env!("CARGO_BIN_EXE_maestro"))
            .arg(world.rig.root())
            .stdout(Stdio::piped());
        let mut shell = shell.spawn().unwrap();
        let mut pid = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(shell.stdout.take().unwrap()),
            &mut pid,
        )
        .unwrap();
        let watcher: u32 = pid.trim().parse().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        shell.kill().unwrap();
        shell.wait().unwrap();
        wait_until("the watcher to end with its shell", || {
            !crate::common::alive(watcher)
        });
        return Vec::new();
    }
    let child = world
        .maestro(&["conductor", "watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(WHOLE) else {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        panic!("the Conductor's watcher went quiet");
    };
    let out = out.unwrap();
    crate::common::assert_success(&out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The Conductor's duty for one event.
fn handle(world: &World, event: &Value, told: &mut Told) {
    let task = event["task_id"].as_str().unwrap_or_default().to_owned();
    match (event["event"].as_str(), event["state"].as_str()) {
        (Some("state"), Some(state)) => {
            told.states.push((task.clone(), state.to_owned()));
            match state {
                "needs_review" => {
                    let out = world
                        .maestro(&["task", "approve", &task, "--message", "go on"])
                        .output()
                        .unwrap();
                    crate::common::assert_success(&out);
                }
                "dead" => relaunch_twice_at_once(world, &task, told),
                "error" if task == "souffleur" => told.souffleur_failed += 1,
                "error" if event["reason"] == "context_exhaustion_warning" => {
                    relaunch_killed_then_again(world, &task, told);
                }
                "error" => {
                    let out = world
                        .maestro(&["task", "fix", &task, "--message", "try again"])
                        .output()
                        .unwrap();
                    crate::common::assert_success(&out);
                }
                _ => {}
            }
        }
        (Some("message"), _) => told
            .messages
            .push(event["message"]["id"].as_i64().unwrap_or_default()),
        _ => {}
    }
}

/// What a Claude Code session puts in its commands' environment about itself.
const LAUNCHING_SESSION: [(&str, &str); 4] = [
    ("CLAUDECODE", "1"),
    (
        "CLAUDE_CODE_SESSION_ID",
        "00000000-0000-4000-8000-00000000c0de",
    ),
    ("CLAUDE_CODE_CHILD_SESSION", "1"),
    ("CLAUDE_PID", "1"),
];

/// A context handoff: the first relaunch is killed (SIGKILL) while it holds the old
/// session stopped. Nothing stays stopped: killed before it released the new session,
/// the old one runs again and a second relaunch replaces it; killed after, the guardian
/// ends the old one and the released session is the task's.
fn relaunch_killed_then_again(world: &World, task: &str, told: &mut Told) {
    let old = session_of_marker(&format!("ORCH-M-{task}")).expect("the old session runs");
    let mut first = world
        .maestro(&["task", "relaunch", task, "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the first relaunch to hold the old session", || {
        crate::common::is_stopped(old)
    });
    first.kill().unwrap();
    first.wait().unwrap();
    told.killed_mid_proof += 1;
    wait_until("the old session no longer stopped", || {
        !crate::common::is_stopped(old)
    });
    // A session the killed relaunch released shows within its proof's time.
    std::thread::sleep(Duration::from_secs(2));
    if session_of_marker(&format!("ORCH-R-{task}")).is_none() {
        let out = world
            .maestro(&["task", "relaunch", task, "--yes"])
            .output()
            .unwrap();
        crate::common::assert_success(&out);
        told.relaunches += 1;
    }
    wait_until("the old session ended", || !crate::common::alive(old));
}

/// The `claude` process whose arguments hold `marker` (a session's prompt).
fn session_of_marker(marker: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c).contains(marker)
                    && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|n| n.trim() == "claude")
            })
        })
}

/// Two relaunches of the dead task asked for at once: one runs, the other is refused.
fn relaunch_twice_at_once(world: &World, task: &str, told: &mut Told) {
    // Asked from inside a Claude Code session: its identity in the environment.
    let start = || {
        world
            .maestro(&["task", "relaunch", task, "--yes"])
            .envs(LAUNCHING_SESSION)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = start();
    std::thread::sleep(Duration::from_millis(300));
    let second = start();
    for child in [first, second] {
        let out = child.wait_with_output().unwrap();
        if out.status.success() {
            told.relaunches += 1;
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("being relaunched already"), "{err}");
            told.refused_relaunches += 1;
        }
    }
}

/// The first session of each task, as the Conductor launches them.
fn launch_musicians(world: &World, claude: &Path) -> BTreeMap<&'static str, std::process::Child> {
    TASKS
        .iter()
        .map(|task| {
            let mut c = world.command(&claude.display().to_string());
            c.args([
                "-p",
                &format!("/musician {task} ORCH-M-{task}"),
                "--model",
                "claude-sonnet-4-5",
                "--allowedTools",
                "Bash",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            (*task, c.spawn().unwrap())
        })
        .collect()
}

/// The claude process of `task`'s first session, once the Conductor's watcher has seen
/// it working (its record holds the session): then it is killed.
fn kill_when_seen(world: &World, task: &str, child: &mut std::process::Child) {
    let pid = child.id();
    let status = world.rig.root().join(format!("temp/{task}-status"));
    wait_until("the task in its long step, its session seen", || {
        std::fs::read_to_string(&status).is_ok_and(|t| t.contains("step 2"))
            && world.state(task) == "working"
            && std::fs::read_to_string(seen_path(world))
                .is_ok_and(|t| t.contains(&format!("\"pid\":{pid}")))
    });
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The messages the Conductor is told: those to task-00 and the Souffleur's errors.
fn conductor_messages(world: &World) -> Vec<i64> {
    super::replace_pollers::conn(world.rig.root())
        .prepare(
            "SELECT id FROM orchestration_messages WHERE task_id = 'task-00'
             OR (task_id = 'souffleur' AND message_type = 'error') ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Twenty 1 MB messages to the Conductor at once (each told once, in bounded tellings),
/// and the Souffleur failing with its own error message.
fn flood_and_fail_the_souffleur(world: &World) {
    let db = super::replace_pollers::conn(world.rig.root());
    let big = "x".repeat(1 << 20);
    for i in 0..20 {
        db.execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-00', ?1, ?2, 'instruction')",
            [format!("flood-{i}"), big.clone()],
        )
        .unwrap();
    }
    db.execute(
        "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('souffleur', 'error', datetime('now'))
         ON CONFLICT(task_id) DO UPDATE SET state = 'error', last_heartbeat = datetime('now')",
        [],
    )
    .unwrap();
    db.execute(
        "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('souffleur', 'souffleur', 'validation failed: no transcript', 'error')",
        [],
    )
    .unwrap();
}

fn seen_path(world: &World) -> PathBuf {
    crate::common::walk(world.rig.data.path())
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "seen"))
        .unwrap_or_default()
}

/// No process of the test left stopped (state `T`).
fn stopped_processes(root: &Path) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            crate::common::is_stopped(*pid)
                && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(root))
        })
        .collect()
}

#[test]
fn a_whole_orchestration_left_alone_finishes_under_faults() {
    let name = "a_whole_orchestration_left_alone_finishes_under_faults";
    let Some(claude) = super::claude_or_skip(name) else {
        return;
    };
    let seed: u64 = std::env::var("ORCH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    // Each task's fate: one of the six orders of the three, by the seed.
    let mut fates = [Fate::Dies, Fate::Errs, Fate::HandsOff];
    let draw = (seed % 6) as usize;
    fates.rotate_left(draw % 3);
    if draw >= 3 {
        fates.swap(1, 2);
    }
    let fate_of = |task: &str| fates[TASKS.iter().position(|t| *t == task).unwrap_or(0)];
    let of = |f: Fate| TASKS[fates.iter().position(|x| *x == f).unwrap_or(0)];
    let (dying, erring, handing) = (of(Fate::Dies), of(Fate::Errs), of(Fate::HandsOff));
    eprintln!(
        "ORCH_SEED={seed}: {dying}'s session is killed, {erring} errs twice, {handing} hands off"
    );
    let mut script: Vec<(String, Vec<Reply>)> = Vec::new();
    for task in TASKS {
        script.push((format!("ORCH-M-{task}"), musician(task, fate_of(task))));
        script.push((format!("ORCH-R-{task}"), relaunched(task)));
    }
    let server = ModelServer::start(
        script
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect(),
    );
    let world = setup(&claude, &server);
    let mut told = Told::default();
    // The first watcher, its shell killed: it ends; the baseline is kept.
    watch_once(&world, true);
    let mut sessions = launch_musicians(&world, &claude);
    let conductor = std::thread::scope(|scope| {
        let killer = scope.spawn(|| {
            let mut session = sessions.remove(dying).unwrap();
            kill_when_seen(&world, dying, &mut session);
            flood_and_fail_the_souffleur(&world);
        });
        let started = Instant::now();
        // Until every task is complete and every message for the Conductor told (a
        // flood is told in bounded tellings, the last ones after the work is done).
        while TASKS.iter().any(|t| world.state(t) != "complete")
            || told.messages.len() < conductor_messages(&world).len()
        {
            assert!(
                started.elapsed() < WHOLE,
                "the orchestration did not finish: {:?}; told {:?}",
                TASKS.iter().map(|t| world.state(t)).collect::<Vec<_>>(),
                told.states
            );
            for event in watch_once(&world, false) {
                handle(&world, &event, &mut told);
            }
        }
        killer.join().unwrap();
        told
    });
    for (_, mut child) in sessions {
        let _ = child.wait();
    }
    let told = conductor;
    // Every task complete, the killed one relaunched once (the second ask refused).
    for task in TASKS {
        assert_eq!(world.state(task), "complete", "{task}");
    }
    // The dead task's relaunch ran and the one asked beside it was refused; the handoff's
    // first relaunch was killed mid-proof (and a second ran unless the first had
    // released its session).
    assert!(
        (1..=2).contains(&told.relaunches)
            && (told.refused_relaunches, told.killed_mid_proof) == (1, 1),
        "{} relaunches, {} refused, {} killed; {:?}; errors the sessions saw: {:?}",
        told.relaunches,
        told.refused_relaunches,
        told.killed_mid_proof,
        told.states,
        super::replace_pollers::tool_results(&server, true)
    );
    let db = super::replace_pollers::conn(world.rig.root());
    let handoffs: i64 = db
        .query_row(
            "SELECT count(*) FROM orchestration_messages WHERE task_id = ?1 AND message_type = 'handoff'",
            [dying],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(handoffs, 1);
    // The handoff's relaunch, killed before it released its window, ran no session of
    // its own: the handing task's new session is the second relaunch's alone.
    let handoff_sessions = crate::common::walk(&world.rig.rig.home.path().join(".claude/projects"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter(|p| {
            std::fs::read_to_string(p).is_ok_and(|t| t.contains(&format!("ORCH-R-{handing}")))
        })
        .count();
    assert_eq!(handoff_sessions, 1);
    // Each review told once: two per task; the killed session's death once.
    for task in TASKS {
        let reviews = told
            .states
            .iter()
            .filter(|(t, s)| t == task && s == "needs_review")
            .count();
        assert_eq!(reviews, 2, "{task}: {:?}", told.states);
    }
    let errors = told
        .states
        .iter()
        .filter(|(t, s)| t == erring && s == "error")
        .count();
    assert_eq!(errors, 2, "{erring}'s errors, each told: {:?}", told.states);
    let handoffs_asked = told
        .states
        .iter()
        .filter(|(t, s)| t == handing && s == "error")
        .count();
    assert_eq!(handoffs_asked, 1, "{:?}", told.states);
    let deaths: Vec<&(String, String)> = told.states.iter().filter(|(_, s)| s == "dead").collect();
    assert_eq!(deaths, [&(dying.to_owned(), "dead".to_owned())]);
    // Every message to the Conductor told once.
    let mut ids = conductor_messages(&world);
    let mut got = told.messages.clone();
    got.sort_unstable();
    ids.sort_unstable();
    assert_eq!(got, ids, "each message once");
    assert_eq!(told.souffleur_failed, 1, "{:?}", told.states);
    assert_eq!(stopped_processes(world.rig.root()), Vec::<u32>::new());
    // The relaunched session is a session of its own (its own transcript), not taken
    // for a child of the session that asked for it.
    let transcripts = crate::common::walk(&world.rig.rig.home.path().join(".claude/projects"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .filter(|p| {
            std::fs::read_to_string(p).is_ok_and(|t| t.contains(&format!("ORCH-R-{dying}")))
        })
        .count();
    assert_eq!(
        transcripts, 1,
        "the relaunched session wrote its own transcript"
    );
    // The relaunched session's window, ended.
    if let Ok(pid) =
        std::fs::read_to_string(world.rig.root().join(format!("temp/musician-{dying}.pid")))
    {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid.trim().parse().unwrap_or(0)),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
