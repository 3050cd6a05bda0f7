//! The orchestration's LLM pollers, recognised from the launch of a subagent: its prompt
//! (a subagent file's first user line, or the `Agent`/`Task` call a hook sees), the
//! call's shape where it is known (`run_in_background`) and the launching session's task.
//! `maestro usage` counts them; `maestro hook --replace-pollers` refuses them.
//!
//! A poller is named by the structure of what it is told to do, never by its topic: the
//! skills' verbatim launch prompts where they give one (Sentinel, Souffleur), and for a
//! Musician's watchers (written by the Musician from its protocol) an order to poll on a
//! cadence the heartbeat and the messages or the state. A subagent asked to write about a
//! watcher (a README section, docs) is ordinary work. Text is compared loosely: case,
//! runs of whitespace and typographic quotes do not hide a poller.

use std::sync::LazyLock;

use regex::Regex;

use crate::core::domain::TaskId;
use crate::core::domain::souffleur::{WatcherMode, valid_session_id};
use crate::core::domain::state;

/// The roles, as `usage`, `doctor` and the `poller_replaced` event name them.
pub const SENTINEL: &str = "sentinel";
pub const SOUFFLEUR_WATCHER: &str = "souffleur-watcher";
pub const SOUFFLEUR_TEAMMATE: &str = "souffleur-teammate";
pub const MUSICIAN_WATCHER: &str = "musician-watcher";
pub const MUSICIAN_PAUSE_WATCHER: &str = "musician-pause-watcher";
pub const CONDUCTOR_WATCHER: &str = "conductor-watcher";
/// Every role, for labels that must stay bounded.
pub const ROLES: [&str; 6] = [
    SENTINEL,
    SOUFFLEUR_WATCHER,
    SOUFFLEUR_TEAMMATE,
    MUSICIAN_WATCHER,
    MUSICIAN_PAUSE_WATCHER,
    CONDUCTOR_WATCHER,
];

/// One subagent launch, as much of it as is known.
#[derive(Debug, Clone, Default)]
pub struct Launch<'a> {
    pub prompt: &'a str,
    /// `run_in_background` of the call (`None`: not known, as in a transcript).
    pub background: Option<bool>,
    /// The task of the session that launched it (its tie), when known.
    pub session_task: Option<&'a TaskId>,
}

/// A recognised poller and what its prompt names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Poller {
    Sentinel,
    /// The Souffleur's watcher: the Conductor's PID (normal mode) and session id.
    SouffleurWatcher {
        mode: WatcherMode,
        pid: Option<i32>,
        session_id: Option<String>,
        awaiting_session_id: bool,
    },
    SouffleurTeammate,
    /// A Musician's watcher for `task` (`None`: the task could not be told).
    MusicianWatcher {
        task: Option<TaskId>,
        pause: bool,
    },
    /// The Conductor's background message-watcher (a loop of the Conductor's session
    /// over the database).
    ConductorWatcher,
}

impl Poller {
    pub fn role(&self) -> &'static str {
        match self {
            Self::Sentinel => SENTINEL,
            Self::SouffleurWatcher { .. } => SOUFFLEUR_WATCHER,
            Self::SouffleurTeammate => SOUFFLEUR_TEAMMATE,
            Self::MusicianWatcher { pause: false, .. } => MUSICIAN_WATCHER,
            Self::MusicianWatcher { pause: true, .. } => MUSICIAN_PAUSE_WATCHER,
            Self::ConductorWatcher => CONDUCTOR_WATCHER,
        }
    }
}

/// The Sentinel protocol's "Sentinel Launch Prompt" (seed 000), its fixed words.
const SENTINEL_PHRASES: [&str; 2] = [
    "you are the sentinel",
    "a monitoring teammate watching musicians' progress logs for anomalies",
];
/// The Souffleur skill's watcher prompts (normal and heartbeat-only).
const WATCHER_PHRASES: [&str; 2] = [
    "poll the conductor's liveness every ~60 seconds",
    "watcher mode:",
];
/// The Souffleur skill's "Teammate (Self-Monitor) Prompt".
const TEAMMATE_PHRASES: [&str; 2] = [
    "you are the souffleur's self-monitor",
    "background watcher is alive",
];

/// The poller a launch is, if any.
pub fn recognise(launch: &Launch<'_>) -> Option<Poller> {
    let text = loose(launch.prompt);
    let holds = |phrases: &[&str]| phrases.iter().all(|p| text.contains(p));
    if holds(&SENTINEL_PHRASES) {
        return Some(Poller::Sentinel);
    }
    if holds(&WATCHER_PHRASES) {
        return Some(souffleur_watcher(&text, launch.prompt));
    }
    if holds(&TEAMMATE_PHRASES) {
        return Some(Poller::SouffleurTeammate);
    }
    musician_watcher(&text, launch)
}

/// The role of a subagent from its prompt alone (a transcript: no call shape).
pub fn role_of(prompt: &str) -> Option<&'static str> {
    recognise(&Launch {
        prompt,
        ..Launch::default()
    })
    .map(|p| p.role())
}

static FIELD_PID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)conductor pid:\s*(\d{1,10})\b").expect("static regex"));
static FIELD_SESSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)conductor session id:\s*([0-9a-z_-]{1,128})").expect("static regex")
});

