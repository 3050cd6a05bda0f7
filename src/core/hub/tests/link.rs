//! A remote project's hub while its link is down and after it comes back.

use super::*;
use crate::core::event::LinkReport;

fn link(status: &'static str) -> CoreEvent {
    CoreEvent::Link(LinkReport {
        project: "ssh://devbox/srv/orch".into(),
        status,
        detail: String::new(),
    })
}

/// Ten minutes without news because the link was down: nothing is stale, stalled or
/// dead, then or in the first interval after the link is back; a full interval of
/// silence after it is.
#[tokio::test(start_paused = true)]
async fn a_link_down_is_no_evidence_and_ages_restart_when_it_is_up() {
    let mut s = settings(false);
    s.rules.sentinel.stall_after = Duration::from_secs(60);
    s.rules.deadlines.task_stale_after = Duration::from_secs(60);
    s.rules.deadlines.conductor_stale_after = Duration::from_secs(60);
    let rows = CoreEvent::Tasks(vec![
        row("task-00", "reviewing", START),
        row("task-01", "working", START),
    ]);
    let mut r = rig_with(vec![rows], s);
    r.events
        .send(lines("task-01", LogKind::Status, &["step 1 [ctx: 10%]"]))
        .await
        .unwrap();
    r.events.send(link("up")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    drain(&mut r.out).await;
    r.events.send(link("down")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
    let while_down = drain(&mut r.out).await;
    assert!(
        while_down
            .iter()
            .all(|w| matches!(w, What::Link(l) if l.status == "down")),
        "{while_down:?}"
    );
    r.events.send(link("up")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let first_half = drain(&mut r.out).await;
    assert!(
        first_half
            .iter()
            .all(|w| matches!(w, What::Link(l) if l.status == "up")),
        "within the interval after the link came back: {first_half:?}"
    );
    tokio::time::sleep(Duration::from_secs(31)).await;
    let after = drain(&mut r.out).await;
    let stale: Vec<_> = after
        .iter()
        .filter_map(|w| match w {
            What::Stale { task_id, .. } => Some(task_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(stale, ["task-00", "task-01"], "{after:?}");
    assert!(
        after
            .iter()
            .any(|w| matches!(w, What::Anomaly(a) if a.kind == AnomalyKind::Stalled)),
        "{after:?}"
    );
}

fn stale_of(got: &[What]) -> Vec<&str> {
    got.iter()
        .filter_map(|w| match w {
            What::Stale { task_id, .. } => Some(task_id.as_str()),
            _ => None,
        })
        .collect()
}

/// A heartbeat's age is judged against the host's last word: with thresholds near the
/// beat window, a host that falls silent (before its link is called down) makes nothing
/// stale and no Conductor dead; a host that keeps beating does.
#[tokio::test(start_paused = true)]
async fn a_silent_host_is_no_evidence_of_a_stale_heartbeat() {
    let mut s = settings(false);
    s.rules.deadlines.task_stale_after = Duration::from_secs(6);
    s.rules.deadlines.conductor_stale_after = Duration::from_secs(6);
    let rows = CoreEvent::Tasks(vec![
        row("task-00", "reviewing", START),
        row("task-01", "working", START),
    ]);
    let mut r = rig_with(vec![rows], s);
    r.events.send(link("up")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    r.events.send(CoreEvent::Heard).await.unwrap();
    // The host says nothing more for 20 s: its link would be down by now; no verdict.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let silent = drain(&mut r.out).await;
    assert!(stale_of(&silent).is_empty(), "{silent:?}");
    assert!(
        !silent.iter().any(|w| matches!(w, What::Watchdog { .. })),
        "{silent:?}"
    );
    // It beats again, and keeps beating: the stamps are old as of its word.
    for _ in 0..5 {
        r.events.send(CoreEvent::Heard).await.unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let beating = drain(&mut r.out).await;
    assert_eq!(stale_of(&beating), ["task-00", "task-01"], "{beating:?}");
}
