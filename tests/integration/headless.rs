//! The headless contract (docs/cli.md), checked on the real binary with a real `SQLite`
#![allow(clippy::unwrap_used, clippy::many_single_char_names)]
//! database and real files. Every wait has a deadline; nothing sleeps and hopes.

use crate::common::{Scratch, event, maestro};
use nix::sys::signal::Signal;

#[test]
fn reports_existing_and_new_anomalies_in_json() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    s.set_task("task-02", "working");
    s.append(
        "task-01-status",
        "step 1 started [ctx: 10%]\nstep 2 self-correction: rewrote tokenizer [ctx: 20%]\n",
    );
    let mut m = s.headless(&[]);
    // Present at start: reported once, like a new one.
    let a = m.wait_json("existing self-correction", |v| event(v) == "anomaly");
    assert_eq!(a["task_id"], "task-01");
    assert_eq!(a["anomaly"], "self-correction");
    assert_eq!(
        a["detail"],
        "step 2 self-correction: rewrote tokenizer [ctx: 20%]"
    );
    assert!(a["ts"].as_str().unwrap().ends_with('Z'), "{a}");

    // Appended in two partial writes: one line, one spike.
    s.append("task-02-status", "step 2 started [ctx: 29%]\nstep 3 sta");
    s.append("task-02-status", "rted [ctx: 51%]\n");
    let a = m.wait_json("context spike", |v| event(v) == "anomaly");
    assert_eq!(a["anomaly"], "context-spike");
    assert_eq!((a["from"].as_i64(), a["to"].as_i64()), (Some(29), Some(51)));
    assert_eq!(
        a["detail"],
        "Context jumped from 29% to 51% between step 2 and step 3 (+22%)"
    );

    s.append("task-02-deviations", "Low: fine\nHigh: broke the API\n");
    let a = m.wait_json("high deviation", |v| event(v) == "anomaly");
    assert_eq!(a["anomaly"], "high-deviation");
    assert_eq!(a["detail"], "High: broke the API");
}

