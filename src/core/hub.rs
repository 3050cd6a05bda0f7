//! The hub: the single owner of core state.
//!
//! It applies each [`CoreEvent`] from the sources, runs the Sentinel, judges heartbeat
//! staleness and the observe-only watchdog, and publishes every [`Happening`] (lossless,
//! in order) plus the latest [`Snapshot`]. Timed checks sleep until the next deadline;
//! nothing here polls.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::core::clock::{Clock, parse_sqlite_utc};
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::domain::{Anomaly, AnomalyKind, LogKind, TaskId, TaskState};
use crate::core::event::{
    CoreEvent, DbStatus, FolderStatus, Happening, PipelineBus, RoleReport, StepRecord, TaskRow,
    What,
};
use crate::core::forecast::ForecastBook;
use crate::core::pipeline::views::PipelineViews;
use crate::core::replay::recorder::Recorder;
use crate::core::sentinel::{Sentinel, SentinelSettings};
use crate::core::snapshot::{CTX_HISTORY, DatabaseHealth, Snapshot, TaskView};
use crate::core::sources::db::{DbCmd, DbHandle};

#[derive(Debug, Clone)]
pub struct HubSettings {
    pub sentinel: SentinelSettings,
    pub task_stale_after: Duration,
    pub conductor_stale_after: Duration,
    pub souffleur_stale_after: Duration,
    pub report_to_db: bool,
    /// Whether a database is being read (otherwise every task with files is watched).
    pub with_database: bool,
    /// Report the Conductor's watchdog reasons from the task table. Off when this
    /// process holds the Souffleur role, whose watcher reports them instead.
    pub observe_watchdog: bool,
    /// Pass log lines on as `What::Log` (the dashboard shows them; headless does not).
    pub forward_logs: bool,
    /// The database's file name, for announcements ("comms.db replaced: …").
    pub db_name: String,
    /// A `forecast` event comes when a context threshold is less than this away.
    pub forecast_lead: Duration,
}

/// Where the hub sends database writes.
pub trait ReportSink: Send {
    fn record(&self, text: String);
    /// A pipeline step for the run history table.
    fn record_step(&self, _step: StepRecord) {}
}

impl ReportSink for DbHandle {
    fn record(&self, text: String) {
        self.send(DbCmd::InsertReport { text });
    }

    fn record_step(&self, step: StepRecord) {
        self.send(DbCmd::RecordStep(Box::new(step)));
    }
}

#[derive(Debug)]
struct TaskEntry {
    row: TaskRow,
    id: Option<TaskId>,
    heartbeat: Option<OffsetDateTime>,
    /// A staleness episode was reported and the heartbeat has not been refreshed since.
    stale_reported: bool,
    /// When this row turns stale, as it stands in `Hub::stale_order`.
    stale_due: Option<Instant>,
}

pub struct Hub {
    settings: HubSettings,
    clock: Clock,
    sentinel: Sentinel,
    tasks: BTreeMap<String, TaskEntry>,
    /// (due, task) of every row that can turn stale: a wake-up looks at the rows due,
    /// never at all of them.
    stale_order: std::collections::BTreeSet<(Instant, String)>,
    ctx: HashMap<TaskId, std::collections::VecDeque<u8>>,
    last_anomaly: HashMap<TaskId, AnomalyKind>,
    /// Reports already in the database, by key, with how many times each was recorded.
    recorded: HashMap<(TaskId, AnomalyKind, String), usize>,
    invalid_ids: HashSet<String>,
    /// (task, value) of heartbeats that are not times, each said once.
    bad_heartbeats: HashSet<(String, String)>,
    /// The pipeline bus: every happening a pipeline can react to, by name.
    bus: PipelineBus,
    /// The hosted pipelines' views and run history.
    pipelines: PipelineViews,
    /// Context trajectories and their forecasts.
    forecasts: ForecastBook,
    /// Live Musician watchers: (task, mode) → PID.
    watchers: BTreeMap<(String, &'static str), i32>,
    reports: Option<Box<dyn ReportSink>>,
    /// The flight recorder, when this maestro records the project.
    recorder: Option<crate::core::replay::recorder::Recorder>,
    out: mpsc::Sender<Happening>,
    snapshot_tx: watch::Sender<Arc<Snapshot>>,
    snapshot: Snapshot,
    dirty: bool,
    /// Each task's published view, in the Tasks pane's order.
    views: BTreeMap<(bool, String), Arc<TaskView>>,
    /// Tasks whose view must be built again before the next publication.
    changed_views: HashSet<String>,
}

impl Hub {
    /// Publishes happenings on the pipeline bus too.
    #[must_use]
    pub fn with_bus(mut self, bus: PipelineBus) -> Self {
        self.bus = bus;
        self
    }

