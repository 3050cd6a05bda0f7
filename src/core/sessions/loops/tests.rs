//! The loop rule on the cases: pollers in every spelling are seen within three
//! cycles; ordinary work, however it talks and whatever it touches, runs to its end.

use std::path::Path;

use serde_json::{Value, json};

use super::*;

/// One call: tool, input, result, and the seconds since the start it began at.
type Call = (&'static str, Value, Value, f64);

fn bash(command: &str, stdout: &str, at_s: f64) -> Call {
    (
        "Bash",
        json!({"command": command, "description": format!("step at {at_s}")}),
        json!({"stdout": stdout, "stderr": "", "interrupted": false}),
        at_s,
    )
}

/// The guard's view of `calls`, in order: the index of the call it stops and the state
/// the loop read, or `None` when every call runs.
fn stopped_at(calls: &[Call]) -> Option<(usize, Vec<State>)> {
    stopped_at_in(calls, Path::new("/p"))
}

/// [`stopped_at`] for a project at `root` (whose files the guard may read).
fn stopped_at_in(calls: &[Call], root: &Path) -> Option<(usize, Vec<State>)> {
    let mut history = Vec::new();
    for (i, (tool, input, response, at_s)) in calls.iter().enumerate() {
        let at_ms = (*at_s * 1000.0) as i64;
        if let Some(states) = closes_loop(&history, call_hash(tool, input), at_ms)
            && !states.is_empty()
        {
            return Some((i, states));
        }
        history.push(look(tool, input, response, at_ms, root, &history));
    }
    None
}

/// `cycles` rounds of `each`, a cycle every `period` seconds.
fn cycles(each: &[(&str, &str)], period: f64, rounds: usize) -> Vec<Call> {
    let mut out = Vec::new();
    for r in 0..rounds {
        for (j, (command, stdout)) in each.iter().enumerate() {
            out.push(bash(command, stdout, r as f64 * period + j as f64 * 0.1));
        }
    }
    out
}

#[test]
fn pollers_in_any_spelling_are_stopped_within_three_cycles() {
    let read = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-03' AND id > 7\"";
    let loops: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("textbook", vec![("sleep 5", ""), (read, "")]),
        ("/bin/sleep", vec![("/bin/sleep 5", ""), (read, "")]),
        ("sleep $T", vec![("sleep $T", ""), (read, "")]),
        ("quoted", vec![("sleep \"5\"", ""), (read, "")]),
        (
            "read -t",
            vec![("read -t 5 < /dev/zero || true", ""), (read, "")],
        ),
        (
            "python",
            vec![("python3 -c 'import time; time.sleep(5)'", ""), (read, "")],
        ),
        (
            "one call",
            vec![(
                "sleep 5; sqlite3 comms.db 'SELECT state FROM orchestration_tasks'",
                "working",
            )],
        ),
        (
            "uppercase",
            vec![("SLEEP 1; SELECT STATE FROM ORCHESTRATION_TASKS", "")],
        ),
        ("no wait", vec![(read, "")]),
        (
            "logs",
            vec![("cd temp && tail -n 5 task-03-status", "step 2 started")],
        ),
        ("ls temp", vec![("ls temp", "task-03-status")]),
        ("pid", vec![("ps -p 4242 -o pid=", "4242")]),
        (
            "copy",
            vec![(
                "cp comms.db /tmp/c.db && sqlite3 /tmp/c.db 'select * from orchestration_tasks'",
                "",
            )],
        ),
        (
            "background output",
            vec![("cat /tmp/poll.out", "task-03|needs_review")],
        ),
        (
            "other calls between",
            vec![
                ("sleep 5", ""),
                ("echo checking", "checking"),
                ("date +%s", "#"),
                ("pwd", "/p"),
                (read, ""),
            ],
        ),
    ];
    for (name, each) in loops {
        let calls = cycles(&each, 5.0, 6);
        let (at, states) = stopped_at(&calls).unwrap_or_else(|| panic!("{name}: never stopped"));
        assert!(
            at < 3 * each.len(),
            "{name}: stopped at call {at}, after three cycles"
        );
        assert!(!states.is_empty(), "{name}");
    }
    // An MCP server of any name whose results are the orchestration's rows.
    let mcp = |at_s: f64| -> Call {
        (
            "mcp__sqlite__read_query",
            json!({"query": "select * from t"}),
            json!([{"task_id": "task-03", "state": "working"}]),
            at_s,
        )
    };
    let calls: Vec<Call> = (0..5).map(|i| mcp(f64::from(i) * 3.0)).collect();
    assert_eq!(stopped_at(&calls).map(|(i, _)| i), Some(2));
    // The Sentinel's reads with the Read and Glob tools.
    let read_log = |at_s: f64| -> Call {
        (
            "Read",
            json!({"file_path": "./temp/task-03-status"}),
            json!("step 2 started"),
            at_s,
        )
    };
    let calls: Vec<Call> = (0..5).map(|i| read_log(f64::from(i) * 3.0)).collect();
    assert_eq!(stopped_at(&calls), Some((2, vec![State::Logs])));
}

