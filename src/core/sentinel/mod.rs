//! The Sentinel: the four anomalies of docs/orchestration.md §3 as a pure state machine.
//!
//! Input: complete log lines per task (from `sources::temp_logs`) and the passing of
//! time (`tick`). Output: [`Anomaly`] values. No I/O and no clock of its own, so tests
//! drive it with plain `Instant`s or paused tokio time.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::core::domain::words::{WORDS, word};
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
        // The kinds a word in a line of this log marks, in the table's order.
        let marked_by_words: Vec<AnomalyKind> = WORDS
            .iter()
            .filter(|w| w.log == kind && w.mark.is_word())
            .map(|w| w.kind)
            .collect();
        let words_in = |found: &mut Vec<Anomaly>, i: usize, line: &String| {
            for &k in &marked_by_words {
                if word(k).mark.is_in(line) {
                    found.push(Anomaly {
                        line: Some(at(i, line)),
                        ..anomaly(task, k, line.clone())
                    });
                }
            }
        };
        match kind {
            LogKind::Deviations => {
                for (i, line) in lines.iter().enumerate() {
                    words_in(&mut found, i, line);
                }
            }
            LogKind::Status => {
                for (i, line) in lines.iter().enumerate() {
                    words_in(&mut found, i, line);
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
mod tests;
