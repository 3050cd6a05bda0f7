//! What flows through maestro: [`CoreEvent`] from the sources into the hub, and
//! [`Happening`] from the hub out to the presenters (headless output, the dashboard).

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::core::domain::souffleur::WatchdogReason;
use crate::core::domain::{Anomaly, AnomalyKind, LogKind, TaskId};

/// One row of `orchestration_tasks`, as read (text columns are whatever the writers put).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRow {
    pub task_id: String,
    pub state: String,
    pub worked_by: Option<String>,
    pub session_id: Option<String>,
    pub last_heartbeat: Option<String>,
    pub retry_count: i64,
    pub last_error: Option<String>,
}

impl TaskRow {
    /// A row with only an id and a state (the other columns empty).
    pub fn new(task_id: impl Into<String>, state: impl Into<String>) -> Self {
        Self {
            task_id: task_id.into(),
            state: state.into(),
            worked_by: None,
            session_id: None,
            last_heartbeat: None,
            retry_count: 0,
            last_error: None,
        }
    }
}

/// One row of `orchestration_messages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRow {
    pub id: i64,
    pub task_id: Option<String>,
    pub from_session: Option<String>,
    pub message_type: Option<String>,
    pub message: Option<String>,
    pub timestamp: Option<String>,
}

/// A part of a log's history read at start: lines that hold nothing the Sentinel
/// judges, counted, or consecutive lines that may.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryPiece {
    Skipped(u64),
    Lines(LineBatch),
    /// The context values read from lines just counted (their last few, in order) and
    /// the last such line: what the Sentinel compares the next value with.
    Context {
        values: Vec<u8>,
        last_line: String,
    },
}

impl HistoryPiece {
    /// Lines this piece stands for.
    pub fn count(&self) -> u64 {
        match self {
            Self::Skipped(n) => *n,
            Self::Lines(batch) => batch.lines.len() as u64,
            Self::Context { .. } => 0,
        }
    }
}

/// Lines kept whole by a skim, and where each starts in its file. Written (a recording,
/// the remote link) as the lines alone, as before: a reader there has no places.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<String>", into = "Vec<String>")]
pub struct LineBatch {
    pub lines: Vec<String>,
    /// Empty where not known.
    pub starts: Vec<u64>,
}

impl From<Vec<String>> for LineBatch {
    fn from(lines: Vec<String>) -> Self {
        Self {
            lines,
            starts: Vec::new(),
        }
    }
}

impl From<LineBatch> for Vec<String> {
    fn from(batch: LineBatch) -> Self {
        batch.lines
    }
}

/// Everything that can happen, sent by the sources into the hub.
#[derive(Debug)]
pub enum CoreEvent {
    /// New complete lines of one log. `initial_mtime` is set for what a file already held
    /// when monitoring started: its mtime stands for when the last line was written.
    LogLines {
        task: TaskId,
        kind: LogKind,
        lines: Vec<String>,
        /// Where each line starts in its file (empty where that is not known: a
        /// recording, a remote link): an anomaly's place, whatever a read starts from.
        starts: Vec<u64>,
        initial_mtime: Option<SystemTime>,
    },
    /// A log file was truncated, replaced or removed.
    LogReset { task: TaskId, kind: LogKind },
    /// What a log held at start, skimmed (`sources::history`): the lines the Sentinel
    /// judges, in order, and counts of the others between them. Positions count on
    /// past the counted lines; `initial_mtime` as for [`CoreEvent::LogLines`].
    LogHistory {
        task: TaskId,
        kind: LogKind,
        pieces: Vec<HistoryPiece>,
        initial_mtime: Option<SystemTime>,
    },
    /// The whole `orchestration_tasks` table after a change.
    Tasks(Vec<TaskRow>),
    /// Messages with ids above the last seen, in id order.
    Messages(Vec<MessageRow>),
    /// Sentinel reports already in the database (with `--report-to-db`), read at start.
    RecordedReports(Vec<(TaskId, AnomalyKind, String)>),
    /// A problem a source survived; it keeps going.
    SourceFailed {
        source: &'static str,
        /// The task the problem is about, when it is about one (a log file of it).
        task: Option<TaskId>,
        detail: String,
    },
    /// The database source is (again) reading without errors.
    SourceHealthy { source: &'static str },
    /// The database file itself: waited for, appeared, replaced or removed.
    Database(DbStatus),
    /// The log folder itself: waited for, removed, back.
    LogFolder(FolderStatus),
    /// The live Musician watchers: (task, mode, PID), the whole list.
    Watchers(Vec<(TaskId, &'static str, i32)>),
    /// From the Souffleur role.
    Role(RoleReport),
    /// From a running pipeline.
    Pipeline(PipelineReport),
    /// The pipeline definitions the host has loaded: names and step counts.
    PipelineCatalog(Vec<(String, usize, bool)>),
    /// From the session source: a task's Claude Code session found, grown, lost.
    Session(crate::core::sessions::figures::SessionReport),
    /// Claude Code hook events, in the order they came (see `core::hooks`).
    Hooks(Vec<crate::core::hooks::book::HookInput>),
    /// A remote project's connection (`remote::link`): up, down, retrying.
    Link(LinkReport),
    /// The remote host spoke (its beat): the last moment its heartbeats are known at.
    Heard,
}

/// The state of a remote project's connection, as its link reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkReport {
    /// The project's `ssh://` address.
    pub project: String,
    /// `up`, `down` or `retrying`.
    pub status: &'static str,
    pub detail: String,
}

/// Named events with their JSON fields: maestro's happenings (see
/// `event_json::bus_event`) and what `emit` steps send. Pipelines start and loop on it.
pub type PipelineBus = tokio::sync::broadcast::Sender<(String, serde_json::Value)>;

/// What happened to `comms.db` as a file (the source re-arms itself after each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbStatus {
    /// No usable database at the path; the text says what maestro waits for.
    Waiting(String),
    /// A database appeared where there was none, with this many task rows.
    Appeared { tasks: usize },
    /// Another file now sits at the path (a new orchestration), with this many rows.
    Replaced { tasks: usize },
    /// The file was removed.
    Removed,
}

/// What happened to `temp/` as a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FolderStatus {
    /// It is not there (or not a folder); the text says what maestro waits for.
    Waiting(String),
    /// It is there (again) and followed.
    Watching(String),
}

