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

use crate::core::clock::Clock;
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::domain::{Anomaly, AnomalyKind, TaskId};
use crate::core::event::{CoreEvent, Happening, PipelineBus, StepRecord, TaskRow, What};
use crate::core::event_log::recorder::Recorder;
use crate::core::forecast::ForecastBook;
use crate::core::pipeline::views::PipelineViews;
use crate::core::sentinel::{Sentinel, SentinelSettings};
use crate::core::snapshot::{DatabaseHealth, Snapshot, TaskView};
use crate::core::sources::db::{DbCmd, DbHandle};
use written::Written;

#[derive(Debug, Clone)]
pub struct HubSettings {
    /// What it judges by, as the settings built it.
    pub rules: Rules,
    /// What is written to the project's database (the reports, when `report_to_db`).
    pub db_writes: crate::core::sources::db::DbWrites,
    /// Whether a database is being read (otherwise every task with files is watched).
    pub with_database: bool,
    /// Report the Conductor's watchdog reasons from the task table. Off when this
    /// process holds the Souffleur role, whose watcher reports them instead.
    pub observe_watchdog: bool,
    /// Pass log lines on as `What::Log` (the dashboard shows them; headless does not).
    pub forward_logs: bool,
    /// The database's file name, for announcements ("comms.db replaced: …").
    pub db_name: String,
}

/// What the hub judges by: the Sentinel's thresholds, when a heartbeat is stale, how
/// early a context forecast warns, the budgets. Built once from the settings (file and
/// flags, `Settings.rules`) and handed down whole, to the core and on to the hub.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub sentinel: SentinelSettings,
    /// When each role's heartbeat is stale (the Souffleur's role reads them too).
    pub deadlines: Deadlines,
    /// A `forecast` event comes when a context threshold is less than this away.
    pub forecast_lead: Duration,
    /// `[budget]`: a `budget` event at 80 % and 100 % of each.
    pub budgets: sessions::Budgets,
}

/// When a heartbeat is stale, per role (`[tasks] stale_after`, `[souffleur]
/// conductor_stale_after`, `watcher_stale_after`): built once from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    pub task_stale_after: Duration,
    pub conductor_stale_after: Duration,
    /// The Souffleur's watcher (`[souffleur] watcher_stale_after`).
    pub souffleur_stale_after: Duration,
}

impl Deadlines {
    /// The heartbeat deadline of `t`'s role: the Conductor's, the Souffleur's, a task's.
    pub fn stale_after(&self, t: &crate::core::snapshot::TaskView) -> Duration {
        if t.is_conductor() {
            self.conductor_stale_after
        } else if t.is_souffleur() {
            self.souffleur_stale_after
        } else {
            self.task_stale_after
        }
    }
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
    /// When maestro saw this Musician start waiting on the Conductor.
    waiting_since: Option<OffsetDateTime>,
}

/// Whether the Sentinel watches a task in this state: a Musician not at an end. The
/// Sentinel is told so on each row, and a task's view says so.
fn watched(id: &TaskId, state: &crate::core::domain::TaskState) -> bool {
    id.is_musician() && !state.is_terminal()
}

impl TaskEntry {
    /// Whether the Sentinel watches this row's task.
    fn watched(&self) -> bool {
        let state = crate::core::domain::TaskState(self.row.state.clone());
        self.id.as_ref().is_some_and(|id| watched(id, &state))
    }
}