#[test]
fn ordinary_work_runs_to_its_end() {
    let count = "sleep 1; sqlite3 comms.db 'select count(*) from orchestration_messages'";
    let cases: Vec<(&str, Vec<Call>)> = vec![
        (
            "a Musician's subagent: an edit, then the same check twice",
            vec![
                (
                    "Edit",
                    json!({"file_path": "src/app.rs", "old_string": "a", "new_string": "b"}),
                    json!("ok"),
                    0.0,
                ),
                bash(count, "4", 1.0),
                bash(count, "4", 3.0),
            ],
        ),
        (
            "a build wait that refreshes the heartbeat between waits",
            vec![
                bash("cargo build --release > /tmp/build.log 2>&1 &", "", 0.0),
                bash("sleep 30", "", 0.1),
                bash(
                    "sqlite3 comms.db \"update orchestration_tasks SET last_heartbeat = datetime('now') WHERE task_id = 'task-03'\"",
                    "",
                    30.1,
                ),
                bash("sleep 30", "", 30.2),
                bash(
                    "sqlite3 comms.db \"update orchestration_tasks SET last_heartbeat = datetime('now') WHERE task_id = 'task-03'\"",
                    "",
                    60.2,
                ),
                bash("sleep 30", "", 60.3),
                bash("tail -n 3 /tmp/build.log", "Finished release", 90.3),
            ],
        ),
        (
            "a migration",
            vec![
                bash(
                    "sqlite3 comms.db .schema",
                    "CREATE TABLE orchestration_tasks (task_id TEXT)",
                    0.0,
                ),
                (
                    "Write",
                    json!({"file_path": "migrations/2.sql", "content": "ALTER TABLE x"}),
                    json!("ok"),
                    1.0,
                ),
                bash("sqlite3 comms.db < migrations/2.sql", "", 2.0),
                bash("./restart.sh & sleep 3", "", 3.0),
                bash(
                    "sqlite3 comms.db 'EXPLAIN QUERY PLAN SELECT * FROM orchestration_tasks'",
                    "SCAN orchestration_tasks",
                    7.0,
                ),
            ],
        ),
        (
            "a Conductor's review of progress",
            vec![
                bash("cat temp/task-03-status", "step 4 done", 0.0),
                bash("sleep 1 && echo ci-green", "ci-green", 1.0),
                bash("cat temp/task-03-status", "step 4 done", 3.0),
            ],
        ),
        (
            "a flaky test run again and again (no orchestration state)",
            (0..6)
                .map(|i| {
                    bash(
                        "cargo test flaky",
                        "test result: ok. 1 passed; finished in 0.52s",
                        f64::from(i) * 20.0,
                    )
                })
                .collect(),
        ),
        (
            "a log read again while it grows",
            (0..6)
                .map(|i| -> Call {
                    (
                        "Read",
                        json!({"file_path": "/p/temp/task-03-status"}),
                        json!(format!("step {i} done")),
                        f64::from(i) * 10.0,
                    )
                })
                .collect(),
        ),
    ];
    for (name, calls) in cases {
        assert_eq!(stopped_at(&calls), None, "{name}");
    }
}

