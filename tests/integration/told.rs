//! Nothing false: a project nobody started accuses nobody; each thing is told once, a
//! restart marks what it restates, and `--after CURSOR` resumes a script where it
//! stopped (docs/cli.md "Resuming after a restart").
#![allow(clippy::unwrap_used)]

use serde_json::Value;

use crate::common::{Scratch, event, maestro};

fn insert_message(s: &Scratch, text: &str) {
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-01', 'musician-1', ?1, 'instruction')",
            [text],
        )
        .unwrap();
}

fn is_anomaly(v: &Value, line: &str) -> bool {
    event(v) == "anomaly" && v["detail"] == line
}

fn is_message(v: &Value, text: &str) -> bool {
    event(v) == "message" && v["message"] == text
}

fn parsed(lines: &[String]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_restart_marks_what_it_restates_and_after_resumes_past_the_cursor() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    s.append("task-01-status", "step 1 self-correction: first\n");
    insert_message(&s, "first message");

    // The first run tells both; the script keeps the cursor of the last event it read.
    let mut first = s.headless(&[]);
    first.wait_all(
        "the anomaly and the message",
        &[&|v| is_anomaly(v, "step 1 self-correction: first"), &|v| {
            is_message(v, "first message")
        }],
    );
    first.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(first.wait_exit(), 0);
    let told = parsed(&first.seen);
    assert!(
        told.iter()
            .all(|v| v["cursor"].is_string() && v.get("replayed").is_none()),
        "every event has a cursor and nothing is a replay yet: {told:?}"
    );
    let cursor = told.last().expect("events")["cursor"]
        .as_str()
        .expect("cursor")
        .to_owned();
    let first_anomaly = told
        .iter()
        .find(|v| is_anomaly(v, "step 1 self-correction: first"))
        .expect("anomaly")
        .clone();
    let first_message = told
        .iter()
        .find(|v| is_message(v, "first message"))
        .expect("message");
    // Every time is RFC 3339 UTC, the database's own included.
    let stamp = first_message["timestamp"].as_str().expect("timestamp");
    assert!(
        time::OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339).is_ok()
            && stamp.ends_with('Z'),
        "{first_message}"
    );

    // A plain restart says both again, marked, with their first times and cursors.
    let mut plain = s.headless(&[]);
    plain.wait_all(
        "both again",
        &[&|v| is_anomaly(v, "step 1 self-correction: first"), &|v| {
            is_message(v, "first message")
        }],
    );
    let again = parsed(&plain.seen);
    let anomaly = again
        .iter()
        .find(|v| is_anomaly(v, "step 1 self-correction: first"))
        .expect("anomaly");
    assert_eq!(anomaly["replayed"], true, "{anomaly}");
    // Its first time, and its first cursor unless this run printed a later one before
    // it (one run prints in journal order: then it prints none).
    assert_eq!(anomaly["ts"], first_anomaly["ts"]);
    assert!(
        anomaly["cursor"] == first_anomaly["cursor"] || anomaly["cursor"].is_null(),
        "{anomaly}"
    );
    let message = again
        .iter()
        .find(|v| is_message(v, "first message"))
        .expect("message");
    assert_eq!(message["replayed"], true, "{message}");
    plain.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(plain.wait_exit(), 0);

    // While no maestro runs: a new anomaly and a new message.
    s.append("task-01-status", "step 2 self-correction: second\n");
    insert_message(&s, "second message");
    let mut resumed = s.headless(&["--after", &cursor]);
    resumed.wait_all(
        "what happened while no maestro ran",
        &[&|v| is_anomaly(v, "step 2 self-correction: second"), &|v| {
            is_message(v, "second message")
        }],
    );
    resumed.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(resumed.wait_exit(), 0);
    let shown = parsed(&resumed.seen);
    let count = |pred: &dyn Fn(&Value) -> bool| shown.iter().filter(|v| pred(v)).count();
    assert_eq!(
        count(&|v| is_anomaly(v, "step 2 self-correction: second")),
        1
    );
    assert_eq!(count(&|v| is_message(v, "second message")), 1);
    // Lines and messages come in order: had the old ones been told, they would be here.
    assert_eq!(
        count(&|v| is_anomaly(v, "step 1 self-correction: first")),
        0,
        "{shown:?}"
    );
    assert_eq!(count(&|v| is_message(v, "first message")), 0, "{shown:?}");
    assert_eq!(
        count(&|v| event(v) == "task"),
        0,
        "the tasks' states were told before the cursor: {shown:?}"
    );
    // A cursor is a place in the journal: `<journal id>-<sequence number>`.
    let position = |c: &str| {
        c.rsplit_once('-')
            .and_then(|(_, seq)| seq.parse::<u64>().ok())
            .expect("a cursor")
    };
    assert!(
        shown
            .iter()
            .all(|v| position(v["cursor"].as_str().expect("cursor")) > position(&cursor)),
        "{shown:?}"
    );

    // Text mode marks a restated report on its header line, with its first time.
    let out = run_text_until(&s, "step 2 self-correction: second");
    assert!(
        out.contains("task-01 (replayed)\nAnomaly: self-correction\nDetail: \"step 1 self-correction: first\""),
        "{out}"
    );
}