pub struct Hub {
    settings: HubSettings,
    clock: Clock,
    sentinel: Sentinel,
    tasks: Written<BTreeMap<String, TaskEntry>>,
    /// (due, task) of every row that can turn stale: a wake-up looks at the rows due,
    /// never at all of them.
    stale_order: std::collections::BTreeSet<(Instant, String)>,
    ctx: Written<HashMap<TaskId, std::collections::VecDeque<u8>>>,
    last_anomaly: Written<HashMap<TaskId, AnomalyKind>>,
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
    forecasts: Written<ForecastBook>,
    /// Live Musician watchers: (task, mode) → PID.
    watchers: BTreeMap<(String, &'static str), i32>,
    reports: Option<Box<dyn ReportSink>>,
    /// The flight recorder, when this maestro records the project.
    recorder: Option<crate::core::event_log::recorder::Recorder>,
    out: mpsc::Sender<Happening>,
    snapshot_tx: watch::Sender<Arc<Snapshot>>,
    /// The snapshot being built, and what changed in it since it was published.
    draft: draft::Draft,
    /// Each task's published view, in the Tasks pane's order.
    views: BTreeMap<(bool, String), Arc<TaskView>>,
    /// Each task's Claude Code sessions.
    sessions: sessions::SessionBook,
    /// Where the session source learns the tasks.
    session_facts: Option<crate::core::sources::sessions::TaskFactsSender>,
    /// The last gap in maestro's running already acted on (its generation).
    gap_seen: u64,
    /// Which session is which task, and which tasks wait for the operator (hooks).
    needs_you: Written<crate::core::hooks::book::NeedsYouBook>,
    /// A remote project's link, or the tap of `maestro serve`.
    link: link::LinkState,
    /// What was told, in this run and before: cursors and restatements.
    told: crate::core::told::Journal,
    /// The highest cursor this run printed: one run prints in journal order.
    printed: Option<crate::core::told::Cursor>,
}

impl Hub {
    /// Publishes happenings on the pipeline bus too.
    #[must_use]
    pub fn with_bus(mut self, bus: PipelineBus) -> Self {
        self.bus = bus;
        self
    }

    /// Tells the session source the tasks as they change.
    #[must_use]
    pub fn with_session_facts(
        mut self,
        facts: crate::core::sources::sessions::TaskFactsSender,
    ) -> Self {
        self.session_facts = Some(facts);
        self
    }

    /// Remembers what is told across runs (see [`crate::core::told`]).
    #[must_use]
    pub fn with_told(mut self, ledger: crate::core::told::Journal) -> Self {
        self.told = ledger;
        self
    }

    /// Records every input in the project's event log.
    #[must_use]
    pub fn with_recorder(mut self, recorder: crate::core::event_log::recorder::Recorder) -> Self {
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
        let forecasts = ForecastBook::new(settings.rules.forecast_lead);
        let snapshot = Snapshot {
            database: if settings.with_database {
                DatabaseHealth::Ok
            } else {
                DatabaseHealth::Absent
            },
            ..Snapshot::default()
        };
        let mut hub = Self {
            sentinel: Sentinel::new(settings.rules.sentinel),
            settings,
            clock,
            tasks: Written::default(),
            stale_order: std::collections::BTreeSet::new(),
            ctx: Written::default(),
            last_anomaly: Written::default(),
            recorded: HashMap::new(),
            invalid_ids: HashSet::new(),
            bad_heartbeats: HashSet::new(),
            bus: broadcast::channel(1).0,
            pipelines: PipelineViews::default(),
            forecasts: Written::new(forecasts),
            watchers: BTreeMap::new(),
            reports,
            recorder: None,
            out,
            snapshot_tx,
            draft: draft::Draft::new(snapshot),
            views: BTreeMap::new(),
            sessions: sessions::SessionBook::default(),
            session_facts: None,
            gap_seen: 0,
            needs_you: Written::default(),
            link: link::LinkState::default(),
            told: crate::core::told::Journal::in_memory(),
            printed: None,
        };
        hub.budgets_at_zero(None);
        hub
    }