#[test]
fn task_changes_and_messages_in_id_order() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let mut m = s.headless(&[]);
    let t = m.wait_json("first seen", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    assert_eq!(t["state"], "working");
    assert!(t["prev_state"].is_null());

    s.set_task("task-01", "needs_review");
    let t = m.wait_json("state change", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    assert_eq!(
        (t["state"].as_str(), t["prev_state"].as_str()),
        (Some("needs_review"), Some("working"))
    );

    // Many messages with one timestamp, in one commit: each once, in id order.
    let mut c = s.conn();
    let tx = c.transaction().unwrap();
    for i in 0..30 {
        tx.execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type, timestamp)
             VALUES ('task-01', 'musician-1', ?1, 'review_request', '2026-11-22 10:00:00')",
            [format!("m{i}")],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let mut ids = Vec::new();
    while ids.len() < 30 {
        let v = m.wait_json("messages", |v| event(v) == "message");
        assert_eq!(v["message_type"], "review_request");
        assert_eq!(v["message"], format!("m{}", ids.len()));
        ids.push(v["id"].as_i64().unwrap());
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn until_complete_exits_zero_after_the_conductor_completes() {
    let s = Scratch::new();
    let mut m = s.headless(&["--until-complete"]);
    m.wait_json("conductor seen", |v| {
        event(v) == "task" && v["task_id"] == "task-00"
    });
    s.set_task("task-00", "complete");
    let w = m.wait_json("watchdog", |v| event(v) == "watchdog");
    assert_eq!(w["reason"], "CONDUCTOR_COMPLETE");
    assert_eq!(w["task_count"], 2);
    assert_eq!(m.wait_exit(), 0);
}

#[test]
fn stale_conductor_heartbeat_is_a_watchdog_event() {
    let s = Scratch::new();
    s.conn()
        .execute("UPDATE orchestration_tasks SET last_heartbeat = datetime('now', '-10 seconds') WHERE task_id = 'task-00'", [])
        .unwrap();
    let mut m = s.headless(&["--conductor-stale-after", "2s"]);
    let st = m.wait_json("stale", |v| event(v) == "stale");
    assert_eq!(st["task_id"], "task-00");
    assert!(st["age_s"].as_u64().unwrap() >= 9);
    let w = m.wait_json("watchdog", |v| event(v) == "watchdog");
    assert_eq!(w["reason"], "CONDUCTOR_DEAD:heartbeat");
}

#[test]
fn stalled_once_per_stall_with_a_short_threshold() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    s.append("task-03-status", "step 1 started [ctx: 5%]\n");
    let mut m = s.headless(&["--stall-after", "1s"]);
    let a = m.wait_json("stall", |v| event(v) == "anomaly");
    assert_eq!(a["anomaly"], "stalled");
    assert!(
        a["detail"]
            .as_str()
            .unwrap()
            .contains("Last entry: \"step 1 started [ctx: 5%]\"")
    );
    // A new line ends the stall; the next stall is a new report, naming the new line.
    s.append("task-03-status", "step 2 started [ctx: 9%]\n");
    let a = m.wait_json("second stall", |v| event(v) == "anomaly");
    assert!(
        a["detail"].as_str().unwrap().contains("step 2 started"),
        "{a}"
    );
}

#[test]
fn text_output_is_the_conductors_format() {
    let s = Scratch::new();
    s.set_task("task-05", "working");
    s.append("task-05-status", "step 2 self-correction: x\n");
    let mut cmd = maestro();
    cmd.arg("--no-tui").arg("--project").arg(s.root());
    let mut m = crate::common::Running::spawn(cmd);
    let task = m.wait_line("task", |l| l.starts_with("TASK: task-00"));
    assert_eq!(task, "TASK: task-00 watching (first seen)");
    let head = m.wait_line("report", |l| l.starts_with("SENTINEL: ["));
    let re = regex::Regex::new(r"^SENTINEL: \[\d\d:\d\d:\d\d\] task-05$").unwrap();
    assert!(re.is_match(&head), "{head}");
    assert_eq!(m.wait_line("anomaly", |_| true), "Anomaly: self-correction");
    assert_eq!(
        m.wait_line("detail", |_| true),
        "Detail: \"step 2 self-correction: x\""
    );
    assert_eq!(m.wait_line("blank", |_| true), "");
}

#[test]
fn report_to_db_records_once_and_a_restart_repeats_nothing() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    s.append("task-01-status", "step 2 self-correction: first\n");
    let mut m = s.headless(&["--report-to-db"]);
    m.wait_json("report", |v| event(v) == "anomaly");
    let msg = m.wait_json("the report comes back as a message", |v| {
        event(v) == "message" && v["from_session"] == "sentinel"
    });
    assert_eq!(msg["task_id"], "task-00");
    // The schema of docs/orchestration.md does not admit 'warning'.
    assert_eq!(msg["message_type"], "system");
    assert!(msg["message"].as_str().unwrap().starts_with("SENTINEL: ["));
    m.signal(Signal::SIGTERM);
    assert_eq!(m.wait_exit(), 0);

    let mut m = s.headless(&["--report-to-db"]);
    s.append("task-01-status", "step 3 self-correction: second\n");
    let a = m.wait_json("only the new report", |v| event(v) == "anomaly");
    assert_eq!(a["detail"], "step 3 self-correction: second");
    m.signal(Signal::SIGINT);
    assert_eq!(m.wait_exit(), 0);
    let count: i64 = s
        .conn()
        .query_row(
            "SELECT count(*) FROM orchestration_messages WHERE from_session = 'sentinel'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(count, 2);
}

#[test]
fn warning_type_is_used_where_the_check_admits_it() {
    let s = Scratch::without_db();
    let conn = rusqlite::Connection::open(s.db()).unwrap();
    let ddl = maestro::core::schema::SCHEMA_SQL.replace("'system')),", "'system','warning')),");
    conn.execute_batch(&ddl).unwrap();
    conn.execute(
        "INSERT INTO orchestration_tasks (task_id, state) VALUES ('task-01', 'working')",
        [],
    )
    .unwrap();
    s.append("task-01-deviations", "High: x\n");
    let mut m = s.headless(&["--report-to-db"]);
    let msg = m.wait_json("report message", |v| {
        event(v) == "message" && v["from_session"] == "sentinel"
    });
    assert_eq!(msg["message_type"], "warning");
}

#[test]
fn temp_only_mode_without_a_database() {
    let s = Scratch::without_db();
    s.append("task-07-deviations", "High: dropped a table\n");
    let mut m = s.headless(&[]);
    let a = m.wait_json("anomaly", |v| event(v) == "anomaly");
    assert_eq!(a["task_id"], "task-07");
    assert!(!s.db().exists(), "temp-only mode creates nothing");
}

#[test]
fn invalid_task_ids_are_an_error_event_and_never_a_path() {
    let s = Scratch::new();
    s.set_task("../../outside", "working");
    let mut m = s.headless(&[]);
    let e = m.wait_json("error", |v| event(v) == "error");
    assert!(
        e["detail"].as_str().unwrap().contains("../../outside"),
        "{e}"
    );
}

#[test]
fn log_files_are_followed_through_truncation_and_replacement() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    s.append("task-01-status", "a [ctx: 10%]\n");
    let mut m = s.headless(&[]);
    m.wait_json("conductor", |v| {
        event(v) == "task" && v["task_id"] == "task-00"
    });
    // Truncated, then rewritten: the new content is read from its start.
    std::fs::write(s.temp().join("task-01-status"), "").unwrap();
    s.append("task-01-status", "b self-correction after truncate\n");
    let a = m.wait_json("after truncation", |v| event(v) == "anomaly");
    assert_eq!(a["detail"], "b self-correction after truncate");
    // Replaced by rename (a new inode).
    let tmp = s.temp().join("new");
    std::fs::write(&tmp, "c self-correction after rename\n").unwrap();
    std::fs::rename(&tmp, s.temp().join("task-01-status")).unwrap();
    let a = m.wait_json("after rename", |v| event(v) == "anomaly");
    assert_eq!(a["detail"], "c self-correction after rename");
    // Bytes that are not UTF-8 do not stop the reader.
    s.append("task-01-status", "d \u{0}\n");
    std::fs::OpenOptions::new()
        .append(true)
        .open(s.temp().join("task-01-status"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"e \xff\xfe self-correction\n"))
        .unwrap();
    let a = m.wait_json("lossy line", |v| event(v) == "anomaly");
    assert_eq!(a["detail"], "e \u{fffd}\u{fffd} self-correction");
}

#[test]
fn temp_folder_created_after_start_is_picked_up() {
    let s = Scratch::new();
    std::fs::remove_dir(s.temp()).unwrap();
    s.set_task("task-01", "working");
    let mut m = s.headless(&[]);
    m.wait_json("conductor", |v| {
        event(v) == "task" && v["task_id"] == "task-00"
    });
    std::fs::create_dir(s.temp()).unwrap();
    s.append("task-01-status", "self-correction in a new folder\n");
    let a = m.wait_json("anomaly", |v| event(v) == "anomaly");
    assert_eq!(a["task_id"], "task-01");
}

#[test]
fn sigint_and_sigterm_exit_zero() {
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        let s = Scratch::new();
        let mut m = s.headless(&[]);
        m.wait_json("started", |v| event(v) == "task");
        m.signal(sig);
        assert_eq!(m.wait_exit(), 0, "{sig:?}");
    }
}