#[test]
fn a_tools_own_timing_is_not_news() {
    let glob = |ms: u64, at_s: f64| -> Call {
        (
            "Glob",
            json!({"pattern": "temp/*"}),
            json!({"filenames": ["temp/task-03-status"], "durationMs": ms, "numFiles": 1}),
            at_s,
        )
    };
    let calls = vec![glob(3, 0.0), glob(5, 2.0), glob(4, 4.0)];
    assert_eq!(stopped_at(&calls), Some((2, vec![State::Logs])));
}

#[test]
fn the_same_look_at_once_is_a_retry_not_a_poll() {
    let read = "sqlite3 comms.db 'select state from orchestration_tasks'";
    let calls: Vec<Call> = (0..3)
        .map(|i| bash(read, "working", f64::from(i) * 0.05))
        .collect();
    assert_eq!(stopped_at(&calls), None);
}

#[test]
fn a_transcripts_loop_is_found_after_the_fact() {
    let read = "sqlite3 comms.db 'select state from orchestration_tasks'";
    let looks: Vec<Look> = (0..4).fold(Vec::new(), |mut acc, i| {
        let l = look(
            "Bash",
            &json!({"command": read}),
            &json!({"stdout": "working"}),
            i * 5000,
            Path::new("/p"),
            &acc,
        );
        acc.push(l);
        acc
    });
    assert_eq!(loop_in(&looks), Some(vec![State::Comms]));
    assert_eq!(loop_in(&looks[..2]), None);
}

/// One comms.db read, then a flaky test run four times with the same output: the
/// repeating call reads nothing of the orchestration, so it is no poller (it was one
/// when what the loop read came from every call since the last progress).
#[test]
fn an_earlier_read_makes_no_poller_of_a_later_repeat() {
    let mut calls = vec![bash(
        "sqlite3 comms.db \"SELECT state FROM orchestration_tasks WHERE task_id = 'task-03'\"",
        "working",
        0.0,
    )];
    for i in 0..4 {
        calls.push(bash(
            "cargo test -p parser",
            "test result: FAILED. 1 failed",
            10.0 + f64::from(i) * 30.0,
        ));
    }
    assert_eq!(stopped_at(&calls), None);
}

/// The Conductor's inbox checks between approvals made with sqlite3: each approval is
/// progress, so the checks never add up to a loop and the third approval is made.
#[test]
fn approvals_written_with_sqlite3_are_progress_between_inbox_checks() {
    let inbox = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-00' AND id > 4\"";
    let mut calls = Vec::new();
    for (i, task) in ["task-01", "task-02", "task-03"].iter().enumerate() {
        let at = i as f64 * 60.0;
        calls.push(bash(inbox, "", at));
        calls.push(bash(inbox, "", at + 20.0));
        calls.push(bash(
            &format!("sqlite3 comms.db \"update orchestration_tasks SET state = 'review_approved', last_heartbeat = datetime('now') WHERE task_id = '{task}'; SELECT changes();\""),
            "1",
            at + 40.0,
        ));
    }
    assert_eq!(stopped_at(&calls), None);
}

/// A poller whose look fails each time (`grep -q … && echo READY` on a log without the
/// word yet): the guard is handed the error as the result (`PostToolUseFailure`), and
/// the third look is stopped.
#[test]
fn a_failing_look_repeated_is_a_poller() {
    let failing = |at_s: f64| -> Call {
        (
            "Bash",
            json!({"command": "grep -q DONE temp/task-03-status && echo READY", "description": "check"}),
            json!("Exit code 1"),
            at_s,
        )
    };
    let calls: Vec<Call> = (0..4).map(|i| failing(f64::from(i) * 15.0)).collect();
    assert_eq!(stopped_at(&calls), Some((2, vec![State::Logs])));
}

