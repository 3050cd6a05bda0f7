//! The Conductor, driven by `maestro conductor watch` alone: what it does with each
//! event it is told, and the relaunches it makes under faults.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;

use super::world::{World, session_of, without_claude};
use super::{Told, WHOLE};
use crate::common::wait_until;

/// One Conductor watcher run to its end: its JSON lines.
pub(super) fn watch_once(world: &World, through_shell_killed: bool) -> Vec<Value> {
    if through_shell_killed {
        // Started by a shell that is killed while it waits: it must end too.
        let mut shell = world.command("/bin/sh");
        shell
            .arg("-c")
            .arg("\"$0\" conductor watch --json --project \"$1\" > /dev/null & echo $!; wait")
            .arg(env!("CARGO_BIN_EXE_maestro"))
            .arg(world.rig.root());
        crate::common::watcher_ends_with_its_shell(&mut shell, world.rig.data.path());
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
        panic!(
            "the Conductor's watcher went quiet; tasks {:?}; messages {:?}",
            super::TASKS.map(|t| (t, world.state(t))),
            super::world::messages(world)
        );
    };
    let out = out.unwrap();
    crate::common::assert_success(&out);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The Conductor's duty for one event.
/// A handoff's first relaunch is interrupted by `interrupt`.
pub(super) fn handle(world: &World, event: &Value, told: &mut Told, interrupt: Signal) {
    let task = event["task_id"].as_str().unwrap_or_default().to_owned();
    match (event["event"].as_str(), event["state"].as_str()) {
        (Some("state"), Some(state)) => {
            told.states.push((task.clone(), state.to_owned()));
            match state {
                "needs_review" => answer(world, "approve", &task, "go on"),
                "dead" => relaunch_twice_at_once(world, &task, told),
                "error" if task == "souffleur" => told.souffleur_failed += 1,
                "error" if event["reason"] == "context_exhaustion_warning" => {
                    relaunch_killed_then_again(world, &task, told, interrupt);
                }
                "error" => answer(world, "fix", &task, "try again"),
                _ => {}
            }
        }
        (Some("message"), _) => {
            told.faults_done |= event["message"]["message"] == super::world::FAULTS_DONE;
            told.messages
                .push(event["message"]["id"].as_i64().unwrap_or_default());
        }
        _ => {}
    }
}

/// The Conductor's answer to a task with maestro's verb (`approve`, `fix`).
fn answer(world: &World, verb: &str, task: &str, message: &str) {
    let out = world
        .maestro(&["task", verb, task, "--message", message])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
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

/// A context handoff: the first relaunch is interrupted (by `signal`, drawn) while it
/// holds the old session stopped. Nothing stays stopped: interrupted before it wrote the
/// handoff, the old session runs again and a second relaunch replaces it; after, the
/// guardian ends the old one and the released session is the task's (its window in
/// the PID file, so the watcher never calls the task dead meanwhile).
fn relaunch_killed_then_again(world: &World, task: &str, told: &mut Told, signal: Signal) {
    let old = session_of(task, false).expect("the old session runs");
    let before = handoffs(world, task);
    // `maestro` runs under a shell that execs it: the child is maestro itself.
    let mut first = world
        .maestro(&["task", "relaunch", task, "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the first relaunch to hold the old session", || {
        crate::common::is_stopped(old)
    });
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first.id() as i32), signal).unwrap();
    first.wait().unwrap();
    told.killed_mid_proof += 1;
    wait_until("the old session no longer stopped", || {
        !crate::common::is_stopped(old)
    });
    if handoffs(world, task) > before {
        wait_until("the released session runs", || {
            session_of(task, true).is_some()
        });
    } else {
        let out = world
            .maestro(&["task", "relaunch", task, "--yes"])
            .output()
            .unwrap();
        crate::common::assert_success(&out);
        told.relaunches += 1;
    }
    wait_until("the old session ended", || !crate::common::alive(old));
}

/// The dead task's relaunch: first with claude missing, then through a gate whose
/// folder another user could write (each refused before anything is committed: no
/// handoff, the task as it was, no session), then two asked for at once (one runs, the
/// other is refused).
fn relaunch_twice_at_once(world: &World, task: &str, told: &mut Told) {
    let before = (world.state(task), handoffs(world, task));
    let out = without_claude(world, || {
        world
            .maestro(&["task", "relaunch", task, "--yes"])
            .output()
            .unwrap()
    });
    assert!(!out.status.success(), "a relaunch without claude succeeded");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("claude"), "{err}");
    assert_eq!((world.state(task), handoffs(world, task)), before, "{err}");
    told.refused_relaunches += 1;
    let out = through_an_opened_gate(world, task);
    assert!(
        !out.status.success(),
        "a relaunch through an opened gate succeeded"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("gate"), "{err}");
    assert_eq!((world.state(task), handoffs(world, task)), before, "{err}");
    assert_eq!(session_of(task, true), None, "{err}");
    told.refused_relaunches += 1;
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

/// How many handoffs `task` has been sent.
pub(super) fn handoffs(world: &World, task: &str) -> i64 {
    super::super::replace_pollers::conn(world.rig.root())
        .query_row(
            "SELECT count(*) FROM orchestration_messages WHERE task_id = ?1 AND message_type = 'handoff'",
            [task],
            |r| r.get(0),
        )
        .unwrap()
}

/// A relaunch whose gate folder is opened to everyone (mode 0777) while its window
/// starts: what another user would need to swap `ready` or `go`.
fn through_an_opened_gate(world: &World, task: &str) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt;
    // A relaunch killed earlier left its folder behind: this one's is the new one.
    let before = world.gate_folders();
    world.hold_windows();
    let relaunch = world
        .maestro(&["task", "relaunch", task, "--yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let new = || -> Vec<std::path::PathBuf> {
        world
            .gate_folders()
            .into_iter()
            .filter(|d| !before.contains(d))
            .collect()
    };
    wait_until("the relaunch's gate folder", || !new().is_empty());
    for dir in new() {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    world.release_windows();
    relaunch.wait_with_output().unwrap()
}
