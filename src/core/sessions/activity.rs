//! What a session is doing, from its transcript: the last tool call with its main
//! argument (the file, command or pattern it works on) and whether its result came
//! back, idle after an end of turn, and the last tool result that was an error.

use std::borrow::Cow;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::core::sessions::skim::{self, ARGUMENT_KEYS, Arguments, Content};

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
    /// The ids of the calls in `recent` (a call may have none).
    #[serde(skip)]
    ids: Vec<Option<String>>,
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
    kind: Cow<'a, str>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    /// Left unparsed: a tool's input can be a whole file (`Write`); only its main
    /// argument is read from it.
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    is_error: Option<bool>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
}

impl Activity {
    /// A main-chain response: its tool calls, and whether the turn ended.
    pub fn response(&mut self, content: &Content<'_>, stop_reason: Option<&str>, at: Option<&str>) {
        self.state = "working";
        if std::mem::take(&mut self.api_error) {
            self.last_error = None;
        }
        for (id, name, argument, _) in calls_of(content) {
            self.call(id.as_deref(), name.as_deref(), argument, at);
        }
        if stop_reason == Some("end_turn") {
            self.state = "idle";
        }
    }

    /// A tool call asked for: waiting for its result.
    fn call(
        &mut self,
        id: Option<&str>,
        name: Option<&str>,
        argument: Option<String>,
        at: Option<&str>,
    ) {
        let call = ToolCall {
            name: name.unwrap_or("tool").to_owned(),
            argument,
            at: at.map(str::to_owned),
            waiting: true,
        };
        if let Some(id) = id {
            self.pending.insert(id.to_owned());
        }
        self.ids.push(id.map(str::to_owned));
        self.recent.push((call.clone(), None));
        if self.recent.len() > RECENT {
            self.recent.remove(0);
            self.ids.remove(0);
        }
        self.tool = Some(call);
        self.state = "waiting";
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
        self.last_error = Some(cut(&text, 500));
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
        if let Some(i) = self.ids.iter().position(|x| x.as_deref() == Some(id)) {
            self.recent[i].1 = Some(error);
            self.recent[i].0.waiting = false;
        }
    }

    /// Whether the last call still waits, and the state, once results are in.
    fn settle(&mut self) {
        if let Some(t) = &mut self.tool {
            t.waiting = self
                .ids
                .last()
                .and_then(Option::as_deref)
                .is_some_and(|id| self.pending.contains(id));
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
    let text = serde_json::from_str::<Cow<'_, str>>(content).unwrap_or(Cow::Borrowed(content));
    cut(&text, 200)
}

/// The first `chars` characters of `text`, ending `…` where it was cut (a cell that
/// shows it says it is not whole).
fn cut(text: &str, chars: usize) -> String {
    if text.len() <= chars || text.chars().nth(chars).is_none() {
        // Never more characters than bytes.
        return text.to_owned();
    }
    let mut out: String = text.chars().take(chars.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The argument that says what a tool works on, cut to 120 characters: the value of
/// the first of [`ARGUMENT_KEYS`] that is a string (a key written twice: its last).
fn main_argument(input: &str) -> Option<String> {
    let values = match skim::members(input, &ARGUMENT_KEYS) {
        Some(values) => values,
        None => arguments_parsed(input)?,
    };
    first_argument(values)
}

/// The first of an input's values under [`ARGUMENT_KEYS`] that is a string, cut.
fn first_argument(values: Arguments<'_>) -> Option<String> {
    values
        .into_iter()
        .flatten()
        .find_map(|raw| serde_json::from_str::<Cow<'_, str>>(raw).ok())
        .map(|s| cut(&s, 120))
}

/// The values under [`ARGUMENT_KEYS`] by the full parse: what the skim must agree with.
fn arguments_parsed(input: &str) -> Option<[Option<&str>; ARGUMENT_KEYS.len()]> {
    let ParsedArguments(values) = serde_json::from_str(input).ok()?;
    Some(values.map(|v| v.map(RawValue::get)))
}

/// A call as the response holds it: its id, its tool, its main argument and its whole
/// input (JSON text).
pub type NewCall<'a> = (
    Option<Cow<'a, str>>,
    Option<Cow<'a, str>>,
    Option<String>,
    Option<&'a str>,
);

/// The tool calls of a response's content, skimmed where the walk can, parsed otherwise.
pub fn calls_of<'a>(content: &Content<'a>) -> Vec<NewCall<'a>> {
    match content {
        Content::Calls(calls) => calls.iter().map(new_call).collect(),
        Content::Raw(Some(raw)) if raw.contains("\"tool_use\"") => {
            calls_skimmed(raw).unwrap_or_else(|| calls_parsed(raw))
        }
        Content::Raw(_) => Vec::new(),
    }
}

/// The tool calls of a response's content, read without parsing it; `None` when the
/// walk cannot read it (`skim::tool_calls`).
fn calls_skimmed(content: &str) -> Option<Vec<NewCall<'_>>> {
    let calls = skim::tool_calls(content)?;
    Some(calls.iter().map(new_call).collect())
}

/// A call the walk read, as [`NewCall`].
fn new_call<'a>(c: &skim::Call<'a>) -> NewCall<'a> {
    (
        c.id.map(Cow::Borrowed),
        c.name.map(Cow::Borrowed),
        first_argument(c.arguments),
        c.input,
    )
}