    /// Records every input in the project's event log.
    #[must_use]
    pub fn with_recorder(mut self, recorder: crate::core::replay::recorder::Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    pub fn new(
        settings: HubSettings,
        clock: Clock,
        out: mpsc::Sender<Happening>,
        snapshot_tx: watch::Sender<Arc<Snapshot>>,
        reports: Option<Box<dyn ReportSink>>,
    ) -> Self {
        let forecasts = ForecastBook::new(settings.forecast_lead);
        let snapshot = Snapshot {
            database: if settings.with_database {
                DatabaseHealth::Ok
            } else {
                DatabaseHealth::Absent
            },
            ..Snapshot::default()
        };
        Self {
            sentinel: Sentinel::new(settings.sentinel),
            settings,
            clock,
            tasks: BTreeMap::new(),
            stale_order: std::collections::BTreeSet::new(),
            ctx: HashMap::new(),
            last_anomaly: HashMap::new(),
            recorded: HashMap::new(),
            invalid_ids: HashSet::new(),
            bad_heartbeats: HashSet::new(),
            bus: broadcast::channel(1).0,
            pipelines: PipelineViews::default(),
            forecasts,
            watchers: BTreeMap::new(),
            reports,
            recorder: None,
            out,
            snapshot_tx,
            snapshot,
            dirty: true,
            views: BTreeMap::new(),
            changed_views: HashSet::new(),
        }
    }

    /// Runs until the sources are gone or `cancel` fires.
    /// `initial` is applied first: what the database held at start.
    pub async fn run(
        mut self,
        initial: Vec<CoreEvent>,
        mut events: mpsc::Receiver<CoreEvent>,
        cancel: CancellationToken,
    ) {
        for ev in initial {
            self.record_and_apply(ev).await;
        }
        if let Some(r) = &mut self.recorder {
            r.flush();
        }
        self.check_deadlines().await;
        loop {
            self.publish_snapshot();
            let deadline = self.next_deadline();
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                ev = events.recv() => {
                    let Some(ev) = ev else { break };
                    self.record_and_apply(ev).await;
                    // Drain what is already queued before publishing once.
                    while let Ok(ev) = events.try_recv() {
                        self.record_and_apply(ev).await;
                    }
                }
                () = sleep_until_opt(deadline) => {}
            }
            self.check_deadlines().await;
            // The presenters go first; the event log's writer is woken after them.
            if self.recorder.as_ref().is_some_and(Recorder::holds) {
                tokio::task::yield_now().await;
                if let Some(r) = &mut self.recorder {
                    r.flush();
                }
            }
        }
        self.publish_snapshot();
        // Close the queue before the sources' handles are dropped (they join their
        // threads, which may be waiting to send).
        drop(events);
    }

    /// Applies an event, then records it with the moment it arrived: the operator's
    /// event does not wait for the event log.
    async fn record_and_apply(&mut self, event: CoreEvent) {
        let clock = self.clock;
        let input = self
            .recorder
            .as_mut()
            .map(|r| (clock.now_utc(), r.take(&event)));
        self.apply(event).await;
        if let (Some(r), Some((at, input))) = (&mut self.recorder, input)
            && let Some(detail) = r.write(at, input)
        {
            self.emit(What::Error {
                task_id: None,
                detail,
            })
            .await;
        }
    }

