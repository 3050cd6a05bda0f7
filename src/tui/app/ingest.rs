//! Happenings into the dashboard state: log lines into scrollbacks, anomalies linked
//! to the line that raised them, messages; plus the reads the panes make of them.

use std::sync::Arc;

use crate::core::domain::{LogKind, SourceLine, TaskId};
use crate::core::event::{Happening, What};
use crate::core::snapshot::Snapshot;
use crate::tui::app::state::{Notification, UiState};
use crate::tui::panes::anomalies::state::AnomalyEntry;
use crate::tui::panes::log::scrollback::{
    LogEntry, LogView, SCROLLBACK, Scrollback, TAIL_KEPT, TaskLog,
};

impl UiState {
    /// Takes one happening in; returns a notification to raise, if it deserves one.
    pub fn ingest(&mut self, h: &Happening) -> Option<Notification> {
        // What an earlier run told is shown with its own time, already read, and
        // raises no new notification.
        let replayed = h.told.as_ref().is_some_and(|t| t.replayed);
        let notification = self.take_in(h, replayed);
        notification.filter(|_| !replayed)
    }

    fn take_in(&mut self, h: &Happening, replayed: bool) -> Option<Notification> {
        match &h.what {
            What::Log {
                task,
                kind,
                skipped,
                lines,
                reset,
            } => {
                if *skipped > 0 {
                    self.on_skipped(task, *kind, *skipped);
                }
                self.on_log(task, *kind, lines, *reset);
                None
            }
            What::Anomaly(a) => Some(self.on_anomaly(a, h.at, replayed)),
            What::Message(m) => {
                self.panes.messages.take(m);
                None
            }
            What::PollerReplaced {
                task_id,
                role,
                command,
                at,
                ..
            } => Some(self.on_poller_replaced(task_id.as_deref(), role, command.as_deref(), at)),
            What::Source {
                source: "replay",
                status: "rewound",
                ..
            } => {
                self.start_over();
                None
            }
            other => notification_of(other),
        }
    }

    /// The replay starts over: what was shown belongs to a later moment.
    fn start_over(&mut self) {
        self.panes.log.logs.clear();
        self.panes.anomalies.forget();
        self.panes.messages.forget();
    }

    /// A poller the hook refused: the status line says the last one; a notification.
    fn on_poller_replaced(
        &mut self,
        task_id: Option<&str>,
        role: &str,
        command: Option<&str>,
        at: &str,
    ) -> Notification {
        let who = task_id.unwrap_or("a session");
        let how = if at == "loop" {
            "stopped in its loop"
        } else {
            "refused at launch"
        };
        self.last_poller = Some(format!("LLM {role} of {who} {how}"));
        Notification {
            title: format!("{who}: LLM {role} {how}"),
            body: command.map_or_else(
                || "maestro does its job; nothing to run instead".to_owned(),
                |c| format!("named instead: {c}"),
            ),
        }
    }

    /// An anomaly into the list, newest first by when it happened (a restatement after
    /// a restart keeps its first time, and goes where that time puts it).
    fn on_anomaly(
        &mut self,
        a: &crate::core::domain::Anomaly,
        at_time: time::OffsetDateTime,
        replayed: bool,
    ) -> Notification {
        let line = self.link_anomaly(&a.task_id, a.line.as_ref());
        self.panes.anomalies.take(AnomalyEntry {
            at: at_time,
            task: a.task_id.clone(),
            kind: a.kind,
            detail: a.detail.clone(),
            line,
            source: a.line.clone(),
            unread: !replayed,
        });
        Notification {
            title: format!("{} {}", a.task_id, a.kind),
            body: format!("{} — press 3 then Enter to see the line", a.detail),
        }
    }

    /// The task's log, made keeping as many lines as its being shown allows.
    fn log_of(&mut self, task: &TaskId) -> &mut TaskLog {
        let shown = self.panes.log.task.as_ref() == Some(task);
        self.panes
            .log
            .logs
            .entry(task.clone())
            .or_insert_with(|| TaskLog::keeping(if shown { SCROLLBACK } else { TAIL_KEPT }))
    }

    /// Lines of a skimmed history that were counted, not sent.
    fn on_skipped(&mut self, task: &TaskId, kind: LogKind, lines: u64) {
        let log = self.log_of(task);
        match kind {
            LogKind::Status => log.status.skip(lines),
            LogKind::Deviations => log.deviations.skip(lines),
        }
        log.merged.skip(lines);
    }

    pub(crate) fn on_log(&mut self, task: &TaskId, kind: LogKind, lines: &[String], reset: bool) {
        let log = self.log_of(task);
        if reset {
            // A truncated file starts over; what was shown stays until replaced.
            if kind == LogKind::Status {
                log.status.clear();
            } else {
                log.deviations.clear();
            }
        }
        for line in lines {
            let e = LogEntry {
                kind,
                text: Arc::from(line.as_str()),
                merged_at: log.merged.end(),
                anomaly: false,
            };
            match kind {
                LogKind::Status => log.status.push(e.clone()),
                LogKind::Deviations => log.deviations.push(e.clone()),
            }
            log.merged.push(e);
        }
        if self.panes.log.task.as_ref() == Some(task) && !self.panes.log.pos.follow {
            let shown = matches!(
                (self.panes.log.view, kind),
                (LogView::Merged, _)
                    | (LogView::Status, LogKind::Status)
                    | (LogView::Deviations, LogKind::Deviations)
            );
            if shown {
                self.panes.log.pos.new_lines += lines.len() as u64;
            }
        }
    }

