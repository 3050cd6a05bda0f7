//! The loop rule ([`crate::core::sessions::loops`]) read from a subagent's transcript as
//! it is counted: each tool call (its tool and whole input) paired with its result
//! (by `tool_use_id`), in time. `maestro usage` bills a subagent as a poller only when
//! its own calls formed a poll loop over the orchestration's state, never by the words
//! of its prompt.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::core::sessions::deeds::State;
use crate::core::sessions::loops::{self, Look};
use crate::core::sessions::monitor;
use crate::core::sessions::timestamp::epoch_ms;

/// A call whose result has not come back yet.
#[derive(Debug, Clone, PartialEq)]
struct Pending {
    tool: String,
    input: Value,
    at_ms: i64,
}

/// One subagent's calls and looks so far, and the loop they formed, once they did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoopWatch {
    pending: HashMap<String, Pending>,
    /// The monitors its `Monitor` calls started, by id: each event is a look of its call.
    monitors: HashMap<String, Pending>,
    looks: Vec<Look>,
    found: Option<Vec<State>>,
    /// The loop was closed by a monitor's event (not by a call).
    found_by_monitor: bool,
}

/// The fields of a tool-results line (or a notification's) this reads.
#[derive(Deserialize)]
struct ResultLine<'a> {
    #[serde(borrow)]
    message: Option<ResultMessage<'a>>,
    #[serde(borrow)]
    timestamp: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ResultMessage<'a> {
    /// Tool results (a list of blocks), or a notification's text.
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ResultBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

impl LoopWatch {
    /// The parts of the state the subagent's loop read, once its calls formed one.
    pub fn found(&self) -> Option<&[State]> {
        self.found.as_deref()
    }

    /// The parts of the state read, once a monitor's events formed the loop.
    pub fn found_by_monitor(&self) -> Option<&[State]> {
        self.found.as_deref().filter(|_| self.found_by_monitor)
    }

    /// The commands of the monitors the subagent started (what runs in its place).
    pub fn monitor_commands(&self) -> impl Iterator<Item = &str> {
        self.monitors
            .values()
            .filter_map(|m| m.input.get("command").and_then(Value::as_str))
    }

    /// A response's tool calls, each with its whole input (what the guard's hook is
    /// handed), asked for at `at_ms`.
    pub fn calls<'a>(
        &mut self,
        calls: impl IntoIterator<Item = crate::core::sessions::activity::NewCall<'a>>,
        at_ms: i64,
    ) {
        for (id, name, _, input) in calls {
            let (Some(id), Some(tool)) = (id, name) else {
                continue;
            };
            let input: Value = input
                .and_then(|raw| serde_json::from_str(raw).ok())
                .unwrap_or(Value::Null);
            if self.found.is_none()
                && let Some(states) =
                    loops::closes_loop(&self.looks, loops::call_hash(&tool, &input), at_ms)
                && !states.is_empty()
            {
                self.found = Some(states);
            }
            let pending = Pending {
                tool: tool.into_owned(),
                input,
                at_ms,
            };
            self.pending.insert(id.into_owned(), pending);
        }
    }

    /// A tool-results line of the subagent: each result paired with its call; or a
    /// notification: each monitor event a look of the call that started the monitor.
    pub fn results(&mut self, line: &[u8], root: &Path) {
        if self.found.is_some() {
            return;
        }
        let Ok(parsed) = serde_json::from_slice::<ResultLine<'_>>(line) else {
            return;
        };
        let Some(content) = parsed.message.and_then(|m| m.content) else {
            return;
        };
        if let Ok(text) = serde_json::from_str::<Cow<'_, str>>(content.get()) {
            let at = parsed.timestamp.as_deref().and_then(epoch_ms);
            self.events(&text, at.unwrap_or_default(), root);
            return;
        }
        let blocks: Vec<ResultBlock<'_>> = serde_json::from_str(content.get()).unwrap_or_default();
        for block in blocks {
            if block.kind.as_deref() != Some("tool_result") {
                continue;
            }
            let Some(call) = block
                .tool_use_id
                .and_then(|id| self.pending.remove(id.as_ref()))
            else {
                continue;
            };
            let response = Value::String(result_of(block.content));
            // A monitor started: its events are its looks, not this note (a subagent's
            // transcript keeps no `toolUseResult`: its id is in the text).
            if call.tool == monitor::TOOL
                && let Some(id) = monitor::task_id(&response).map(str::to_owned)
            {
                self.monitors.insert(id, call);
                continue;
            }
            let look = loops::look(
                &call.tool,
                &call.input,
                &response,
                call.at_ms,
                root,
                &self.looks,
            );
            self.looks.push(look);
        }
    }

    /// The events of the subagent's monitors a notification holds, read at `at_ms`.
    fn events(&mut self, text: &str, at_ms: i64, root: &Path) {
        for event in monitor::events(text) {
            let Some(call) = self.monitors.get(event.task_id) else {
                continue;
            };
            let response = Value::String(event.text.to_owned());
            let look = loops::look(&call.tool, &call.input, &response, at_ms, root, &self.looks);
            if self.found.is_none()
                && let Some(states) = loops::closed_by(&self.looks, &look)
                && !states.is_empty()
            {
                self.found = Some(states);
                self.found_by_monitor = true;
            }
            self.looks.push(look);
        }
    }
}

/// A tool result's text as the model read it: the string, or its text blocks joined
/// (the JSON as written for anything else).
fn result_of(content: Option<&RawValue>) -> String {
    let Some(raw) = content else {
        return String::new();
    };
    if let Ok(text) = serde_json::from_str::<std::borrow::Cow<'_, str>>(raw.get()) {
        return text.into_owned();
    }
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => raw.get().to_owned(),
    }
}
