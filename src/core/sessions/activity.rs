//! What a session is doing, from its transcript: the last tool call with its main
//! argument (the file, command or pattern it works on) and whether its result came
//! back, idle after an end of turn, and the last tool result that was an error.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// The last tool call of the main chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    /// Its main argument, cut to 120 characters.
    pub argument: Option<String>,
    /// When it was asked for (the line's timestamp).
    pub at: Option<String>,
    /// No result has come back yet.
    pub waiting: bool,
}

/// What the session is doing as of its last line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Activity {
    /// `working` (a response or a tool under way), `waiting` (a tool call without its
    /// result), `idle` (the turn ended), `api_error` (the API refused the last request
    /// and Claude Code gave up on it), or `unknown` (nothing read yet).
    pub state: &'static str,
    pub tool: Option<ToolCall>,
    /// The last tool result marked as an error, cut to 200 characters, or the API's
    /// text while in `api_error` (up to 500).
    pub last_error: Option<String>,
    /// The last tool calls, oldest first (at most [`RECENT`]), with whether each
    /// result was an error (`None` while waiting).
    pub recent: Vec<(ToolCall, Option<bool>)>,
    #[serde(skip)]
    pending: HashSet<String>,
    #[serde(skip)]
    ids: Vec<String>,
    /// `last_error` is the API's (cleared by the next real response).
    #[serde(skip)]
    api_error: bool,
}

/// The state of a session the API refused.
pub const API_ERROR: &str = "api_error";

/// Tool calls kept in `recent`.
pub const RECENT: usize = 20;

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
    input: Option<Value>,
    #[serde(borrow)]
    tool_use_id: Option<std::borrow::Cow<'a, str>>,
    is_error: Option<bool>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

impl Activity {
    /// A main-chain response: its tool calls, and whether the turn ended.
    pub fn response(&mut self, content: Option<&str>, stop_reason: Option<&str>, at: Option<&str>) {
        self.state = "working";
        if std::mem::take(&mut self.api_error) {
            self.last_error = None;
        }
        if let Some(raw) = content.filter(|c| c.contains("\"tool_use\""))
            && let Ok(blocks) = serde_json::from_str::<Vec<Block<'_>>>(raw)
        {
            for b in blocks.iter().filter(|b| b.kind == "tool_use") {
                let call = ToolCall {
                    name: b.name.as_deref().unwrap_or("tool").to_owned(),
                    argument: b.input.as_ref().and_then(main_argument),
                    at: at.map(str::to_owned),
                    waiting: true,
                };
                if let Some(id) = &b.id {
                    self.pending.insert(id.to_string());
                    self.ids.push(id.to_string());
                }
                self.recent.push((call.clone(), None));
                if self.recent.len() > RECENT {
                    self.recent.remove(0);
                    self.ids.remove(0);
                }
                self.tool = Some(call);
                self.state = "waiting";
            }
        }
        if stop_reason == Some("end_turn") {
            self.state = "idle";
        }
    }

    /// Claude Code's line for a request the API refused (`"isApiErrorMessage": true`,
    /// model `<synthetic>`): the session stops on it until a real response comes.
    pub fn api_error(&mut self, content: Option<&str>) {
        let text = content
            .and_then(|c| serde_json::from_str::<Vec<Block<'_>>>(c).ok())
            .and_then(|blocks| {
                blocks
                    .into_iter()
                    .find(|b| b.kind == "text")
                    .and_then(|b| b.text.map(std::borrow::Cow::into_owned))
            })
            .unwrap_or_else(|| "API Error (no text)".to_owned());
        self.state = API_ERROR;
        self.api_error = true;
        self.last_error = Some(text.chars().take(500).collect());
    }

    /// A user line of the main chain: a prompt, or tool results.
    pub fn user(&mut self, content: Option<&str>) {
        let Some(raw) = content else { return };
        if !raw.contains("\"tool_result\"") {
            // A prompt: the session works on it.
            self.state = "working";
            return;
        }
        let Ok(blocks) = serde_json::from_str::<Vec<Block<'_>>>(raw) else {
            return;
        };
        for b in blocks.iter().filter(|b| b.kind == "tool_result") {
            let Some(id) = b.tool_use_id.as_deref() else {
                continue;
            };
            let error = b.is_error.unwrap_or(false);
            self.result(id, error);
            if error {
                self.last_error = Some(
                    b.content
                        .map(|c| {
                            serde_json::from_str::<String>(c.get())
                                .unwrap_or_else(|_| c.get().to_owned())
                        })
                        .unwrap_or_default()
                        .chars()
                        .take(200)
                        .collect(),
                );
            }
        }
        self.settle();
    }

    /// Tool results that are not errors, read without parsing their line
    /// (`sessions::skim`): the same as [`Activity::user`] on them.
    pub fn results<'a>(&mut self, ids: impl IntoIterator<Item = &'a str>) {
        for id in ids {
            self.result(id, false);
        }
        self.settle();
    }

    fn result(&mut self, id: &str, error: bool) {
        self.pending.remove(id);
        if let Some(i) = self.ids.iter().position(|x| x == id) {
            self.recent[i].1 = Some(error);
            self.recent[i].0.waiting = false;
        }
    }

    /// Whether the last call still waits, and the state, once results are in.
    fn settle(&mut self) {
        if let Some(t) = &mut self.tool {
            t.waiting = self
                .pending
                .contains(self.ids.last().map_or("", String::as_str));
        }
        self.state = if self.pending.is_empty() {
            "working"
        } else {
            "waiting"
        };
    }
}

/// The argument that says what a tool works on.
fn main_argument(input: &Value) -> Option<String> {
    [
        "file_path",
        "command",
        "pattern",
        "path",
        "url",
        "description",
        "prompt",
    ]
    .iter()
    .find_map(|k| input[*k].as_str())
    .map(|s| s.chars().take(120).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_waits_for_its_result_and_an_end_of_turn_is_idle() {
        let mut a = Activity::default();
        a.response(
            Some(
                r#"[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test"}}]"#,
            ),
            Some("tool_use"),
            Some("2026-11-20T14:02:15.911Z"),
        );
        assert_eq!(a.state, "waiting");
        let tool = a.tool.clone().expect("tool");
        assert_eq!(
            (tool.name.as_str(), tool.argument.as_deref(), tool.waiting),
            ("Bash", Some("cargo test"), true)
        );
        a.user(Some(r#"[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"error[E0308]: mismatched types"}]"#));
        assert_eq!(a.state, "working");
        assert_eq!(
            a.last_error.as_deref(),
            Some("error[E0308]: mismatched types")
        );
        assert_eq!(a.recent[0].1, Some(true));
        assert!(!a.tool.as_ref().expect("tool").waiting);
        a.response(
            Some(r#"[{"type":"text","text":"done"}]"#),
            Some("end_turn"),
            None,
        );
        assert_eq!(a.state, "idle");
    }
}