    /// Applies one event (public for tests that drive the hub by hand).
    pub async fn apply(&mut self, event: CoreEvent) {
        match event {
            CoreEvent::LogLines {
                task,
                kind,
                lines,
                initial_mtime,
            } => self.on_lines(task, kind, lines, initial_mtime).await,
            CoreEvent::LogReset { task, kind } => {
                self.sentinel.on_reset(&task, kind);
                if kind == LogKind::Status {
                    self.forecasts.reset(&task);
                    self.view_changed(task.as_str());
                }
                if !self.settings.forward_logs {
                    return;
                }
                let lines: Arc<[String]> = Arc::new([]);
                self.emit(What::Log {
                    task,
                    kind,
                    lines,
                    reset: true,
                })
                .await;
            }
            CoreEvent::Tasks(rows) => self.on_tasks(rows).await,
            CoreEvent::Messages(rows) => {
                self.snapshot.message_count += rows.len() as u64;
                self.dirty = true;
                for row in rows {
                    self.emit(What::Message(row)).await;
                }
            }
            CoreEvent::RecordedReports(keys) => {
                for key in keys {
                    *self.recorded.entry(key).or_default() += 1;
                }
            }
            CoreEvent::SourceFailed {
                source,
                task,
                detail,
            } => {
                let detail = format!("{source}: {detail}");
                if source == "database" {
                    self.snapshot.database = DatabaseHealth::Failing(detail.clone());
                }
                self.snapshot.last_error = Some((self.clock.now_utc(), detail.clone()));
                self.dirty = true;
                self.emit(What::Error {
                    task_id: task.map(|t| t.to_string()),
                    detail,
                })
                .await;
            }
            CoreEvent::Role(report) => self.on_role(report).await,
            CoreEvent::Pipeline(report) => {
                self.on_pipeline(&report);
                self.emit(What::Pipeline(report)).await;
            }
            CoreEvent::PipelineCatalog(names) => {
                PipelineViews::catalog(&mut self.snapshot.pipelines, names);
                self.dirty = true;
            }
            CoreEvent::SourceHealthy { source } => {
                if source == "database" {
                    self.snapshot.database = DatabaseHealth::Ok;
                    self.dirty = true;
                }
            }
            CoreEvent::Database(status) => self.on_database(status).await,
            CoreEvent::Watchers(list) => self.on_watchers(list).await,
            CoreEvent::LogFolder(status) => {
                let (state, detail) = match status {
                    FolderStatus::Waiting(d) => {
                        self.snapshot.logs_waiting = Some(d.clone());
                        ("waiting", d)
                    }
                    FolderStatus::Watching(d) => {
                        self.snapshot.logs_waiting = None;
                        ("watching", d)
                    }
                };
                self.dirty = true;
                self.emit(What::Source {
                    source: "temp",
                    status: state,
                    detail,
                })
                .await;
            }
        }
    }

