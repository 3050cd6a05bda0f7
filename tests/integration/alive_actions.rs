//! An action's word is its result: a relaunch or a recovery reports success only once the
//! session runs in the window it opened (a `claude` process below it, still running a
//! moment later); what can be checked first (a display) is checked before anything is
//! written, and what fails after a write is put back as it was.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use crate::common::{Scratch, event, maestro};

/// A kitty that cannot open a window, as kitty says it without a display.
fn dying_kitty(dir: &std::path::Path) {
    stub(
        dir,
        "kitty",
        "echo 'X11: The DISPLAY environment variable is missing' >&2\nexit 1\n",
    );
}

/// The task's state and worker, and how many messages the database holds.
fn task_and_messages(s: &Scratch, task: &str) -> ((String, Option<String>), i64) {
    let c = s.conn();
    let row = c
        .query_row(
            "SELECT state, worked_by FROM orchestration_tasks WHERE task_id = ?1",
            [task],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let n = c
        .query_row("SELECT count(*) FROM orchestration_messages", [], |r| {
            r.get(0)
        })
        .unwrap();
    (row, n)
}

fn relaunch(s: &Scratch, bin: &std::path::Path, display: Option<&str>) -> std::process::Output {
    let mut c = maestro();
    c.args(["task", "relaunch", "task-03", "--yes", "--project"])
        .arg(s.root())
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env_remove("WAYLAND_DISPLAY");
    match display {
        Some(d) => c.env("DISPLAY", d),
        None => c.env_remove("DISPLAY"),
    };
    c.output().unwrap()
}

/// A project whose task-03 works, worked by its first Musician, and a dying kitty.
fn working_task_and_a_dying_kitty() -> (Scratch, tempfile::TempDir) {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET worked_by = 'musician-task-03' WHERE task_id = 'task-03'",
            [],
        )
        .unwrap();
    let bin = tempfile::tempdir().unwrap();
    dying_kitty(bin.path());
    (s, bin)
}

#[test]
fn a_relaunch_with_no_display_is_refused_and_changes_nothing() {
    let (s, bin) = working_task_and_a_dying_kitty();
    let before = task_and_messages(&s, "task-03");
    let out = relaunch(&s, bin.path(), None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("no display to open a window on"), "{err}");
    assert!(err.contains("Nothing was changed"), "{err}");
    assert_eq!(task_and_messages(&s, "task-03"), before);
}

/// The task's row as a relaunch may touch it: state, worker, heartbeat.
type Row = (String, Option<String>, Option<String>);
/// Each message: id, type, text.
type Messages = Vec<(i64, String, String)>;

