//! `maestro demo --no-tui` plays the whole built-in scenario through the real core.
#![allow(clippy::unwrap_used)]

use crate::common::{Running, maestro};

#[test]
fn demo_shows_all_four_anomalies_and_the_watchdog() {
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().join("demo-here");
    // Given as a relative path, the way people type it: the lines the scenario appends
    // after start must be heard all the same.
    let mut cmd = maestro();
    cmd.current_dir(dir.path()).args([
        "demo",
        "--no-tui",
        "--json",
        "--speed",
        "10",
        "--project",
        "demo-here",
    ]);
    let mut m = Running::spawn(cmd);
    let lines = m.rest();
    let events: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let anomalies: std::collections::BTreeSet<&str> = events
        .iter()
        .filter(|v| v["event"] == "anomaly")
        .filter_map(|v| v["anomaly"].as_str())
        .collect();
    assert_eq!(
        anomalies.into_iter().collect::<Vec<_>>(),
        [
            "context-spike",
            "high-deviation",
            "self-correction",
            "stalled"
        ]
    );
    let reasons: Vec<&str> = events
        .iter()
        .filter(|v| v["event"] == "watchdog")
        .filter_map(|v| v["reason"].as_str())
        .collect();
    assert!(reasons.contains(&"CONDUCTOR_DEAD:heartbeat"), "{reasons:?}");
    assert_eq!(reasons.last(), Some(&"CONDUCTOR_COMPLETE"));
    assert!(
        events
            .iter()
            .any(|v| v["event"] == "stale" && v["task_id"] == "task-04")
    );
    assert!(events.iter().filter(|v| v["event"] == "message").count() >= 10);
    // The example pipelines are installed and the anomaly check runs on an anomaly.
    assert!(
        events.iter().any(|v| v["event"] == "pipeline"
            && v["name"] == "check-on-anomaly"
            && v["status"] == "completed"),
        "the anomaly-triggered example ran"
    );
    assert!(here.join(".maestro/sentinels/build-fix.json").is_file());
    // The demo's own transcripts: each Musician's found by its first prompt, the
    // Conductor's by the database's session id, with a compaction and a subagent.
    let found = |task: &str, rule: &str| {
        events.iter().any(|v| {
            v["event"] == "session"
                && v["status"] == "found"
                && v["task_id"] == task
                && v["found_by"] == rule
        })
    };
    // Its launch (`/conductor`) names it, else the database's session id does.
    assert!(
        found("task-00", "transcript") || found("task-00", "database"),
        "the Conductor's session"
    );
    let sessions: Vec<&serde_json::Value> =
        events.iter().filter(|v| v["event"] == "session").collect();
    for task in ["task-01", "task-02", "task-03", "task-04"] {
        assert!(found(task, "transcript"), "{task}'s session: {sessions:#?}");
    }
    assert!(
        events
            .iter()
            .any(|v| v["event"] == "session" && v["compactions"].as_u64() > Some(0)),
        "a compaction"
    );
    assert!(
        !events
            .iter()
            .any(|v| v["event"] == "session" && v["status"] == "missing"),
        "every demo task has its session"
    );
    assert!(here.join(".demo-claude/projects").is_dir());
    assert_eq!(m.child.wait().unwrap().code(), Some(0));

    // --project is where the demo played, and it is kept.
    assert!(here.join("comms.db").is_file());
    assert!(here.join("temp/task-01-status").is_file());
    // A folder that already holds an orchestration is refused, untouched.
    let before = std::fs::read(here.join("comms.db")).unwrap();
    let out = maestro()
        .args(["demo", "--no-tui", "--project"])
        .arg(&here)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already holds comms.db"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(here.join("comms.db")).unwrap(), before);
}