/// A step of a recovery, as the `recovery` event reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryStatus {
    Started,
    Success,
    Failed,
}

impl RecoveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Success => "success",
            Self::Failed => "failed",
        }
    }
}

/// One step of a recovery cycle: which provider, how it went, the Conductor
/// generation it is for, and the new window's PID when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryStep {
    pub provider: crate::core::domain::souffleur::Provider,
    pub status: RecoveryStatus,
    pub generation: u32,
    pub pid: Option<i32>,
}

/// A pipeline's transition (docs/cli.md `pipeline` event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineReport {
    pub name: String,
    /// started, iteration, step, paused, resumed, stopped, completed, failed, edited
    pub status: &'static str,
    pub iteration: u64,
    pub step: Option<usize>,
    pub outcome: Option<String>,
    /// For a finished step: its type, how long it took, an excerpt of its output.
    pub trace: Option<StepTrace>,
}

/// What a finished step left for the run history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepTrace {
    pub step_type: &'static str,
    pub duration_ms: u64,
    /// The last few hundred characters of its output (or its error).
    pub excerpt: String,
}

/// One step of one run, as the history keeps it (in memory and in
/// `maestro_pipeline_steps`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepRecord {
    pub pipeline: String,
    /// When the run started (UTC, `YYYY-MM-DD HH:MM:SS.mmm`): the run's identity.
    pub run_started: String,
    pub iteration: u64,
    pub step: u64,
    pub step_type: String,
    /// When the step started (UTC, same form).
    pub started: String,
    pub duration_ms: u64,
    pub outcome: String,
    pub excerpt: String,
}

/// Where the Souffleur role stands, for the Watchdog pane.
#[derive(Debug, Clone, PartialEq)]
pub struct RoleView {
    /// `validating`, `watching`, `recovering`, `exited`.
    pub phase: String,
    pub mode: String,
    pub generation: u32,
    pub no_progress: u32,
    pub held: bool,
    pub conductor_pid: Option<i32>,
    pub session_id: String,
    pub next_check: Option<OffsetDateTime>,
    pub last_provider: Option<(String, String)>,
    pub alert: Option<String>,
    /// The settings the role runs with (providers, `FORCE_COMPACT`, permission ceiling,
    /// where each came from), one line for the Watchdog pane; empty when not known.
    pub settings: String,
}

/// What the Souffleur role tells the hub.
#[derive(Debug, Clone)]
pub enum RoleReport {
    /// A watcher exited (or the teammate raised `WATCHER_DEAD`).
    Reason {
        reason: WatchdogReason,
        task_count: u64,
    },
    Recovery(RecoveryStep),
    Status(Box<RoleView>),
    /// For the operator's eyes (hold, release, provider steps).
    Alert(String),
    /// The settings the role runs with, once at start.
    Settings(SouffleurSettings),
    /// The role stopped on a failure (validation, retry exhaustion, failed recovery).
    Fatal(String),
    /// The role has ended; nothing more will come from it.
    Ended,
}