/// A poller whose spelling drifts between cycles (`;` then `&&`, a `| cat`, a backoff
/// from `sleep 5` to `sleep 20`) and whose result carries the epoch second it ran: the
/// same call, the same result, stopped by its third look.
#[test]
fn spelling_drift_backoff_and_epoch_seconds_are_the_same_look() {
    let spellings = [
        "sleep 5; sqlite3 comms.db \"SELECT state FROM orchestration_tasks\"",
        "sleep 10 && sqlite3 comms.db \"SELECT state FROM orchestration_tasks\" | cat",
        "sleep 20 &&   sqlite3 comms.db \"SELECT state FROM orchestration_tasks\"",
        "sleep 40; sqlite3 comms.db \"SELECT state FROM orchestration_tasks\" | cat",
    ];
    let calls: Vec<Call> = spellings
        .iter()
        .enumerate()
        .map(|(i, c)| {
            bash(
                c,
                &format!("working\nchecked at {}", 1_764_000_000 + i * 37),
                i as f64 * 20.0,
            )
        })
        .collect();
    assert_eq!(stopped_at(&calls), Some((2, vec![State::Comms])));
}

/// Two different commands joined alike stay two calls: only the joins are one spelling.
#[test]
fn different_commands_are_not_made_alike() {
    assert_ne!(
        call_hash("Bash", &json!({"command": "cargo test; cargo build"})),
        call_hash("Bash", &json!({"command": "cargo test; cargo clippy"}))
    );
    assert_ne!(
        call_hash("Bash", &json!({"command": "cat notes | cat"})),
        call_hash("Bash", &json!({"command": "cat other | cat"}))
    );
}

/// The Conductor's subagent reads a status log, then its inbox, each cycle: both repeat
/// with nothing new, so the loop reads both (the command named is the inbox's).
#[test]
fn what_repeats_beside_the_closing_call_is_read_too() {
    let inbox = "sqlite3 comms.db \"SELECT id, message FROM orchestration_messages WHERE task_id = 'task-00' AND id > 9\"";
    let calls = cycles(
        &[("cat temp/task-03-status", "step 2 started"), (inbox, "")],
        10.0,
        4,
    );
    let (_, states) = stopped_at(&calls).expect("stopped");
    assert!(
        states.contains(&State::Logs) && states.contains(&State::Comms),
        "{states:?}"
    );
}

/// A helper script is judged by its source: one that names comms.db is a look at it
/// whatever it prints (`new messages: 0`, the rows as a Python list), one that does not
/// is not; and a test whose assertion prints rows-like text is no look at comms.db.
#[test]
fn a_helper_script_is_judged_by_its_source_and_a_tests_output_by_nothing() {
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        root.path().join("check_inbox.py"),
        "import sqlite3\nc = sqlite3.connect('comms.db')\nn = c.execute(\"select count(*) from orchestration_messages where id > 7\").fetchone()[0]\nprint(f'new messages: {n}')\n",
    )
    .expect("write");
    std::fs::write(root.path().join("build.py"), "print('building')\n").expect("write");
    for (command, stdout) in [
        ("sleep 5; python3 check_inbox.py", "new messages: 0"),
        ("sleep 5 && ./check_inbox.py", "[('task-03', 'working')]"),
        (
            "sleep 5; VERBOSE=1 python3.12 -u check_inbox.py | cat",
            "new messages: 0",
        ),
    ] {
        let calls = cycles(&[(command, stdout)], 5.0, 6);
        assert_eq!(
            stopped_at_in(&calls, root.path()),
            Some((2, vec![State::Comms])),
            "{command}"
        );
    }
    for (command, stdout) in [
        ("sleep 5; python3 build.py", "building"),
        (
            "cargo test -p watcher 2>&1 | tail -5",
            "assertion failed: ('task-03','working') != ('task-03','complete')",
        ),
        (
            "python3 -m pytest tests/test_states.py",
            "E   AssertionError: [('task-03', 'working')] != [('task-03', 'needs_review')]",
        ),
    ] {
        let calls = cycles(&[(command, stdout)], 5.0, 6);
        assert_eq!(stopped_at_in(&calls, root.path()), None, "{command}");
    }
}

