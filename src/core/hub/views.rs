//! The published snapshot: each task's view is built again only when what it reads
//! was written. Every store a view reads is held in a `Written` (`hub::written`), whose
//! writes name the tasks they change; the publication takes those marks.

use std::sync::Arc;

use super::{Hub, TaskEntry};
use crate::core::domain::TaskId;
use crate::core::domain::state;
use crate::core::event::TaskRow;
use crate::core::snapshot::TaskView;
use time::OffsetDateTime;

impl Hub {
    /// The view of one task as it stands, if it is shown: a row of the table, or,
    /// without a database, a task known by its files alone.
    pub(super) fn view_of(&self, key: &str) -> Option<TaskView> {
        let entry = self.tasks.get(key);
        let id = match entry {
            Some(e) => e.id.clone(),
            None if !self.settings.with_database => TaskId::parse(key),
            None => return None,
        };
        let ctx = id.as_ref().and_then(|id| self.ctx.get(id));
        let row = if let Some(e) = entry {
            e.row.clone()
        } else {
            // Without a database, tasks are known by their files alone.
            ctx?;
            TaskRow::new(key.to_owned(), state::WORKING)
        };
        Some(TaskView {
            row,
            heartbeat: entry.and_then(|e| e.heartbeat),
            ctx: ctx.cloned().unwrap_or_default(),
            last_anomaly: id
                .as_ref()
                .and_then(|id| self.last_anomaly.get(id))
                .copied(),
            watched: entry.is_none_or(TaskEntry::watched),
            forecast: self.forecasts.of(key).copied(),
            sessions: self.sessions.of(key),
            session_lost: self
                .sessions
                .of(key)
                .last()
                .is_some_and(|s| self.sessions.is_lost(&s.session_id)),
            needs_you: self.needs_you.waiting(key).map(|w| {
                let since =
                    OffsetDateTime::from_unix_timestamp_nanos(i128::from(w.since_ms) * 1_000_000)
                        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
                (w.wait.describe(), since)
            }),
            waiting_since: entry.and_then(|e| e.waiting_since),
        })
    }

    /// What the stores the views read say was written since the last publication:
    /// (every view, these tasks' views).
    fn take_view_marks(&mut self) -> (bool, std::collections::HashSet<String>) {
        let mut all = false;
        let mut changed = std::collections::HashSet::new();
        for (every, tasks) in [
            self.tasks.take_marks(),
            self.ctx.take_marks(),
            self.last_anomaly.take_marks(),
            self.forecasts.take_marks(),
            self.needs_you.take_marks(),
            self.sessions.take_shown_marks(),
        ] {
            all |= every;
            changed.extend(tasks);
        }
        (all, changed)
    }

    pub(super) fn publish_snapshot(&mut self) {
        if self.snapshot_tx.receiver_count() == 0 {
            return;
        }
        let (all, mut changed) = self.take_view_marks();
        match self.draft.take_changes() {
            Some(named) => changed.extend(named),
            None if !all && changed.is_empty() => return,
            None => {}
        }
        if all {
            changed.extend(self.views.keys().map(|(_, key)| key.clone()));
            changed.extend(self.tasks.keys().cloned());
        }
        // Only the views of tasks that changed are built again; the others are shared
        // with the previous snapshot.
        let rebuilt = !changed.is_empty();
        for key in changed {
            let special = key == crate::core::domain::CONDUCTOR_ID
                || key == crate::core::domain::SOUFFLEUR_ID;
            let slot = (special, key);
            match self.view_of(&slot.1) {
                Some(view) => {
                    self.views.insert(slot, Arc::new(view));
                }
                None => {
                    self.views.remove(&slot);
                }
            }
        }
        let views = &self.views;
        let conductor = self.tasks.get(crate::core::domain::CONDUCTOR_ID);
        let task_count = self.tasks.len() as u64;
        let snapshot = self.draft.finish(|s| {
            if rebuilt {
                s.tasks = views.values().cloned().collect();
            }
            s.watchdog.conductor_heartbeat = conductor.and_then(|c| c.heartbeat);
            s.watchdog.conductor_state = conductor.map(|c| c.row.state.clone());
            s.watchdog.task_count = task_count;
        });
        self.snapshot_tx.send_replace(Arc::new(snapshot));
    }
}