/// Two commits in quick succession: one wake-up may carry both, with only the first
/// visible yet. The second must still be read (it used to wait for a third commit).
#[test]
fn back_to_back_commits_are_all_seen() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    let mut m = s.headless(&[]);
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    let c = s.conn();
    for i in 0..20 {
        let state = if i % 2 == 0 {
            "needs_review"
        } else {
            "working"
        };
        c.execute(
            "UPDATE orchestration_tasks SET state = ?1 WHERE task_id = 'task-01'",
            [state],
        )
        .unwrap();
        c.execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-01', 'm', ?1, 'system')",
            [format!("burst {i}")],
        )
        .unwrap();
        let text = format!("burst {i}");
        m.wait_json("the second commit", |v| {
            event(v) == "message" && v["message"] == text.as_str()
        });
    }
}

#[test]
fn a_temp_path_that_is_a_file_is_reported() {
    let s = Scratch::new();
    let file = s.root().join("not-a-folder");
    std::fs::write(&file, "x").unwrap();
    let mut m = s.headless(&["--temp", file.to_str().unwrap()]);
    let e = m.wait_json("error", |v| event(v) == "error");
    assert!(
        e["detail"].as_str().unwrap().contains("is not a folder"),
        "{e}"
    );
}

/// Values seconds apart (a burst of responses) are no trend: no `forecast` event.
#[test]
fn values_seconds_apart_make_no_forecast() {
    // A session's first responses come seconds apart and jump (the system prompt and
    // tools): no trend. The forecast itself, over minutes, is tested on virtual time
    // (core::hub::tests, core::forecast::tests).
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let mut m = s.headless(&[]);
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-03"
    });
    for (i, ctx) in [1, 20, 40, 60].into_iter().enumerate() {
        s.append(
            "task-03-status",
            &format!("step {i} self-correction: redo {i} [ctx: {ctx}%]\n"),
        );
        m.wait_json("its value was seen", |v| {
            event(v) == "anomaly"
                && v["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(&format!("redo {i}"))
        });
    }
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    assert!(
        !m.seen.iter().any(|l| l.contains("\"forecast\"")),
        "{:?}",
        m.seen
    );
}

