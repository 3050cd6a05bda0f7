//! The flight recorder and replay: what recording costs the hub per input, how long a
//! 10,000-input event log takes to load, and to play to its end through the hub as
//! fast as it goes (headless `maestro replay`). Run with `cargo bench --bench replay`.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Instant;

use maestro::core::clock::Clock;
use maestro::core::domain::{LogKind, TaskId};
use maestro::core::event::{CoreEvent, MessageRow, TaskRow};
use maestro::core::event_log::input::RecordedSettings;
use maestro::core::event_log::recorder::Recorder;
use maestro::core::event_log::timeline::Timeline;
use maestro::core::paths::EventLogFiles;
use maestro::core::replay::player::{Replay, ReplayConfig};
use time::OffsetDateTime;

const INPUTS: usize = 10_000;
const TASKS: usize = 10;
const RUNS: usize = 20;

fn settings() -> RecordedSettings {
    RecordedSettings::default()
}

/// A run's inputs: ten Musicians writing status lines (a rising context, a
/// self-correction now and then), deviations, messages and state changes.
fn inputs() -> Vec<CoreEvent> {
    let mut rows: Vec<TaskRow> = (1..=TASKS)
        .map(|n| {
            let mut r = TaskRow::new(format!("task-{n:02}"), "working");
            r.last_heartbeat = Some("2026-11-22 14:00:00".into());
            r
        })
        .collect();
    let mut out = vec![CoreEvent::Tasks(rows.clone())];
    for i in 1..INPUTS {
        let n = i % TASKS + 1;
        let task = TaskId::parse(&format!("task-{n:02}")).unwrap();
        out.push(match i % 50 {
            0 => CoreEvent::Messages(vec![MessageRow {
                id: i as i64,
                task_id: Some(task.to_string()),
                from_session: Some("task-00".into()),
                message_type: Some("instruction".into()),
                message: Some(format!("instruction {i}: keep going")),
                timestamp: Some("2026-11-22 14:00:00".into()),
            }]),
            25 => {
                rows[n - 1].last_heartbeat = Some(format!(
                    "2026-11-22 {:02}:{:02}:{:02}",
                    14 + i / 3600,
                    (i / 60) % 60,
                    i % 60
                ));
                CoreEvent::Tasks(rows.clone())
            }
            10 => CoreEvent::LogLines {
                task,
                kind: LogKind::Deviations,
                lines: vec![format!("Medium: deviation {i}")],
                starts: Vec::new(),
                initial_mtime: None,
            },
            _ => CoreEvent::LogLines {
                task,
                kind: LogKind::Status,
                lines: vec![if i % 97 == 0 {
                    format!(
                        "step {i} self-correction: fixed the tests [ctx: {}%]",
                        10 + (i / 200) % 50
                    )
                } else {
                    format!("step {i} agent 1 returned [ctx: {}%]", 10 + (i / 200) % 50)
                }],
                starts: Vec::new(),
                initial_mtime: None,
            },
        });
    }
    out
}

fn files(dir: &std::path::Path) -> EventLogFiles {
    EventLogFiles {
        current: dir.join("events.jsonl"),
        previous: dir.join("events.1.jsonl"),
        lock: dir.join("events.lock"),
        journal: dir.join("journal.tsv"),
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let files = files(dir.path());
    let start = OffsetDateTime::now_utc() - time::Duration::hours(3);
    let events = inputs();

    // Recording, as the hub pays for it: one `note` per input (each run a new log; the
    // last one is kept for the rest).
    let mut notes = Vec::with_capacity(5);
    for run in 0..5 {
        if run > 0 {
            std::fs::remove_file(&files.current).unwrap();
        }
        let mut recorder = Recorder::start(&files, 1 << 30, settings(), "bench".into(), start)
            .unwrap()
            .unwrap();
        let t = Instant::now();
        for (i, ev) in events.iter().enumerate() {
            recorder.note(start + time::Duration::seconds(i as i64), ev);
        }
        notes.push(t.elapsed());
        drop(recorder);
    }
    notes.sort();
    let noted = support::percentile(&notes, 50.0);
    let bytes = std::fs::metadata(&files.current).unwrap().len();
    println!(
        "record: {INPUTS} inputs noted in p50 {:.1} ms of 5 runs ({:.2} µs per input on the hub); event log {:.1} MiB",
        noted.as_secs_f64() * 1e3,
        noted.as_secs_f64() * 1e6 / INPUTS as f64,
        bytes as f64 / f64::from(1 << 20)
    );

    // Loading: read and parse the whole log.
    let mut loads = Vec::with_capacity(RUNS);
    let mut timeline = None;
    for _ in 0..RUNS {
        let t = Instant::now();
        let loaded = Timeline::from_event_log(&files).unwrap().unwrap();
        loads.push(t.elapsed());
        timeline = Some(loaded);
    }
    let timeline = Arc::new(timeline.unwrap());
    assert_eq!(timeline.len(), INPUTS, "{:?}", timeline.notes);
    loads.sort();
    println!(
        "load: {INPUTS} inputs in p50 {:.1} ms, max {:.1} ms ({RUNS} runs)",
        support::percentile(&loads, 50.0).as_secs_f64() * 1e3,
        support::percentile(&loads, 100.0).as_secs_f64() * 1e3
    );

    // Playing: the whole run through the hub, as fast as it goes (3 h of run time).
    let mut plays = Vec::with_capacity(RUNS);
    let mut anomalies = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let mut replay = Replay::spawn(
            timeline.clone(),
            ReplayConfig {
                speed: None,
                from: None,
                paused: false,
                quiet_before_from: false,
                exit_at_end: true,
                forward_logs: false,
                fallback: settings(),
            },
            Clock::system(time::UtcOffset::UTC),
        )
        .unwrap();
        anomalies = 0;
        while let Some(h) = replay.happenings.blocking_recv() {
            if matches!(h.what, maestro::core::event::What::Anomaly(_)) {
                anomalies += 1;
            }
        }
        plays.push(t.elapsed());
    }
    plays.sort();
    println!(
        "play to the end: {INPUTS} inputs, {anomalies} anomalies, in p50 {:.1} ms, max {:.1} ms ({RUNS} runs)",
        support::percentile(&plays, 50.0).as_secs_f64() * 1e3,
        support::percentile(&plays, 100.0).as_secs_f64() * 1e3
    );
}
