//! The orchestration's world: its project, its processes' environment and the faults
//! the test makes in it.

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

    /// Windows opened from now on wait until [`Self::release_windows`].
    pub(super) fn hold_windows(&self) {
        std::fs::write(self.rig.data.path().join("hold-windows"), "").unwrap();
    }

    pub(super) fn release_windows(&self) {
        std::fs::remove_file(self.rig.data.path().join("hold-windows")).unwrap();
    }

    /// The relaunch gates' folders there are now.
    pub(super) fn gate_folders(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.rig.data.path().join("tmp"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("maestro-gate-"))
            .map(|e| e.path())
            .collect()
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

/// Whatever the test's end, no process of the project outlives it (a failed run's
/// sessions would be counted by the next).
impl Drop for World {
    fn drop(&mut self) {
        for pid in processes_in(self.rig.root()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The processes whose working folder is in `root`.
pub(super) fn processes_in(root: &Path) -> Vec<u32> {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|c| c.starts_with(&root))
        })
        .collect()
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
    let (bin, _) = super::super::real_claude_first(rig.root(), claude);
    // Only the test's own claude on PATH: taking it away must leave none.
    let path = std::iter::once(bin.clone())
        .chain(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ))
        .filter(|dir| *dir == bin || !dir.join("claude").exists())
        .map(|dir| dir.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_maestro"), bin.join("maestro")).unwrap();
    // A window waits while the test holds windows (to tamper with a gate meanwhile).
    let hold = rig.data.path().join("hold-windows");
    crate::alive_actions::stub(
        &bin,
        "kitty",
        &format!(
            "while [ -e '{}' ]; do sleep 0.05; done\n{RUN_AFTER_DASHES}",
            hold.display()
        ),
    );
    crate::alive_actions::stub(&bin, "claude_export", "printf 'SUMMARY of %s\\n' \"$1\"\n");
    let config = rig.root().join("maestro.toml");
    std::fs::write(
        &config,
        format!(
            "[launch]\nclaude = [\"claude\", \"-p\", \"--allowedTools\", \"Bash\", \"--model\", \"claude-sonnet-4-5\"]\nmusician_prompt = \"/musician {{task}} ORCH-{{task}}\"\n\
             [souffleur]\ninitial_wait = \"300ms\"\npoll = \"200ms\"\nteammate_initial_wait = \"2s\"\nteammate_poll = \"1s\"\nkill_grace = \"1s\"\n\
             claude_projects_dir = \"{}/.claude/projects\"\nexport_dir = \"{}/exports\"\n",
            rig.rig.home.path().display(),
            rig.root().display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(rig.root().join("exports")).unwrap();
    let mut env = super::super::claude_env(rig.rig.home.path(), server);
    env.extend([
        ("XDG_DATA_HOME", rig.data.path().display().to_string()),
        ("PATH", path),
        ("MAESTRO_CONFIG", config.display().to_string()),
        ("DISPLAY", ":99".to_owned()),
        ("TMPDIR", rig.data.path().join("tmp").display().to_string()),
    ]);
    std::fs::create_dir_all(rig.data.path().join("tmp")).unwrap();
    let world = World { rig, env };
    install_hooks_under_umask_000(&world);
    world
}

/// The hooks installed again by maestro under umask 000 into a project with no
/// `.claude/` yet: the folder it makes is no one else's to write. The rest the rig put
/// there (the skills' commands) is put back beside them.
fn install_hooks_under_umask_000(world: &World) {
    use std::os::unix::fs::PermissionsExt;
    let folder = world.rig.root().join(".claude");
    let aside = world.rig.root().join(".claude-aside");
    std::fs::rename(&folder, &aside).unwrap();
    let out = world
        .maestro(&["hooks", "install", "--replace-pollers"])
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
    assert_eq!(mode & 0o022, 0, ".claude/ made with mode {mode:o}");
    for entry in std::fs::read_dir(&aside).unwrap().flatten() {
        let to = folder.join(entry.file_name());
        if !to.exists() {
            std::fs::rename(entry.path(), to).unwrap();
        }
    }
    std::fs::remove_dir_all(&aside).unwrap();
}

/// The first session of each task, as the Conductor launches them: `maestro task
/// launch`, asked twice at once for `doubled` (one opens its window, the other is
/// refused, naming the first).
pub(super) fn launch_musicians(world: &World, doubled: &str) {
    for task in TASKS {
        let start = || {
            world
                .maestro(&["task", "launch", task])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let asked = if task == doubled {
            vec![start(), start()]
        } else {
            vec![start()]
        };
        let outs: Vec<_> = asked
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let opened = outs.iter().filter(|o| o.status.success()).count();
        assert_eq!(opened, 1, "{task}: {outs:?}");
        for out in outs.iter().filter(|o| !o.status.success()) {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("being relaunched already") || err.contains("already running"),
                "{task}: {err}"
            );
        }
        assert!(session_of(task, false).is_some(), "{task}: no session");
    }
}

/// The `claude` process of `task`'s first session (`relaunched`: of its relaunched one,
/// whose prompt says where to pick up).
pub(super) fn session_of(task: &str, relaunched: bool) -> Option<u32> {
    let marker = format!("ORCH-{task}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let line = String::from_utf8_lossy(&c);
                line.contains(&marker)
                    && line.contains("Previous session:") == relaunched
                    && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .is_ok_and(|n| n.trim() == "claude")
            })
        })
}

