//! What the logs hold at start is skimmed, not read line by line: the anomalies are
//! the ones reading every line finds, at the same moments of the files, and the lines
//! appended after start are judged against the history's last context value.
#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;

use crate::common::{Scratch, event};

#[test]
fn a_long_history_raises_what_every_line_raises_and_appends_follow_it() {
    let s = Scratch::new();
    s.set_task("task-01", "working");
    // 3 MB of status history (far above what is skimmed) with the lines that matter
    // in its middle, and 1 MB of deviations with one `High:` line and one that only
    // mentions it.
    let mut status = String::new();
    for i in 0..30_000 {
        let line = match i {
            100 => "step 1 started [ctx: 10%]".to_owned(),
            15_000 => "step 2 self-correction: redo the parser [ctx: 40%]".to_owned(),
            29_999 => "step 3 checking [ctx: 41%]".to_owned(),
            _ => format!("progress {i}: an ordinary line with nothing to judge in it"),
        };
        writeln!(status, "{line}").unwrap();
    }
    let mut deviations = String::new();
    for i in 0..10_000 {
        let line = match i {
            5_000 => "High: the schema differs from the plan".to_owned(),
            5_001 => "Low: not High: at all".to_owned(),
            _ => format!("Low: deviation {i} of no weight, noted for the record"),
        };
        writeln!(deviations, "{line}").unwrap();
    }
    std::fs::write(s.temp().join("task-01-status"), &status).unwrap();
    std::fs::write(s.temp().join("task-01-deviations"), &deviations).unwrap();

    let mut m = s.headless(&["--stall-after", "1h", "--task-stale-after", "1h"]);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let a = m.wait_json("the history's anomalies", |v| event(v) == "anomaly");
        seen.push(format!(
            "{} {}",
            a["anomaly"].as_str().unwrap(),
            a["detail"].as_str().unwrap()
        ));
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "context-spike Context jumped from 10% to 40% between step 1 and step 2 (+30%)",
            "high-deviation High: the schema differs from the plan",
            "self-correction step 2 self-correction: redo the parser [ctx: 40%]",
        ],
        "{seen:#?}"
    );
    // The history's last value is 41 %: 41 → 70 is a spike, judged as it arrives.
    s.append(
        "task-01-status",
        "step 4 self-correction: again [ctx: 70%]\n",
    );
    let spike = m.wait_json("the appended line's spike", |v| {
        event(v) == "anomaly" && v["anomaly"] == "context-spike"
    });
    assert_eq!(
        (spike["from"].as_u64(), spike["to"].as_u64()),
        (Some(41), Some(70))
    );
}

/// A folder filled with more task logs than are followed: the first ones are, the
/// rest are refused, said once.
#[test]
fn more_task_logs_than_are_followed_are_refused_once() {
    let s = Scratch::new();
    s.set_task("task-00001", "working");
    let cap = maestro::core::sources::temp_logs::MAX_FILES;
    for i in 0..=cap + 4 {
        std::fs::write(s.temp().join(format!("task-{i:05}-status")), "step 1\n").unwrap();
    }
    let mut m = s.headless(&["--stall-after", "1h", "--task-stale-after", "1h"]);
    let refused = m.wait_json("the refusal", |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&format!("more than {cap} task logs")))
    });
    assert!(
        refused["detail"].as_str().unwrap().contains("not followed"),
        "{refused}"
    );
    // A new line in a followed log still comes through, and the refusal is not repeated.
    s.append(
        "task-00001-status",
        "step 2 self-correction: after the flood\n",
    );
    m.wait_json("the followed log's anomaly", |v| event(v) == "anomaly");
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
    let said = m.seen.iter().filter(|l| l.contains("task logs; ")).count();
    assert_eq!(said, 1, "said once");
}

/// A task table filled past what is followed: the first rows by task id are, and the
/// rest are left out, said once.
#[test]
fn more_task_rows_than_are_followed_are_said_once() {
    let s = Scratch::new();
    let cap = maestro::core::sources::db::MAX_TASKS;
    let mut conn = s.conn();
    let tx = conn.transaction().unwrap();
    for i in 0..=cap {
        tx.execute(
            "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'working', datetime('now'))",
            [format!("task-{:05}", i + 1)],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let mut m = s.headless(&["--stall-after", "1h", "--task-stale-after", "1h"]);
    let said = m.wait_json("the rows left out", |v| {
        event(v) == "error"
            && v["detail"]
                .as_str()
                .is_some_and(|d| d.contains("tasks; maestro follows the first"))
    });
    assert!(
        said["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("{}", cap + 3)),
        "{said}"
    );
    m.signal(nix::sys::signal::Signal::SIGTERM);
    m.wait_exit();
}
