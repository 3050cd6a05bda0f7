//! The demo's script, read from TOML (`assets/demo/scenario.toml` is built in). Every
//! task id and message type is checked here, before anything becomes a path or a row.

use std::time::Duration;

use serde::Deserialize;

use crate::core::domain::TaskId;
use crate::settings::parse_duration;

pub const BUILT_IN: &str = include_str!("../../../assets/demo/scenario.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    settings: RawSettings,
    step: Vec<RawStep>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    heartbeat_every: String,
    stall_after: String,
    task_stale_after: String,
    conductor_stale_after: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at: String,
    task: String,
    state: Option<String>,
    worked_by: Option<String>,
    last_error: Option<String>,
    #[serde(default)]
    retry: bool,
    #[serde(default)]
    status: Vec<String>,
    #[serde(default)]
    deviations: Vec<String>,
    message: Option<RawMessage>,
    heartbeat: Option<String>,
    /// Play the step only while the task is in this state (the operator may have
    /// answered first).
    if_state: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMessage {
    #[serde(rename = "type")]
    kind: String,
    from: String,
    text: String,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub heartbeat_every: Duration,
    pub stall_after: Duration,
    pub task_stale_after: Duration,
    pub conductor_stale_after: Duration,
    /// In time order.
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone)]
pub struct Step {
    pub at: Duration,
    pub task: TaskId,
    pub state: Option<String>,
    pub worked_by: Option<String>,
    pub last_error: Option<String>,
    pub retry: bool,
    pub status: Vec<String>,
    pub deviations: Vec<String>,
    pub message: Option<Message>,
    /// `Some(false)`: stop refreshing this task's heartbeat; `Some(true)`: resume.
    pub heartbeat: Option<bool>,
    /// Played only while the task is in this state.
    pub if_state: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Message {
    pub kind: String,
    pub from: String,
    pub text: String,
}

/// A scenario that cannot be played, named where it is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{origin} is not a valid scenario: {why}")]
    NotToml { origin: String, why: String },
    #[error("{origin}: {what} = {value:?} is not a duration ({source})")]
    Duration {
        origin: String,
        what: String,
        value: String,
        source: humantime::DurationError,
    },
    /// A step's field (`.task`, `.state`, …) and what is wrong with it.
    #[error("{origin}: step[{step}]{field}{why}")]
    Step {
        origin: String,
        step: usize,
        field: String,
        why: String,
    },
}

impl Scenario {
    /// Parses and checks a scenario; `origin` names it in messages.
    pub fn parse(origin: &str, text: &str) -> Result<Self, ScenarioError> {
        let origin_of = || origin.to_owned();
        let raw: RawScenario = toml::from_str(text).map_err(|e| ScenarioError::NotToml {
            origin: origin_of(),
            why: e.to_string().trim_end().to_owned(),
        })?;
        let dur = |v: &str, what: &str| {
            parse_duration(v).map_err(|source| ScenarioError::Duration {
                origin: origin_of(),
                what: what.to_owned(),
                value: v.to_owned(),
                source,
            })
        };
        let mut steps = Vec::with_capacity(raw.step.len());
        for (i, s) in raw.step.into_iter().enumerate() {
            let bad = |field: &str, why: String| ScenarioError::Step {
                origin: origin_of(),
                step: i,
                field: field.to_owned(),
                why,
            };
            let at = dur(&s.at, &format!("step[{i}].at"))?;
            let task = TaskId::parse(&s.task).ok_or_else(|| {
                bad(
                    ".task",
                    format!(" = {:?} is not a task id like task-01", s.task),
                )
            })?;
            if let Some(state) = &s.state
                && !crate::core::domain::STATES
                    .iter()
                    .any(|(name, _)| name == state)
            {
                return Err(bad(
                    ".state",
                    format!(" = {state:?} is not a state of docs/orchestration.md"),
                ));
            }
            if let Some(m) = &s.message
                && !crate::core::schema::MESSAGE_TYPES.contains(&m.kind.as_str())
            {
                return Err(bad(
                    ".message.type",
                    format!(" = {:?} is not a message type", m.kind),
                ));
            }
            let heartbeat = match s.heartbeat.as_deref() {
                None => None,
                Some("stop") => Some(false),
                Some("start") => Some(true),
                Some(other) => {
                    return Err(bad(
                        ".heartbeat",
                        format!(" = {other:?}: use \"stop\" or \"start\""),
                    ));
                }
            };
            if (!s.status.is_empty() || !s.deviations.is_empty()) && !task.is_musician() {
                return Err(bad(
                    "",
                    ": only Musicians write status and deviation lines".to_owned(),
                ));
            }
            steps.push(Step {
                at,
                task,
                state: s.state,
                worked_by: s.worked_by,
                last_error: s.last_error,
                retry: s.retry,
                status: s.status,
                deviations: s.deviations,
                if_state: s.if_state,
                message: s.message.map(|m| Message {
                    kind: m.kind,
                    from: m.from,
                    text: m.text,
                }),
                heartbeat,
            });
        }
        steps.sort_by_key(|s| s.at);
        Ok(Self {
            name: raw.name,
            heartbeat_every: dur(&raw.settings.heartbeat_every, "settings.heartbeat_every")?,
            stall_after: dur(&raw.settings.stall_after, "settings.stall_after")?,
            task_stale_after: dur(&raw.settings.task_stale_after, "settings.task_stale_after")?,
            conductor_stale_after: dur(
                &raw.settings.conductor_stale_after,
                "settings.conductor_stale_after",
            )?,
            steps,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_scenario_is_valid_and_ordered() {
        let s = Scenario::parse("built-in", BUILT_IN).unwrap();
        assert!(s.steps.len() > 20);
        assert!(s.steps.windows(2).all(|w| w[0].at <= w[1].at));
        let last = s.steps.last().unwrap();
        assert!(last.task.is_conductor());
        assert_eq!(last.state.as_deref(), Some("complete"));
    }

    #[test]
    fn bad_scenarios_name_the_step() {
        let base = "name = \"x\"\n[settings]\nheartbeat_every = \"1s\"\nstall_after = \"1s\"\ntask_stale_after = \"1s\"\nconductor_stale_after = \"1s\"\n";
        let cases = [
            ("[[step]]\nat = \"1s\"\ntask = \"../etc\"\n", "step[0].task"),
            (
                "[[step]]\nat = \"soon\"\ntask = \"task-01\"\n",
                "step[0].at",
            ),
            (
                "[[step]]\nat = \"1s\"\ntask = \"task-01\"\nstate = \"dancing\"\n",
                "step[0].state",
            ),
            (
                "[[step]]\nat = \"1s\"\ntask = \"task-00\"\nstatus = [\"x\"]\n",
                "only Musicians",
            ),
        ];
        for (step, expected) in cases {
            let err = Scenario::parse("s.toml", &format!("{base}{step}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
