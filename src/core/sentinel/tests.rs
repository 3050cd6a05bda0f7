use super::*;

fn sentinel() -> Sentinel {
    Sentinel::new(SentinelSettings {
        stall_after: Duration::from_secs(300),
        spike_threshold: 15,
    })
}

fn t(id: &str) -> TaskId {
    TaskId::parse(id).unwrap()
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn each_anomaly_names_its_line_by_kind_position_and_text() {
    let (mut s, task) = active("task-03");
    let now = Instant::now();
    s.on_lines(&task, LogKind::Status, &lines(&["a [ctx: 10%]", "b"]), now);
    s.on_lines(
        &task,
        LogKind::Deviations,
        &lines(&["Low: x", "High: y"]),
        now,
    );
    let found = s.on_lines(
        &task,
        LogKind::Status,
        &lines(&["c", "step 2 self-correction: z [ctx: 40%]"]),
        now,
    );
    let at: Vec<_> = found
        .iter()
        .map(|a| {
            a.line
                .as_ref()
                .map(|l| (a.kind, l.kind, l.index, l.text.to_string()))
        })
        .collect();
    let text = "step 2 self-correction: z [ctx: 40%]".to_owned();
    assert_eq!(
        at,
        [
            Some((
                AnomalyKind::SelfCorrection,
                LogKind::Status,
                3,
                text.clone()
            )),
            Some((AnomalyKind::ContextSpike, LogKind::Status, 3, text)),
        ]
    );
    // Positions count on across a truncation, as the presenters' views do.
    s.on_reset(&task, LogKind::Deviations);
    let found = s.on_lines(&task, LogKind::Deviations, &lines(&["High: again"]), now);
    assert_eq!(found[0].line.as_ref().map(|l| l.index), Some(2));
}

#[test]
fn a_truncated_log_rewritten_with_the_same_lines_raises_nothing_twice() {
    let (mut s, task) = active("task-03");
    let now = Instant::now();
    let before = lines(&["a", "step 1 self-correction: x", "b"]);
    assert_eq!(s.on_lines(&task, LogKind::Status, &before, now).len(), 1);
    s.on_reset(&task, LogKind::Status);
    // The same lines again (a rewrite that kept them), then a new one.
    assert!(s.on_lines(&task, LogKind::Status, &before, now).is_empty());
    let new = s.on_lines(
        &task,
        LogKind::Status,
        &lines(&["step 2 self-correction: y"]),
        now,
    );
    assert_eq!(new.len(), 1);
    // A different line at the replayed place is new.
    s.on_reset(&task, LogKind::Status);
    let other = lines(&["a", "step 1 self-correction: something else"]);
    assert_eq!(s.on_lines(&task, LogKind::Status, &other, now).len(), 1);
}

fn active(id: &str) -> (Sentinel, TaskId) {
    let mut s = sentinel();
    let task = t(id);
    s.set_active(&task, true);
    (s, task)
}

#[test]
fn self_correction_and_high_deviation() {
    let (mut s, task) = active("task-03");
    let now = Instant::now();
    let found = s.on_lines(
        &task,
        LogKind::Status,
        &lines(&[
            "step 1 started [ctx: 10%]",
            "step 2 self-correction: test failure in parser, rewrote tokenizer [ctx: 34%]",
        ]),
        now,
    );
    let kinds: Vec<_> = found.iter().map(|a| a.kind).collect();
    assert_eq!(
        kinds,
        [AnomalyKind::SelfCorrection, AnomalyKind::ContextSpike]
    );
    assert_eq!(
        found[0].detail,
        "step 2 self-correction: test failure in parser, rewrote tokenizer [ctx: 34%]"
    );
    let found = s.on_lines(
        &task,
        LogKind::Deviations,
        &lines(&[
            "Low: renamed a helper",
            "High: changed the public API",
            " High: indented",
        ]),
        now,
    );
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, AnomalyKind::HighDeviation);
    assert_eq!(found[0].detail, "High: changed the public API");
}

#[test]
fn context_spike_is_strictly_more_than_threshold() {
    let (mut s, task) = active("task-05");
    let now = Instant::now();
    let table = [
        (&["step 1 [ctx: 10%]", "step 2 [ctx: 25%]"][..], 0), // +15: not more than 15
        (&["step 3 [ctx: 41%]"][..], 1),                      // +16
        (&["no value here", "step 4 [ctx: 40%]"][..], 0),     // lines without a value are skipped
        (&["step 5 [ctx: 56%]"][..], 1), // +16 from 40, across a valueless line
        (&["step 6 [ctx: 20%]", "step 7 [ctx: 30%]"][..], 0), // drop, then +10
    ];
    for (batch, expected) in table {
        let found = s.on_lines(&task, LogKind::Status, &lines(batch), now);
        assert_eq!(found.len(), expected, "{batch:?}");
    }
    let found = s.on_lines(
        &task,
        LogKind::Status,
        &lines(&["step 2 [ctx: 29%]", "step 3 [ctx: 51%]"]),
        now,
    );
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].detail,
        "Context jumped from 29% to 51% between step 2 and step 3 (+22%)"
    );
    assert_eq!(found[0].spike, Some((29, 51)));
}