    /// Runs until the sources are gone or `cancel` fires.
    /// `initial` is applied first: what the database held at start.
    pub async fn run(
        mut self,
        initial: Vec<CoreEvent>,
        mut events: mpsc::Receiver<CoreEvent>,
        cancel: CancellationToken,
    ) {
        // A journal that cannot be used is said before anything it would have held.
        let now = self.clock.now_utc();
        self.say_journal_news(now).await;
        for ev in initial {
            self.record_and_apply(ev).await;
        }
        if let Some(r) = &mut self.recorder {
            r.flush();
        }
        self.check_deadlines().await;
        let mut gap_news = self.clock.gap_news();
        // When the inputs held for the event log go to its writer.
        let mut record_due: Option<Instant> = None;
        loop {
            self.publish_snapshot();
            let deadline = self.next_deadline();
            // What the journal could not keep is tried again each second, events or not.
            let keep_due = self
                .told
                .holds()
                .then(|| Instant::now() + std::time::Duration::from_secs(1));
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                // A gap seen by the clock's own ticker: announced by check_deadlines.
                () = gap_changed(&mut gap_news) => {}
                ev = events.recv() => {
                    let Some(ev) = ev else { break };
                    self.record_and_apply(ev).await;
                    // What it told goes out now: the presenter (on this thread) writes
                    // it before the hub drains the queue, checks deadlines or publishes.
                    tokio::task::yield_now().await;
                    // Drain what is already queued before publishing once; a flood
                    // that never empties the queue still lets a stop (and the rest of
                    // the runtime) through after each batch.
                    let mut drained = 0;
                    while drained < DRAIN_BATCH
                        && !cancel.is_cancelled()
                        && let Ok(ev) = events.try_recv()
                    {
                        self.record_and_apply(ev).await;
                        drained += 1;
                    }
                    if drained == DRAIN_BATCH {
                        tokio::task::yield_now().await;
                    }
                }
                () = sleep_until_opt(deadline) => {}
                () = sleep_until_opt(keep_due) => {
                    let now = self.clock.now_utc();
                    self.told.keep_held(now);
                    self.say_journal_news(now).await;
                }
                () = sleep_until_opt(record_due) => {
                    record_due = None;
                    if let Some(r) = &mut self.recorder {
                        r.flush();
                    }
                }
            }
            self.check_deadlines().await;
            // The event log's writer is woken a little later, never at the moment an
            // event is on its way to the operator: on two cores its wake-up would
            // compete with the reader's (and the inputs keep the time they came).
            if record_due.is_none() && self.recorder.as_ref().is_some_and(Recorder::holds) {
                record_due = Some(Instant::now() + RECORD_DELAY);
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
        self.tap(&event).await;
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
        // A remote project's every input is the host speaking.
        if self.draft.read().link.is_some() {
            self.link.last_heard = Some(Instant::now());
        }
        match event {
            CoreEvent::Heard => {}
            CoreEvent::LogLines {
                task,
                kind,
                lines,
                starts,
                initial_mtime,
            } => {
                self.on_lines(task, kind, (lines, starts), initial_mtime)
                    .await;
            }
            CoreEvent::LogReset { task, kind } => self.on_log_reset(task, kind).await,
            CoreEvent::LogHistory {
                task,
                kind,
                pieces,
                initial_mtime,
            } => self.on_history(task, kind, pieces, initial_mtime).await,
            CoreEvent::Tasks(rows) => {
                self.on_tasks(rows).await;
                self.send_task_facts();
                // A row's session_id may tie a session whose hook events wait.
                self.release_held_hooks().await;
            }
            CoreEvent::Session(report) => self.on_session(report).await,
            CoreEvent::Hooks(inputs) => {
                self.on_pollers_replaced(&inputs).await;
                self.on_hooks(inputs).await;
            }
            CoreEvent::Link(report) => self.on_link(report).await,
            CoreEvent::Messages(rows) => self.on_messages(rows).await,
            CoreEvent::RecordedReports(keys) => {
                for (task, kind, detail) in keys {
                    let key = (
                        task,
                        kind,
                        crate::core::domain::dedupe_detail(kind, &detail),
                    );
                    *self.recorded.entry(key).or_default() += 1;
                }
            }
            CoreEvent::SourceFailed {
                source,
                task,
                detail,
            } => self.on_source_failed(source, task, detail).await,
            CoreEvent::Role(report) => self.on_role(report).await,
            CoreEvent::Pipeline(report) => {
                self.on_pipeline(&report);
                self.emit(What::Pipeline(report)).await;
            }
            CoreEvent::PipelineCatalog(names) => {
                PipelineViews::catalog(&mut self.draft.edit().pipelines, names);
            }
            CoreEvent::SourceHealthy { source } => {
                if source == "database" {
                    self.draft.edit().database = DatabaseHealth::Ok;
                }
            }
            CoreEvent::Database(status) => self.on_database(status).await,
            CoreEvent::Watchers(list) => self.on_watchers(list).await,
            CoreEvent::LogFolder(status) => self.on_log_folder(status).await,
        }
    }

    async fn report(&mut self, anomaly: Anomaly) {
        if self.settings.db_writes.report_to_db
            && let Some(n) = self.recorded.get_mut(&anomaly.dedupe_key())
            && *n > 0
        {
            *n -= 1;
            return;
        }
        let at = self.clock.now_utc();
        if self.settings.db_writes.report_to_db
            && let Some(sink) = &self.reports
        {
            sink.record(anomaly.report(&self.clock.hms(at)));
        }
        self.last_anomaly
            .write(anomaly.task_id.as_str())
            .insert(anomaly.task_id.clone(), anomaly.kind);
        self.draft.edit().anomaly_count += 1;
        *self
            .draft
            .edit()
            .counts
            .anomalies
            .entry(anomaly.kind.as_str())
            .or_default() += 1;
        self.emit_at(at, What::Anomaly(anomaly)).await;
    }

    async fn watchdog(&mut self, reason: WatchdogReason) {
        let at = self.clock.now_utc();
        self.draft.edit().watchdog.last_reason = Some((at, reason.clone()));
        let task_count = self.tasks.len() as u64;
        self.emit_at(at, What::Watchdog { reason, task_count })
            .await;
    }

    async fn emit(&mut self, what: What) {
        let at = self.clock.now_utc();
        self.emit_at(at, what).await;
    }

    async fn emit_at(&mut self, at: OffsetDateTime, what: What) {
        let identity = self.identity(&what);
        self.emit_told(at, what, identity).await;
    }

    /// Emits a happening whose identity says whether an earlier run told it already
    /// (then it keeps its first time and cursor).
    async fn emit_told(
        &mut self,
        at: OffsetDateTime,
        what: What,
        identity: Option<crate::core::told::Identity>,
    ) {
        // Nobody to tell any more (the presenter is gone: shutting down): nothing is
        // journaled, the next run tells it.
        if self.out.is_closed() {
            return;
        }
        // Journaled before anyone is told; what has no printed form (log lines for
        // the dashboard) is not.
        let told = match &what {
            // Written straight to its line: what the Sentinel's readers wait for.
            What::Anomaly(a) => Some(self.told.tell(at, identity.as_ref(), |cursor| {
                crate::core::event_json::anomaly_journal_line(at, a, cursor)
            })),
            what => crate::core::event_json::journal_fields(at, what).map(|fields| {
                self.told.tell(at, identity.as_ref(), |cursor| {
                    crate::core::event_json::journal_line(fields, cursor)
                })
            }),
        };
        let (told_at, told) = match told {
            // A message this process told already, read again (a database replaced by
            // a copy of itself): each message is told once.
            Some((_, told)) if told.repeat && matches!(what, What::Message(_)) => {
                self.say_journal_news(at).await;
                return;
            }
            Some((first, told)) => (first, Some(self.in_order(told))),
            None => (at, None),
        };
        let happening = Happening {
            at: told_at,
            what,
            told,
        };
        // Pipelines react to the same happenings (no receiver: nothing to do).
        if self.bus.receiver_count() > 0
            && let Some(event) = crate::core::event_json::bus_event(&happening)
        {
            let _ = self.bus.send(event);
        }
        // A closed receiver means the presenter is gone: shutdown is under way.
        let _ = self.out.send(happening).await;
        // What happened to the journal itself comes after the entry that found it out
        // (its cursor is the next one): a resume never tells it twice.
        self.say_journal_news(at).await;
    }

    /// A restated fact whose place is before one this run printed already keeps its
    /// `replayed` mark but prints no cursor: within a run, each printed cursor is
    /// greater than the one before, so a reader resuming after the last one it handled
    /// loses nothing.
    fn in_order(&mut self, mut told: crate::core::told::Told) -> crate::core::told::Told {
        if let Some(c) = told.cursor {
            match self.printed {
                Some(p) if p.journal == c.journal && c.seq <= p.seq => told.cursor = None,
                _ => self.printed = Some(c),
            }
        }
        told
    }
}

impl Hub {
    /// The journal's own news (it cannot be written, it is again, a new one replaced
    /// it): each an `error` event, told like any other (with a cursor when it could be
    /// kept).
    async fn say_journal_news(&mut self, at: OffsetDateTime) {
        for detail in self.told.take_news() {
            let what = What::Error {
                task_id: None,
                detail,
            };
            Box::pin(self.emit_told(at, what, None)).await;
        }
    }
}

/// Events applied in one go before the hub looks at a stop and lets the runtime's other
/// tasks run (the presenter on a single-threaded runtime).
const DRAIN_BATCH: usize = 256;

/// How long the hub holds inputs for the event log before waking its writer (a burst
/// of 64 goes at once; a stop flushes everything).
const RECORD_DELAY: std::time::Duration = std::time::Duration::from_millis(20);

/// Resolves when the clock notices a new gap; never without a detector.
async fn gap_changed(news: &mut Option<watch::Receiver<Option<crate::core::clock::gaps::Gap>>>) {
    match news {
        Some(rx) => {
            if rx.changed().await.is_err() {
                *news = None;
            }
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

mod draft;
mod identity;
mod lines;
mod link;
mod needs_you;
pub mod sessions;
mod sources;
mod tasks;
#[cfg(test)]
mod tests;
mod views;
mod written;
