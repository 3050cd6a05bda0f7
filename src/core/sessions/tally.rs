//! Counting one session's transcript the way the usage tools do (docs/sessions.md):
//! each response counted once by (`message.id`, `requestId`), sidechain responses
//! billed too, `<synthetic>` lines carrying nothing, the context in use taken from the
//! latest main-chain response and started over by a `compact_boundary`. Lines arrive
//! one at a time (a whole file, or what was appended), so the same tally follows a
//! growing transcript; a line that is not JSON (half written, damaged) is skipped.

use std::collections::{BTreeSet, VecDeque};

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::core::sessions::activity::Activity;
use crate::core::sessions::counted::CountedKeys;
use crate::core::sessions::prices::{PriceTable, Tokens};
use crate::core::sessions::skim::{self, Content, Response};
use crate::core::sessions::timestamp::epoch_ms;

/// The fields of a transcript line that are counted (every one optional).
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(rename = "sessionId", borrow)]
    session_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    cwd: Option<Cow<'a, str>>,
    #[serde(borrow)]
    timestamp: Option<Cow<'a, str>>,
    #[serde(rename = "isSidechain")]
    is_sidechain: Option<bool>,
    #[serde(rename = "requestId", borrow)]
    request_id: Option<Cow<'a, str>>,
    /// Claude Code's own line for an answer the API refused (model `<synthetic>`).
    #[serde(rename = "isApiErrorMessage")]
    is_api_error: Option<bool>,
    #[serde(rename = "agentId", borrow)]
    agent_id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    subtype: Option<Cow<'a, str>>,
    #[serde(borrow)]
    message: Option<Message<'a>>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    /// Left unparsed: a prompt's text when it is a string; tool calls and results
    /// are read from it only when it names them.
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    stop_reason: Option<Cow<'a, str>>,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Usage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation: Option<CacheCreation>,
}

impl Usage {
    fn tokens(&self) -> Tokens {
        Tokens {
            input: self.input_tokens.unwrap_or(0),
            output: self.output_tokens.unwrap_or(0),
            cache_write: self.cache_creation_input_tokens.unwrap_or(0),
            cache_read: self.cache_read_input_tokens.unwrap_or(0),
            cache_write_1h: self
                .cache_creation
                .as_ref()
                .and_then(|c| c.ephemeral_1h_input_tokens)
                .unwrap_or(0),
        }
    }
}

#[derive(Deserialize)]
struct CacheCreation {
    ephemeral_1h_input_tokens: Option<u64>,
}

/// What one session's transcript adds up to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub session_id: Option<String>,
    /// The `cwd` of the first line that has one.
    pub cwd: Option<String>,
    /// The first prompt typed (a string `user` message), when there is one.
    pub first_prompt: Option<String>,
    /// In a subagent's file: the prompt that launched it (its first sidechain `user`
    /// line, cut to 4,000 characters) and its `agentId`.
    pub agent_prompt: Option<String>,
    pub agent_id: Option<String>,
    pub models: BTreeSet<String>,
    /// The model of the latest counted response.
    pub last_model: Option<String>,
    /// Billed tokens, each response counted once.
    pub tokens: Tokens,
    /// USD at list prices; `None` once a response of a model without a price counted.
    pub cost_usd: Option<f64>,
    /// The models of counted responses that have no price (say which, and how to add one).
    pub unpriced_models: BTreeSet<String>,
    /// Input + cache write + cache read of the latest main-chain response since the
    /// last compaction.
    pub context_tokens: u64,
    pub compactions: u32,
    /// First and last `timestamp` seen (RFC 3339 text as written).
    pub started: Option<String>,
    pub last_activity: Option<String>,
    /// Lines that could not be read as JSON.
    pub skipped_lines: u64,
    /// What the main chain is doing as of its last line.
    pub activity: Activity,
    /// A subagent's calls and results under the loop rule (is it a poller?).
    pub loops: crate::core::sessions::loop_watch::LoopWatch,
    /// The keys of the responses counted: `<id's length>:<id><requestId>`, one string
    /// (one hash) for the pair.
    counted: CountedKeys,
    /// Where the key of the line being counted is made (no allocation per line).
    key: String,
    cost_known: bool,
    /// (ms since the epoch, tokens, cost) of the responses of the last
    /// [`BURN_WINDOW_MS`] before the newest one: the burn rate.
    recent_bills: VecDeque<(i64, u64, Option<f64>)>,
    newest_bill: i64,
}