/// `maestro --no-tui` in text mode until a report quoting `line` is printed.
fn run_text_until(s: &Scratch, line: &str) -> String {
    let mut cmd = maestro();
    cmd.args(["--no-tui", "--project"]).arg(s.root());
    let mut m = crate::common::Running::spawn(cmd);
    m.wait_line("the report", |l| l.contains(line));
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    m.seen.join("\n")
}

#[test]
fn a_bad_cursor_is_refused_with_the_fix() {
    let s = Scratch::new();
    let out = maestro()
        .args(["--no-tui", "--json", "--after", "yesterday", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`cursor` field"), "{err}");
    assert!(out.stdout.is_empty());
}

/// `maestro init` makes no participants: with thresholds of three seconds, a project
/// nobody started raises no stale heartbeat and no death, while a real row does.
#[test]
fn a_project_nobody_started_accuses_nobody() {
    let s = Scratch::fresh();
    let rows: i64 = s
        .conn()
        .query_row("SELECT count(*) FROM orchestration_tasks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0, "init writes no participant rows");
    // A Musician whose heartbeat turns stale after any Conductor's would have.
    s.conn()
        .execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES ('task-01', 'working', datetime('now', '+3 seconds'))",
            [],
        )
        .unwrap();
    let mut m = s.headless(&["--conductor-stale-after", "3s", "--task-stale-after", "3s"]);
    m.wait_json("task-01 stale", |v| {
        event(v) == "stale" && v["task_id"] == "task-01"
    });
    m.signal(nix::sys::signal::Signal::SIGTERM);
    assert_eq!(m.wait_exit(), 0);
    let seen = parsed(&m.seen);
    assert!(
        !seen
            .iter()
            .any(|v| (event(v) == "stale" && v["task_id"] != "task-01") || event(v) == "watchdog"),
        "{seen:?}"
    );
}

/// Waits until every one of `details` was printed as an anomaly, in any order.
fn wait_for_anomalies(m: &mut crate::common::Running, details: &[String]) {
    let printed = |m: &crate::common::Running| -> std::collections::BTreeSet<String> {
        parsed(&m.seen)
            .iter()
            .filter(|v| event(v) == "anomaly")
            .filter_map(|v| v["detail"].as_str().map(str::to_owned))
            .collect()
    };
    while details.iter().any(|d| !printed(m).contains(d)) {
        m.wait_json("the anomalies", |v| event(v) == "anomaly");
    }
}

/// A cursor's place: its sequence number (`None`: no cursor printed).
fn place(v: &Value) -> Option<u64> {
    v["cursor"]
        .as_str()
        .and_then(|c| c.rsplit_once('-'))
        .and_then(|(_, seq)| seq.parse().ok())
}

/// One run prints in journal order: a plain restart, restating what an earlier run told
/// while new anomalies arrive, prints each cursor greater than the one before; a reader
/// killed half-way resumes `--after` the last cursor it handled, and together the two
/// runs tell every anomaly.
#[test]
fn one_run_prints_in_journal_order_and_a_resume_loses_nothing() {
    let s = Scratch::new();
    for t in ["task-01", "task-02", "task-03"] {
        s.set_task(t, "working");
    }
    let detail = |t: &str, n: usize| format!("step {n} self-correction: {t} round {n}");
    let mut all = Vec::new();
    for n in 1..=4 {
        for t in ["task-01", "task-02", "task-03"] {
            s.append(&format!("{t}-status"), &format!("{}\n", detail(t, n)));
            all.push(detail(t, n));
        }
    }
    let mut first = s.headless(&[]);
    wait_for_anomalies(&mut first, &all);
    first.signal(nix::sys::signal::Signal::SIGTERM);
    first.wait_exit();

    let mut plain = s.headless(&[]);
    let writer = {
        let status = s.temp().join("task-02-status");
        std::thread::spawn(move || {
            let mut added = Vec::new();
            for n in 5..=44 {
                let line = format!("step {n} self-correction: task-02 round {n}");
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&status)
                    .unwrap();
                std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
                added.push(line);
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            added
        })
    };
    all.extend(writer.join().unwrap());
    wait_for_anomalies(&mut plain, &all);
    plain.signal(nix::sys::signal::Signal::SIGTERM);
    plain.wait_exit();
    let lines = parsed(&plain.seen);
    let places: Vec<u64> = lines.iter().filter_map(place).collect();
    assert!(
        places.windows(2).all(|w| w[0] < w[1]),
        "printed cursors go back: {places:?}"
    );
    // A reader killed half-way, then `--after` its last cursor.
    let half = lines.len() / 2;
    let handled = &lines[..half];
    let last = handled
        .iter()
        .rev()
        .find_map(|v| v["cursor"].as_str())
        .expect("a cursor in the first half")
        .to_owned();
    let mut told: std::collections::BTreeSet<String> = handled
        .iter()
        .filter(|v| event(v) == "anomaly")
        .filter_map(|v| v["detail"].as_str().map(str::to_owned))
        .collect();
    let mut resumed = s.headless(&["--after", &last]);
    while let Some(missing) = all.iter().find(|d| !told.contains(*d)).cloned() {
        let v = resumed.wait_json(&format!("{missing} after the resume"), |v| {
            event(v) == "anomaly"
        });
        told.insert(v["detail"].as_str().unwrap_or_default().to_owned());
    }
}
