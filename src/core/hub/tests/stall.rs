//! Only work stalls: a Musician waiting on the Conductor (`needs_review`, `error`) is
//! the Conductor's queue, not a stalled task; `fix_proposed` is the Musician's turn.

use super::*;

fn stalled(got: &[What]) -> Vec<String> {
    got.iter()
        .filter_map(|w| match w {
            What::Anomaly(a) if a.kind == AnomalyKind::Stalled => Some(a.task_id.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_task_waiting_on_the_conductor_never_stalls_and_back_at_work_is_judged_from_then() {
    let mut s = settings(false);
    s.rules.sentinel.stall_after = Duration::from_secs(3);
    let mut r = rig_with(
        vec![CoreEvent::Tasks(vec![
            row("task-01", "working", START),
            row("task-02", "needs_review", START),
            row("task-03", "error", START),
            row("task-04", "fix_proposed", START),
        ])],
        s,
    );
    for task in ["task-01", "task-02", "task-03", "task-04"] {
        r.events
            .send(lines(task, LogKind::Status, &["step 2 done [ctx: 20%]"]))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(stalled(&drain(&mut r.out).await), ["task-01", "task-04"]);

    // The Conductor answers: task-02 works again. Its minute of waiting is no silence.
    r.events
        .send(CoreEvent::Tasks(vec![row("task-02", "working", START)]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(stalled(&drain(&mut r.out).await).is_empty());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(stalled(&drain(&mut r.out).await), ["task-02"]);
}