/// The burn rate's window: ten minutes.
pub const BURN_WINDOW_MS: i64 = 10 * 60 * 1000;

impl Tally {
    pub fn new() -> Self {
        Self {
            cost_usd: Some(0.0),
            cost_known: true,
            ..Self::default()
        }
    }

    /// Adds one line of the transcript.
    pub fn feed(&mut self, line: &str, prices: &PriceTable) {
        self.feed_bytes(line.as_bytes(), prices);
    }

    /// Adds one line of the transcript, as read (the parser checks the text it reads).
    pub fn feed_bytes(&mut self, line: &[u8], prices: &PriceTable) {
        self.feed_line(line, prices, true);
    }

    /// `skim`: a line of tool results is read without parsing it (`sessions::skim`)
    /// once the session and its folder are known; the tests turn it off to compare.
    fn feed_line(&mut self, line: &[u8], prices: &PriceTable, skim: bool) {
        let line = line.trim_ascii();
        if line.is_empty() {
            return;
        }
        if skim && self.session_id.is_some() && self.cwd.is_some() && self.skimmed(line, prices) {
            return;
        }
        // Only the fields counted are read; the rest (a response's text, a tool's
        // output) is skipped without being built.
        let Ok(v) = serde_json::from_slice::<Line<'_>>(line) else {
            self.skipped_lines += 1;
            return;
        };
        if self.session_id.is_none() {
            self.session_id = v.session_id.map(Cow::into_owned);
        }
        if self.cwd.is_none() {
            self.cwd = v.cwd.map(Cow::into_owned);
        }
        if let Some(ts) = v.timestamp.as_deref() {
            self.seen_at(ts);
        }
        let sidechain = v.is_sidechain.unwrap_or(false);
        match v.kind.as_deref() {
            Some("user") if sidechain && self.agent_prompt.is_none() => {
                let content = v.message.as_ref().and_then(|m| m.content);
                // A string, or text blocks: either way the prompt the parent gave.
                if let Some(text) = content
                    .and_then(|c| serde_json::from_str::<serde_json::Value>(c.get()).ok())
                    .and_then(|v| crate::core::text::prompt_text(&v))
                {
                    self.agent_prompt = Some(text.chars().take(4000).collect());
                    self.agent_id = v.agent_id.map(Cow::into_owned);
                }
            }
            Some("user") if sidechain => self.sidechain_results(line),
            Some("user") if !sidechain => {
                let content = v
                    .message
                    .as_ref()
                    .and_then(|m| m.content)
                    .map(RawValue::get);
                if self.first_prompt.is_none()
                    && let Some(text) = content.and_then(|c| serde_json::from_str::<String>(c).ok())
                {
                    self.first_prompt = Some(text.chars().take(2000).collect());
                }
                self.activity.user(content);
            }
            Some("system") if v.subtype.as_deref() == Some("compact_boundary") => {
                self.compactions += 1;
                self.context_tokens = 0;
            }
            Some("assistant") => {
                if let Some(m) = &v.message {
                    let response = Response {
                        timestamp: v.timestamp.as_deref(),
                        sidechain,
                        request_id: v.request_id.as_deref(),
                        api_error: v.is_api_error.unwrap_or(false)
                            && m.model.as_deref() == Some("<synthetic>"),
                        id: m.id.as_deref(),
                        model: m.model.as_deref(),
                        content: Content::Raw(m.content.map(RawValue::get)),
                        stop_reason: m.stop_reason.as_deref(),
                        usage: m.usage.as_ref().map(Usage::tokens),
                    };
                    self.assistant(&response, prices);
                }
            }
            _ => {}
        }
    }

    /// Reads the line without parsing it (`sessions::skim`), when it has one of the
    /// shapes the walks know; false leaves it to the full parse. Two lines in three are
    /// responses: one that says so near its start is walked as one first (a hint only;
    /// each walk checks the whole line).
    fn skimmed(&mut self, line: &[u8], prices: &PriceTable) -> bool {
        let response_first = looks_like_response(line);
        if response_first && self.skimmed_response(line, prices) {
            return true;
        }
        if let Some(results) = skim::tool_results(line) {
            if let Some(ts) = results.timestamp {
                self.seen_at(ts);
            }
            if results.sidechain {
                self.sidechain_results(line);
            } else {
                self.activity.results(results.results);
            }
            return true;
        }
        !response_first && self.skimmed_response(line, prices)
    }

    fn skimmed_response(&mut self, line: &[u8], prices: &PriceTable) -> bool {
        let Some(response) = skim::response(line) else {
            return false;
        };
        if let Some(ts) = response.timestamp {
            self.seen_at(ts);
        }
        self.assistant(&response, prices);
        true
    }

    fn seen_at(&mut self, timestamp: &str) {
        if self.started.is_none() {
            self.started = Some(timestamp.to_owned());
        }
        // The line's own buffer is reused: this runs for every line.
        match &mut self.last_activity {
            Some(last) => {
                last.clear();
                last.push_str(timestamp);
            }
            None => self.last_activity = Some(timestamp.to_owned()),
        }
    }

    /// The full parse only, never the skim: what the skim must agree with.
    #[cfg(test)]
    pub(crate) fn feed_parsed(&mut self, line: &[u8], prices: &PriceTable) {
        self.feed_line(line, prices, false);
    }

    /// A subagent's tool results, for the loop rule.
    fn sidechain_results(&mut self, line: &[u8]) {
        let root = std::path::PathBuf::from(self.cwd.as_deref().unwrap_or_default());
        self.loops.results(line, &root);
    }

    /// A response of the main chain or a subagent: what it is doing, and its bill.
    fn assistant(&mut self, response: &Response<'_>, prices: &PriceTable) {
        if response.sidechain {
            let at = response.timestamp.and_then(epoch_ms).unwrap_or_default();
            self.loops.calls(
                crate::core::sessions::activity::calls_of(&response.content),
                at,
            );
        }
        if !response.sidechain && response.api_error {
            self.activity.api_error(response.content.raw());
        } else if !response.sidechain {
            self.activity
                .response(&response.content, response.stop_reason, response.timestamp);
        }
        self.bill(response, prices);
    }

    fn bill(&mut self, response: &Response<'_>, prices: &PriceTable) {
        let model = response.model.unwrap_or_default();
        if model == "<synthetic>" {
            return;
        }
        let Some(tokens) = response.usage else {
            return;
        };
        let sidechain = response.sidechain;
        // Every line of a response repeats its usage: the context is the latest one
        // either way, the bill counts the pair once.
        if !sidechain {
            self.context_tokens = tokens.prompt();
        }
        let (id, request) = (
            response.id.unwrap_or_default(),
            response.request_id.unwrap_or_default(),
        );
        if !self.first_time(id, request) {
            return;
        }
        if !model.is_empty() {
            if !self.models.contains(model) {
                self.models.insert(model.to_owned());
            }
            if self.last_model.as_deref() != Some(model) {
                self.last_model = Some(model.to_owned());
            }
        }
        self.tokens.add(&tokens);
        let cost = prices.cost(model, &tokens);
        if let Some(at) = response.timestamp.and_then(epoch_ms) {
            self.recent_bills.push_back((at, tokens.total(), cost));
            self.newest_bill = self.newest_bill.max(at);
            let newest = self.newest_bill;
            while self
                .recent_bills
                .front()
                .is_some_and(|b| b.0 < newest - BURN_WINDOW_MS)
            {
                self.recent_bills.pop_front();
            }
        }
        match cost {
            Some(c) if self.cost_known => {
                self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + c);
            }
            Some(_) => {}
            None => {
                self.cost_known = false;
                self.cost_usd = None;
                if !self.unpriced_models.contains(model) {
                    self.unpriced_models.insert(model.to_owned());
                }
            }
        }
    }

    /// Whether the response (`message.id`, `requestId`) is met for the first time; one
    /// without either is always counted. The key counted last is told without hashing.
    fn first_time(&mut self, id: &str, request: &str) -> bool {
        if id.is_empty() && request.is_empty() {
            return true;
        }
        self.key.clear();
        // The length makes the pair one string without ambiguity ("ab"+"c", "a"+"bc").
        let _ = write!(self.key, "{}:{id}{request}", id.len());
        self.counted.insert(&self.key)
    }

    /// Tokens and cost of the responses of the ten minutes before `now_ms` (the cost
    /// is unknown if one of them has no price).
    pub fn burn(&self, now_ms: i64) -> (u64, Option<f64>) {
        let mut tokens: u64 = 0;
        let mut cost = Some(0.0);
        for (at, t, c) in &self.recent_bills {
            if *at >= now_ms - BURN_WINDOW_MS {
                tokens = tokens.saturating_add(*t);
                cost = cost.zip(*c).map(|(a, b)| a + b);
            }
        }
        (tokens, cost)
    }

    /// The context window the session runs with: 200,000 tokens, or 1,000,000 once a
    /// prompt was already larger than 200,000.
    pub fn context_window(&self, default_window: u64) -> u64 {
        if self.context_tokens > default_window {
            1_000_000
        } else {
            default_window
        }
    }

    /// The context in use as a percent of the window.
    pub fn context_percent(&self, default_window: u64) -> f64 {
        let window = self.context_window(default_window).max(1);
        self.context_tokens as f64 * 100.0 / window as f64
    }
}

