//! An action's word is its result: a relaunch or a recovery reports success only once the
//! window it opened is seen alive; what can be checked first (a display) is checked
//! before anything is written, and what fails after a write is put back.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;

use crate::common::{Scratch, event, maestro};

/// A kitty that cannot open a window, as kitty says it without a display.
fn dying_kitty(dir: &std::path::Path) {
    let kitty = dir.join("kitty");
    std::fs::write(
        &kitty,
        "#!/bin/sh\necho 'X11: The DISPLAY environment variable is missing' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&kitty, std::fs::Permissions::from_mode(0o755)).unwrap();
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

#[test]
fn a_window_that_dies_at_once_is_no_relaunch_and_the_task_is_put_back() {
    let (s, bin) = working_task_and_a_dying_kitty();
    let out = relaunch(&s, bin.path(), Some(":99"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("exited at once"), "{err}");
    assert!(err.contains("X11: The DISPLAY"), "kitty's own words: {err}");
    let ((state, worker), _) = task_and_messages(&s, "task-03");
    assert_eq!(state, "working");
    assert_eq!(worker.as_deref(), Some("musician-task-03"));
    let (kind, text): (String, String) = s
        .conn()
        .query_row(
            "SELECT message_type, message FROM orchestration_messages ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(
        text.contains("Relaunch of task-03 failed"),
        "{kind}: {text}"
    );
    assert!(
        !s.temp().join("musician-task-03.pid").exists(),
        "no PID recorded for a window that is not there"
    );
}

/// The Souffleur's recovery with a terminal that dies at once: never `success`.
#[test]
fn a_recovery_whose_window_dies_at_once_is_not_a_success() {
    let mut rig = crate::souffleur::Rig::new(None);
    dying_kitty(&rig.stubs);
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