/// `text` is the loose prompt (for the fixed words), `raw` the prompt as given (the ids
/// keep their case).
fn souffleur_watcher(text: &str, raw: &str) -> Poller {
    let mode = if text.contains("watcher mode: heartbeat-only") {
        WatcherMode::HeartbeatOnly
    } else {
        WatcherMode::Normal
    };
    let pid = FIELD_PID
        .captures(raw)
        .and_then(|c| c[1].parse::<i32>().ok())
        .filter(|p| *p > 1);
    let session_id = FIELD_SESSION
        .captures(raw)
        .map(|c| c[1].to_owned())
        .filter(|s| valid_session_id(s));
    Poller::SouffleurWatcher {
        mode,
        pid: pid.filter(|_| mode == WatcherMode::Normal),
        session_id,
        awaiting_session_id: text.contains("awaiting session id: true"),
    }
}

/// An order to repeat on a cadence: "every 15 s", "every ~10 seconds", "poll …".
static CADENCE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\bevery *~? *\d+ *(s|sec|secs|seconds?|m|min|minutes?)\b|\bpoll(s|ing)?\b|\bsleep (for )?~? *\d+")
        .expect("static regex")
});
/// Work on files: what a watcher never is asked to do.
static WRITING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\breadme\b|\bdocument(s|ed|ation)?\b|\bdocs?/|\.md\b|\bsection\b|\bwrite about\b|\bdescribe\b|\bexplain\b|\bedit\b|\bimplement\b|\brefactor\b|\bunit tests?\b",
    )
    .expect("static regex")
});
static TASK_IN_TEXT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\btask-\d{2,4}\b").expect("static regex"));

/// A Musician's watcher: told to poll (a cadence), to keep its heartbeat, and to watch
/// for the Conductor's word (messages) or, paused, for the state to change; launched by
/// a Musician (its session's task, else the one task its prompt names).
fn musician_watcher(text: &str, launch: &Launch<'_>) -> Option<Poller> {
    if !CADENCE.is_match(text) || WRITING.is_match(text) || !text.contains("heartbeat") {
        return None;
    }
    let messages = text.contains("orchestration_messages") || text.contains("new message");
    let paused = text.contains(state::NEEDS_REVIEW)
        && (text.contains("pause") || text.contains("state change") || text.contains("no longer"));
    let pause = match launch.background {
        Some(true) => false,
        Some(false) => paused || !messages,
        None => paused,
    };
    if !(messages || paused) {
        return None;
    }
    let named: Vec<&str> = TASK_IN_TEXT.find_iter(text).map(|m| m.as_str()).collect();
    let task = launch
        .session_task
        .filter(|t| t.is_musician())
        .cloned()
        .or_else(|| {
            let first = *named.first()?;
            named
                .iter()
                .all(|t| *t == first)
                .then(|| TaskId::parse(first))
                .flatten()
                .filter(TaskId::is_musician)
        });
    // A session tied to the Conductor or the Souffleur launches no Musician watcher.
    if launch.session_task.is_some_and(|t| !t.is_musician()) {
        return None;
    }
    Some(Poller::MusicianWatcher { task, pause })
}

/// Lower case, typographic quotes as ASCII, runs of whitespace as one space.
fn loose(text: &str) -> String {
    crate::core::sessions::loops::loose(text)
        .replace(['\u{2018}', '\u{2019}', '\u{02bc}', '\u{2032}'], "'")
        .replace(['\u{201c}', '\u{201d}'], "\"")
}

/// What one poller subagent cost, as `maestro usage` lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PollerFigures {
    pub role: String,
    /// The subagent's id (`agent-<id>.jsonl`).
    pub agent: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_write_tokens: u64,
    pub cache_read_tokens: u64,
    pub total_tokens: u64,
    /// At list prices; `None` when a model has no price.
    pub cost_usd: Option<f64>,
    pub last_activity: Option<String>,
}

/// The pollers among a session's subagents, in the order their files were read: those
/// whose own calls formed a poll loop over the orchestration's state (the loop rule,
/// read from their transcripts), never a subagent for its prompt's words.
pub fn pollers_of(
    agents: &[&crate::core::sessions::tally::Tally],
    task: Option<&TaskId>,
) -> Vec<PollerFigures> {
    agents
        .iter()
        .filter_map(|a| {
            let role = role_of_loop(a.loops.found()?, task);
            Some(PollerFigures {
                role: role.to_owned(),
                agent: a.agent_id.clone(),
                input_tokens: a.tokens.input,
                output_tokens: a.tokens.output,
                cache_write_tokens: a.tokens.cache_write,
                cache_read_tokens: a.tokens.cache_read,
                total_tokens: a.tokens.total(),
                cost_usd: a.cost_usd.map(|c| (c * 1e6).round() / 1e6),
                last_activity: a.last_activity.clone(),
            })
        })
        .collect()
}

/// The role a loop plays, by what it read and whose session ran it, as the guard names
/// it when it stops one (`hooks::replace::stop_in_loop`): the Conductor's reads of its
/// inbox (with the logs or not) its message-watcher's, its reads of the logs alone the
/// Sentinel's; a Musician's (or an untied session's) reads of the database a Musician's
/// watcher; an untied session's reads of the logs alone the Sentinel's; a probe of a
/// process the Souffleur's watcher.
pub fn role_of_loop(
    states: &[crate::core::sessions::deeds::State],
    task: Option<&TaskId>,
) -> &'static str {
    use crate::core::sessions::deeds::State;
    let conductor = task.is_some_and(TaskId::is_conductor);
    if task.is_some_and(TaskId::is_souffleur) || states == [State::Pid] {
        SOUFFLEUR_WATCHER
    } else if conductor && states.contains(&State::Comms) {
        CONDUCTOR_WATCHER
    } else if states.contains(&State::Logs) && (conductor || !states.contains(&State::Comms)) {
        SENTINEL
    } else if conductor {
        CONDUCTOR_WATCHER
    } else {
        MUSICIAN_WATCHER
    }
}

#[cfg(test)]
mod tests;
