//! The faults a real run produces, driven on the real binary: maestro must keep seeing
//! the orchestration through each, and say what happened. Every wait is on an event
//! with a deadline.
#![allow(clippy::unwrap_used)]

use crate::common::{Scratch, event, maestro};

fn init(root: &std::path::Path) {
    let out = maestro()
        .args(["init", "--project"])
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

fn remove_db(s: &Scratch) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", s.db().display()));
    }
}

#[test]
fn a_database_created_after_start_is_picked_up() {
    let s = Scratch::without_db();
    let mut m = s.headless(&[]);
    let waiting = m.wait_json("waiting for the database", |v| {
        event(v) == "source" && v["source"] == "database" && v["status"] == "waiting"
    });
    assert!(
        waiting["detail"].as_str().unwrap().contains("comms.db"),
        "{waiting}"
    );
    init(s.root());
    s.set_task("task-01", "working");
    let appeared = m.wait_json("the database appears", |v| {
        event(v) == "source" && v["status"] == "appeared"
    });
    assert!(
        appeared["detail"].as_str().unwrap().contains("appeared"),
        "{appeared}"
    );
    m.wait_json("its tasks are seen", |v| {
        event(v) == "task" && v["task_id"] == "task-01" && v["state"] == "working"
    });
    // And the Sentinel watches them from the database's word now.
    s.append("task-01-status", "step 1 self-correction: redid it\n");
    m.wait_json("an anomaly for the new task", |v| {
        event(v) == "anomaly" && v["task_id"] == "task-01"
    });
}

#[test]
fn a_database_deleted_and_created_again_is_a_new_orchestration() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let mut m = s.headless(&[]);
    m.wait_json("first orchestration", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    remove_db(&s);
    m.wait_json("removal said", |v| {
        event(v) == "source" && v["source"] == "database" && v["status"] == "removed"
    });
    init(s.root());
    s.set_task("task-07", "working");
    let replaced = m.wait_json("the new one", |v| {
        event(v) == "source" && (v["status"] == "appeared" || v["status"] == "replaced")
    });
    assert!(
        replaced["detail"].as_str().unwrap().contains("comms.db"),
        "{replaced}"
    );
    m.wait_json("its tasks", |v| {
        event(v) == "task" && v["task_id"] == "task-07"
    });
    // Messages start over by id in the new file, and each is seen.
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-07', 'task-00', 'hello', 'instruction')",
            [],
        )
        .unwrap();
    let msg = m.wait_json("a message of the new file", |v| event(v) == "message");
    assert_eq!(
        (msg["id"].as_i64(), msg["message"].as_str()),
        (Some(1), Some("hello"))
    );
}

#[test]
fn a_database_renamed_over_the_old_one_is_seen() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let mut m = s.headless(&[]);
    m.wait_json("first orchestration", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    let other = tempfile::tempdir().unwrap();
    init(other.path());
    let conn = rusqlite::Connection::open(other.path().join("comms.db")).unwrap();
    conn.execute(
        "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('task-09', 'working', datetime('now'))",
        [],
    )
    .unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    drop(conn);
    std::fs::rename(other.path().join("comms.db"), s.db()).unwrap();
    let replaced = m.wait_json("replacement said", |v| {
        event(v) == "source" && v["status"] == "replaced"
    });
    assert!(
        replaced["detail"]
            .as_str()
            .unwrap()
            .contains("new orchestration"),
        "{replaced}"
    );
    m.wait_json("its task", |v| {
        event(v) == "task" && v["task_id"] == "task-09"
    });
}