/// The resolved `.orchestra_configs/souffleur` values and where each came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SouffleurSettings {
    pub force_compact: u64,
    pub force_compact_from: String,
    pub max_permission: String,
    pub max_permission_from: String,
    /// The file read, if any.
    pub source: Option<String>,
    pub warnings: Vec<String>,
}

/// A discrete thing that happened, for presenters that need every transition.
#[derive(Debug, Clone)]
pub struct Happening {
    /// When it happened; for a restatement, when it was first told.
    pub at: OffsetDateTime,
    pub what: What,
    /// Its cursor and whether an earlier run told it (set by the hub; none in replays
    /// and tests).
    pub told: Option<crate::core::told::Told>,
}

#[derive(Debug, Clone)]
pub enum What {
    Anomaly(Anomaly),
    /// A remote project's connection changed (`link` in JSON).
    Link(LinkReport),
    Task {
        task_id: String,
        state: String,
        prev_state: Option<String>,
    },
    Stale {
        task_id: String,
        age_s: u64,
    },
    Message(MessageRow),
    Watchdog {
        reason: WatchdogReason,
        task_count: u64,
    },
    Recovery(RecoveryStep),
    Error {
        /// The task the problem is about, when there is one (docs/cli.md's shape).
        task_id: Option<String>,
        detail: String,
    },
    /// The settings the Souffleur role in this process runs with.
    Settings(SouffleurSettings),
    /// A source's file or folder came, went or was replaced (`source`: `database` or
    /// `temp`; `status`: `waiting`, `appeared`, `replaced`, `removed`, `watching`).
    Source {
        source: &'static str,
        status: &'static str,
        detail: String,
    },
    /// A task is forecast to reach `threshold` % context at `at` (less than the lead
    /// time away): before the Musician has to say so itself.
    Forecast {
        task_id: String,
        threshold: u8,
        at: OffsetDateTime,
    },
    /// A task's forecast no longer holds (its trend is older than it was measured over,
    /// or the task stopped working): it is not shown any more.
    ForecastWithdrawn {
        task_id: String,
        reason: String,
    },
    /// A `maestro musician watch` attached to a task, exited, or was replaced by a
    /// newer one of the same mode.
    Watcher {
        task_id: String,
        mode: &'static str,
        status: &'static str,
        pid: i32,
    },
    /// The Souffleur role in this process ended (headless output stops after it).
    RoleEnded,
    Pipeline(PipelineReport),
    /// A task's Claude Code session: `found`, `lost`, `missing` (none could be found:
    /// `detail` says why), `activity` (what it does changed), `usage` (its tokens,
    /// cost and context, at most once per 10 s).
    Session {
        status: &'static str,
        task_id: String,
        session_id: Option<String>,
        figures: Option<std::sync::Arc<crate::core::sessions::figures::SessionFigures>>,
        detail: Option<String>,
    },
    /// A budget reached `level` % (80, then 100) of its limit: `budget` is
    /// `task_usd` or `context_percent` (with the task) or `orchestration_usd`.
    Budget {
        task_id: Option<String>,
        budget: &'static str,
        level: u8,
        value: f64,
        limit: f64,
    },
    /// A task's session waits for the operator: `reason` `permission` (with the tool
    /// and its main argument when known) or `input`.
    NeedsYou {
        task_id: String,
        session_id: String,
        reason: &'static str,
        tool: Option<String>,
        detail: Option<String>,
        /// "permission for Bash `cargo publish`", "waiting for input".
        text: String,
    },
    /// `maestro hook --replace-pollers` refused an LLM poller (its launch, or its loop) and named
    /// `command` instead (`None`: nothing to run).
    PollerReplaced {
        task_id: Option<String>,
        session_id: String,
        role: &'static str,
        command: Option<String>,
        /// `launch` (refused before it ran) or `loop` (stopped while polling).
        at: &'static str,
    },
    /// The session went on (a tool ran, a prompt came, it stopped or ended).
    NeedsYouCleared {
        task_id: String,
        waited_s: u64,
    },
    /// maestro's own time stopped (`kind`: `suspend`, `pause`, `step`) for `seconds`;
    /// every age-based judgement restarted its clock from now.
    Clock {
        kind: &'static str,
        seconds: u64,
    },
    /// Lines for the dashboard's log pane (headless output ignores them).
    Log {
        task: TaskId,
        kind: LogKind,
        /// Lines counted before these and not sent (a history skimmed at start).
        skipped: u64,
        lines: std::sync::Arc<[String]>,
        reset: bool,
    },
}
