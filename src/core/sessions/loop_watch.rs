//! The loop rule ([`crate::core::sessions::loops`]) read from a subagent's transcript as
//! it is counted: each tool call (its tool and main argument) paired with its result
//! (by `tool_use_id`), in time. `maestro usage` bills a subagent as a poller only when
//! its own calls formed a poll loop over the orchestration's state, never by the words
//! of its prompt.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

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

    /// A response's tool calls, asked for at `at_ms`.
    pub fn calls<'a>(
        &mut self,
        calls: impl IntoIterator<Item = crate::core::sessions::activity::NewCall<'a>>,
        at_ms: i64,
    ) {
        for (id, name, argument) in calls {
            let (Some(id), Some(tool)) = (id, name) else {
                continue;
            };
            let input = input_of(&tool, argument.as_deref());
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
            let text = block.content.map(RawValue::get).unwrap_or_default();
            let response = Value::String(text.to_owned());
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

/// A call's input as far as the transcript's main argument tells it.
fn input_of(tool: &str, argument: Option<&str>) -> Value {
    let key = match tool {
        "Bash" => "command",
        "Read" | "Grep" | "Glob" => "file_path",
        _ => "argument",
    };
    argument.map_or(Value::Null, |a| json!({ key: a }))
}
