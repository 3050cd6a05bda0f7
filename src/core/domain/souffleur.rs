//! The Souffleur's vocabulary, shared by the watchdog (which decides) and the recovery
//! providers (which act) and the presenters (which show): watcher exit reasons, watcher
//! modes, recovery kinds, providers and outcomes, and what the watcher reads of the
//! Conductor. Only data here, so neither side imports the other for it.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde::Serialize;

/// A watchdog exit reason (docs/orchestration.md §4), as the observe-only watchdog sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum WatchdogReason {
    ConductorDeadPid,
    ConductorDeadHeartbeat,
    SessionIdFound(String),
    ConductorComplete,
    ContextRecovery,
    WatcherDead,
}

impl std::fmt::Display for WatchdogReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ConductorDeadPid => f.write_str("CONDUCTOR_DEAD:pid"),
            Self::ConductorDeadHeartbeat => f.write_str("CONDUCTOR_DEAD:heartbeat"),
            Self::SessionIdFound(id) => write!(f, "SESSION_ID_FOUND:{id}"),
            Self::ConductorComplete => f.write_str("CONDUCTOR_COMPLETE"),
            Self::ContextRecovery => f.write_str("CONTEXT_RECOVERY"),
            Self::WatcherDead => f.write_str("WATCHER_DEAD"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatcherMode {
    /// The Conductor's PID is known: its death is watched directly.
    Normal,
    /// A relaunch succeeded but no PID was found: heartbeat and state only.
    HeartbeatOnly,
}

impl WatcherMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::HeartbeatOnly => "heartbeat-only",
        }
    }
}

/// Which recovery a trigger asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecoveryKind {
    /// `CONDUCTOR_DEAD:*` or a manual relaunch: the `claude_export` provider.
    Relaunch,
    /// `CONTEXT_RECOVERY` or a manual recover: Lethe if its preflight passes.
    ContextRecovery,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Lethe,
    ClaudeExport,
    StandardCompact,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lethe => "lethe",
            Self::ClaudeExport => "claude_export",
            Self::StandardCompact => "standard_compact",
        }
    }
}

/// What a recovery cycle ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryOutcome {
    pub provider: Provider,
    /// A Conductor generation was (or may have been) started.
    pub relaunched: bool,
    pub pid_known: bool,
    /// The new Conductor runs under a new session id that must be discovered.
    pub session_rediscover: bool,
    /// The new session id, when the provider already knows it.
    pub new_session_id: Option<String>,
    /// Why it failed, when no relaunch happened.
    pub failure: Option<String>,
    /// The file a recovery left for the next Conductor (the trimmed export), if any.
    pub artifact: Option<String>,
}

/// What the watcher reads of `task-00` each cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConductorView {
    pub heartbeat_age: Option<Duration>,
    pub state: String,
    pub session_id: Option<String>,
    /// `SELECT COUNT(*) FROM orchestration_tasks`.
    pub task_count: u64,
}

static SESSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$").expect("static regex"));

/// Session ids become part of a file pattern and of argv: letters, digits, `-`, `_`.
pub fn valid_session_id(id: &str) -> bool {
    SESSION.is_match(id)
}