#[test]
fn spike_across_batches_and_unnamed_lines() {
    let (mut s, task) = active("task-05");
    let now = Instant::now();
    assert!(
        s.on_lines(
            &task,
            LogKind::Status,
            &lines(&["task claimed [ctx: 5%]"]),
            now
        )
        .is_empty()
    );
    let found = s.on_lines(
        &task,
        LogKind::Status,
        &lines(&["context at 65%, preparing handoff [ctx: 65%]"]),
        now,
    );
    assert_eq!(
        found[0].detail,
        "Context jumped from 5% to 65% between \"task claimed\" and \"context at 65%, preparing handoff\" (+60%)"
    );
}

#[test]
fn a_spike_within_one_step_names_both_entries() {
    let (mut s, task) = active("task-05");
    let now = Instant::now();
    let found = s.on_lines(
        &task,
        LogKind::Status,
        &lines(&[
            "step 1 started [ctx: 10%]",
            "step 1 self-correction: retried [ctx: 30%]",
        ]),
        now,
    );
    let spike = found
        .iter()
        .find(|a| a.kind == AnomalyKind::ContextSpike)
        .expect("spike");
    assert_eq!(
        spike.detail,
        "Context jumped from 10% to 30% between \"step 1 started\" and \"step 1 self-correction: retried\" (+20%)"
    );
}

#[test]
fn inactive_tasks_are_followed_but_not_reported() {
    let mut s = sentinel();
    let task = t("task-02");
    let now = Instant::now();
    assert!(
        s.on_lines(
            &task,
            LogKind::Status,
            &lines(&["self-correction [ctx: 10%]"]),
            now
        )
        .is_empty()
    );
    s.set_active(&task, true);
    // The value seen while inactive still counts as the previous one.
    let found = s.on_lines(&task, LogKind::Status, &lines(&["step 2 [ctx: 30%]"]), now);
    assert_eq!(found.len(), 1);
}

/// After a gap in maestro's running, silence counts from the resume: a Musician that
/// was stopped with maestro is not stalled, one still silent a full interval later is.
#[test]
fn a_stall_needs_a_full_interval_after_a_resume() {
    let (mut s, task) = active("task-01");
    let start = Instant::now();
    s.on_lines(
        &task,
        LogKind::Status,
        &lines(&["step 1 [ctx: 10%]"]),
        start,
    );
    let resumed = start + Duration::from_secs(280);
    s.restart_clocks(resumed);
    assert_eq!(
        s.next_deadline(),
        Some(resumed + Duration::from_millis(300_001))
    );
    assert!(
        s.tick(start + Duration::from_secs(420)).is_empty(),
        "the pause is no evidence"
    );
    assert_eq!(s.tick(resumed + Duration::from_secs(301)).len(), 1);
}

#[test]
fn stall_is_reported_once_per_stall_and_ended_by_a_line() {
    let (mut s, task) = active("task-04");
    let start = Instant::now();
    s.on_lines(
        &task,
        LogKind::Status,
        &lines(&["step 3 agent 1 launched [ctx: 41%]"]),
        start,
    );
    let deadline = s.next_deadline().unwrap();
    assert_eq!(deadline, start + Duration::from_millis(300_001));
    assert!(
        s.tick(start + Duration::from_secs(300)).is_empty(),
        "exactly 5 min is not more than 5 min"
    );
    let found = s.tick(start + Duration::from_secs(420));
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].detail,
        "No new entries in temp/task-04-status for 7 minutes. Last entry: \"step 3 agent 1 launched [ctx: 41%]\""
    );
    assert!(
        s.tick(start + Duration::from_secs(900)).is_empty(),
        "one report per stall"
    );
    assert!(s.next_deadline().is_none());
    let later = start + Duration::from_secs(1000);
    s.on_lines(&task, LogKind::Status, &lines(&["step 4 started"]), later);
    assert!(s.tick(later + Duration::from_secs(200)).is_empty());
    assert_eq!(
        s.tick(later + Duration::from_secs(301)).len(),
        1,
        "a new stall after a new line"
    );
}

#[test]
fn deviations_do_not_end_a_stall_and_inactive_tasks_never_stall() {
    let (mut s, task) = active("task-04");
    let start = Instant::now();
    s.on_lines(&task, LogKind::Status, &lines(&["x"]), start);
    s.on_lines(
        &task,
        LogKind::Deviations,
        &lines(&["Low: y"]),
        start + Duration::from_secs(200),
    );
    assert_eq!(s.tick(start + Duration::from_secs(301)).len(), 1);
    let other = t("task-09");
    s.on_lines(&other, LogKind::Status, &lines(&["x"]), start);
    assert!(s.tick(start + Duration::from_secs(9999)).is_empty());
}

#[test]
fn durations_read_naturally() {
    assert_eq!(human_duration(Duration::from_secs(420)), "7 minutes");
    assert_eq!(human_duration(Duration::from_secs(60)), "1 minute");
    assert_eq!(human_duration(Duration::from_secs(3)), "3 seconds");
    assert_eq!(human_duration(Duration::from_secs(1)), "1 second");
}
