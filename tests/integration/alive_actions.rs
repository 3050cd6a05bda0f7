//! An action's word is its result: a relaunch or a recovery reports success only once the
//! session runs in the window it opened (a `claude` process below it, still running a
//! moment later). Prove, then commit: a window that fails changes nothing (no row, no
//! message, no id consumed), and the task's live session runs on as it was.
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

pub(crate) fn relaunch(
    s: &Scratch,
    bin: &std::path::Path,
    display: Option<&str>,
) -> std::process::Output {
    relaunch_command(s, bin, display).output().unwrap()
}

/// The `maestro task relaunch task-03 --yes` of [`relaunch`], not started.
pub(crate) fn relaunch_command(
    s: &Scratch,
    bin: &std::path::Path,
    display: Option<&str>,
) -> std::process::Command {
    task_command(s, bin, display, "relaunch")
}

/// `maestro task VERB task-03 --yes` with the stubs in `bin` first on PATH, on `display`.
pub(crate) fn task_command(
    s: &Scratch,
    bin: &std::path::Path,
    display: Option<&str>,
    verb: &str,
) -> std::process::Command {
    let mut c = maestro();
    c.args(["task", verb, "task-03", "--yes", "--project"])
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
    c
}

/// A project whose task-03 works, worked by its first Musician, and a dying kitty.
pub(crate) fn working_task_and_a_dying_kitty() -> (Scratch, tempfile::TempDir) {
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
pub(crate) type Row = (String, Option<String>, Option<String>);
/// Each message: id, type, text.
pub(crate) type Messages = Vec<(i64, String, String)>;

/// The task's whole row as the relaunch may touch it (state, worker, heartbeat).
pub(crate) fn row(s: &Scratch) -> Row {
    s.conn()
        .query_row(
            "SELECT state, worked_by, last_heartbeat FROM orchestration_tasks WHERE task_id = 'task-03'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

pub(crate) fn messages(s: &Scratch) -> Messages {
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
pub(crate) fn stub(bin: &std::path::Path, name: &str, body: &str) {
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

/// Every row of the orchestration's tables, as text: a dump to compare.
pub(crate) fn dump(s: &Scratch) -> Vec<String> {
    let c = s.conn();
    let mut out = Vec::new();
    for table in ["orchestration_tasks", "orchestration_messages"] {
        let mut q = c.prepare(&format!("SELECT * FROM {table}")).unwrap();
        let n = q.column_count();
        let rows = q
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get_ref(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap();
        out.extend(rows.map(|r| format!("{table}: {}", r.unwrap())));
    }
    out
}

// The window is returned to the caller, who kills and waits on it.
#[allow(clippy::zombie_processes)]
/// task-03's Musician as maestro would have launched it: a window named `kitty` (a
/// script) with a `claude` in it, its PID in `temp/musician-task-03.pid`. The window
/// and the claude's PID.
pub(crate) fn musician_window(s: &Scratch) -> (std::process::Child, u32) {
    let dir = s.root().join("old-window");
    std::fs::create_dir_all(&dir).unwrap();
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap();
    let claude = dir.join("claude");
    if !claude.exists() {
        std::os::unix::fs::symlink(sleep, &claude).unwrap();
    }
    stub(&dir, "kitty", &format!("{} 300\n", claude.display()));
    let window = std::process::Command::new(dir.join("kitty"))
        .spawn()
        .unwrap();
    std::fs::write(
        s.temp().join("musician-task-03.pid"),
        format!("{}\n", window.id()),
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let child = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", window.id()))
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = child {
            return (window, pid);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the old claude never started"
        );
        std::thread::yield_now();
    }
}

/// Three failed relaunches of task-03 while its Musician runs (a window, a claude in
/// it) and a headless maestro watches: after each, the old window and its claude are
/// alive with the same PIDs and running, the PID file is byte for byte the same, the
/// tables hold the same rows; the next message gets `max(id) + 1` of the rows before;
/// and the watching maestro never printed a message id that is not in the table.
pub(crate) fn failed_relaunches_keep_the_musician(
    s: &Scratch,
    run: &dyn Fn() -> std::process::Output,
) {
    let (mut window, claude) = musician_window(s);
    let mut watching = s.headless(&[]);
    watching.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-00"
    });
    let pid_file = s.temp().join("musician-task-03.pid");
    let recorded = std::fs::read(&pid_file).unwrap();
    let before = dump(s);
    let max_id: i64 = s
        .conn()
        .query_row(
            "SELECT coalesce(max(id), 0) FROM orchestration_messages",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for round in 0..3 {
        let out = run();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "round {round}: {err}");
        assert!(err.contains("Nothing was changed"), "round {round}: {err}");
        assert!(
            window.try_wait().unwrap().is_none(),
            "round {round}: the window ended"
        );
        assert!(
            crate::common::alive(claude),
            "round {round}: its claude ended"
        );
        assert!(
            !crate::common::is_stopped(claude) && !crate::common::is_stopped(window.id()),
            "round {round}: left paused"
        );
        assert_eq!(std::fs::read(&pid_file).unwrap(), recorded, "round {round}");
        assert_eq!(dump(s), before, "round {round}");
    }
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-03', 'task-00', 'next', 'instruction')",
            [],
        )
        .unwrap();
    let next: i64 = s
        .conn()
        .query_row("SELECT max(id) FROM orchestration_messages", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(next, max_id + 1, "no id was consumed");
    watching.wait_json("the next message", |v| {
        event(v) == "message" && v["id"] == next
    });
    let ids: Vec<i64> = messages(s).iter().map(|m| m.0).collect();
    for line in &watching.seen {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if event(&v) == "message" {
            let id = v["id"].as_i64().unwrap();
            assert!(
                ids.contains(&id),
                "printed message #{id} is not in the table: {line}"
            );
        }
    }
    let _ = window.kill();
    let _ = window.wait();
}

fn failing_kitty_keeps_the_musician(seconds: u32) {
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(
        bin.path(),
        "kitty",
        &format!("sleep {seconds}\necho 'GLFW initialization failed' >&2\nexit 1\n"),
    );
    failed_relaunches_keep_the_musician(&s, &|| relaunch(&s, bin.path(), Some(":99")));
}

/// A kitty that gives up after 2 s: three relaunches, the Musician untouched.
#[test]
fn a_kitty_failing_after_two_seconds_leaves_the_musician_running() {
    failing_kitty_keeps_the_musician(2);
}

/// A kitty that gives up after 9 s (inside the 10 s wait): the same.
#[test]
fn a_kitty_failing_after_nine_seconds_leaves_the_musician_running() {
    failing_kitty_keeps_the_musician(9);
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

/// A kitty whose session ends at once once released (claude runs, then exits): no
/// relaunch. The handoff was written before the release and stays (nothing is
/// deleted); a second message says the relaunch failed, and ids only grow.
#[test]
fn a_window_whose_session_ends_at_once_is_no_relaunch() {
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(
        bin.path(),
        "kitty",
        &format!("{}sleep 5\n", crate::common::RUN_AFTER_DASHES),
    );
    stub(bin.path(), "claude", "sleep 0.3\nexit 1\n");
    let before = messages(&s);
    let out = relaunch(&s, bin.path(), Some(":99"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("ended at once"), "{err}");
    assert!(err.contains("The handoff was written"), "{err}");
    let after = messages(&s);
    assert_eq!(
        after[..before.len()],
        before[..],
        "no row changed or deleted"
    );
    let added: Vec<&str> = after[before.len()..].iter().map(|m| m.1.as_str()).collect();
    assert_eq!(added, ["handoff", "instruction"], "{after:?}");
    assert!(after.last().unwrap().2.contains("relaunch"), "{after:?}");
    assert!(!s.temp().join("musician-task-03.pid").exists());
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

/// A claude of task-03 outside maestro's window (as in tmux), tied to the task by its
/// hooks (`/musician task-03`): its PID.
fn tied_claude_elsewhere(s: &Scratch) -> std::process::Child {
    let root = std::fs::canonicalize(s.root()).unwrap();
    let dir = s.root().join("elsewhere");
    std::fs::create_dir_all(&dir).unwrap();
    stub(
        &dir,
        "claude",
        &format!(
            "printf '%s' '{{\"session_id\":\"s-tmux\",\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"/musician task-03\",\"cwd\":\"{root}\"}}' | {maestro} hook --project {root}\ntouch {root}/elsewhere/hooked\nexec sleep 300\n",
            root = root.display(),
            maestro = env!("CARGO_BIN_EXE_maestro"),
        ),
    );
    let child = std::process::Command::new(dir.join("claude"))
        .env("XDG_DATA_HOME", crate::common::data_home())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !dir.join("hooked").exists() {
        assert!(std::time::Instant::now() < deadline, "the hook never ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// A proven relaunch: the new session, at its first read of comms.db, finds the handoff,
/// the new state and worker; then every old session of the task (its window, a claude
/// the hooks tie to it in another terminal) is ended and named. Never two Musicians.
#[test]
fn a_proven_relaunch_ends_every_old_session_and_the_new_one_finds_its_handoff() {
    if crate::common::find_on_path("sqlite3").is_none() {
        eprintln!("skipped: sqlite3 is not installed (.ci/run installs it with apt)");
        return;
    }
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(bin.path(), "kitty", crate::common::RUN_AFTER_DASHES);
    stub(
        bin.path(),
        "claude",
        "sqlite3 comms.db \"SELECT count(*) FROM orchestration_messages WHERE task_id = 'task-03' AND message_type = 'handoff'; SELECT state || ' ' || worked_by FROM orchestration_tasks WHERE task_id = 'task-03'\" > first-read.txt\nsleep 30\n",
    );
    let (mut window, old_claude) = musician_window(&s);
    let mut elsewhere = tied_claude_elsewhere(&s);
    let out = relaunch(&s, bin.path(), Some(":99"));
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = std::fs::read_to_string(s.root().join("first-read.txt")).unwrap();
    assert_eq!(first, "1\nfix_proposed musician-task-03-S2\n", "{first}");
    for pid in [window.id(), elsewhere.id()] {
        assert!(said.contains(&format!("PID {pid}")), "names {pid}: {said}");
    }
    assert!(window.wait().is_ok() && elsewhere.wait().is_ok());
    assert!(
        !crate::common::alive(old_claude),
        "the old window's claude was ended"
    );
    let new: i32 = std::fs::read_to_string(s.temp().join("musician-task-03.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(crate::common::alive(new as u32));
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(new),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// A live session of the task that belongs to another user (the task's recorded
/// session, run as `nobody`): the relaunch refuses before anything changes, naming its
/// PID, and that session runs on.
#[test]
fn another_users_session_of_the_task_makes_the_relaunch_refuse() {
    let Some(setpriv) = crate::common::find_on_path("setpriv") else {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    };
    if rustix::process::getuid().as_raw() != 0 {
        eprintln!("skipped: starting another user's process needs root");
        return;
    }
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(bin.path(), "kitty", crate::common::RUN_AFTER_DASHES);
    crate::common::stub_claude(bin.path(), 30);
    // A folder `nobody` can read, holding its `claude`.
    let shared = tempfile::Builder::new()
        .prefix("maestro-foreign-")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(shared.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    stub(shared.path(), "claude", "sleep 300\n");
    let mut foreign = std::process::Command::new(setpriv)
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/bin/sh",
        ])
        .arg(shared.path().join("claude"))
        .args(["--resume", "s-foreign"])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read(format!("/proc/{}/cmdline", foreign.id()))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("s-foreign"))
        || std::fs::metadata(format!("/proc/{}", foreign.id()))
            .is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) != 65534)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the foreign session never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET session_id = 's-foreign' WHERE task_id = 'task-03'",
            [],
        )
        .unwrap();
    let before = dump(&s);
    let out = relaunch(&s, bin.path(), Some(":99"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("PID {}", foreign.id())), "{err}");
    assert!(err.contains("another user"), "{err}");
    assert!(err.contains("Nothing was changed"), "{err}");
    assert_eq!(dump(&s), before);
    assert!(
        foreign.try_wait().unwrap().is_none(),
        "the other user's session runs on"
    );
    let _ = foreign.kill();
    let _ = foreign.wait();
}
