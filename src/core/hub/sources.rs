//! What the sources say about themselves: the database file and the log folder
//! coming and going, the Musician watchers, the pipelines, the Souffleur role.

use std::collections::BTreeMap;

use super::Hub;
use crate::core::domain::{LogKind, TaskId};
use crate::core::event::{DbStatus, RoleReport, What};
use crate::core::snapshot::DatabaseHealth;

impl Hub {
    /// Says which watchers attached, exited or were replaced, and keeps the per-task
    /// summary the Tasks pane shows.
    pub(super) async fn on_watchers(&mut self, list: Vec<(TaskId, &'static str, i32)>) {
        let now: BTreeMap<(String, &'static str), i32> = list
            .into_iter()
            .map(|(t, m, pid)| ((t.to_string(), m), pid))
            .collect();
        let before = std::mem::take(&mut self.watchers);
        for ((task, mode), pid) in &now {
            let status = match before.get(&(task.clone(), *mode)) {
                None => "attached",
                Some(old) if old != pid => "replaced",
                Some(_) => continue,
            };
            self.emit(What::Watcher {
                task_id: task.clone(),
                mode,
                status,
                pid: *pid,
            })
            .await;
        }
        for ((task, mode), pid) in &before {
            if !now.contains_key(&(task.clone(), *mode)) {
                self.emit(What::Watcher {
                    task_id: task.clone(),
                    mode,
                    status: "exited",
                    pid: *pid,
                })
                .await;
            }
        }
        let mut summary: BTreeMap<String, String> = BTreeMap::new();
        for (task, mode) in now.keys() {
            summary
                .entry(task.clone())
                .and_modify(|m| {
                    m.push('+');
                    m.push_str(mode);
                })
                .or_insert_with(|| (*mode).to_owned());
        }
        self.draft.edit().watchers = summary;
        self.watchers = now;
    }

    /// The database file came, went or was replaced: the source has re-armed itself;
    /// here the tasks start over and the operator is told.
    pub(super) async fn on_database(&mut self, status: DbStatus) {
        let name = self.settings.db_name.clone();
        let (state, detail) = match status {
            DbStatus::Waiting(d) => {
                self.draft.edit().database = DatabaseHealth::Absent;
                ("waiting", d)
            }
            DbStatus::Removed => {
                self.draft.edit().database = DatabaseHealth::Absent;
                // Its rows are history now: no staleness, no anomalies judged by them.
                self.on_tasks(Vec::new()).await;
                ("removed", format!("{name} was removed"))
            }
            DbStatus::Appeared { tasks } | DbStatus::Replaced { tasks } => {
                let replaced = matches!(status, DbStatus::Replaced { .. });
                self.settings.with_database = true;
                self.draft.edit().database = DatabaseHealth::Ok;
                // Reports recorded in the old file say nothing about the new one.
                self.recorded.clear();
                // Activity comes from the new rows from now on (the Tasks event follows).
                self.sentinel.deactivate_all();
                // Which tasks there are follows the table now, not the files: every view
                // is built again (the one write to what they read that is no store's).
                let all: Vec<String> = self.views.keys().map(|(_, id)| id.clone()).collect();
                self.draft.tasks_changed(all);
                if replaced {
                    (
                        "replaced",
                        format!("{name} replaced: new orchestration, {tasks} tasks"),
                    )
                } else {
                    ("appeared", format!("{name} appeared: {tasks} tasks"))
                }
            }
        };
        self.emit(What::Source {
            source: "database",
            status: state,
            detail,
        })
        .await;
    }

    /// Keeps the pipelines' state for the dashboard; a finished step goes to the history.
    pub(super) fn on_pipeline(&mut self, r: &crate::core::event::PipelineReport) {
        let now = self.clock.now_utc();
        let record = self
            .pipelines
            .report(&mut self.draft.edit().pipelines, r, now);
        if matches!(r.status, "completed" | "failed" | "stopped") {
            *self
                .draft
                .edit()
                .counts
                .pipeline_runs
                .entry((r.name.clone(), r.status.to_owned()))
                .or_default() += 1;
        }
        if let (Some(record), Some(sink)) = (record, &self.reports) {
            sink.record_step(record);
        }
    }

    pub(super) async fn on_role(&mut self, report: RoleReport) {
        match report {
            RoleReport::Reason { reason, task_count } => {
                let at = self.clock.now_utc();
                self.draft.edit().watchdog.last_reason = Some((at, reason.clone()));
                self.emit_at(at, What::Watchdog { reason, task_count })
                    .await;
            }
            RoleReport::Recovery(step) => {
                *self
                    .draft
                    .edit()
                    .counts
                    .recoveries
                    .entry((
                        crate::core::event_json::contract_provider(step.provider).to_owned(),
                        step.status.as_str().to_owned(),
                    ))
                    .or_default() += 1;
                if let Some(role) = &mut self.draft.edit().watchdog.role {
                    role.last_provider = Some((
                        step.provider.as_str().to_owned(),
                        step.status.as_str().to_owned(),
                    ));
                }
                self.emit(What::Recovery(step)).await;
            }
            RoleReport::Status(view) => {
                let keep = self
                    .draft
                    .read()
                    .watchdog
                    .role
                    .as_ref()
                    .map(|r| (r.last_provider.clone(), r.alert.clone()));
                let mut view = *view;
                if let Some((provider, alert)) = keep {
                    view.last_provider = view.last_provider.or(provider);
                    view.alert = view.alert.or(alert);
                }
                self.draft.edit().watchdog.role = Some(view);
            }
            RoleReport::Alert(text) => {
                if let Some(role) = &mut self.draft.edit().watchdog.role {
                    role.alert = Some(text);
                }
            }
            RoleReport::Settings(s) => self.emit(What::Settings(s)).await,
            RoleReport::Ended => self.emit(What::RoleEnded).await,
            RoleReport::Fatal(detail) => {
                if let Some(role) = &mut self.draft.edit().watchdog.role {
                    role.alert = Some(detail.clone());
                }
                self.draft.edit().last_error = Some((self.clock.now_utc(), detail.clone()));
                self.emit(What::Error {
                    task_id: Some(crate::core::domain::SOUFFLEUR_ID.to_owned()),
                    detail: format!("souffleur: {detail}"),
                })
                .await;
            }
        }
    }
}

impl Hub {
    /// A log truncated or replaced: its lines are judged afresh; the dashboard's copy
    /// starts over.
    pub(super) async fn on_log_reset(&mut self, task: TaskId, kind: LogKind) {
        self.sentinel.on_reset(&task, kind);
        if kind == LogKind::Status {
            self.forecasts.write(task.as_str()).reset(&task);
        }
        if !self.settings.forward_logs {
            return;
        }
        let lines: std::sync::Arc<[String]> = std::sync::Arc::new([]);
        self.emit(What::Log {
            task,
            kind,
            skipped: 0,
            lines,
            reset: true,
        })
        .await;
    }

    /// New database messages: counted by type (a type the schema does not name is
    /// `other`), each told once.
    pub(super) async fn on_messages(&mut self, rows: Vec<crate::core::event::MessageRow>) {
        self.draft.edit().message_count += rows.len() as u64;
        for row in &rows {
            let kind = row
                .message_type
                .as_deref()
                .filter(|t| *t == "warning" || crate::core::schema::MESSAGE_TYPES.contains(t))
                .unwrap_or("other");
            *self
                .draft
                .edit()
                .counts
                .messages
                .entry(kind.to_owned())
                .or_default() += 1;
        }
        for row in rows {
            self.emit(What::Message(row)).await;
        }
    }

    /// A problem a source survived: the last error, the database's health when it is
    /// the database's, and an `error` event.
    pub(super) async fn on_source_failed(
        &mut self,
        source: &'static str,
        task: Option<TaskId>,
        detail: String,
    ) {
        let detail = format!("{source}: {detail}");
        if source == "database" {
            self.draft.edit().database = DatabaseHealth::Failing(detail.clone());
        }
        self.draft.edit().last_error = Some((self.clock.now_utc(), detail.clone()));
        self.emit(What::Error {
            task_id: task.map(|t| t.to_string()),
            detail,
        })
        .await;
    }

    /// `temp/` came or went as a folder.
    pub(super) async fn on_log_folder(&mut self, status: crate::core::event::FolderStatus) {
        let (state, detail) = match status {
            crate::core::event::FolderStatus::Waiting(d) => {
                self.draft.edit().logs_waiting = Some(d.clone());
                ("waiting", d)
            }
            crate::core::event::FolderStatus::Watching(d) => {
                self.draft.edit().logs_waiting = None;
                ("watching", d)
            }
        };
        self.emit(What::Source {
            source: "temp",
            status: state,
            detail,
        })
        .await;
    }
}
