//! The player on a paused clock: lines judged at their moments, steps, seeks, speeds.
use super::*;
use crate::core::domain::AnomalyKind;
use crate::core::event::TaskRow;
use crate::core::event_log::input::Input;
use crate::core::event_log::timeline::{Entry, Origin, Session};

const DEADLINE: Duration = Duration::from_secs(10);

fn t0() -> OffsetDateTime {
    crate::core::clock::parse_sqlite_utc("2026-11-22 14:00:00").expect("time")
}

fn at(s: i64) -> OffsetDateTime {
    t0() + time::Duration::seconds(s)
}

fn settings() -> RecordedSettings {
    RecordedSettings {
        stall_after_ms: 60_000,
        task_stale_after_ms: 3_600_000,
        conductor_stale_after_ms: 3_600_000,
        souffleur_stale_after_ms: 3_600_000,
        forecast_lead_ms: 0,
        ..RecordedSettings::default()
    }
}

fn line(s: i64, text: &str) -> Entry {
    Entry {
        at: at(s),
        input: Input::Lines {
            task: "task-01".into(),
            kind: "status".into(),
            lines: vec![text.into()],
            mtime: None,
        },
    }
}

/// task-01 works; a self-correction at +2 s; silence until +100 s, so a 60 s
/// stall falls due at +62 s, between two inputs.
fn timeline() -> Arc<Timeline> {
    let mut row = TaskRow::new("task-01", "working");
    row.last_heartbeat = Some("2026-11-22 14:00:00".into());
    let entries = vec![
        Entry {
            at: at(0),
            input: Input::Tasks {
                set: vec![row],
                gone: vec![],
            },
        },
        line(1, "step 1 started [ctx: 10%]"),
        line(2, "step 1 self-correction: rewrote the parser [ctx: 12%]"),
        line(100, "step 2 started [ctx: 14%]"),
    ];
    Arc::new(Timeline {
        origin: Origin::EventLog,
        sessions: vec![Session {
            settings: Some(settings()),
            entries,
            start: at(0),
            end: at(120),
        }],
        notes: vec!["a note".into()],
    })
}

fn config(paused: bool, speed: Option<f64>, exit_at_end: bool) -> ReplayConfig {
    ReplayConfig {
        speed,
        from: None,
        paused,
        quiet_before_from: false,
        exit_at_end,
        forward_logs: false,
        fallback: settings(),
    }
}

fn clock() -> Clock {
    Clock::system(time::UtcOffset::UTC)
}

/// The next happening, or a failure after the deadline.
/// Waits for `fut` on a runtime of the test's own (real time), failing after the
/// deadline.
fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    rt.block_on(async { tokio::time::timeout(DEADLINE, fut).await })
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The next happening.
fn next(replay: &mut Replay) -> Happening {
    within("a happening", replay.happenings.recv()).expect("the replay is running")
}

fn anomalies(replay: &mut Replay) -> Vec<(AnomalyKind, OffsetDateTime)> {
    let mut out = Vec::new();
    while let Some(h) = replay.happenings.blocking_recv() {
        if let What::Anomaly(a) = h.what {
            out.push((a.kind, h.at));
        }
    }
    out
}

/// The anomalies that arrive until one of `last` kind (after a `source` happening
/// of status `after`, when given).
fn anomalies_until(
    replay: &mut Replay,
    last: AnomalyKind,
    after: Option<&str>,
) -> Vec<(AnomalyKind, OffsetDateTime)> {
    let mut armed = after.is_none();
    let mut out = Vec::new();
    loop {
        let h = next(replay);
        match h.what {
            What::Source { status, .. } if Some(status) == after => armed = true,
            What::Anomaly(a) if armed => {
                out.push((a.kind, h.at));
                if a.kind == last {
                    return out;
                }
            }
            _ => {}
        }
    }
}

/// Waits until the replay's status satisfies `ok`.
fn status_until(replay: &mut Replay, ok: impl Fn(&ReplayStatus) -> bool) -> ReplayStatus {
    within("a replay status", replay.status.wait_for(|s| ok(s)))
        .expect("the replay is running")
        .clone()
}

#[test]
fn the_sentinel_judges_the_replayed_lines_at_their_moments() {
    let mut replay = Replay::spawn(timeline(), config(false, None, true), clock()).expect("spawn");
    let found = anomalies(&mut replay);
    // The stall falls due 60 s after the last line (+2 s), between two inputs.
    let stall = found
        .iter()
        .find(|(k, _)| *k == AnomalyKind::Stalled)
        .expect("a stall")
        .1;
    assert_eq!(found[0], (AnomalyKind::SelfCorrection, at(2)));
    assert!(
        stall > at(62) && stall < at(62) + time::Duration::milliseconds(5),
        "{stall}"
    );
    assert_eq!(found.len(), 2, "{found:?}");
}

#[test]
fn step_seek_and_rewind() {
    let mut replay =
        Replay::spawn(timeline(), config(true, Some(1.0), false), clock()).expect("spawn");
    let loaded = next(&mut replay);
    assert!(matches!(
        loaded.what,
        What::Source {
            status: "loaded",
            ..
        }
    ));
    status_until(&mut replay, |s| s.paused && s.played == 0);

    replay.send(ReplayCmd::Step);
    let s = status_until(&mut replay, |s| s.played == 1);
    assert_eq!(
        (s.at, s.paused),
        (at(0), true),
        "a step pauses at the input's moment"
    );
    replay.send(ReplayCmd::Step);
    replay.send(ReplayCmd::Step);
    let s = status_until(&mut replay, |s| s.played == 3);
    assert_eq!(s.at, at(2));
    assert_eq!(
        replay.clock.now_utc(),
        at(2),
        "presenters read the replay clock"
    );

    // Forward past the stall's moment: it is raised on the way, at its moment.
    replay.send(ReplayCmd::SeekTo(at(70)));
    let s = status_until(&mut replay, |s| s.at == at(70));
    assert_eq!(s.played, 3);
    let seen = anomalies_until(&mut replay, AnomalyKind::Stalled, None);
    assert_eq!(
        seen.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        [AnomalyKind::SelfCorrection, AnomalyKind::Stalled]
    );
    let stalled_at = seen[1].1;

    // Back: the dashboard is told to forget, and the run plays again to there; on
    // again, the stall comes once more at the same moment.
    replay.send(ReplayCmd::SeekBy(-68));
    let s = status_until(&mut replay, |s| s.at == at(2));
    assert_eq!(s.played, 3);
    replay.send(ReplayCmd::SeekTo(at(70)));
    let again = anomalies_until(&mut replay, AnomalyKind::Stalled, Some("rewound"));
    assert_eq!(
        again,
        [
            (AnomalyKind::SelfCorrection, at(2)),
            (AnomalyKind::Stalled, stalled_at)
        ]
    );

    // Past the end: clamped, and the replay says it is finished.
    replay.send(ReplayCmd::SeekBy(3600));
    let s = status_until(&mut replay, |s| s.finished);
    assert_eq!((s.at, s.played, s.total), (at(120), 4, 4));
}

#[test]
fn speed_steps_along_the_ladder() {
    assert!((step_speed(1.0, true) - 2.0).abs() < f64::EPSILON);
    assert!((step_speed(1.0, false) - 0.5).abs() < f64::EPSILON);
    assert!((step_speed(1000.0, true) - 1000.0).abs() < f64::EPSILON);
}