/// The task's whole row as the relaunch may touch it (state, worker, heartbeat).
fn row(s: &Scratch) -> Row {
    s.conn()
        .query_row(
            "SELECT state, worked_by, last_heartbeat FROM orchestration_tasks WHERE task_id = 'task-03'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

fn messages(s: &Scratch) -> Messages {
    let c = s.conn();
    let mut q = c
        .prepare("SELECT id, message_type, message FROM orchestration_messages ORDER BY id")
        .unwrap();
    q.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// A relaunch that fails leaves the row, the messages and the PID files as they were.
fn assert_nothing_changed(s: &Scratch, before: &(Row, Messages)) {
    assert_eq!(row(s), before.0);
    assert_eq!(
        messages(s),
        before.1,
        "no message says a session was launched"
    );
    assert!(
        !s.temp().join("musician-task-03.pid").exists(),
        "no PID recorded for a window that is not there"
    );
}

/// Writes an executable stub `name` in `bin` with this body (after its `#!/bin/sh`).
fn stub(bin: &std::path::Path, name: &str, body: &str) {
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A relaunch with these stubs in place that must fail: exit 1, and the row, the
/// messages and the PID file as they were. Its stderr.
fn failed_relaunch(s: &Scratch, bin: &std::path::Path) -> String {
    let before = (row(s), messages(s));
    let out = relaunch(s, bin, Some(":99"));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_nothing_changed(s, &before);
    err
}

#[test]
fn a_window_that_dies_at_once_is_no_relaunch_and_the_task_is_put_back() {
    let (s, bin) = working_task_and_a_dying_kitty();
    let err = failed_relaunch(&s, bin.path());
    assert!(err.contains("before claude ran in it"), "{err}");
    assert!(err.contains("X11: The DISPLAY"), "kitty's own words: {err}");
}

/// A kitty that lives 2 s and opens nothing (it never runs the command): no relaunch.
#[test]
fn a_window_that_lives_two_seconds_and_runs_nothing_is_no_relaunch() {
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(
        bin.path(),
        "kitty",
        "sleep 2\necho 'GLFW initialization failed' >&2\nexit 1\n",
    );
    crate::common::stub_claude(bin.path(), 30);
    let err = failed_relaunch(&s, bin.path());
    assert!(err.contains("before claude ran in it"), "{err}");
    assert!(err.contains("GLFW initialization failed"), "{err}");
}

/// A kitty whose session ends at once (claude runs, then exits): no relaunch either.
#[test]
fn a_window_whose_session_ends_at_once_is_no_relaunch() {
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(
        bin.path(),
        "kitty",
        &format!("{}sleep 5\n", crate::common::RUN_AFTER_DASHES),
    );
    stub(bin.path(), "claude", "sleep 0.3\nexit 1\n");
    let err = failed_relaunch(&s, bin.path());
    assert!(err.contains("ended at once"), "{err}");
}

/// A kitty that runs the command as its child: a relaunch, the live window's PID
/// recorded, within the time it took before (the session seen running for 1.5 s).
#[test]
fn a_window_that_runs_the_session_is_a_relaunch_with_its_live_pid() {
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(bin.path(), "kitty", crate::common::RUN_AFTER_DASHES);
    crate::common::stub_claude(bin.path(), 30);
    let t0 = std::time::Instant::now();
    let out = relaunch(&s, bin.path(), Some(":99"));
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    eprintln!("relaunch with a running session took {took:?}");
    let pid: i32 = std::fs::read_to_string(s.temp().join("musician-task-03.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok());
    assert_eq!(row(&s).0, "fix_proposed");
    assert!(String::from_utf8_lossy(&out.stdout).contains("its session running"));
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The Souffleur confirmed, its Conductor killed: the recovery ends `failed`, with no
/// PID to show for it.
fn recovery_after_the_conductor_dies_fails(rig: &mut crate::souffleur::Rig) {
    let mut m = rig.souffleur(rig.conductor.id());
    crate::souffleur::confirmed(&mut m);
    rig.conductor.kill().unwrap();
    rig.conductor.wait().unwrap();
    m.wait_json("death noticed", |v| event(v) == "watchdog");
    let done = m.wait_json("recovery result", |v| {
        event(v) == "recovery" && v["status"] != "started"
    });
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["pid"].is_null(), "{done}");
}

/// The Souffleur's recovery with a terminal that dies at once: never `success`.
#[test]
fn a_recovery_whose_window_dies_at_once_is_not_a_success() {
    let mut rig = crate::souffleur::Rig::new(None);
    dying_kitty(&rig.stubs);
    recovery_after_the_conductor_dies_fails(&mut rig);
}

/// The Souffleur's recovery with a kitty that lives 2 s and runs nothing: `failed`.
#[test]
fn a_recovery_whose_window_runs_no_session_is_not_a_success() {
    let mut rig = crate::souffleur::Rig::new(None);
    crate::souffleur::stub(
        &rig.stubs,
        "kitty",
        "echo $$ >> \"$STUB_DIR/pids\"\nsleep 2\nexit 0\n",
    );
    recovery_after_the_conductor_dies_fails(&mut rig);
}

/// A terminal that hands the command to an instance already running (the session is
/// not a process below the window): the new session's `SessionStart` hook says it runs.
#[test]
fn a_session_started_outside_the_window_is_seen_by_its_start_hook() {
    let (s, bin) = working_task_and_a_dying_kitty();
    let root = std::fs::canonicalize(s.root()).unwrap();
    // The command runs detached (not a child of the stub), as a single-instance
    // terminal runs it; the window itself stays up.
    stub(
        bin.path(),
        "kitty",
        &crate::common::RUN_AFTER_DASHES.replace("\"$@\"\n", "( \"$@\" & )\nexec sleep 30\n"),
    );
    stub(
        bin.path(),
        "claude",
        &format!(
            "printf '%s' '{{\"session_id\":\"s-new\",\"hook_event_name\":\"SessionStart\",\"cwd\":\"{}\"}}' | {} hook --project {}\nexec sleep 30\n",
            root.display(),
            env!("CARGO_BIN_EXE_maestro"),
            root.display()
        ),
    );
    let out = relaunch(&s, bin.path(), Some(":99"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(row(&s).0, "fix_proposed");
}