/// `task`'s first session, killed (SIGKILL) once the Conductor's watcher has seen it
/// working in its long step (its record holds the session's window; the window ends
/// with the session in it).
pub(super) fn kill_when_seen(world: &World, task: &str) {
    let pid = session_of(task, false).expect("the first session runs");
    let window =
        std::fs::read_to_string(world.rig.root().join(format!("temp/musician-{task}.pid")))
            .expect("the window's PID file");
    let status = world.rig.root().join(format!("temp/{task}-status"));
    wait_until("the task in its long step, its window seen", || {
        std::fs::read_to_string(&status).is_ok_and(|t| t.contains("step 2"))
            && world.state(task) == "working"
            && std::fs::read_to_string(seen_path(world))
                .is_ok_and(|t| t.contains(&format!("\"pid\":{}", window.trim())))
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_until("the killed session gone", || !crate::common::alive(pid));
}

/// Runs `f` with the test's claude taken off PATH (a user's broken install).
pub(super) fn without_claude<T>(world: &World, f: impl FnOnce() -> T) -> T {
    let bin = world.rig.root().join("bin");
    std::fs::rename(bin.join("claude"), bin.join("claude.away")).unwrap();
    let out = f();
    std::fs::rename(bin.join("claude.away"), bin.join("claude")).unwrap();
    out
}

/// Every window maestro opened for the tasks, ended (their sessions are done).
pub(super) fn end_windows(world: &World) {
    wait_until("every session done", || {
        TASKS
            .iter()
            .all(|t| session_of(t, false).is_none() && session_of(t, true).is_none())
    });
    for task in TASKS {
        let pid_file = world.rig.root().join(format!("temp/musician-{task}.pid"));
        if let Ok(pid) = std::fs::read_to_string(pid_file) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid.trim().parse().unwrap_or(0)),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The messages the Conductor is told: those to task-00 and the Souffleur's own (not
/// the instructions sent to it).
pub(super) fn conductor_messages(world: &World) -> Vec<i64> {
    super::super::replace_pollers::conn(world.rig.root())
        .prepare(
            "SELECT id FROM orchestration_messages WHERE task_id = 'task-00'
             OR (task_id = 'souffleur' AND message_type IS NOT 'instruction') ORDER BY id",
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
    processes_in(root)
        .into_iter()
        .filter(|pid| crate::common::is_stopped(*pid))
        .collect()
}

/// Every message (id, to, from, type, its start): shown when the test fails.
pub(super) fn messages(world: &World) -> Vec<(i64, String, String, String, String)> {
    super::super::replace_pollers::conn(world.rig.root())
        .prepare(
            "SELECT id, task_id, from_session, message_type, substr(message, 1, 60)
             FROM orchestration_messages ORDER BY id",
        )
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The test's word that every fault has been made, sent to the Conductor last.
pub(super) const FAULTS_DONE: &str = "FAULTS-DONE";

pub(super) fn say_faults_done(world: &World) {
    super::super::replace_pollers::conn(world.rig.root())
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-00', 'test', ?1, 'instruction')",
            [FAULTS_DONE],
        )
        .unwrap();
}
