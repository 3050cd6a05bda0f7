//! The Sentinel: the four anomalies of docs/orchestration.md §3 as a pure state machine.
//!
//! Input: complete log lines per task (from `sources::temp_logs`) and the passing of
//! time (`tick`). Output: [`Anomaly`] values. No I/O and no clock of its own, so tests
//! drive it with plain `Instant`s or paused tokio time.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::core::domain::{
    Anomaly, AnomalyKind, LogKind, SourceLine, TaskId, context_percent, step_label,
    without_context_marker,
};

#[derive(Debug, Clone, Copy)]
pub struct SentinelSettings {
    /// `stalled` after strictly more than this without a new status line.
    pub stall_after: Duration,
    /// `context-spike` when the value rises by strictly more than this many points.
    pub spike_threshold: u8,
}

#[derive(Debug, Default)]
struct TaskWatch {
    /// Reports are made only for active tasks; lines are still followed otherwise.
    active: bool,
    /// Not in a working state (waiting on the Conductor, not claimed yet): the task's
    /// silence is the Conductor's queue, not a stall.
    not_working: bool,
    /// The last status line carrying a `[ctx: …]` value, and that value.
    last_ctx: Option<(u8, String)>,
    /// When the last status line arrived (or the file's mtime at start).
    last_entry_at: Option<Instant>,
    last_entry: Option<String>,
    /// Where the last entry starts in its file, when known.
    last_entry_offset: Option<u64>,
    /// A stall was reported and no new line has ended it yet.
    stalled: bool,
    /// Lines read so far of the status and the deviations log: the next line's index.
    read: [u64; 2],
    /// Lines read of each log since it was last truncated or replaced.
    since_reset: [u64; 2],
    /// Lines of the current file (position since reset → hash) that raised anomalies,
    /// and those of the file before the last reset: a truncated log rewritten with the
    /// same lines replays them, and a replayed line is not a new anomaly.
    raised: [HashMap<u64, u64>; 2],
    raised_before_reset: [HashMap<u64, u64>; 2],
}

/// Anomaly lines remembered per log file for replay detection.
const RAISED_KEPT: usize = 10_000;

fn line_hash(line: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    line.hash(&mut h);
    h.finish()
}

fn slot(kind: LogKind) -> usize {
    match kind {
        LogKind::Status => 0,
        LogKind::Deviations => 1,
    }
}

#[derive(Debug)]
pub struct Sentinel {
    settings: SentinelSettings,
    tasks: HashMap<TaskId, TaskWatch>,
    /// (last entry, task) of every task that can stall: active, not stalled, with an
    /// entry. The first one is the next stall, so a wake-up never looks at the others.
    stall_order: BTreeSet<(Instant, TaskId)>,
    /// The last resume after a gap in maestro's running: silence before it is no evidence.
    evidence_floor: Option<Instant>,
}

impl Sentinel {
    pub fn new(settings: SentinelSettings) -> Self {
        Self {
            settings,
            tasks: HashMap::new(),
            stall_order: BTreeSet::new(),
            evidence_floor: None,
        }
    }

    /// Runs `change` on a task's watch and keeps the stall order in step with it.
    fn update<R>(&mut self, task: &TaskId, change: impl FnOnce(&mut TaskWatch) -> R) -> R {
        let watch = self.tasks.entry(task.clone()).or_default();
        let before = watch.stall_key();
        let result = change(watch);
        let after = watch.stall_key();
        if before != after {
            if let Some(at) = before {
                self.stall_order.remove(&(at, task.clone()));
            }
            if let Some(at) = after {
                self.stall_order.insert((at, task.clone()));
            }
        }
        result
    }

    /// Marks a task as watched (reported on) or not. A task turning inactive forgets
    /// its stall; one turning active is judged from its last entry.
    pub fn set_active(&mut self, task: &TaskId, active: bool) {
        self.update(task, |w| w.active = active);
    }

    /// Marks whether a task is in a working state (docs/orchestration.md §3: only work
    /// stalls). Back at work, its silence is judged from `now`, not from before the wait.
    pub fn set_working(&mut self, task: &TaskId, working: bool, now: Instant) {
        self.update(task, |w| {
            if w.not_working && working {
                w.last_entry_at = w.last_entry_at.map(|at| at.max(now));
            }
            w.not_working = !working;
        });
    }

    /// Stops reporting on every task (a new database names the active ones again).
    pub fn deactivate_all(&mut self) {
        for w in self.tasks.values_mut() {
            w.active = false;
        }
        self.stall_order.clear();
    }