/// The tool calls of a response's content by the full parse: none when it fails.
fn calls_parsed(content: &str) -> Vec<NewCall<'_>> {
    let Ok(blocks) = serde_json::from_str::<Vec<Block<'_>>>(content) else {
        return Vec::new();
    };
    blocks
        .into_iter()
        .filter(|b| b.kind == "tool_use")
        .map(|b| {
            let input = b.input.map(RawValue::get);
            let argument = input.and_then(main_argument);
            (b.id, b.name, argument, input)
        })
        .collect()
}

/// An input's values under [`ARGUMENT_KEYS`], unparsed; every other value skipped
/// without being built. Not an object: none.
struct ParsedArguments<'a>([Option<&'a RawValue>; ARGUMENT_KEYS.len()]);

/// A key, borrowed from the line unless it has an escape.
#[derive(Deserialize)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'de> Deserialize<'de> for ParsedArguments<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ArgumentsVisitor)
    }
}

struct ArgumentsVisitor;

impl<'de> serde::de::Visitor<'de> for ArgumentsVisitor {
    type Value = ParsedArguments<'de>;

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
        Ok(ParsedArguments(values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_waits_for_its_result_and_an_end_of_turn_is_idle() {
        let mut a = Activity::default();
        a.response(
            &Content::Raw(Some(
                r#"[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test"}}]"#,
            )),
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
            &Content::Raw(Some(r#"[{"type":"text","text":"done"}]"#)),
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
            main_argument(raw.get())
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

    /// Calls without an id (anyone can write a transcript) keep `recent` and its ids
    /// in step: a result used to mark the wrong call, and could empty the ids first.
    #[test]
    fn calls_without_ids_never_misalign_the_recent_calls() {
        let mut a = Activity::default();
        for n in 0..RECENT + 5 {
            let id = if n % 2 == 0 {
                String::new()
            } else {
                format!(r#""id":"t{n}","#)
            };
            let content = format!(
                r#"[{{"type":"tool_use",{id}"name":"Bash","input":{{"command":"ls {n}"}}}}]"#
            );
            a.response(&Content::Raw(Some(&content)), Some("tool_use"), None);
        }
        assert_eq!((a.recent.len(), a.ids.len()), (RECENT, RECENT));
        a.results([("t23", None)]);
        let answered = a
            .recent
            .iter()
            .position(|(c, _)| c.argument.as_deref() == Some("ls 23"));
        assert_eq!(answered.map(|i| a.recent[i].1), Some(Some(false)));
        // The last call has no id: no result can answer it, it is not shown waiting.
        assert!(a.tool.as_ref().is_some_and(|t| !t.waiting));
    }

    mod skimmed_and_parsed {
        use super::super::*;
        use proptest::prelude::*;

        /// A JSON value as text: strings with quotes and backslashes to escape,
        /// numbers, null, nested objects and arrays.
        fn value() -> impl Strategy<Value = String> {
            let text = prop_oneof![
                "\\PC{0,8}",
                prop::sample::select(vec!["\"", "\\", "cargo \"test\"", "/p/a.rs", "\n"])
                    .prop_map(str::to_owned),
            ];
            let leaf = prop_oneof![
                4 => text.prop_map(|t| serde_json::Value::from(t).to_string()),
                1 => prop::sample::select(vec!["null", "7", "-1.5e3", "true", "\"a\\u0062\""])
                    .prop_map(str::to_owned),
            ];
            leaf.prop_recursive(2, 8, 3, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..3)
                        .prop_map(|v| format!("[{}]", v.join(","))),
                    prop::collection::vec(("[a-z_]{1,4}", inner), 0..3).prop_map(|kv| {
                        let members: Vec<String> =
                            kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                        format!("{{{}}}", members.join(","))
                    }),
                ]
            })
        }

        /// An object as text whose keys are often the ones read, sometimes twice.
        fn object(
            keys: Vec<&'static str>,
            value: impl Strategy<Value = String>,
        ) -> impl Strategy<Value = String> {
            prop::collection::vec((prop::sample::select(keys), value), 0..5).prop_map(|kv| {
                let members: Vec<String> = kv.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", members.join(","))
            })
        }

        fn input() -> impl Strategy<Value = String> {
            let mut keys = ARGUMENT_KEYS.to_vec();
            keys.extend(["content", "todos", "file\\u005fpath"]);
            prop_oneof![4 => object(keys, value()), 1 => value()]
        }

        fn content() -> impl Strategy<Value = String> {
            let field = prop_oneof![
                2 => prop::sample::select(vec!["\"tool_use\"", "\"text\"", "\"t1\"", "\"Bash\"", "null", "3", "\"tool\\u005fuse\"", "false"])
                    .prop_map(str::to_owned),
                2 => input(),
                1 => value(),
            ];
            let block = object(
                vec![
                    "type",
                    "type",
                    "id",
                    "name",
                    "input",
                    "input",
                    "tool_use_id",
                    "is_error",
                    "content",
                    "text",
                    "other",
                ],
                field,
            );
            prop::collection::vec(prop_oneof![6 => block, 1 => value()], 0..4)
                .prop_map(|blocks| format!("[{}]", blocks.join(",")))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            /// Where the walk reads a tool's input, it finds the main argument the parse finds.
            #[test]
            fn the_main_argument_skimmed_is_the_one_parsed(input in input()) {
                let first = |values: [Option<&str>; ARGUMENT_KEYS.len()]| {
                    values.into_iter().flatten().find_map(|raw| serde_json::from_str::<Cow<'_, str>>(raw).ok())
                };
                if let Some(values) = skim::members(&input, &ARGUMENT_KEYS) {
                    prop_assert_eq!(first(values), arguments_parsed(&input).and_then(first), "{}", input);
                }
            }

            /// Where the walk reads a response's content, it finds the calls the parse finds.
            #[test]
            fn the_calls_skimmed_are_the_calls_parsed(content in content()) {
                if let Some(calls) = calls_skimmed(&content) {
                    prop_assert_eq!(calls, calls_parsed(&content), "{}", content);
                }
            }
        }

        /// The shapes Claude Code writes are read by the walk, not left to the parse.
        #[test]
        fn a_real_call_is_skimmed() {
            let content = r#"[{"type":"tool_use","id":"toolu_01","name":"Write","input":{"file_path":"/p/a.rs","content":"fn main() {\n    println!(\"hi\");\n}\n"}}]"#;
            let calls = calls_skimmed(content).expect("skimmed");
            assert_eq!(
                calls,
                [(
                    Some("toolu_01".into()),
                    Some("Write".into()),
                    Some("/p/a.rs".to_owned()),
                    Some(&content[content.find("{\"file_path").expect("input")..content.len() - 2]),
                )]
            );
        }
    }
}