#[test]
fn a_temp_folder_removed_and_created_again_is_followed() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let mut m = s.headless(&[]);
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    std::fs::remove_dir_all(s.temp()).unwrap();
    m.wait_json("the folder is missed", |v| {
        event(v) == "source" && v["source"] == "temp" && v["status"] == "waiting"
    });
    std::fs::create_dir(s.temp()).unwrap();
    m.wait_json("the folder is back", |v| {
        event(v) == "source" && v["source"] == "temp" && v["status"] == "watching"
    });
    s.append(
        "task-01-status",
        "step 2 self-correction: after the clean start\n",
    );
    let a = m.wait_json("an anomaly from the new folder", |v| event(v) == "anomaly");
    assert_eq!(a["anomaly"], "self-correction");
}

#[test]
fn a_fifo_named_like_a_log_blinds_nothing_and_stops_nothing() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    s.set_task("task-02", "working");
    nix::unistd::mkfifo(
        &s.temp().join("task-02-status"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    let mut m = s.headless(&[]);
    let warned = m.wait_json("one warning for the FIFO", |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("task-02-status")
    });
    assert!(
        warned["detail"]
            .as_str()
            .unwrap()
            .contains("not a regular file")
    );
    s.append("task-01-status", "step 1 self-correction: still seen\n");
    m.wait_json("the other logs are still read", |v| {
        event(v) == "anomaly" && v["task_id"] == "task-01"
    });
    m.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(m.wait_exit(), 0, "SIGTERM still ends maestro");
}

#[test]
fn escape_codes_in_a_log_never_reach_the_terminal_in_text_mode() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    s.append(
        "task-01-status",
        "step 1 self-correction: \u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}]52;c;aGk=\u{7}\n",
    );
    let mut cmd = maestro();
    cmd.args(["--no-tui", "--project"]).arg(s.root());
    let mut m = crate::common::Running::spawn(cmd);
    let line = m.wait_line("the report's detail", |l| l.starts_with("Detail:"));
    assert!(
        !line.contains('\u{1b}') && !line.contains('\u{7}'),
        "{line:?}"
    );
    assert!(line.contains("·]0;pwned"), "{line:?}");
}

#[test]
fn an_unreadable_heartbeat_is_said_once_and_the_row_still_shows() {
    let s = Scratch::new();
    s.conn()
        .execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('task-01', 'working', 'not a time')",
            [],
        )
        .unwrap();
    let mut m = s.headless(&[]);
    let e = m.wait_json("a warning", |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("not a time")
    });
    assert!(e["detail"].as_str().unwrap().contains("task-01"), "{e}");
    assert_eq!(
        e["task_id"], "task-01",
        "an error about a task names it as a field"
    );
    m.wait_json("the row still shows", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    // Another change of the row does not repeat it.
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET state = 'needs_review' WHERE task_id = 'task-01'",
            [],
        )
        .unwrap();
    m.wait_json("the change", |v| {
        event(v) == "task" && v["state"] == "needs_review"
    });
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    let repeats = m
        .seen
        .iter()
        .filter(|l| l.contains("not a time") && l.contains("\"error\""))
        .count();
    assert_eq!(repeats, 1, "{:?}", m.seen);
}