    pub fn is_active(&self, task: &TaskId) -> bool {
        self.tasks.get(task).is_some_and(|w| w.active)
    }

    /// The tasks reported on.
    pub fn active_tasks(&self) -> impl Iterator<Item = &TaskId> {
        self.tasks.iter().filter(|(_, w)| w.active).map(|(t, _)| t)
    }

    /// New lines of one log. `arrived_at` is when they were written as far as anyone
    /// can tell: now for appended lines, the file's mtime for what was there at start.
    pub fn on_lines(
        &mut self,
        task: &TaskId,
        kind: LogKind,
        lines: &[String],
        arrived_at: Instant,
    ) -> Vec<Anomaly> {
        self.on_lines_at(task, kind, (lines, &[]), arrived_at)
    }

    /// [`Self::on_lines`] with where each line starts in its file (`starts`; empty when
    /// not known): each anomaly's line keeps its place.
    pub fn on_lines_at(
        &mut self,
        task: &TaskId,
        kind: LogKind,
        (lines, starts): (&[String], &[u64]),
        arrived_at: Instant,
    ) -> Vec<Anomaly> {
        let spike = self.settings.spike_threshold;
        self.update(task, |watch| {
            watch.take_lines(task, kind, (lines, starts), arrived_at, spike)
        })
    }

    /// A status file exists but holds no line yet: at start, its mtime counts as the
    /// last entry.
    pub fn on_file_seen(&mut self, task: &TaskId, kind: LogKind, at: Instant) {
        self.update(task, |watch| {
            if kind == LogKind::Status && watch.last_entry_at.is_none() {
                watch.last_entry_at = Some(at);
            }
        });
    }

    /// Lines of a history skimmed at start that hold nothing judged: positions count
    /// on past them.
    pub fn skip(&mut self, task: &TaskId, kind: LogKind, lines: u64) {
        self.update(task, |watch| {
            watch.read[slot(kind)] += lines;
            watch.since_reset[slot(kind)] += lines;
        });
    }

    /// The last context value of lines only counted, and its line: the next value is
    /// compared with it.
    pub fn set_context(&mut self, task: &TaskId, value: u8, line: String) {
        self.update(task, |watch| watch.last_ctx = Some((value, line)));
    }

    /// A status file was truncated or replaced: its context history starts over.
    pub fn on_reset(&mut self, task: &TaskId, kind: LogKind) {
        if let Some(w) = self.tasks.get_mut(task) {
            if kind == LogKind::Status {
                w.last_ctx = None;
            }
            let k = slot(kind);
            w.since_reset[k] = 0;
            w.raised_before_reset[k] = std::mem::take(&mut w.raised[k]);
        }
    }

    /// Stalls whose deadline has passed at `now`, each reported once. Only the tasks
    /// due are looked at.
    pub fn tick(&mut self, now: Instant) -> Vec<Anomaly> {
        let stall_after = self.settings.stall_after;
        let mut found = Vec::new();
        while let Some((at, task)) = self.stall_order.first().cloned() {
            // Silence counts only from the last resume after a gap in maestro's running.
            let since = self.evidence_floor.map_or(at, |floor| at.max(floor));
            if now.saturating_duration_since(since) <= stall_after {
                break;
            }
            self.stall_order.pop_first();
            let Some(w) = self.tasks.get_mut(&task) else {
                continue;
            };
            w.stalled = true;
            let detail = format!(
                "No new entries in temp/{task}-status for {}. Last entry: \"{}\"",
                human_duration(now.saturating_duration_since(at)),
                w.last_entry.as_deref().unwrap_or_default()
            );
            // The stall is about the last entry, when there is one (not a bare mtime).
            let line = w.last_entry.as_deref().map(|text| SourceLine {
                kind: LogKind::Status,
                index: w.read[0].saturating_sub(1),
                offset: w.last_entry_offset,
                text: Arc::from(text),
            });
            found.push(Anomaly {
                line,
                ..anomaly(&task, AnomalyKind::Stalled, detail)
            });
        }
        found.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        found
    }

    /// The next moment `tick` could find a stall: "strictly more than" the threshold,
    /// so one millisecond past it.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.stall_order.first().map(|(at, _)| {
            let since = self.evidence_floor.map_or(*at, |floor| (*at).max(floor));
            since + self.settings.stall_after + Duration::from_millis(1)
        })
    }

    /// maestro's own time stopped until `resumed_at`: a stall needs a full
    /// `stall_after` of silence from then (the writers were stopped too).
    pub fn restart_clocks(&mut self, resumed_at: Instant) {
        self.evidence_floor = Some(
            self.evidence_floor
                .map_or(resumed_at, |f| f.max(resumed_at)),
        );
    }
}