    /// Says which watchers attached, exited or were replaced, and keeps the per-task
    /// summary the Tasks pane shows.
    async fn on_watchers(&mut self, list: Vec<(TaskId, &'static str, i32)>) {
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
        self.snapshot.watchers = summary;
        self.watchers = now;
        self.dirty = true;
    }

    /// The database file came, went or was replaced: the source has re-armed itself;
    /// here the tasks start over and the operator is told.
    async fn on_database(&mut self, status: DbStatus) {
        let name = self.settings.db_name.clone();
        let (state, detail) = match status {
            DbStatus::Waiting(d) => {
                self.snapshot.database = DatabaseHealth::Absent;
                ("waiting", d)
            }
            DbStatus::Removed => {
                self.snapshot.database = DatabaseHealth::Absent;
                // Its rows are history now: no staleness, no anomalies judged by them.
                self.on_tasks(Vec::new()).await;
                ("removed", format!("{name} was removed"))
            }
            DbStatus::Appeared { tasks } | DbStatus::Replaced { tasks } => {
                let replaced = matches!(status, DbStatus::Replaced { .. });
                self.settings.with_database = true;
                self.snapshot.database = DatabaseHealth::Ok;
                // Reports recorded in the old file say nothing about the new one.
                self.recorded.clear();
                // Activity comes from the new rows from now on (the Tasks event follows).
                self.sentinel.deactivate_all();
                let all: Vec<String> = self.views.keys().map(|(_, id)| id.clone()).collect();
                self.changed_views.extend(all);
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
        self.dirty = true;
        self.emit(What::Source {
            source: "database",
            status: state,
            detail,
        })
        .await;
    }

    /// Keeps the pipelines' state for the dashboard; a finished step goes to the history.
    fn on_pipeline(&mut self, r: &crate::core::event::PipelineReport) {
        let now = self.clock.now_utc();
        let record = self.pipelines.report(&mut self.snapshot.pipelines, r, now);
        if let (Some(record), Some(sink)) = (record, &self.reports) {
            sink.record_step(record);
        }
        self.dirty = true;
    }

    async fn on_role(&mut self, report: RoleReport) {
        self.dirty = true;
        match report {
            RoleReport::Reason { reason, task_count } => {
                let at = self.clock.now_utc();
                self.snapshot.watchdog.last_reason = Some((at, reason.clone()));
                self.emit_at(at, What::Watchdog { reason, task_count })
                    .await;
            }
            RoleReport::Recovery(step) => {
                if let Some(role) = &mut self.snapshot.watchdog.role {
                    role.last_provider = Some((
                        step.provider.as_str().to_owned(),
                        step.status.as_str().to_owned(),
                    ));
                }
                self.emit(What::Recovery(step)).await;
            }
            RoleReport::Status(view) => {
                let keep = self
                    .snapshot
                    .watchdog
                    .role
                    .as_ref()
                    .map(|r| (r.last_provider.clone(), r.alert.clone()));
                let mut view = *view;
                if let Some((provider, alert)) = keep {
                    view.last_provider = view.last_provider.or(provider);
                    view.alert = view.alert.or(alert);
                }
                self.snapshot.watchdog.role = Some(view);
            }
            RoleReport::Alert(text) => {
                if let Some(role) = &mut self.snapshot.watchdog.role {
                    role.alert = Some(text);
                }
            }
            RoleReport::Settings(s) => self.emit(What::Settings(s)).await,
            RoleReport::Ended => self.emit(What::RoleEnded).await,
            RoleReport::Fatal(detail) => {
                if let Some(role) = &mut self.snapshot.watchdog.role {
                    role.alert = Some(detail.clone());
                }
                self.snapshot.last_error = Some((self.clock.now_utc(), detail.clone()));
                self.emit(What::Error {
                    task_id: Some(crate::core::domain::SOUFFLEUR_ID.to_owned()),
                    detail: format!("souffleur: {detail}"),
                })
                .await;
            }
        }
    }

    async fn on_lines(
        &mut self,
        task: TaskId,
        kind: LogKind,
        lines: Vec<String>,
        initial_mtime: Option<std::time::SystemTime>,
    ) {
        if !self.settings.with_database && !self.sentinel.is_active(&task) {
            self.sentinel.set_active(&task, true);
            self.view_changed(task.as_str());
        }
        let arrived_at = match initial_mtime {
            Some(mtime) => self.clock.instant_of(OffsetDateTime::from(mtime)),
            None => Instant::now(),
        };
        if kind == LogKind::Status {
            let values: Vec<u8> = lines
                .iter()
                .filter_map(|l| crate::core::domain::context_percent(l))
                .collect();
            if !values.is_empty() {
                let history = self.ctx.entry(task.clone()).or_default();
                for v in &values {
                    if history.len() == CTX_HISTORY {
                        history.pop_front();
                    }
                    history.push_back(*v);
                }
                let seen = initial_mtime.map_or_else(|| self.clock.now_utc(), OffsetDateTime::from);
                self.forecasts.on_values(&task, seen, &values);
                self.view_changed(task.as_str());
                self.warn_forecasts().await;
            }
        }
        let found = if lines.is_empty() {
            self.sentinel.on_file_seen(&task, kind, arrived_at);
            Vec::new()
        } else {
            self.sentinel.on_lines(&task, kind, &lines, arrived_at)
        };
        if self.settings.forward_logs && !lines.is_empty() {
            let lines: Arc<[String]> = lines.into();
            self.emit(What::Log {
                task,
                kind,
                lines,
                reset: false,
            })
            .await;
        }
        for anomaly in found {
            self.report(anomaly).await;
        }
    }

    async fn on_tasks(&mut self, rows: Vec<TaskRow>) {
        // The whole table comes after each change: rows as they were cost a lookup and
        // a comparison, nothing more. Ids are unique, so when every known row is still
        // there, none was deleted.
        let known = rows
            .iter()
            .filter(|r| self.tasks.contains_key(&r.task_id))
            .count();
        let gone: Vec<String> = if known == self.tasks.len() {
            Vec::new()
        } else {
            let present: HashSet<&str> = rows.iter().map(|r| r.task_id.as_str()).collect();
            self.tasks
                .keys()
                .filter(|k| !present.contains(k.as_str()))
                .cloned()
                .collect()
        };
        for row in rows {
            if self.tasks.get(&row.task_id).is_some_and(|p| p.row == row) {
                continue;
            }
            let id = TaskId::parse(&row.task_id);
            if id.is_none() && self.invalid_ids.insert(row.task_id.clone()) {
                self.emit(What::Error {
                    task_id: Some(row.task_id.clone()),
                    detail: format!(
                        "orchestration_tasks holds the task id {:?}, which is not of the form task-NN[-fix|-S<n>]; it is shown but never used as a file name",
                        row.task_id
                    ),
                })
                .await;
            }
            let heartbeat = row.last_heartbeat.as_deref().and_then(parse_sqlite_utc);
            if let Some(text) = &row.last_heartbeat
                && heartbeat.is_none()
                && self
                    .bad_heartbeats
                    .insert((row.task_id.clone(), text.clone()))
            {
                self.emit(What::Error {
                    task_id: Some(row.task_id.clone()),
                    detail: format!(
                        "{}'s last_heartbeat {text:?} is not a time (YYYY-MM-DD HH:MM:SS, UTC); its staleness cannot be judged until a writer refreshes it",
                        row.task_id
                    ),
                })
                .await;
            }
            let prev = self.tasks.get(&row.task_id);
            let prev_state = prev.map(|p| p.row.state.clone());
            let changed_state = prev_state.as_deref() != Some(row.state.as_str());
            let refreshed = prev.is_none_or(|p| p.heartbeat != heartbeat);
            let stale_reported =
                prev.is_some_and(|p| p.stale_reported) && !refreshed && !changed_state;
            if let Some(id) = &id
                && id.is_musician()
            {
                self.sentinel
                    .set_active(id, !TaskState(row.state.clone()).is_terminal());
            }
            let mut entry = TaskEntry {
                row: row.clone(),
                id: id.clone(),
                heartbeat,
                stale_reported,
                stale_due: None,
            };
            entry.stale_due = self.stale_due(&entry);
            if let Some(old) = self.tasks.insert(row.task_id.clone(), entry)
                && let Some(due) = old.stale_due
            {
                self.stale_order.remove(&(due, row.task_id.clone()));
            }
            if let Some(due) = self.tasks.get(&row.task_id).and_then(|e| e.stale_due) {
                self.stale_order.insert((due, row.task_id.clone()));
            }
            self.view_changed(&row.task_id);
            if changed_state {
                self.emit(What::Task {
                    task_id: row.task_id.clone(),
                    state: row.state.clone(),
                    prev_state: prev_state.clone(),
                })
                .await;
                if self.settings.observe_watchdog && id.as_ref().is_some_and(TaskId::is_conductor) {
                    let reason = match row.state.as_str() {
                        "complete" => Some(WatchdogReason::ConductorComplete),
                        "context_recovery" => Some(WatchdogReason::ContextRecovery),
                        _ => None,
                    };
                    if let Some(reason) = reason {
                        self.watchdog(reason).await;
                    }
                }
            }
        }
        // Rows deleted by another process.
        for key in gone {
            let Some(entry) = self.tasks.remove(&key) else {
                continue;
            };
            if let Some(due) = entry.stale_due {
                self.stale_order.remove(&(due, key.clone()));
            }
            if let Some(id) = entry.id {
                self.sentinel.set_active(&id, false);
            }
            self.view_changed(&key);
        }
    }

    /// Reports the stalls and stale heartbeats whose time has come.
    async fn check_deadlines(&mut self) {
        for anomaly in self.sentinel.tick(Instant::now()) {
            self.report(anomaly).await;
        }
        self.warn_forecasts().await;
        // Only the rows due are looked at; the wall clock has the last word (a row
        // whose heartbeat is not old enough yet goes back in line).
        let now = Instant::now();
        let mut newly_stale = Vec::new();
        while let Some((due, key)) = self.stale_order.first().cloned() {
            if due > now {
                break;
            }
            self.stale_order.pop_first();
            let Some(entry) = self.tasks.get_mut(&key) else {
                continue;
            };
            entry.stale_due = None;
            let Some((threshold, hb)) = stale_rule(&self.settings, entry) else {
                continue;
            };
            let age = self.clock.age(hb);
            if age > threshold {
                entry.stale_reported = true;
                newly_stale.push((
                    key.clone(),
                    age,
                    entry.id.as_ref().is_some_and(TaskId::is_conductor),
                ));
            } else {
                let due = now + threshold.saturating_sub(age) + Duration::from_millis(1);
                entry.stale_due = Some(due);
                self.stale_order.insert((due, key));
            }
        }
        for (task_id, age, conductor) in newly_stale {
            self.emit(What::Stale {
                task_id,
                age_s: age.as_secs(),
            })
            .await;
            if conductor && self.settings.observe_watchdog {
                self.watchdog(WatchdogReason::ConductorDeadHeartbeat).await;
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let stale = self.stale_order.first().map(|(due, _)| *due);
        let forecast = self
            .forecasts
            .next_due()
            .map(|at| self.clock.deadline_of(at));
        stale
            .into_iter()
            .chain(self.sentinel.next_deadline())
            .chain(forecast)
            .min()
    }

    /// When a row turns stale, if it can (not reported yet, a rule applies).
    fn stale_due(&self, entry: &TaskEntry) -> Option<Instant> {
        if entry.stale_reported {
            return None;
        }
        let (threshold, hb) = stale_rule(&self.settings, entry)?;
        Some(self.clock.instant_of(hb) + threshold + Duration::from_millis(1))
    }

    /// Raises the `forecast` warnings that fell due (once each).
    async fn warn_forecasts(&mut self) {
        let now = self.clock.now_utc();
        let sentinel = &self.sentinel;
        for (task, threshold, at) in self.forecasts.due(now, |t| sentinel.is_active(t)) {
            self.emit(What::Forecast {
                task_id: task.to_string(),
                threshold,
                at,
            })
            .await;
        }
    }

    async fn report(&mut self, anomaly: Anomaly) {
        if self.settings.report_to_db
            && let Some(n) = self.recorded.get_mut(&anomaly.dedupe_key())
            && *n > 0
        {
            *n -= 1;
            return;
        }
        let at = self.clock.now_utc();
        if self.settings.report_to_db
            && let Some(sink) = &self.reports
        {
            sink.record(anomaly.report(&self.clock.hms(at)));
        }
        self.last_anomaly
            .insert(anomaly.task_id.clone(), anomaly.kind);
        self.snapshot.anomaly_count += 1;
        self.view_changed(anomaly.task_id.as_str());
        self.emit_at(at, What::Anomaly(anomaly)).await;
    }

    async fn watchdog(&mut self, reason: WatchdogReason) {
        let at = self.clock.now_utc();
        self.snapshot.watchdog.last_reason = Some((at, reason.clone()));
        self.dirty = true;
        let task_count = self.tasks.len() as u64;
        self.emit_at(at, What::Watchdog { reason, task_count })
            .await;
    }

    async fn emit(&mut self, what: What) {
        let at = self.clock.now_utc();
        self.emit_at(at, what).await;
    }

    async fn emit_at(&mut self, at: OffsetDateTime, what: What) {
        let happening = Happening { at, what };
        // Pipelines react to the same happenings (no receiver: nothing to do).
        if self.bus.receiver_count() > 0
            && let Some(event) = crate::core::event_json::bus_event(&happening)
        {
            let _ = self.bus.send(event);
        }
        // A closed receiver means the presenter is gone: shutdown is under way.
        let _ = self.out.send(happening).await;
    }

    /// A task's view must be built again before the next publication.
    fn view_changed(&mut self, task: &str) {
        if !self.changed_views.contains(task) {
            self.changed_views.insert(task.to_owned());
        }
        self.dirty = true;
    }

    /// The view of one task as it stands, if it is shown: a row of the table, or,
    /// without a database, a task known by its files alone.
    fn view_of(&self, key: &str) -> Option<TaskView> {
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
            TaskRow::new(key.to_owned(), "working")
        };
        Some(TaskView {
            row,
            heartbeat: entry.and_then(|e| e.heartbeat),
            ctx: ctx.cloned().unwrap_or_default(),
            last_anomaly: id
                .as_ref()
                .and_then(|id| self.last_anomaly.get(id))
                .copied(),
            watched: entry.is_none() || id.as_ref().is_some_and(|id| self.sentinel.is_active(id)),
            forecast: self.forecasts.of(key).copied(),
        })
    }

    fn publish_snapshot(&mut self) {
        if !self.dirty || self.snapshot_tx.receiver_count() == 0 {
            return;
        }
        self.dirty = false;
        // Only the views of tasks that changed are built again; the others are shared
        // with the previous snapshot.
        let mut rebuilt = false;
        for key in std::mem::take(&mut self.changed_views) {
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
            rebuilt = true;
        }
        if rebuilt {
            self.snapshot.tasks = self.views.values().cloned().collect();
        }
        let conductor = self.tasks.get(crate::core::domain::CONDUCTOR_ID);
        self.snapshot.watchdog.conductor_heartbeat = conductor.and_then(|c| c.heartbeat);
        self.snapshot.watchdog.conductor_state = conductor.map(|c| c.row.state.clone());
        self.snapshot.watchdog.task_count = self.tasks.len() as u64;
        self.snapshot.version += 1;
        self.snapshot_tx
            .send_replace(Arc::new(self.snapshot.clone()));
    }
}

/// Which staleness threshold applies to a row right now, with its heartbeat.
fn stale_rule(settings: &HubSettings, entry: &TaskEntry) -> Option<(Duration, OffsetDateTime)> {
    let hb = entry.heartbeat?;
    let id = entry.id.as_ref()?;
    let state = entry.row.state.as_str();
    let threshold = if id.is_conductor() {
        (state != "complete").then_some(settings.conductor_stale_after)
    } else if id.is_souffleur() {
        (state == "confirmed").then_some(settings.souffleur_stale_after)
    } else {
        TaskState(state.to_owned())
            .is_heartbeat_active()
            .then_some(settings.task_stale_after)
    }?;
    Some((threshold, hb))
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::parse_sqlite_utc;

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
            sentinel: SentinelSettings {
                stall_after: Duration::from_secs(300),
                spike_threshold: 15,
            },
            task_stale_after: Duration::from_secs(540),
            conductor_stale_after: Duration::from_secs(240),
            souffleur_stale_after: Duration::from_secs(180),
            report_to_db,
            with_database: true,
            db_name: "comms.db".into(),
            forecast_lead: Duration::from_secs(600),
            observe_watchdog: true,
            forward_logs: true,
        }
    }

    fn rig(initial: Vec<CoreEvent>, report_to_db: bool) -> Rig {
        let (events, rx) = mpsc::channel(64);
        let (out_tx, out) = mpsc::channel(256);
        let (snap_tx, _) = watch::channel(Arc::new(Snapshot::default()));
        let recorded = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let clock = Clock::following_tokio(parse_sqlite_utc(START).unwrap());
        let hub = Hub::new(
            settings(report_to_db),
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
        tokio::time::sleep(Duration::from_secs(60)).await;
        r.events
            .send(lines("task-01", LogKind::Status, &["step 2 [ctx: 12%]"]))
            .await
            .unwrap();
        // 2 points a minute from 12 % at +60 s: 65 % at +1650 s, warned 600 s before.
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
        let two_minutes_ago = std::time::SystemTime::from(
            parse_sqlite_utc(START).unwrap() - Duration::from_secs(120),
        );
        r.events
            .send(CoreEvent::LogLines {
                task: TaskId::parse("task-04").unwrap(),
                kind: LogKind::Status,
                lines: vec!["step 3 agent 1 launched [ctx: 41%]".into()],
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
}
