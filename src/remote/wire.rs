//! What travels on a remote project's one SSH connection, one JSON object per line.
//!
//! From `maestro serve` (stdout): a `hello` first (the protocol and maestro's
//! version), then an `input` for everything its sources told its hub (the event log's
//! [`Line`] form, plus hook events), a `reply` to each request, and a `beat` every
//! [`BEAT`] it is otherwise silent. To it (stdin):
//! requests, each with an id its reply repeats.

use serde::{Deserialize, Serialize};

use crate::core::actions::TaskRequest;
use crate::core::domain::TaskId;
use crate::core::event_log::input::Line;

/// The wire's version: both ends must speak the same one (2: the host beats).
pub const PROTOCOL: u32 = 2;

/// How often `maestro serve` sends a beat when it has nothing else to say. The
/// watching end that hears no frame for [`SILENT_BEATS`] of them takes the host for
/// gone: a stopped or hung host sends nothing, and silence is not "nothing changed".
pub const BEAT: std::time::Duration = std::time::Duration::from_secs(2);
/// Beats missed before the link is down.
pub const SILENT_BEATS: u32 = 3;

/// This maestro's version, as `hello` states it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One line from `maestro serve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "frame", rename_all = "snake_case")]
pub enum Frame {
    Hello {
        protocol: u32,
        version: String,
        /// The project folder, resolved on the host.
        project: String,
        /// Whether `comms.db` was there at start.
        database: bool,
    },
    Input {
        #[serde(flatten)]
        line: Line,
    },
    Reply {
        id: u64,
        #[serde(flatten)]
        outcome: Outcome,
    },
    /// "Still here", every [`BEAT`] without other frames.
    Beat {},
}

/// A request's answer: the text the operator reads, or why it was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok(String),
    Refused(String),
}

/// A request the host refused: its words, as it sent them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

impl Outcome {
    pub fn into_result(self) -> Result<String, Refused> {
        match self {
            Self::Ok(t) => Ok(t),
            Self::Refused(e) => Err(Refused(e)),
        }
    }
}

/// One line to `maestro serve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub id: u64,
    #[serde(flatten)]
    pub ask: Ask,
}

/// What a request asks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Ask {
    /// What a task action will do (the confirmation's question).
    Describe { request: TaskRequest },
    /// Carry out a confirmed task action.
    Perform { request: TaskRequest },
    /// A task's context headroom, as its panel shows it.
    Headroom { task: TaskId },
}

/// A frame as its line (without the newline).
pub fn encode<T: Serialize>(frame: &T) -> String {
    // Plain data with string keys: serializing cannot fail.
    serde_json::to_string(frame).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event_log::input::Input;

    #[test]
    fn frames_and_requests_read_back_as_themselves() {
        let input = Frame::Input {
            line: Line {
                t: "2026-11-25T10:00:00.5Z".into(),
                input: Input::Lines {
                    task: "task-03".into(),
                    kind: "status".into(),
                    lines: vec!["step 1 self-correction: x".into()],
                    mtime: None,
                },
            },
        };
        let hello = Frame::Hello {
            protocol: PROTOCOL,
            version: VERSION.into(),
            project: "/srv/orch".into(),
            database: true,
        };
        let reply = Frame::Reply {
            id: 7,
            outcome: Outcome::Refused("task-03 is not in orchestration_tasks.".into()),
        };
        for f in [input, hello, reply] {
            let line = encode(&f);
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<Frame>(&line).unwrap(), f, "{line}");
        }
        let ask = Request {
            id: 3,
            ask: Ask::Perform {
                request: TaskRequest::Approve {
                    task: TaskId::parse("task-02").unwrap(),
                    message: Some("ok".into()),
                },
            },
        };
        let line = encode(&ask);
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), ask);
    }

    #[test]
    fn a_request_naming_no_task_is_refused_when_read() {
        let bad = r#"{"id":1,"op":"perform","request":{"action":"kill","task":"../../etc"}}"#;
        assert!(serde_json::from_str::<Request>(bad).is_err());
    }
}
