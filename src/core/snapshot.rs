//! The published picture of the orchestration: immutable, shared as `Arc<Snapshot>` on a
//! `watch` channel (last value wins, so a slow screen never builds a backlog).

use std::collections::VecDeque;
use std::sync::Arc;

use time::OffsetDateTime;

use crate::core::domain::AnomalyKind;
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::event::TaskRow;

/// How many `[ctx: …]` values a task keeps for its trend.
pub const CTX_HISTORY: usize = 32;

#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Grows by one with every publication.
    pub version: u64,
    /// Musicians, then the Conductor and the Souffleur, by id. Each view is shared
    /// between snapshots until its task changes, so publishing costs what changed.
    pub tasks: Vec<Arc<TaskView>>,
    pub database: DatabaseHealth,
    pub last_error: Option<(OffsetDateTime, String)>,
    /// The last gap in maestro's running (when it resumed, the kind, seconds unseen):
    /// ages restarted from then.
    pub last_gap: Option<(OffsetDateTime, &'static str, u64)>,
    pub watchdog: WatchdogView,
    pub anomaly_count: u64,
    pub message_count: u64,
    /// Pipelines this process hosts, by name.
    pub pipelines: Vec<PipelineView>,
    /// What the log source waits for, while `temp/` is missing.
    pub logs_waiting: Option<String>,
    /// Tasks with a `maestro musician watch` attached: task id → `background`,
    /// `pause`, or `background+pause`.
    pub watchers: std::collections::BTreeMap<String, String>,
    /// What happened since start, counted by kind (for the metrics): every label
    /// value is bounded (anomaly kinds, message types, providers, pipelines).
    pub counts: Counts,
    /// What every session found cost at list prices (none found: `None`), and
    /// whether a session's model has no price (then the sum leaves it out).
    pub session_cost_usd: Option<f64>,
    pub session_cost_unknown: bool,
    /// The models of the sessions whose cost is unknown (no price), sorted.
    pub unpriced_models: Vec<String>,
    /// What the session source waits for, while Claude Code's folder is missing.
    pub sessions_waiting: Option<String>,
    /// Each configured budget's use, value / limit: (task or none, budget) → ratio.
    pub budgets: std::collections::BTreeMap<(Option<String>, &'static str), f64>,
    /// A remote project's connection (`None`: a local project).
    pub link: Option<LinkView>,
}

/// A remote project's connection as the screen shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    /// `up`, `down` or `retrying`.
    pub status: &'static str,
    /// When it went down (still down while retrying), or came up.
    pub since: OffsetDateTime,
    pub detail: String,
}

impl Snapshot {
    /// The Musicians' tasks, in display order (the Conductor and the Souffleur aside).
    pub fn musicians(&self) -> impl Iterator<Item = &TaskView> {
        self.tasks
            .iter()
            .map(AsRef::as_ref)
            .filter(|t: &&TaskView| !t.is_conductor() && !t.is_souffleur())
    }

    /// A remote project whose link is down: what is shown is its last known state.
    pub fn link_down(&self) -> bool {
        self.link.as_ref().is_some_and(LinkView::is_down)
    }
}

impl LinkView {
    /// Whether what the screen shows of the project is its last known state only.
    pub fn is_down(&self) -> bool {
        self.status != "up"
    }
}

/// Counters since this process started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Anomaly kind → reports.
    pub anomalies: std::collections::BTreeMap<&'static str, u64>,
    /// Message type (`other` for a type the schema does not name) → messages.
    pub messages: std::collections::BTreeMap<String, u64>,
    /// (provider, outcome) → recovery steps that ended so (`started` included).
    pub recoveries: std::collections::BTreeMap<(String, String), u64>,
    /// (pipeline, outcome) → runs that ended so.
    pub pipeline_runs: std::collections::BTreeMap<(String, String), u64>,
    /// Poller role → launches refused by `maestro hook --replace-pollers`.
    pub pollers_replaced: std::collections::BTreeMap<&'static str, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineView {
    pub name: String,
    pub steps: usize,
    /// stopped, running, paused, completed, failed
    pub status: String,
    pub iteration: u64,
    pub step: Option<usize>,
    pub outcome: Option<String>,
    /// The last steps run, oldest first (at most `pipeline::views::HISTORY_KEPT`).
    pub history: Vec<crate::core::event::StepRecord>,
    /// The operator trusts this content (otherwise nothing in it runs).
    pub trusted: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DatabaseHealth {
    /// No database: temp-only mode.
    #[default]
    Absent,
    Ok,
    Failing(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskView {
    pub row: TaskRow,
    pub heartbeat: Option<OffsetDateTime>,
    /// Recent `[ctx: …]` values, oldest first.
    pub ctx: VecDeque<u8>,
    pub last_anomaly: Option<AnomalyKind>,
    /// Whether the Sentinel reports on it.
    pub watched: bool,
    /// Its context forecast (see `core::forecast`).
    pub forecast: Option<crate::core::forecast::Forecast>,
    /// Its Claude Code sessions, oldest first (the last is current).
    pub sessions: Vec<Arc<crate::core::sessions::figures::SessionFigures>>,
    /// The current session's transcript can no longer be read.
    pub session_lost: bool,
    /// Its session waits for the operator: what for ("permission for Bash `cargo
    /// publish`", "waiting for input") and since when.
    pub needs_you: Option<(String, OffsetDateTime)>,
    /// In a state that waits on the Conductor (`needs_review`, `error`,
    /// `fix_proposed`) since this moment, when maestro saw it start (`None`: not
    /// waiting, or since before maestro watched).
    pub waiting_since: Option<OffsetDateTime>,
}

impl TaskView {
    pub fn id(&self) -> &str {
        &self.row.task_id
    }

    pub fn is_conductor(&self) -> bool {
        self.row.task_id == crate::core::domain::CONDUCTOR_ID
    }

    pub fn is_souffleur(&self) -> bool {
        self.row.task_id == crate::core::domain::SOUFFLEUR_ID
    }

    pub fn context(&self) -> Option<u8> {
        self.ctx.back().copied()
    }

    /// The current session, when one was found.
    pub fn session(&self) -> Option<&crate::core::sessions::figures::SessionFigures> {
        self.sessions.last().map(AsRef::as_ref)
    }

    /// What every session of the task cost (unknown if a model has no price).
    pub fn cost_usd(&self) -> Option<f64> {
        self.sessions
            .iter()
            .try_fold(0.0, |sum, s| s.cost_usd.map(|c| sum + c))
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchdogView {
    /// `task-00`'s heartbeat, if known.
    pub conductor_heartbeat: Option<OffsetDateTime>,
    pub conductor_state: Option<String>,
    pub last_reason: Option<(OffsetDateTime, WatchdogReason)>,
    pub task_count: u64,
    /// Set while this process holds the Souffleur role.
    pub role: Option<crate::core::event::RoleView>,
}