/// A poller that writes what it saw to a state file each cycle (the same file, the same
/// text) makes no progress by it after the first write (which was new): stopped by its
/// third look after that. A state file that changes is progress.
#[test]
fn a_state_file_written_the_same_each_cycle_is_no_progress() {
    let read = "sleep 5; sqlite3 comms.db 'select max(id) from orchestration_messages'";
    let write = |text: &str, at_s: f64| -> Call {
        (
            "Write",
            json!({"file_path": "/p/.poll-state", "content": text}),
            json!({"type": "update"}),
            at_s,
        )
    };
    let mut calls = Vec::new();
    for r in 0..6 {
        let at = f64::from(r) * 5.0;
        calls.push(bash(read, "7", at));
        calls.push(write("last=7", at + 0.1));
    }
    assert_eq!(stopped_at(&calls), Some((6, vec![State::Comms])));
    let mut calls = Vec::new();
    for r in 0..6 {
        let at = f64::from(r) * 5.0;
        calls.push(bash(read, "7", at));
        calls.push(write(&format!("step {r} done"), at + 0.1));
    }
    assert_eq!(stopped_at(&calls), None);
}

/// A heartbeat's age computed by the poller from the clock changes every cycle and is
/// still nothing new; a state beside it that changes is news.
#[test]
fn what_a_poller_computes_from_the_clock_is_no_news() {
    let age = "sqlite3 comms.db \"SELECT task_id, state, CAST((julianday('now') - julianday(last_heartbeat)) * 86400 AS INTEGER) FROM orchestration_tasks\"";
    let ages: Vec<Call> = [5, 25, 45]
        .iter()
        .enumerate()
        .map(|(i, s)| bash(age, &format!("task-03|working|{s}"), i as f64 * 20.0))
        .collect();
    assert_eq!(stopped_at(&ages), Some((2, vec![State::Comms])));
    let epoch =
        "echo $(date +%s) $(sqlite3 comms.db 'SELECT count(*) FROM orchestration_messages')";
    let seconds: Vec<Call> = (0..3)
        .map(|i| {
            bash(
                epoch,
                &format!("{} 4", 1_764_000_000 + i * 20),
                f64::from(i) * 20.0,
            )
        })
        .collect();
    assert_eq!(stopped_at(&seconds), Some((2, vec![State::Comms])));
    let changed: Vec<Call> = ["working", "needs_review", "needs_review"]
        .iter()
        .enumerate()
        .map(|(i, state)| {
            bash(
                age,
                &format!("task-03|{state}|{}", 5 + i * 20),
                i as f64 * 20.0,
            )
        })
        .collect();
    assert_eq!(stopped_at(&changed), None);
}

/// A file the loop appends the same row to, read back whole each cycle, says nothing
/// new; a log that gains new lines does.
#[test]
fn a_growing_file_of_the_same_row_is_no_news() {
    let append = "sqlite3 comms.db 'SELECT task_id, state FROM orchestration_tasks' >> poll.log; cat poll.log";
    // As Claude Code hands it over: the last line without its newline.
    let rows = "task-00|watching\ntask-03|working";
    let grows: Vec<Call> = (1..=3)
        .map(|n| {
            let text = vec![rows; n].join("\n");
            bash(append, &text, f64::from(n as u32) * 20.0)
        })
        .collect();
    assert_eq!(stopped_at(&grows), Some((2, vec![State::Comms])));
    let tail = "tail -n 20 temp/task-03-status";
    let news: Vec<Call> = (1..=3)
        .map(|n| {
            let lines: Vec<String> = (1..=n).map(|k| format!("step {k} started")).collect();
            let lines = lines.join("\n");
            bash(tail, &lines, f64::from(n as u32) * 20.0)
        })
        .collect();
    assert_eq!(stopped_at(&news), None);
}
