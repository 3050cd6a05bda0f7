//! Files planted in a project by whoever can write there: links to the operator's
//! files, FIFOs, control bytes. maestro neither reads through them, nor writes through
//! them, nor hangs on them, nor prints their bytes raw.
#![allow(clippy::unwrap_used)]

use crate::common::{Relauncher, Scratch, assert_success, event, maestro};

#[test]
fn a_status_log_linked_to_a_secret_is_refused_and_never_quoted() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let secret = s.root().join("secret");
    std::fs::write(&secret, "root-only-token-8d1f\n").unwrap();
    std::os::unix::fs::symlink(&secret, s.temp().join("task-01-status")).unwrap();
    let mut m = s.headless(&["--stall-after", "1s", "--report-to-db"]);
    let e = m.wait_json("the link is refused and named", |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .is_some_and(|d| d.contains("task-01-status") && d.contains("symbolic link"))
    });
    assert_eq!(e["task_id"], "task-01", "{e}");
    // A real log of another task stalls and is reported: by then the linked one
    // would have been too.
    s.set_task("task-02", "working");
    s.append("task-02-status", "step 1 started [ctx: 10%]\n");
    m.wait_json("the other task's stall", |v| {
        event(v) == "anomaly" && v["task_id"] == "task-02" && v["anomaly"] == "stalled"
    });
    assert!(
        !m.seen.iter().any(|l| l.contains("root-only-token")),
        "the secret reached the output"
    );
    let stored: String = s
        .conn()
        .query_row(
            "SELECT coalesce(group_concat(message, '|'), '') FROM orchestration_messages",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!stored.contains("root-only-token"), "{stored}");
}

#[test]
fn a_relaunch_replaces_a_planted_pid_file_link_instead_of_writing_through_it() {
    let r = Relauncher::new();
    r.s.set_task("task-02", "working");
    let victim = r.s.root().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let pid_file = r.s.temp().join("musician-task-02.pid");
    std::os::unix::fs::symlink(&victim, &pid_file).unwrap();
    let v = r.relaunch("task-02");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!std::fs::symlink_metadata(&pid_file).unwrap().is_symlink());
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        v["pid"].as_i64().unwrap().to_string()
    );
    Relauncher::end_window(&v);
}

#[test]
fn headroom_answers_at_once_on_a_fifo() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    nix::unistd::mkfifo(
        &s.temp().join("task-01-status"),
        nix::sys::stat::Mode::S_IRWXU,
    )
    .unwrap();
    let out = maestro()
        .args(["task", "headroom", "task-01", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    // No data: caution, at once.
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn control_bytes_in_worked_by_and_pipeline_names_never_reach_the_terminal() {
    let s = Scratch::new();
    s.set_task("task-02", "working");
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET worked_by = ?1 WHERE task_id = 'task-02'",
            ["musician-\u{1b}[2J\u{1b}]0;pwned\u{7}"],
        )
        .unwrap();
    let err = relaunch_question(&s);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
}

#[test]
fn a_hold_flag_planted_as_a_link_is_replaced_not_written_through() {
    let s = Scratch::new();
    let data = tempfile::tempdir().unwrap();
    let key = maestro::core::paths::ProjectKey::of(s.root());
    let holds = data.path().join("maestro/holds");
    std::fs::create_dir_all(&holds).unwrap();
    let victim = s.root().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let flag = holds.join(format!("{}.hold", key.key));
    std::os::unix::fs::symlink(&victim, &flag).unwrap();
    let out = maestro()
        .env("XDG_DATA_HOME", data.path())
        .args(["conductor", "hold", "--yes", "--json", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!std::fs::symlink_metadata(&flag).unwrap().is_symlink());
}

#[test]
fn a_relaunch_answers_at_once_when_the_logs_are_fifos() {
    let s = Scratch::new();
    s.set_task("task-02", "working");
    for name in ["task-02-status", "task-02-deviations"] {
        nix::unistd::mkfifo(&s.temp().join(name), nix::sys::stat::Mode::S_IRWXU).unwrap();
    }
    // The facts were gathered without waiting for a writer on either FIFO.
    relaunch_question(&s);
}

/// `task relaunch task-02` without a terminal: refused for want of --yes, with the
/// question shown on stderr (returned).
fn relaunch_question(s: &Scratch) -> String {
    let out = maestro()
        .args(["task", "relaunch", "task-02", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("Relaunch task-02"), "{err}");
    err
}