    /// Flags the line an anomaly names (the Sentinel says which: kind, position and
    /// text) in its own view and the merged one; returns its merged position. A line
    /// that has scrolled out, or a position whose text differs (lines this view never
    /// received), links nothing.
    pub(crate) fn link_anomaly(&mut self, task: &TaskId, line: Option<&SourceLine>) -> Option<u64> {
        let line = line?;
        let log = self.panes.log.logs.get_mut(task)?;
        let single = match line.kind {
            LogKind::Status => &mut log.status,
            LogKind::Deviations => &mut log.deviations,
        };
        let entry = single.get_mut(line.index).filter(|e| e.text == line.text)?;
        entry.anomaly = true;
        let at = entry.merged_at;
        if let Some(e) = log.merged.get_mut(at) {
            e.anomaly = true;
        }
        Some(at)
    }

    /// The task whose log is shown.
    pub fn current_log(&self) -> Option<&Scrollback> {
        self.panes
            .log
            .task
            .as_ref()
            .and_then(|t| self.panes.log.logs.get(t))
            .map(|l| l.view(self.panes.log.view))
    }

    pub fn unread_anomalies(&self) -> usize {
        self.panes.anomalies.unread()
    }

    /// Keeps the selection valid against a new snapshot and points the Log pane at the
    /// selected task.
    pub fn sync_with(&mut self, snap: &Snapshot) {
        let shown = self.shown_tasks(snap);
        let n = shown.len();
        // The selection stays on its task when the order changes (a task that starts
        // waiting for the operator moves to the top).
        if let Some(i) = self
            .panes
            .log
            .task
            .as_ref()
            .and_then(|lt| shown.iter().position(|t| t.id() == lt.as_str()))
        {
            self.selected_task = i;
        }
        if n > 0 && self.selected_task >= n {
            self.selected_task = n - 1;
        }
        // One selection: the Log shows the selected row's task, unless it shows a task
        // the table does not list by nature (the Conductor's, from its anomaly). A task
        // hidden by a filter, or gone, gives way to the selected row.
        let hidden = self.panes.log.task.as_ref().is_some_and(|lt| {
            !shown.iter().any(|t| t.id() == lt.as_str())
                && (self.panes.tasks.filter.is_some()
                    || !snap.tasks.iter().any(|t| t.id() == lt.as_str()))
        });
        if (self.panes.log.task.is_none() || hidden)
            && let Some(t) = shown.get(self.selected_task)
        {
            let task = TaskId::parse(t.id());
            self.show_task(task);
        }
    }

    /// The Log shows the selected row's task (▶, what the action keys act on), unless it
    /// shows a task the table does not list by nature (the Conductor's, from its
    /// anomaly). Called after every key, not only at the next snapshot.
    pub fn log_follows_selection(&mut self, snap: &Snapshot) {
        let shown = self.shown_tasks(snap);
        let Some(row) = shown.get(self.selected_task).map(|t| t.id().to_owned()) else {
            return;
        };
        let in_rows = |id: &str| shown.iter().any(|t| t.id() == id);
        let unlisted = self.panes.log.task.as_ref().is_some_and(|lt| {
            !in_rows(lt.as_str())
                && self.panes.tasks.filter.is_none()
                && snap.tasks.iter().any(|t| t.id() == lt.as_str())
        });
        if !unlisted && self.panes.log.task.as_ref().map(TaskId::as_str) != Some(row.as_str()) {
            self.show_task(TaskId::parse(&row));
        }
    }
}

/// The desktop notification a happening raises by itself (a task that needs the
/// operator or went stale, the watchdog, a recovery, a link down); none for the rest.
fn notification_of(what: &What) -> Option<Notification> {
    match what {
        What::NeedsYou { task_id, text, .. } => Some(Notification {
            title: format!("{task_id} needs you"),
            body: format!("{text} — press w to go to its window"),
        }),
        What::Stale { task_id, age_s } => Some(Notification {
            title: format!("{task_id} heartbeat stale"),
            body: format!("no heartbeat for {age_s}s — press 1 to see the task"),
        }),
        What::Watchdog { reason, .. } => Some(Notification {
            title: format!("watchdog: {reason}"),
            body: "press 6 to see the watchdog".into(),
        }),
        What::Recovery(r) => Some(Notification {
            title: format!("recovery {} {}", r.provider.as_str(), r.status.as_str()),
            body: format!(
                "Conductor (S{}) — press 6 to see the watchdog",
                r.generation
            ),
        }),
        What::Link(l) if l.status == "down" => Some(Notification {
            title: format!("link down: {}", l.project),
            body: format!("{} — its tasks show their last known state", l.detail),
        }),
        What::Task { .. }
        | What::Link(_)
        | What::Error { .. }
        | What::Settings(_)
        | What::Source { .. }
        | What::Watcher { .. }
        | What::Forecast { .. }
        | What::ForecastWithdrawn { .. }
        | What::Session { .. }
        | What::Budget { .. }
        | What::Clock { .. }
        | What::NeedsYouCleared { .. }
        | What::RoleEnded
        | What::Pipeline(_) => None,
        // Taken in by `UiState::take_in`, which says their notification.
        What::Log { .. } | What::Anomaly(_) | What::Message(_) | What::PollerReplaced { .. } => {
            None
        }
    }
}
