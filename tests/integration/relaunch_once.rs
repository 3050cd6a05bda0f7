//! A relaunch is one at a time and leaves nothing stopped: a second relaunch of the same
//! task while the first proves its window is refused, naming the first; a relaunch
//! killed while it holds the old session stopped lets it run again; the gate's folder
//! is private under any umask; the gate looks for the session's program, not `env`.
#![allow(clippy::unwrap_used)]

use std::os::unix::process::CommandExt;

use crate::alive_actions::{
    dump, musician_window, relaunch, relaunch_command, stub, task_command,
    working_task_and_a_dying_kitty,
};
use crate::common::{RUN_AFTER_DASHES, alive, is_stopped, stub_claude, wait_until};

fn handoffs(s: &crate::common::Scratch) -> i64 {
    s.conn()
        .query_row(
            "SELECT count(*) FROM orchestration_messages WHERE task_id = 'task-03' AND message_type = 'handoff'",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

/// The new window's process group, from the PID file, ended (it is the test's to end).
fn end_new_window(s: &crate::common::Scratch) {
    if let Ok(text) = std::fs::read_to_string(s.temp().join("musician-task-03.pid"))
        && let Ok(pid) = text.trim().parse::<i32>()
    {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Two relaunches of task-03 at once: the second is refused while the first holds the
/// old session stopped, naming the first's PID; one handoff, one new window.
#[test]
fn a_second_relaunch_of_the_same_task_is_refused_naming_the_first() {
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(bin.path(), "kitty", RUN_AFTER_DASHES);
    stub_claude(bin.path(), 30);
    let (mut window, old_claude) = musician_window(&s);
    let first = relaunch_command(&s, bin.path(), Some(":99"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the first relaunch to hold the old session", || {
        is_stopped(old_claude)
    });
    let second = relaunch(&s, bin.path(), Some(":99"));
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(err.contains("being relaunched already"), "{err}");
    assert!(err.contains(&format!("PID {}", first.id())), "{err}");
    let out = first.wait_with_output().unwrap();
    crate::common::assert_success(&out);
    assert_eq!(handoffs(&s), 1);
    assert!(window.wait().is_ok());
    end_new_window(&s);
}

/// A relaunch ended by SIGINT, SIGHUP or SIGKILL while the old window and its claude
/// are stopped: both run again (its guardian resumes them), still the same processes.
#[test]
fn a_relaunch_killed_mid_proof_leaves_nothing_stopped() {
    use nix::sys::signal::Signal;
    for signal in [Signal::SIGINT, Signal::SIGHUP, Signal::SIGKILL] {
        let (s, bin) = working_task_and_a_dying_kitty();
        stub(bin.path(), "kitty", RUN_AFTER_DASHES);
        stub_claude(bin.path(), 30);
        let (mut window, old_claude) = musician_window(&s);
        let mut first = relaunch_command(&s, bin.path(), Some(":99"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_until("the relaunch to hold the old session", || {
            is_stopped(old_claude)
        });
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(first.id() as i32), signal).unwrap();
        first.wait().unwrap();
        wait_until("the old session no longer stopped", || {
            !is_stopped(old_claude) && !is_stopped(window.id())
        });
        // Killed before it released the new session, the old one runs on; killed after
        // (the relaunch committed), the guardian ends it: never two.
        let released = new_session_runs(bin.path());
        if released {
            wait_until("the old session ended", || !alive(old_claude));
        } else {
            assert!(alive(old_claude) && alive(window.id()), "{signal}");
        }
        let _ = window.kill();
        let _ = window.wait();
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(old_claude as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A relaunch interrupted (SIGINT) once it released the new session, during its proof:
/// the new window is the task's (its PID file names it, running), the old session ends,
/// and the Conductor's watcher, which saw the old session, never calls the task dead.
#[test]
fn a_relaunch_interrupted_after_its_release_leaves_the_new_window_the_tasks() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let rig = crate::musician::Rig::new();
    let bin = tempfile::tempdir().unwrap();
    stub(bin.path(), "kitty", RUN_AFTER_DASHES);
    stub_claude(bin.path(), 30);
    let (mut window, old_claude) = musician_window(&rig.s);
    let watch = crate::conductor_watch::conductor_watch(&rig);
    wait_until("the watcher records task-03's session", || {
        crate::watch_never_quiet::seen_record(&rig).contains(&format!("\"pid\":{}", window.id()))
    });
    let mut first = relaunch_command(&rig.s, bin.path(), Some(":99"))
        .env("XDG_DATA_HOME", rig.data.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the new session released, the old one held", || {
        is_stopped(old_claude) && claude_of_runs(bin.path())
    });
    kill(Pid::from_raw(first.id() as i32), Signal::SIGINT).unwrap();
    first.wait().unwrap();
    wait_until("the old session ended", || !alive(old_claude));
    window.wait().unwrap();
    let recorded: u32 = std::fs::read_to_string(rig.s.temp().join("musician-task-03.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(recorded, window.id());
    assert!(
        alive(recorded),
        "the PID file names a window that is not running"
    );
    // A later event ends the watcher: it is the first and only one told.
    crate::conductor_watch::set(&rig, "task-03", "needs_review", None);
    let (code, out) = crate::musician::finish(watch);
    assert_eq!(code, 0, "{out}");
    let told = crate::conductor_watch::lines(&out);
    assert_eq!(told.len(), 1, "{out}");
    assert_eq!(told[0]["state"], "needs_review", "{out}");
    end_new_window(&rig.s);
}

/// Whether a session of the stubs in `bin` runs (a released relaunch's `claude`), given
/// half a second to show.
fn new_session_runs(bin: &std::path::Path) -> bool {
    std::thread::sleep(std::time::Duration::from_millis(500));
    claude_of_runs(bin)
}

/// Whether a process runs the `claude` stub of `bin`.
fn claude_of_runs(bin: &std::path::Path) -> bool {
    let claude = bin.join("claude").display().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .any(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&claude))
        })
}

/// The window's side of the gate refuses a folder anyone may write to (0777): it runs
/// nothing, whatever `ready` or `go` say there.
#[test]
fn the_gate_refuses_a_folder_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let ran = dir.path().join("ran");
    let out = crate::common::maestro()
        .arg("gate")
        .arg(dir.path())
        .args(["--", "/bin/sh", "-c"])
        .arg(format!("touch '{}'", ran.display()))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("mode 0700"), "{err}");
    assert!(!ran.exists());
    assert!(!dir.path().join("ready").exists());
}

/// `maestro hooks install` under umask 000 makes `.claude/` 0755 (not 0777: anyone could
/// plant settings in it).
#[test]
fn hooks_install_under_umask_000_makes_no_folder_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let s = crate::common::Scratch::new();
    let out = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("umask 000; exec \"$0\" hooks install --project \"$1\"")
        .arg(env!("CARGO_BIN_EXE_maestro"))
        .arg(s.root())
        .env("XDG_DATA_HOME", crate::common::data_home())
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let mode = std::fs::metadata(s.root().join(".claude"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
}

/// Under umask 000 the gate's folder is 0700 all the same (another user could swap
/// `ready` or open `go` in a 0777 one).
#[test]
fn the_gate_folder_is_private_under_umask_000() {
    let (s, bin) = working_task_and_a_dying_kitty();
    // The kitty notes the mode of the folder its gate is given, then runs the command.
    stub(
        bin.path(),
        "kitty",
        &format!(
            "while [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nstat -c %a \"$3\" > '{}'\n\"$@\"\n",
            s.root().join("gate-mode.txt").display()
        ),
    );
    stub_claude(bin.path(), 30);
    let c = relaunch_command(&s, bin.path(), Some(":99"));
    // The umask is set by a shell in front of maestro.
    let program = c.get_program().to_owned();
    let args: Vec<_> = c.get_args().map(ToOwned::to_owned).collect();
    let envs: Vec<_> = c
        .get_envs()
        .map(|(k, v)| (k.to_owned(), v.map(ToOwned::to_owned)))
        .collect();
    let mut sh = std::process::Command::new("/bin/sh");
    sh.arg("-c")
        .arg("umask 000; exec \"$0\" \"$@\"")
        .arg(program)
        .args(args);
    for (k, v) in envs {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    let out = sh.process_group(0).output().unwrap();
    crate::common::assert_success(&out);
    let mode = std::fs::read_to_string(s.root().join("gate-mode.txt")).unwrap();
    assert_eq!(mode.trim(), "700");
    end_new_window(&s);
}

/// The default template runs `env -u CLAUDECODE claude`: with no claude on PATH the gate
/// refuses before the handoff is written (it looked for `env` before), so nothing
/// changes.
#[test]
fn a_missing_claude_behind_env_changes_nothing() {
    if crate::common::find_on_path("claude").is_some() {
        eprintln!("skipped: a claude is on PATH here; the test needs none");
        return;
    }
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(bin.path(), "kitty", RUN_AFTER_DASHES);
    let before = dump(&s);
    let out = relaunch(&s, bin.path(), Some(":99"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("claude was not found"), "{err}");
    assert!(err.contains("Nothing was changed"), "{err}");
    assert_eq!(dump(&s), before);
}

/// `maestro task launch`: a Musician's first window, proven like a relaunch (its session
/// runs before its PID is recorded), with nothing written to the database; refused
/// while a session of the task runs.
#[test]
fn a_first_launch_is_proven_and_refused_beside_a_live_session() {
    let (s, bin) = working_task_and_a_dying_kitty();
    s.set_task("task-03", "watching");
    stub(bin.path(), "kitty", RUN_AFTER_DASHES);
    stub(
        bin.path(),
        "claude",
        &format!(
            "echo \"$@\" > '{}'\nsleep 30\n",
            s.root().join("argv.txt").display()
        ),
    );
    let before = dump(&s);
    let launch = || {
        task_command(&s, bin.path(), Some(":99"), "launch")
            .output()
            .unwrap()
    };
    let out = launch();
    crate::common::assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("its session running"));
    assert_eq!(dump(&s), before, "nothing written to the database");
    let pid: i32 = std::fs::read_to_string(s.temp().join("musician-task-03.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid as u32));
    wait_until("the session's argv", || s.root().join("argv.txt").exists());
    let argv = std::fs::read_to_string(s.root().join("argv.txt")).unwrap();
    assert!(argv.contains("/musician task-03"), "{argv}");
    let again = launch();
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(1), "{err}");
    assert!(err.contains("already has a live session"), "{err}");
    end_new_window(&s);
}

/// Under a user's ceiling of `default` (`[souffleur] max_external_permission`), a
/// Musician's first launch and its relaunch both start it in `default`, not acceptEdits;
/// without that line, acceptEdits.
#[test]
fn a_musicians_window_starts_held_to_the_users_ceiling() {
    let (s, bin) = working_task_and_a_dying_kitty();
    s.set_task("task-03", "watching");
    stub(bin.path(), "kitty", RUN_AFTER_DASHES);
    let argv = s.root().join("argv.txt");
    stub(
        bin.path(),
        "claude",
        &format!(
            "{{ echo \"$@\"; echo END; }} >> '{}'\nsleep 30\n",
            argv.display()
        ),
    );
    let config = s.root().join("config.toml");
    let run = |verb: &str, ceiling: Option<&str>| {
        let body = ceiling.map_or(String::new(), |c| {
            format!("[souffleur]\nmax_external_permission = \"{c}\"\n")
        });
        std::fs::write(&config, body).unwrap();
        let out = task_command(&s, bin.path(), Some(":99"), verb)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        crate::common::assert_success(&out);
        wait_until("the session's argv", || {
            std::fs::read_to_string(&argv).is_ok_and(|t| t.ends_with("END\n"))
        });
        let line = std::fs::read_to_string(&argv).unwrap();
        std::fs::remove_file(&argv).unwrap();
        line
    };
    let first = run("launch", Some("default"));
    assert!(first.starts_with("--permission-mode default "), "{first}");
    let again = run("relaunch", Some("default"));
    assert!(again.starts_with("--permission-mode default "), "{again}");
    let unset = run("relaunch", None);
    assert!(
        unset.starts_with("--permission-mode acceptEdits "),
        "{unset}"
    );
    end_new_window(&s);
}
