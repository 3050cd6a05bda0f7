//! The orchestration's world: its project, its processes' environment and the faults
//! the test makes in it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::super::ModelServer;
use super::super::replace_pollers::Rig;
use super::scripts::TASKS;
use crate::common::{RUN_AFTER_DASHES, wait_until};

/// Everything a process of the orchestration needs: the scripted model, the test's home,
/// maestro's data, its configuration, and a PATH with maestro, the real claude and a
/// terminal that runs its command.
pub(super) struct World {
    pub(super) rig: Rig,
    env: Vec<(&'static str, String)>,
}

impl World {
    pub(super) fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CLAUDECODE")
            .envs(self.env.iter().map(|(k, v)| (*k, v.as_str())))
            .current_dir(self.rig.root())
            .stdin(Stdio::null());
        c
    }

    /// maestro, run under umask 000 (what it makes must be private all the same).
    pub(super) fn maestro(&self, args: &[&str]) -> Command {
        let mut c = self.command("/bin/sh");
        c.arg("-c")
            .arg("umask 000; exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_maestro"))
            .args(args)
            .arg("--project")
            .arg(self.rig.root());
        c
    }

    pub(super) fn state(&self, task: &str) -> String {
        super::super::replace_pollers::conn(self.rig.root())
            .query_row(
                "SELECT state FROM orchestration_tasks WHERE task_id = ?1",
                [task],
                |r| r.get(0),
            )
            .unwrap()
    }
}

pub(super) fn setup(claude: &Path, server: &ModelServer) -> World {
    let rig = Rig::new("task-01", true);
    let db = super::super::replace_pollers::conn(rig.root());
    for task in TASKS {
        db.execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'watching', datetime('now'))
             ON CONFLICT(task_id) DO UPDATE SET state = 'watching'",
            [task],
        )
        .unwrap();
    }
    let (bin, path) = super::super::real_claude_first(rig.root(), claude);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_maestro"), bin.join("maestro")).unwrap();
    crate::alive_actions::stub(&bin, "kitty", RUN_AFTER_DASHES);
    let config = rig.root().join("maestro.toml");
    std::fs::write(
        &config,
        "[launch]\nclaude = [\"claude\", \"-p\", \"--allowedTools\", \"Bash\", \"--model\", \"claude-sonnet-4-5\"]\nmusician_prompt = \"/musician {task} ORCH-R-{task}\"\n",
    )
    .unwrap();
    let mut env = super::super::claude_env(rig.rig.home.path(), server);
    env.extend([
        ("XDG_DATA_HOME", rig.data.path().display().to_string()),
        ("PATH", path),
        ("MAESTRO_CONFIG", config.display().to_string()),
        ("DISPLAY", ":99".to_owned()),
    ]);
    World { rig, env }
}

/// The first session of each task, as the Conductor launches them.
pub(super) fn launch_musicians(
    world: &World,
    claude: &Path,
) -> BTreeMap<&'static str, std::process::Child> {
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
pub(super) fn kill_when_seen(world: &World, task: &str, child: &mut std::process::Child) {
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
pub(super) fn conductor_messages(world: &World) -> Vec<i64> {
    super::super::replace_pollers::conn(world.rig.root())
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
pub(super) fn flood_and_fail_the_souffleur(world: &World) {
    let db = super::super::replace_pollers::conn(world.rig.root());
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

pub(super) fn seen_path(world: &World) -> PathBuf {
    crate::common::walk(world.rig.data.path())
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "seen"))
        .unwrap_or_default()
}

/// No process of the test left stopped (state `T`).
pub(super) fn stopped_processes(root: &Path) -> Vec<u32> {
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
