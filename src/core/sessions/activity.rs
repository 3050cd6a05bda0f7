//! What a session is doing, from its transcript: the last tool call with its main
//! argument (the file, command or pattern it works on) and whether its result came
//! back, idle after an end of turn, and the last tool result that was an error.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
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
    /// Left unparsed: a tool's input can be a whole file (`Write`); only its main
    /// argument is read from it.
    #[serde(borrow)]
    input: Option<&'a RawValue>,
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
                    argument: b.input.and_then(main_argument),
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
                self.last_error = Some(error_text(b.content.map_or("", RawValue::get)));
            }
        }
        self.settle();
    }

    /// Tool results read without parsing their line (`sessions::skim`), each with
    /// its content (JSON text) when it is an error: the same as [`Activity::user`].
    pub fn results<'a>(&mut self, results: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) {
        for (id, error) in results {
            self.result(id, error.is_some());
            if let Some(content) = error {
                self.last_error = Some(error_text(content));
            }
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

/// An error result's text from its content (JSON text): the string, or the JSON as
/// written when it is not one (blocks), cut to 200 characters.
fn error_text(content: &str) -> String {
    serde_json::from_str::<String>(content)
        .unwrap_or_else(|_| content.to_owned())
        .chars()
        .take(200)
        .collect()
}

/// The keys of a tool's input that say what it works on, the first found wins.
const ARGUMENT_KEYS: [&str; 7] = [
    "file_path",
    "command",
    "pattern",
    "path",
    "url",
    "description",
    "prompt",
];

/// The argument that says what a tool works on, cut to 120 characters: the value of
/// the first of [`ARGUMENT_KEYS`] that is a string (a key written twice: its last).
fn main_argument(input: &RawValue) -> Option<String> {
    let Arguments(values) = serde_json::from_str(input.get()).ok()?;
    values
        .into_iter()
        .flatten()
        .find_map(|raw| serde_json::from_str::<std::borrow::Cow<'_, str>>(raw.get()).ok())
        .map(|s| s.chars().take(120).collect())
}

/// An input's values under [`ARGUMENT_KEYS`], unparsed; every other value skipped
/// without being built. Not an object: none.
struct Arguments<'a>([Option<&'a RawValue>; ARGUMENT_KEYS.len()]);

/// A key, borrowed from the line unless it has an escape.
#[derive(Deserialize)]
struct Key<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

impl<'de> Deserialize<'de> for Arguments<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ArgumentsVisitor)
    }
}

struct ArgumentsVisitor;

impl<'de> serde::de::Visitor<'de> for ArgumentsVisitor {
    type Value = Arguments<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a tool's input")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values = [None; ARGUMENT_KEYS.len()];
        while let Some(Key(key)) = map.next_key()? {
            match ARGUMENT_KEYS.iter().position(|k| *k == key) {
                Some(i) => values[i] = Some(map.next_value()?),
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Arguments(values))
    }
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

    /// What `input[key].as_str()` over the keys in order would say, the rest unbuilt.
    #[test]
    fn the_main_argument_is_the_first_key_holding_a_string() {
        let argument = |json: &str| {
            let raw: Box<RawValue> = serde_json::from_str(json).expect("json");
            main_argument(&raw)
        };
        assert_eq!(
            argument(r#"{"content":"fn main() {}","file_path":"/p/a.rs"}"#).as_deref(),
            Some("/p/a.rs")
        );
        // Not a string: the next key; written twice: the last; escapes read.
        assert_eq!(
            argument(r#"{"file_path":7,"command":"ls","command":"cargo \"test\""}"#).as_deref(),
            Some("cargo \"test\"")
        );
        assert_eq!(argument(r#""ls""#), None);
        assert_eq!(argument(r#"{"todos":[{"content":"x"}]}"#), None);
        let long = format!(r#"{{"prompt":"{}"}}"#, "é".repeat(300));
        assert_eq!(argument(&long).map(|a| a.chars().count()), Some(120));
    }
}
