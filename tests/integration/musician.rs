//! `maestro musician watch` on the real binary and a real comms.db: what wakes it,
//! what does not, the heartbeat it keeps, the pause and its Conductor timeout, one
//! watcher of each kind per task, a busy database.
#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{DEADLINE, Scratch, maestro, walk};

pub(crate) struct Rig {
    pub(crate) s: Scratch,
    pub(crate) data: tempfile::TempDir,
}

impl Rig {
    pub(crate) fn new() -> Self {
        let s = Scratch::new();
        s.set_task("task-03", "working");
        s.set_task("task-04", "working");
        Self {
            s,
            data: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = maestro();
        c.env("XDG_DATA_HOME", self.data.path())
            .args(["musician", "watch"])
            .args(args)
            .arg("--project")
            .arg(self.s.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        let child = self.cmd(args).spawn().unwrap();
        self.attached(
            child.id(),
            if args.contains(&"--pause") {
                "pause"
            } else {
                "background"
            },
        );
        child
    }

    /// Waits until the watcher file names `pid`: the watcher holds its claim.
    pub(crate) fn attached(&self, pid: u32, mode: &str) {
        let end = Instant::now() + DEADLINE;
        loop {
            let found = walk(self.data.path())
                .into_iter()
                .filter(|p| p.extension().and_then(|e| e.to_str()) == Some(mode))
                .any(|p| std::fs::read_to_string(p).is_ok_and(|t| t.trim() == pid.to_string()));
            if found {
                return;
            }
            assert!(Instant::now() < end, "watcher {pid} never attached");
            std::thread::yield_now();
        }
    }

    pub(crate) fn message(&self, task: &str, from: &str, kind: &str, text: &str) {
        self.s
            .conn()
            .execute(
                "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES (?1, ?2, ?3, ?4)",
                [task, from, text, kind],
            )
            .unwrap();
    }

    pub(crate) fn heartbeat_age(&self, task: &str) -> f64 {
        self.s
            .conn()
            .query_row(
                "SELECT (julianday('now') - julianday(last_heartbeat)) * 86400 FROM orchestration_tasks WHERE task_id = ?1",
                [task],
                |r| r.get(0),
            )
            .unwrap()
    }
}

/// Waits for the process to end (within the deadline): exit code and stdout.
pub(crate) fn finish(child: Child) -> (i32, String) {
    let (code, out, _) = finish_all(child);
    (code, out)
}

/// Waits for the process to end: exit code and stderr.
fn finish_err(child: Child) -> (i32, String) {
    let (code, _, err) = finish_all(child);
    (code, err)
}

/// Waits for the process to end (within the deadline): exit code, stdout, stderr.
fn finish_all(child: Child) -> (i32, String, String) {
    let pid = child.id();
    let end = Instant::now() + DEADLINE;
    let out = std::thread::spawn(move || child.wait_with_output().unwrap());
    while !out.is_finished() {
        assert!(Instant::now() < end, "watcher {pid} did not exit");
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = out.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn only_a_conductor_message_for_its_own_task_wakes_a_background_watcher() {
    let rig = Rig::new();
    let w = rig.spawn(&["task-03", "--json"]);
    rig.message("task-04", "task-00", "instruction", "for another task");
    rig.message(
        "task-03",
        "task-03",
        "review_request",
        "the Musician's own message",
    );
    rig.message(
        "task-03",
        "task-00",
        "instruction",
        "rebase on main, then continue",
    );
    let (code, out) = finish(w);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["event"], "message");
    assert_eq!(v["message"]["message"], "rebase on main, then continue");
    assert_eq!(v["message"]["message_type"], "instruction");
    assert_eq!(v["message"]["from_session"], "task-00");
}

#[test]
fn since_id_picks_up_a_message_already_there_and_terminal_states_end_it() {
    let rig = Rig::new();
    rig.message("task-03", "task-00", "instruction", "first");
    let (code, out) = finish(rig.cmd(&["task-03", "--since-id", "0"]).spawn().unwrap());
    assert_eq!(code, 0);
    assert!(
        out.contains("MESSAGE: #1 [instruction] from task-00: first"),
        "{out}"
    );

    let w = rig.spawn(&["task-04"]);
    rig.s.set_task("task-04", "complete");
    let (code, out) = finish(w);
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("TERMINAL: task-04 is complete"), "{out}");
}

#[test]
fn the_heartbeat_is_kept_fresh_and_no_more_often_than_the_rule() {
    let rig = Rig::new();
    let conn = rig.s.conn();
    conn.execute_batch(
        "CREATE TABLE beats (at REAL);
         CREATE TRIGGER count_beats AFTER UPDATE OF last_heartbeat ON orchestration_tasks
         WHEN NEW.task_id = 'task-03' BEGIN INSERT INTO beats VALUES (julianday('now')); END;
         UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-10 seconds') WHERE task_id = 'task-03';
         DELETE FROM beats;",
    )
    .unwrap();
    let started = Instant::now();
    let w = rig.spawn(&["task-03", "--heartbeat-after", "1s"]);
    // A stale heartbeat is refreshed at once, then whenever it turns 1 s old.
    let end = Instant::now() + DEADLINE;
    while conn
        .query_row("SELECT count(*) FROM beats", [], |r| r.get::<_, i64>(0))
        .unwrap()
        < 3
    {
        assert!(Instant::now() < end, "the heartbeat was not kept fresh");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Three refreshes need two full periods: never more often than the rule.
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(rig.heartbeat_age("task-03") < 2.0);
    rig.message("task-03", "task-00", "instruction", "done waiting");
    assert_eq!(finish(w).0, 0);
}

#[test]
fn a_pause_watcher_exits_on_the_state_change_with_the_answer() {
    let rig = Rig::new();
    rig.s.set_task("task-03", "needs_review");
    let w = rig.spawn(&["task-03", "--pause", "--json"]);
    rig.message(
        "task-03",
        "task-00",
        "approval",
        "Approved; continue with step 4.",
    );
    rig.s.set_task("task-03", "review_approved");
    let (code, out) = finish(w);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["state"].as_str(), v["prev_state"].as_str()),
        (Some("review_approved"), Some("needs_review"))
    );
    assert_eq!(v["message"]["message"], "Approved; continue with step 4.");
}

#[test]
fn a_fresh_conductor_keeps_a_pause_waiting_and_a_stale_one_times_it_out() {
    let rig = Rig::new();
    rig.s.set_task("task-03", "error");
    // Fresh at the check (after 200 ms): waits until it would be 3 s old, then times out
    // (heartbeats are stored to the second, so that is at least 2 s from now).
    rig.s.set_task("task-00", "reviewing");
    let started = Instant::now();
    let w = rig.spawn(&[
        "task-03",
        "--pause",
        "--conductor-check-after",
        "200ms",
        "--conductor-fresh-within",
        "3s",
    ]);
    let (code, out) = finish(w);
    assert_eq!(code, 3, "{out}");
    assert!(out.starts_with("TIMEOUT:"), "{out}");
    assert!(
        started.elapsed() >= Duration::from_millis(1500),
        "the fresh Conductor was waited for: {:?}",
        started.elapsed()
    );

    // Stale already: out at the first check.
    rig.s
        .conn()
        .execute(
            "UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-10 minutes') WHERE task_id = 'task-00'",
            [],
        )
        .unwrap();
    let w = rig.spawn(&[
        "task-03",
        "--pause",
        "--json",
        "--conductor-check-after",
        "200ms",
        "--conductor-fresh-within",
        "9m",
    ]);
    let (code, out) = finish(w);
    assert_eq!(code, 3, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(
        v["conductor_heartbeat_age_s"].as_u64().unwrap() >= 600,
        "{v}"
    );
}

#[test]
fn a_second_watcher_of_the_same_kind_replaces_the_first() {
    let rig = Rig::new();
    let first = rig.spawn(&["task-03"]);
    let second = rig.spawn(&["task-03"]);
    let (code, out) = finish(first);
    assert_eq!(code, 5, "{out}");
    assert!(out.contains("REPLACED"), "{out}");
    rig.message("task-03", "task-00", "instruction", "to the newer one");
    let (code, out) = finish(second);
    assert_eq!(code, 0);
    assert!(out.contains("to the newer one"), "{out}");
}

#[test]
fn a_busy_database_delays_the_heartbeat_but_does_not_stop_the_watcher() {
    let rig = Rig::new();
    rig.s
        .conn()
        .execute(
            "UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-5 minutes') WHERE task_id = 'task-03'",
            [],
        )
        .unwrap();
    // Another process holds the write lock for 2 s.
    let mut holder = rig.s.conn();
    let tx = holder
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let w = rig.cmd(&["task-03"]).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    tx.commit().unwrap();
    let end = Instant::now() + DEADLINE;
    while rig.heartbeat_age("task-03") > 60.0 {
        assert!(Instant::now() < end, "the heartbeat was never refreshed");
        std::thread::sleep(Duration::from_millis(20));
    }
    rig.message("task-03", "task-00", "instruction", "still listening");
    let (code, out) = finish(w);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn bad_arguments_a_missing_database_and_sigterm() {
    let rig = Rig::new();
    let out = rig.cmd(&["task-00"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "the Conductor is no Musician");
    let out = rig.cmd(&["../etc"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = maestro()
        .args(["musician", "watch", "task-03", "--db"])
        .arg(rig.s.root().join("nothing.db"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no database"));

    let w = rig.spawn(&["task-03"]);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(w.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let (code, out) = finish(w);
    assert_eq!((code, out.as_str()), (0, ""), "quietly");
}

#[test]
fn headless_output_says_when_a_watcher_attaches_is_replaced_and_exits() {
    let rig = Rig::new();
    let mut cmd = maestro();
    cmd.env("XDG_DATA_HOME", rig.data.path())
        .args(["--no-tui", "--json", "--project"])
        .arg(rig.s.root());
    let mut m = crate::common::Running::spawn(cmd);
    m.wait_json("started", |v| {
        v["event"] == "task" && v["task_id"] == "task-03"
    });
    let first = rig.spawn(&["task-03"]);
    let v = m.wait_json("attached", |v| v["event"] == "watcher");
    assert_eq!(
        (
            v["task_id"].as_str(),
            v["mode"].as_str(),
            v["status"].as_str(),
            v["pid"].as_u64()
        ),
        (
            Some("task-03"),
            Some("background"),
            Some("attached"),
            Some(u64::from(first.id()))
        )
    );
    let second = rig.spawn(&["task-03"]);
    let v = m.wait_json("replaced", |v| v["event"] == "watcher");
    assert_eq!(v["status"], "replaced", "{v}");
    assert_eq!(v["pid"].as_u64(), Some(u64::from(second.id())));
    assert_eq!(finish(first).0, 5);
    rig.message("task-03", "task-00", "instruction", "go");
    assert_eq!(finish(second).0, 0);
    let v = m.wait_json("exited", |v| v["event"] == "watcher");
    assert_eq!(v["status"], "exited", "{v}");
}

#[test]
fn a_watcher_whose_database_is_deleted_says_so_and_exits_1() {
    let rig = Rig::new();
    let w = rig.spawn(&["task-03", "--heartbeat-after", "1s"]);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", rig.s.db().display()));
    }
    let (code, err) = finish_err(w);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("comms.db") && err.contains("removed"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
}

#[test]
fn a_watcher_whose_database_is_replaced_says_so_and_exits_1() {
    let rig = Rig::new();
    let w = rig.spawn(&["task-03"]);
    // A new orchestration's database renamed over the old one.
    let other = tempfile::tempdir().unwrap();
    let out = maestro()
        .args(["init", "--project"])
        .arg(other.path())
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    std::fs::rename(other.path().join("comms.db"), rig.s.db()).unwrap();
    let (code, err) = finish_err(w);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("replaced"), "{err}");
}