/// Whether a response's role shows in the line's first bytes (its message comes
/// after a few short members): which walk to try first.
fn looks_like_response(line: &[u8]) -> bool {
    static ROLE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(br#""role":"assistant""#));
    ROLE.find(&line[..line.len().min(512)]).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::sessions::deeds::State;
    use serde_json::json;

    fn assistant(id: &str, req: &str, model: &str, side: bool, usage: &str) -> String {
        format!(
            r#"{{"type":"assistant","sessionId":"s1","timestamp":"2026-11-20T14:02:15.407Z","isSidechain":{side},"requestId":"{req}","message":{{"id":"{id}","model":"{model}","usage":{usage}}}}}"#
        )
    }

    #[test]
    fn the_counting_rules_of_the_usage_tools() {
        let prices = PriceTable::default();
        let mut t = Tally::new();
        let u = r#"{"input_tokens":3,"cache_creation_input_tokens":5120,"cache_read_input_tokens":14032,"output_tokens":210}"#;
        t.feed(
            r#"{"type":"user","sessionId":"s1","cwd":"/p","timestamp":"2026-11-20T14:02:11.120Z","isSidechain":false,"message":{"role":"user","content":"/musician task-03"}}"#,
            &prices,
        );
        // One response written as two lines: counted once.
        t.feed(
            &assistant("m1", "r1", "claude-sonnet-4-5-20250929", false, u),
            &prices,
        );
        t.feed(
            &assistant("m1", "r1", "claude-sonnet-4-5-20250929", false, u),
            &prices,
        );
        assert_eq!(t.tokens.total(), 3 + 5120 + 14032 + 210);
        assert_eq!(t.context_tokens, 19_155);
        // A sidechain response is billed but is not the context.
        t.feed(
            &assistant(
                "m2",
                "r2",
                "claude-sonnet-4-5-20250929",
                true,
                r#"{"input_tokens":10,"output_tokens":5}"#,
            ),
            &prices,
        );
        assert_eq!(t.tokens.total(), 19_365 + 15);
        assert_eq!(t.context_tokens, 19_155);
        // Synthetic lines carry nothing; half a line is skipped.
        t.feed(&assistant("m3", "r3", "<synthetic>", false, u), &prices);
        t.feed(r#"{"type":"assistant","message":{"id":"m4""#, &prices);
        assert_eq!(t.tokens.total(), 19_380);
        assert_eq!(t.skipped_lines, 1);
        // A compaction starts the context over.
        t.feed(
            r#"{"type":"system","subtype":"compact_boundary","compactMetadata":{"trigger":"auto","preTokens":190000}}"#,
            &prices,
        );
        assert_eq!((t.compactions, t.context_tokens), (1, 0));
        assert_eq!(t.first_prompt.as_deref(), Some("/musician task-03"));
        assert_eq!(t.cwd.as_deref(), Some("/p"));
        // Sonnet list prices: 3 in, 15 out, 3.75 cache write, 0.30 cache read per MTok.
        let expected =
            (3.0 * 3.0 + 210.0 * 15.0 + 5120.0 * 3.75 + 14032.0 * 0.30 + 10.0 * 3.0 + 5.0 * 15.0)
                / 1e6;
        assert!(
            (t.cost_usd.unwrap_or_default() - expected).abs() < 1e-9,
            "{t:?}"
        );
    }

    #[test]
    fn an_unknown_model_leaves_the_cost_unknown_and_a_large_prompt_means_a_1m_window() {
        let prices = PriceTable::default();
        let mut t = Tally::new();
        t.feed(
            &assistant(
                "m1",
                "r1",
                "gpt-9",
                false,
                r#"{"input_tokens":250000,"output_tokens":1}"#,
            ),
            &prices,
        );
        assert_eq!(t.cost_usd, None);
        assert_eq!(t.context_window(200_000), 1_000_000);
        assert!((t.context_percent(200_000) - 25.0).abs() < 1e-9);
    }

    /// A subagent's transcript, its lines as Claude Code 2.1.328 writes them: a
    /// `Monitor` call over comms.db, its start, then one notification per event.
    fn monitored(events: &[&str]) -> Tally {
        let line = |v: serde_json::Value| {
            let mut v = v;
            v["isSidechain"] = json!(true);
            v["sessionId"] = json!("s1");
            v["cwd"] = json!("/p");
            v.to_string()
        };
        let command = "while true; do sqlite3 comms.db \"select state from orchestration_tasks where task_id='task-03'\"; sleep 15; done";
        let mut lines = vec![
            line(
                json!({"type": "user", "agentId": "a1", "timestamp": "2026-12-02T10:00:00.000Z",
                "message": {"role": "user", "content": "watch task-03's state"}}),
            ),
            line(
                json!({"type": "assistant", "timestamp": "2026-12-02T10:00:01.000Z",
                "message": {"id": "m1", "model": "claude-sonnet-4-5", "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "Monitor",
                        "input": {"description": "state", "timeout_ms": 300_000, "command": command}}],
                    "usage": {"input_tokens": 1, "output_tokens": 1}}}),
            ),
            line(
                json!({"type": "user", "timestamp": "2026-12-02T10:00:01.100Z",
                "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                    "content": "Monitor started (task b0x, expires in 300s unless the source ends first)."}]}}),
            ),
        ];
        for (i, e) in events.iter().enumerate() {
            let text = format!(
                "[SYSTEM NOTIFICATION - NOT USER INPUT]\n\n<task-notification>\n<task-id>b0x</task-id>\n<summary>Monitor event: \"state\"</summary>\n<event>{e}</event>\n</task-notification>"
            );
            lines.push(line(json!({"type": "user", "isMeta": true,
                "timestamp": format!("2026-12-02T10:00:{:02}.000Z", 15 + 15 * i),
                "origin": {"kind": "task-notification"},
                "message": {"role": "user", "content": text}})));
        }
        let prices = PriceTable::default();
        let mut tally = Tally::new();
        for l in &lines {
            tally.feed(l, &prices);
        }
        tally
    }

    #[test]
    fn a_monitor_printing_the_same_row_is_a_loop_by_its_third_event() {
        assert_eq!(monitored(&["working", "working"]).loops.found(), None);
        assert_eq!(
            monitored(&["working", "working", "working"]).loops.found(),
            Some(&[State::Comms][..])
        );
        assert!(
            monitored(&["working", "working", "working"])
                .loops
                .found_by_monitor()
                .is_some()
        );
        // A row that changes is news: the count starts again from it.
        let news = monitored(&["working", "working", "needs_review", "needs_review"]);
        assert_eq!(news.loops.found(), None);
        assert!(
            news.loops
                .monitor_commands()
                .any(|c| c.contains("comms.db"))
        );
    }
}
