//! The Conductor's seat: a real Conductor session (task-00's recorded session) watched
//! by `maestro souffleur`. Midway the Conductor's claude is killed: the Souffleur must
//! relaunch one Conductor, with the recovery prompt (the reason, the export to read
//! first, the predecessor's session), its permission held to the ceiling although the
//! payload asked for more, and a clean environment (the new session writes its own
//! transcript).

use std::path::Path;
use std::process::Stdio;

use super::super::Reply;
use super::scripts::session_of;
use super::world::World;
use crate::common::{Running, event, wait_until};

/// The first Conductor's session id (recorded in task-00's row).
const CONDUCTOR_SESSION: &str = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f";
/// What the first Conductor's prompt holds (its conversation's marker).
pub(super) const FIRST: &str = "ORCH-CONDUCTOR";
/// What only a recovered Conductor's prompt holds.
pub(super) const RECOVERED: &str = "--recovery-bootstrap";

/// What the recovered Conductor's one short call prints.
pub(super) const CHECKED: &str = "conductor-checked";

/// Both Conductors' scripts. Each waits in a long step (the Souffleur must not see the
/// recovered one end while it runs); the recovered one first makes one short call,
/// after which the `PostToolUse` hook hands it the messages not told yet (some of the
/// flood): those `conductor watch` must then not tell again.
pub(super) fn scripts() -> Vec<(String, Vec<Reply>)> {
    let long_step = "timeout 300 tail -f /dev/null || true".to_owned();
    vec![
        (
            FIRST.to_owned(),
            session_of(std::slice::from_ref(&long_step)),
        ),
        (
            RECOVERED.to_owned(),
            session_of(&[format!("sleep 2 && echo {CHECKED}"), long_step]),
        ),
    ]
}

/// The messages the `PostToolUse` hook handed to the recovered Conductor (their ids, as
/// often as each was handed), and the longest hand-over, from what its model was sent
/// last (its whole conversation).
pub(super) fn handed_over(server: &super::super::ModelServer) -> (Vec<i64>, usize) {
    let id = regex::Regex::new(r"message #([0-9]+) \[").unwrap();
    let last = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["messages"].to_string().contains(RECOVERED));
    let Some(last) = last else {
        return (Vec::new(), 0);
    };
    let mut ids = Vec::new();
    let mut longest = 0;
    for m in last["messages"].as_array().into_iter().flatten() {
        for block in m["content"].as_array().into_iter().flatten() {
            let text = block.to_string();
            if text.contains("new message(s) for the Conductor") {
                longest = longest.max(text.len());
                ids.extend(
                    id.captures_iter(&text)
                        .filter_map(|c| c[1].parse::<i64>().ok()),
                );
            }
        }
    }
    (ids, longest)
}

/// Whether the recovered Conductor's short call is over and its model was sent what
/// came after it (the hook's hand-over with it).
pub(super) fn checked(server: &super::super::ModelServer) -> bool {
    server.requests().iter().any(|r| {
        let text = r["messages"].to_string();
        text.contains(RECOVERED) && text.matches(CHECKED).count() >= 2
    })
}

pub(super) struct Podium {
    souffleur: Running,
    conductor: std::process::Child,
}