#[test]
fn a_paused_reader_loses_no_message() {
    use std::io::{BufRead, BufReader};
    const MESSAGES: i64 = 30_000;
    let s = Scratch::new();
    {
        let mut c = s.conn();
        let tx = c.transaction().unwrap();
        for i in 0..MESSAGES {
            tx.execute(
                "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-01', 'conductor', ?1, 'instruction')",
                [format!("message {i}")],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let mut child = maestro()
        .args(["--no-tui", "--json", "--project"])
        .arg(s.root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // The reader is away while maestro reads every message (the pipe holds 64 KiB and
    // the output queue 10,000 lines: far fewer than the messages).
    std::thread::sleep(std::time::Duration::from_secs(2));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut ids = Vec::new();
    let end = std::time::Instant::now() + crate::common::DEADLINE;
    while ids.len() < MESSAGES as usize {
        let left = end.saturating_duration_since(std::time::Instant::now());
        let line = rx
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("only {} of {MESSAGES} messages arrived", ids.len()));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_ne!(event(&v), "error", "{v}");
        if event(&v) == "message" {
            ids.push(v["id"].as_i64().unwrap());
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    // Each message exactly once, in id order.
    assert!(ids.windows(2).all(|w| w[0] + 1 == w[1]), "gaps or repeats");
    assert_eq!(ids.len() as i64, MESSAGES);
}

#[test]
fn a_huge_log_at_start_is_read_from_its_last_part_and_new_lines_come_through() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    // 1 GiB of history (sparse: no disk is spent), then one whole line.
    let file = s.temp().join("task-01-status");
    std::fs::File::create(&file)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    s.append("task-01-status", "\nstep 9 started [ctx: 40%]\n");
    let mut m = s.headless(&[]);
    let note = m.wait_json("the note that only the last part is read", |v| {
        event(v) == "source"
            && v["detail"]
                .as_str()
                .is_some_and(|d| d.contains("only its last"))
    });
    assert!(
        note["detail"].as_str().unwrap().contains("task-01-status"),
        "{note}"
    );
    s.append(
        "task-01-status",
        "step 10 self-correction: retried [ctx: 41%]\n",
    );
    let a = m.wait_json("the new line's anomaly", |v| event(v) == "anomaly");
    assert_eq!(a["anomaly"], "self-correction");
}

/// A database another process holds locked when maestro starts is waited for, never an
/// exit: a `source` event says so, and the tasks come once the lock is gone.
#[test]
fn a_database_locked_at_start_is_waited_for() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    // Held as a writer that keeps the file to itself (readers get SQLITE_BUSY, WAL or not).
    let conn = s.conn();
    conn.execute_batch(
        "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; UPDATE orchestration_tasks SET state = state;",
    )
    .unwrap();
    let mut m = s.headless(&[]);
    let waiting = m.wait_json("the wait said", |v| {
        crate::common::event(v) == "source" && v["status"] == "waiting"
    });
    assert!(
        waiting["detail"].as_str().unwrap().contains("busy"),
        "{waiting}"
    );
    conn.execute_batch("COMMIT").unwrap();
    drop(conn);
    m.wait_json("the tasks once the lock is gone", |v| {
        crate::common::event(v) == "task" && v["task_id"] == "task-01"
    });
    m.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(m.wait_exit(), 0);
}

/// SIGTERM ends headless maestro while a writer floods the database with messages (a
/// signal is heard before the next happening, however many wait; a hub waiting to hand
/// one over is let go). A second when the machine is not loaded; the deadline here
/// leaves room for a test suite on two busy cores.
#[test]
fn sigterm_ends_it_promptly_under_a_flood_of_messages() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let flooding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let writer = {
        let (flooding, db) = (flooding.clone(), s.db());
        std::thread::spawn(move || {
            let mut conn = rusqlite::Connection::open(db).unwrap();
            conn.busy_timeout(std::time::Duration::from_secs(5))
                .unwrap();
            while flooding.load(std::sync::atomic::Ordering::Relaxed) {
                let tx = conn.transaction().unwrap();
                for _ in 0..200 {
                    tx.execute(
                        "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-01', 'flood', 'more', 'instruction')",
                        [],
                    )
                    .unwrap();
                }
                tx.commit().unwrap();
            }
        })
    };
    let mut m = s.headless(&[]);
    for _ in 0..3 {
        m.wait_json("the flood", |v| event(v) == "message");
    }
    let signalled = std::time::Instant::now();
    m.signal(nix::sys::signal::Signal::SIGTERM);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut child = std::mem::replace(
        &mut m.child,
        std::process::Command::new("true").spawn().unwrap(),
    );
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = rx.recv_timeout(std::time::Duration::from_secs(3));
    let took = signalled.elapsed();
    flooding.store(false, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let status = status.unwrap_or_else(|_| panic!("still running {took:?} after SIGTERM"));
    assert_eq!(status.unwrap().code(), Some(0), "ended after {took:?}");
}
