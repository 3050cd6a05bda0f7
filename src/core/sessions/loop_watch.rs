//! The loop rule ([`crate::core::sessions::loops`]) read from a subagent's transcript as
//! it is counted: each tool call (its tool and whole input) paired with its result
//! (by `tool_use_id`), in time. `maestro usage` bills a subagent as a poller only when
//! its own calls formed a poll loop over the orchestration's state, never by the words
//! of its prompt.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::core::sessions::deeds::State;
use crate::core::sessions::loops::{self, Look};

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
    looks: Vec<Look>,
    found: Option<Vec<State>>,
}

/// The fields of a tool-results line this reads.
#[derive(Deserialize)]
struct ResultLine<'a> {
    #[serde(borrow)]
    message: Option<ResultMessage<'a>>,
}

#[derive(Deserialize)]
struct ResultMessage<'a> {
    #[serde(borrow)]
    content: Option<Vec<ResultBlock<'a>>>,
}

#[derive(Deserialize)]
struct ResultBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    tool_use_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
}

impl LoopWatch {
    /// The parts of the state the subagent's loop read, once its calls formed one.
    pub fn found(&self) -> Option<&[State]> {
        self.found.as_deref()
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

    /// A tool-results line of the subagent: each result paired with its call.
    pub fn results(&mut self, line: &[u8], root: &Path) {
        if self.found.is_some() {
            return;
        }
        let Ok(parsed) = serde_json::from_slice::<ResultLine<'_>>(line) else {
            return;
        };
        let blocks = parsed.message.and_then(|m| m.content).unwrap_or_default();
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