impl Podium {
    /// The first Conductor running, its session recorded, a payload asking for more
    /// permission than the ceiling, and the Souffleur watching it (confirmed).
    pub(super) fn start(world: &World, claude: &Path) -> Self {
        let db = super::super::replace_pollers::conn(world.rig.root());
        db.execute(
            "INSERT INTO orchestration_tasks (task_id, state, session_id, last_heartbeat) VALUES ('task-00', 'working', ?1, datetime('now'))
             ON CONFLICT(task_id) DO UPDATE SET state = 'working', session_id = ?1",
            [CONDUCTOR_SESSION],
        )
        .unwrap();
        db.execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('souffleur', 'task-00', 'CONTEXT_RECOVERY_PAYLOAD_V1\npermission_mode: bypassPermissions\n', 'instruction')",
            [],
        )
        .unwrap();
        let conductor = world
            .command(&claude.display().to_string())
            .args([
                "-p",
                &format!("/conductor {FIRST}"),
                "--session-id",
                CONDUCTOR_SESSION,
                "--model",
                "claude-sonnet-4-5",
                "--allowedTools",
                "Bash",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The Souffleur validates the session it is given by its transcript.
        wait_until("the first Conductor's transcript", || {
            super::transcripts_holding(world, FIRST) == 1
        });
        let invocation = format!("PID:{} SESSION_ID:{CONDUCTOR_SESSION}", conductor.id());
        let mut souffleur =
            Running::spawn(world.maestro(&["souffleur", &invocation, "--no-tui", "--json"]));
        souffleur.wait_json("the Souffleur confirmed", |v| {
            event(v) == "task" && v["task_id"] == "souffleur" && v["state"] == "confirmed"
        });
        Self {
            souffleur,
            conductor,
        }
    }

    /// The Conductor's claude killed (SIGKILL); returns once the Souffleur relaunched
    /// one and the new session runs. The Souffleur is stopped then (its own failure is
    /// another fault of the run).
    pub(super) fn kill_and_recover(mut self, world: &World) {
        self.conductor.kill().unwrap();
        self.conductor.wait().unwrap();
        let done = self.souffleur.wait_json("the recovery's result", |v| {
            event(v) == "recovery" && v["status"] != "started"
        });
        assert_eq!(
            done["status"],
            "success",
            "{done}; the Souffleur said:\n{}",
            self.souffleur.seen.join("\n")
        );
        assert_eq!(done["provider"], "claude_export", "{done}");
        wait_until("the recovered Conductor's transcript", || {
            super::transcripts_holding(world, RECOVERED) == 1
        });
        self.souffleur.signal(nix::sys::signal::Signal::SIGTERM);
        assert_eq!(self.souffleur.wait_exit(), 0);
    }
}

/// One recovered Conductor, with the recovery prompt, its permission held to the
/// ceiling (`acceptEdits`; the payload asked for `bypassPermissions`) and a transcript
/// of its own; then its window ended.
pub(super) fn one_conductor_recovered(world: &World) {
    let recovered: Vec<Vec<String>> = conductors(world.rig.root(), RECOVERED);
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    let argv = &recovered[0];
    let mode = argv.iter().position(|a| a == "--permission-mode");
    assert_eq!(
        mode.and_then(|i| argv.get(i + 1)).map(String::as_str),
        Some("acceptEdits"),
        "{argv:?}"
    );
    let prompt = argv.last().cloned().unwrap_or_default();
    assert!(
        prompt.starts_with("/conductor --recovery-bootstrap"),
        "{prompt}"
    );
    assert!(prompt.contains(CONDUCTOR_SESSION), "{prompt}");
    assert!(prompt.contains("**Recovery context:** "), "{prompt}");
    assert_eq!(super::transcripts_holding(world, RECOVERED), 1);
    let pid_file = world.rig.root().join("temp/souffleur-conductor.pid");
    let pid: i32 = std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .expect("the recovered Conductor's window PID");
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The argv of each running claude of the project at `root` whose prompt holds `marker`
/// (a session's process, not the claude it runs below itself with the same arguments).
fn conductors(root: &Path, marker: &str) -> Vec<Vec<String>> {
    let argv_of = |pid: u32| -> Option<Vec<String>> {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let argv: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        (comm.trim() == "claude" && argv.iter().any(|a| a.contains(marker))).then_some(argv)
    };
    let pids: Vec<u32> = super::world::processes_in(root)
        .into_iter()
        .filter(|pid| argv_of(*pid).is_some())
        .collect();
    pids.iter()
        .filter(|pid| {
            let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split(' ').nth(1)?.parse::<u32>().ok()
                });
            !parent.is_some_and(|p| pids.contains(&p))
        })
        .filter_map(|pid| argv_of(*pid))
        .collect()
}