/// Only work stalls: with as old a log, the `needs_review` task (waiting on the
/// Conductor) raises nothing while the `working` one stalls; by the time the working
/// one's stall is printed, the other's would have been too.
#[test]
fn a_task_waiting_on_the_conductor_is_not_stalled() {
    let s = Scratch::new();
    s.set_task("task-02", "needs_review");
    s.set_task("task-03", "working");
    s.append("task-02-status", "step 4 ready for review [ctx: 30%]\n");
    s.append("task-03-status", "step 1 started [ctx: 5%]\n");
    let mut m = s.headless(&["--stall-after", "3s"]);
    let a = m.wait_json("the working task's stall", |v| {
        event(v) == "anomaly" && v["anomaly"] == "stalled"
    });
    assert_eq!(a["task_id"], "task-03", "{a}");
    m.signal(Signal::SIGTERM);
    let rest = m.rest();
    let waiting_stalled = m
        .seen
        .iter()
        .chain(&rest)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|v| event(&v) == "anomaly" && v["task_id"] == "task-02");
    assert!(!waiting_stalled, "{:?}", m.seen);
}

/// `maestro --no-tui --json | head -1` on a quiet project ends as soon as its reader
/// does: the closed pipe is seen when it closes, not at the next event (the reader takes
/// its line, waits until the start-up burst is written, notes when it leaves, then
/// leaves). The pipeline ends within 3 s of that.
#[test]
fn a_closed_pipe_ends_the_run_at_once() {
    let s = Scratch::new();
    let left = s.root().join("reader-left");
    let line = format!(
        "{} --no-tui --json --project {} | {{ read -r l; echo \"$l\"; sleep 1; date +%s.%N > {}; }}",
        shlex::try_quote(env!("CARGO_BIN_EXE_maestro")).unwrap(),
        shlex::try_quote(&s.root().display().to_string()).unwrap(),
        shlex::try_quote(&left.display().to_string()).unwrap(),
    );
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(&line)
        .env("XDG_DATA_HOME", crate::common::data_home())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(crate::common::DEADLINE)
        .expect("the pipeline ended (on a quiet project no next event would end it)")
        .unwrap();
    let ended = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let reader_left: f64 = std::fs::read_to_string(&left)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        ended - reader_left < 3.0,
        "maestro ended {:.2} s after its reader",
        ended - reader_left
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

/// A 5 MB status line whose `self-correction` lies past the 64 KiB cap still raises it,
/// and the cut is said once.
#[test]
fn a_line_past_the_cap_is_judged_and_its_cut_said() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    s.append("task-03-status", "step 1 started [ctx: 5%]\n");
    let mut m = s.headless(&[]);
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-03"
    });
    let mut line = "x".repeat(200 * 1024);
    line.push_str(" step 2 self-correction: retried the build ");
    line.push_str(&"y".repeat(5 * 1024 * 1024));
    line.push_str(" [ctx: 9%]\n");
    s.append("task-03-status", &line);
    let said = m.wait_json("the cut said", |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .is_some_and(|d| d.contains("over 64 KiB"))
    });
    assert_eq!(said["task_id"], "task-03", "{said}");
    let a = m.wait_json("the anomaly", |v| {
        event(v) == "anomaly" && v["anomaly"] == "self-correction"
    });
    assert_eq!(a["task_id"], "task-03");
}