impl TaskWatch {
    /// When this task would stall, if it can.
    fn stall_key(&self) -> Option<Instant> {
        self.last_entry_at
            .filter(|_| self.active && !self.stalled && !self.not_working)
    }

    fn take_lines(
        &mut self,
        task: &TaskId,
        kind: LogKind,
        (lines, starts): (&[String], &[u64]),
        arrived_at: Instant,
        spike: u8,
    ) -> Vec<Anomaly> {
        let watch = self;
        let first = watch.read[slot(kind)];
        watch.read[slot(kind)] += lines.len() as u64;
        let first_since_reset = watch.since_reset[slot(kind)];
        watch.since_reset[slot(kind)] += lines.len() as u64;
        let at = |i: usize, text: &str| SourceLine {
            kind,
            index: first + i as u64,
            offset: starts.get(i).copied(),
            text: Arc::from(text),
        };
        let mut found = Vec::new();
        match kind {
            LogKind::Deviations => {
                for (i, line) in lines.iter().enumerate() {
                    if line.starts_with("High:") {
                        found.push(Anomaly {
                            line: Some(at(i, line)),
                            ..anomaly(task, AnomalyKind::HighDeviation, line.clone())
                        });
                    }
                }
            }
            LogKind::Status => {
                for (i, line) in lines.iter().enumerate() {
                    if line.contains("self-correction") {
                        found.push(Anomaly {
                            line: Some(at(i, line)),
                            ..anomaly(task, AnomalyKind::SelfCorrection, line.clone())
                        });
                    }
                    if let Some(now) = context_percent(line) {
                        if let Some((before, before_line)) = &watch.last_ctx
                            && now > *before
                            && now - before > spike
                        {
                            found.push(Anomaly {
                                spike: Some((*before, now)),
                                line: Some(at(i, line)),
                                ..anomaly(
                                    task,
                                    AnomalyKind::ContextSpike,
                                    spike_detail(*before, before_line, now, line),
                                )
                            });
                        }
                        watch.last_ctx = Some((now, line.clone()));
                    }
                }
                if let Some(last) = lines.last() {
                    watch.last_entry_offset = starts.get(lines.len() - 1).copied();
                    watch.last_entry = Some(last.clone());
                    watch.last_entry_at = Some(arrived_at);
                    watch.stalled = false;
                }
            }
        }
        // A line at the same place with the same text as one that raised an anomaly
        // before the file was truncated is a replay, not a new anomaly.
        found.retain(|a| {
            let Some(line) = &a.line else { return true };
            let i = line.index - first;
            let pos = first_since_reset + i;
            let hash = line_hash(&line.text);
            let raised = &mut watch.raised[slot(kind)];
            if raised.len() < RAISED_KEPT {
                raised.insert(pos, hash);
            }
            watch.raised_before_reset[slot(kind)].get(&pos) != Some(&hash)
        });
        if watch.active { found } else { Vec::new() }
    }
}

fn anomaly(task: &TaskId, kind: AnomalyKind, detail: String) -> Anomaly {
    Anomaly {
        task_id: task.clone(),
        kind,
        detail,
        spike: None,
        line: None,
    }
}

fn quoted(line: &str) -> String {
    format!("\"{line}\"")
}

/// "Context jumped from 29% to 51% between step 2 and step 3 (+22%)": the two entries
/// compared, by their step numbers when those tell them apart, else by their text.
fn spike_detail(before: u8, before_line: &str, now: u8, line: &str) -> String {
    let (a, b) = match (step_label(before_line), step_label(line)) {
        (Some(a), Some(b)) if a != b => (a, b),
        _ => (
            quoted(&without_context_marker(before_line)),
            quoted(&without_context_marker(line)),
        ),
    };
    format!(
        "Context jumped from {before}% to {now}% between {a} and {b} (+{}%)",
        now - before
    )
}

/// "7 minutes", "1 minute", "45 seconds".
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    let plural = |n: u64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    if secs >= 120 || (secs >= 60 && secs.is_multiple_of(60)) {
        plural(secs / 60, "minute")
    } else {
        plural(secs, "second")
    }
}

#[cfg(test)]
mod tests {
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
            (&["no value here", "step 4 [ctx: 40%]"][..], 0), // lines without a value are skipped
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
}
