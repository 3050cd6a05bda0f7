//! The hub driven by hand with fake sources and paused time.

use super::*;
use crate::core::clock::parse_sqlite_utc;
use crate::core::domain::LogKind;

const START: &str = "2026-11-22 14:00:00";

struct Rig {
    events: mpsc::Sender<CoreEvent>,
    out: mpsc::Receiver<Happening>,
    _cancel: CancellationToken,
    recorded: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

struct Recorder(std::sync::Arc<std::sync::Mutex<Vec<String>>>);
impl ReportSink for Recorder {
    fn record(&self, text: String) {
        self.0.lock().unwrap().push(text);
    }
}

fn settings(report_to_db: bool) -> HubSettings {
    HubSettings {
        rules: Rules {
            sentinel: SentinelSettings {
                stall_after: Duration::from_secs(300),
                spike_threshold: 15,
            },
            deadlines: crate::core::hub::Deadlines {
                task_stale_after: Duration::from_secs(540),
                conductor_stale_after: Duration::from_secs(240),
                souffleur_stale_after: Duration::from_secs(180),
            },
            forecast_lead: Duration::from_secs(600),
            budgets: crate::core::sessions::Budgets::default(),
        },
        db_writes: crate::core::sources::db::DbWrites {
            report_to_db,
            history_runs: 1000,
        },
        with_database: true,
        db_name: "comms.db".into(),
        observe_watchdog: true,
        forward_logs: true,
    }
}

fn rig(initial: Vec<CoreEvent>, report_to_db: bool) -> Rig {
    rig_with(initial, settings(report_to_db))
}

fn rig_with(initial: Vec<CoreEvent>, settings: HubSettings) -> Rig {
    let clock = Clock::following_tokio(parse_sqlite_utc(START).unwrap());
    rig_with_clock(initial, settings, clock)
}

fn rig_with_clock(initial: Vec<CoreEvent>, settings: HubSettings, clock: Clock) -> Rig {
    let (events, rx) = mpsc::channel(64);
    let (out_tx, out) = mpsc::channel(256);
    let (snap_tx, _) = watch::channel(Arc::new(Snapshot::default()));
    let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let hub = Hub::new(
        settings,
        clock,
        out_tx,
        snap_tx,
        Some(Box::new(Recorder(recorded.clone()))),
    );
    let cancel = CancellationToken::new();
    tokio::spawn(hub.run(initial, rx, cancel.clone()));
    Rig {
        events,
        out,
        _cancel: cancel,
        recorded,
    }
}

fn row(id: &str, state: &str, heartbeat: &str) -> TaskRow {
    TaskRow {
        last_heartbeat: Some(heartbeat.into()),
        ..TaskRow::new(id, state)
    }
}

fn lines(task: &str, kind: LogKind, v: &[&str]) -> CoreEvent {
    CoreEvent::LogLines {
        task: TaskId::parse(task).unwrap(),
        kind,
        lines: v.iter().map(|s| (*s).to_owned()).collect(),
        starts: Vec::new(),
        initial_mtime: None,
    }
}

/// Everything emitted until the hub has been idle (paused time auto-advances only
/// when every task sleeps, so this returns at the next quiet point).
async fn drain(out: &mut mpsc::Receiver<Happening>) -> Vec<What> {
    let mut got = Vec::new();
    tokio::task::yield_now().await;
    while let Ok(h) = out.try_recv() {
        got.push(h.what);
        tokio::task::yield_now().await;
    }
    got
}

async fn next(out: &mut mpsc::Receiver<Happening>) -> (OffsetDateTime, What) {
    let h = out.recv().await.expect("hub alive");
    (h.at, h.what)
}

fn is_log(w: &What) -> bool {
    matches!(w, What::Log { .. })
}

/// A crossing far ahead is slept until, not polled: the hub once woke at once for
/// every pending forecast and spun until it fell due (here the test would hang,
/// since paused time only moves while the hub sleeps).
#[tokio::test(start_paused = true)]
async fn a_distant_forecast_is_raised_when_it_falls_due() {
    let mut r = rig(
        vec![CoreEvent::Tasks(vec![row("task-01", "working", START)])],
        false,
    );
    let start = parse_sqlite_utc(START).unwrap();
    r.events
        .send(lines("task-01", LogKind::Status, &["step 1 [ctx: 10%]"]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(300)).await;
    r.events
        .send(lines("task-01", LogKind::Status, &["step 2 [ctx: 20%]"]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(300)).await;
    r.events
        .send(lines("task-01", LogKind::Status, &["step 3 [ctx: 30%]"]))
        .await
        .unwrap();
    // 2 points a minute from 30 % at +600 s: 65 % at +1650 s, warned 600 s before,
    // while the trend (measured over 600 s) still speaks (until +1200 s).
    let (raised, crossing) = loop {
        if let (
            raised,
            What::Forecast {
                threshold: 65, at, ..
            },
        ) = next(&mut r.out).await
        {
            break (raised, at);
        }
    };
    assert_eq!(crossing, start + time::Duration::seconds(1650));
    let early = raised - (start + time::Duration::seconds(1050));
    assert!(
        early.abs() < time::Duration::milliseconds(5),
        "raised {early} off"
    );
}

#[tokio::test(start_paused = true)]
async fn task_changes_stale_heartbeats_and_conductor_watchdog() {
    let mut r = rig(
        vec![CoreEvent::Tasks(vec![
            row("task-00", "watching", START),
            row("task-01", "working", START),
            row("task-02", "complete", "2026-11-22 10:00:00"),
        ])],
        false,
    );
    let first: Vec<What> = drain(&mut r.out).await;
    assert_eq!(
        first
            .iter()
            .filter(|w| matches!(
                w,
                What::Task {
                    prev_state: None,
                    ..
                }
            ))
            .count(),
        3
    );
    assert!(
        !first.iter().any(|w| matches!(w, What::Stale { .. })),
        "a complete task is never stale"
    );

    // 240 s is not "more than" 240 s; the conductor goes stale just after.
    let (at, what) = next(&mut r.out).await;
    assert!(
        matches!(&what, What::Stale { task_id, age_s: 240 } if task_id == "task-00"),
        "{what:?}"
    );
    assert_eq!(
        at,
        parse_sqlite_utc("2026-11-22 14:04:00").unwrap() + Duration::from_millis(1)
    );
    let (_, what) = next(&mut r.out).await;
    assert!(matches!(
        what,
        What::Watchdog {
            reason: WatchdogReason::ConductorDeadHeartbeat,
            task_count: 3
        }
    ));
    let (at, what) = next(&mut r.out).await;
    assert!(matches!(&what, What::Stale { task_id, .. } if task_id == "task-01"));
    assert_eq!(
        at,
        parse_sqlite_utc("2026-11-22 14:09:00").unwrap() + Duration::from_millis(1)
    );

    // A fresh heartbeat ends the episode; a state change is reported with its previous state.
    r.events
        .send(CoreEvent::Tasks(vec![
            row("task-00", "complete", "2026-11-22 14:09:00"),
            row("task-01", "needs_review", "2026-11-22 14:09:00"),
            row("task-02", "complete", "2026-11-22 10:00:00"),
        ]))
        .await
        .unwrap();
    let got = drain(&mut r.out).await;
    assert!(got.iter().any(|w| matches!(w, What::Task { task_id, state, prev_state: Some(p) } if task_id == "task-01" && state == "needs_review" && p == "working")));
    assert!(got.iter().any(|w| matches!(
        w,
        What::Watchdog {
            reason: WatchdogReason::ConductorComplete,
            ..
        }
    )));
    // needs_review is not a heartbeat-active state and the Conductor is complete:
    // nothing more can go stale, so the hub sleeps with no deadline.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert!(drain(&mut r.out).await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn stall_is_reported_after_the_threshold_from_file_mtime() {
    let mut r = rig(
        vec![CoreEvent::Tasks(vec![row("task-04", "working", START)])],
        false,
    );
    drain(&mut r.out).await;
    let two_minutes_ago =
        std::time::SystemTime::from(parse_sqlite_utc(START).unwrap() - Duration::from_secs(120));
    r.events
        .send(CoreEvent::LogLines {
            task: TaskId::parse("task-04").unwrap(),
            kind: LogKind::Status,
            lines: vec!["step 3 agent 1 launched [ctx: 41%]".into()],
            starts: Vec::new(),
            initial_mtime: Some(two_minutes_ago),
        })
        .await
        .unwrap();
    let got = drain(&mut r.out).await;
    assert!(got.iter().all(is_log));
    let (at, what) = next(&mut r.out).await;
    // mtime + 300 s (+1 ms: strictly more than) = 180 s after start.
    assert_eq!(
        at,
        parse_sqlite_utc("2026-11-22 14:03:00").unwrap() + Duration::from_millis(1)
    );
    let What::Anomaly(a) = what else {
        panic!("{what:?}")
    };
    assert_eq!(a.kind, AnomalyKind::Stalled);
    assert!(
        a.detail
            .starts_with("No new entries in temp/task-04-status for 5 minutes."),
        "{}",
        a.detail
    );
}

#[tokio::test(start_paused = true)]
async fn only_active_tasks_are_reported() {
    let mut r = rig(
        vec![CoreEvent::Tasks(vec![
            row("task-01", "working", START),
            row("task-02", "complete", START),
        ])],
        false,
    );
    drain(&mut r.out).await;
    r.events
        .send(lines("task-02", LogKind::Status, &["self-correction"]))
        .await
        .unwrap();
    r.events
        .send(lines("task-03", LogKind::Status, &["self-correction"]))
        .await
        .unwrap();
    r.events
        .send(lines("task-01", LogKind::Status, &["self-correction"]))
        .await
        .unwrap();
    let anomalies: Vec<String> = drain(&mut r.out)
        .await
        .into_iter()
        .filter_map(|w| match w {
            What::Anomaly(a) => Some(a.task_id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        anomalies,
        ["task-01"],
        "complete and unknown tasks are not watched"
    );
}

#[tokio::test(start_paused = true)]
async fn recorded_reports_are_not_repeated_but_new_ones_are_recorded() {
    let key = (
        TaskId::parse("task-01").unwrap(),
        AnomalyKind::SelfCorrection,
        "\"step 2 self-correction: x\"".to_owned(),
    );
    let mut r = rig(
        vec![
            CoreEvent::RecordedReports(vec![key]),
            CoreEvent::Tasks(vec![row("task-01", "working", START)]),
        ],
        true,
    );
    drain(&mut r.out).await;
    // The same line twice: the first was recorded by an earlier run, the second is new.
    r.events
        .send(lines(
            "task-01",
            LogKind::Status,
            &["step 2 self-correction: x", "step 2 self-correction: x"],
        ))
        .await
        .unwrap();
    let got = drain(&mut r.out).await;
    assert_eq!(
        got.iter().filter(|w| matches!(w, What::Anomaly(_))).count(),
        1
    );
    let recorded = r.recorded.lock().unwrap().clone();
    assert_eq!(recorded.len(), 1);
    assert_eq!(
        recorded[0],
        "SENTINEL: [14:00:00] task-01\nAnomaly: self-correction\nDetail: \"step 2 self-correction: x\""
    );
}

#[tokio::test(start_paused = true)]
async fn invalid_task_ids_are_reported_once() {
    let bad = row("../../etc/passwd", "working", START);
    let mut r = rig(vec![CoreEvent::Tasks(vec![bad.clone()])], false);
    let got = drain(&mut r.out).await;
    assert_eq!(
        got.iter()
            .filter(
                |w| matches!(w, What::Error { detail, .. } if detail.contains("../../etc/passwd"))
            )
            .count(),
        1
    );
    r.events
        .send(CoreEvent::Tasks(vec![TaskRow {
            state: "needs_review".into(),
            ..bad
        }]))
        .await
        .unwrap();
    let got = drain(&mut r.out).await;
    assert!(!got.iter().any(|w| matches!(w, What::Error { .. })));
}

/// Everything stopped 9 s (maestro and every writer), then resumed: the ages include
/// the pause, which is no evidence. Silent a full interval after the resume, a task is
/// stale and stalled all the same.
#[tokio::test(start_paused = true)]
async fn after_a_pause_nothing_is_stale_or_stalled_until_a_full_interval_passes() {
    use crate::core::clock::gaps::{GapKind, Gaps};
    let mut s = settings(false);
    s.rules.sentinel.stall_after = Duration::from_secs(4);
    s.rules.deadlines.task_stale_after = Duration::from_secs(4);
    s.rules.deadlines.conductor_stale_after = Duration::from_secs(4);
    let gaps = Gaps::detached();
    let start = parse_sqlite_utc(START).unwrap();
    let clock = Clock::following_tokio(start).with_gaps(gaps);
    let rows = |hb: &str| {
        CoreEvent::Tasks(vec![
            row("task-00", "reviewing", hb),
            row("task-01", "working", hb),
        ])
    };
    let mut r = rig_with_clock(vec![rows(START)], s, clock);
    r.events
        .send(lines("task-01", LogKind::Status, &["step 1 [ctx: 10%]"]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        drain(&mut r.out)
            .await
            .iter()
            .all(|w| matches!(w, What::Task { .. } | What::Log { .. }))
    );
    // The pause: every timer is overdue when maestro runs again at t = 10 s.
    let t0 = Instant::now();
    gaps.declare(
        GapKind::Pause,
        Duration::from_secs(9),
        t0 + Duration::from_secs(9),
        start,
    );
    tokio::time::advance(Duration::from_secs(9)).await;
    let (_, what) = next(&mut r.out).await;
    assert!(
        matches!(
            what,
            What::Clock {
                kind: "pause",
                seconds: 9
            }
        ),
        "{what:?}"
    );
    // The writers speak again within the interval: nothing is judged.
    tokio::time::sleep(Duration::from_millis(500)).await;
    r.events.send(rows("2026-11-22 14:00:10")).await.unwrap();
    r.events
        .send(lines("task-01", LogKind::Status, &["step 2 [ctx: 12%]"]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let quiet: Vec<_> = drain(&mut r.out)
        .await
        .into_iter()
        .filter(|w| {
            matches!(
                w,
                What::Stale { .. } | What::Anomaly(_) | What::Watchdog { .. }
            )
        })
        .collect();
    assert!(quiet.is_empty(), "no judgement on the pause: {quiet:?}");
    // Then silence for a full interval: stale, dead and stalled as usual.
    let mut judged = Vec::new();
    while judged.len() < 4 {
        match next(&mut r.out).await.1 {
            What::Stale { task_id, .. } => judged.push(format!("stale {task_id}")),
            What::Watchdog { reason, .. } => judged.push(reason.to_string()),
            What::Anomaly(a) => judged.push(format!("{} {}", a.kind.as_str(), a.task_id)),
            _ => {}
        }
    }
    judged.sort();
    assert_eq!(
        judged,
        [
            "CONDUCTOR_DEAD:heartbeat",
            "stale task-00",
            "stale task-01",
            "stalled task-01"
        ]
    );
    assert!(Instant::now() >= t0 + Duration::from_secs(9 + 4));
}

mod link;
mod sessions;
mod stall;
