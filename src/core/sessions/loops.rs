//! The loop rule: a session (or subagent) polls when it looks at the same thing again
//! and again and sees nothing new, with time passing and no progress between. One rule,
//! read from the hooks as calls happen (the guard) and from transcripts afterwards
//! (`maestro usage`).
//!
//! - *The same thing*: the same call, its input normalised (runs of whitespace; a Bash
//!   call's `description` aside, which a model rewrites each time).
//! - *Nothing new*: the same result (timestamps and durations aside, which change on
//!   every run of any command).
//! - *Time passing*: measured, between the first of the looks and the last, whatever
//!   spelled the wait (a `sleep`, a `read -t`, a script's own sleep, or only the model's
//!   turns).
//! - *Progress*: an edit (Edit, Write, …), a write to comms.db (an `UPDATE` or `INSERT`
//!   through `sqlite3`: an approval, a message sent), or a look whose result changed.
//!
//! A look is a call that returns something or reads the orchestration's state (a `sleep`
//! or a heartbeat `UPDATE` looks at nothing). Which part of the state the loop's calls
//! read ([`deeds`]) decides which maestro command replaces it; a loop that reads none of
//! it is no poller of the orchestration and is left alone.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::core::sessions::deeds::{self, State};

/// How many times the same look is made before the loop is seen: the third look with
/// the same result, i.e. within three cycles.
pub const SAME_LOOKS: usize = 3;
/// The least time between the first of those looks and the last: a call repeated at once
/// (a retry) is not a poll.
pub const MIN_SPAN_MS: i64 = 200;

/// One call as the rule remembers it, once it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// The normalised call's hash.
    pub call: u64,
    /// The normalised result's hash.
    pub result: u64,
    /// When the call started, in ms since the epoch.
    pub at_ms: i64,
    /// The part of the orchestration's state it read (by its input or its result).
    pub reads: Option<State>,
    /// It returned something or read the state.
    pub is_look: bool,
    /// It changed something: an edit, or a look whose result changed.
    pub progress: bool,
}

/// The normalised call's hash: a Bash command in one spelling, any other input as
/// JSON (its `description` aside), lower case, runs of whitespace as one space. Hashed
/// as it is written, never built: `maestro usage` hashes every subagent's call.
pub fn call_hash(tool: &str, input: &Value) -> u64 {
    let mut hash = LooseHash::default();
    hash.feed(tool.as_bytes());
    hash.push(0);
    let command = input.get("command").and_then(Value::as_str);
    match (tool, command) {
        ("Bash" | "Monitor", Some(command)) => hash.feed(same_spelling(&loose(command)).as_bytes()),
        _ => hash.value(input, true),
    }
    hash.finish()
}

/// A hash of text as [`loose`] would make it (ASCII lower case, runs of whitespace as
/// one space, none at the ends), fed as it comes: eight bytes mixed at a time (`FxHash`'s
/// step), so a long result costs little more than reading it.
#[derive(Default)]
struct LooseHash {
    hash: u64,
    word: u64,
    filled: u32,
    len: u64,
    started: bool,
    space: bool,
}

impl LooseHash {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b.is_ascii_whitespace() {
                self.space = self.started;
                continue;
            }
            if std::mem::take(&mut self.space) {
                self.push(b' ');
            }
            self.started = true;
            self.push(b.to_ascii_lowercase());
        }
    }

    /// A JSON value's text, its structure marked (the top object's `description`
    /// aside, which a model rewrites each time).
    fn value(&mut self, value: &Value, top: bool) {
        match value {
            Value::Object(map) => {
                self.push(b'{');
                for (k, v) in map.iter().filter(|(k, _)| !top || *k != "description") {
                    self.feed(k.as_bytes());
                    self.push(b':');
                    self.value(v, false);
                    self.push(b',');
                }
                self.push(b'}');
            }
            Value::Array(items) => {
                self.push(b'[');
                for v in items {
                    self.value(v, false);
                    self.push(b',');
                }
                self.push(b']');
            }
            Value::String(text) => {
                self.push(b'"');
                self.feed(text.as_bytes());
                self.push(b'"');
            }
            other => self.feed(other.to_string().as_bytes()),
        }
    }

    fn push(&mut self, b: u8) {
        self.word |= u64::from(b) << (8 * self.filled);
        self.filled += 1;
        self.len += 1;
        if self.filled == 8 {
            self.mix();
        }
    }

    fn mix(&mut self) {
        self.hash = mixed(self.hash, self.word);
        self.word = 0;
        self.filled = 0;
    }

    fn finish(mut self) -> u64 {
        if self.filled > 0 {
            self.mix();
        }
        self.word = self.len;
        self.mix();
        self.hash
    }
}

/// One step of `FxHash`: `word` mixed into `hash`.
fn mixed(hash: u64, word: u64) -> u64 {
    (hash.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95)
}

/// A call's result as text: a Bash call's stdout and stderr, else the response itself.
pub fn result_text(response: &Value) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    match response {
        Value::String(s) => Cow::Borrowed(s),
        Value::Object(map) if map.contains_key("stdout") || map.contains_key("stderr") => {
            let text = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or_default();
            Cow::Owned(format!("{}\u{0}{}", text("stdout"), text("stderr")))
        }
        Value::Null => Cow::Borrowed(""),
        Value::Object(map) => {
            // A tool's own timing (`durationMs`) differs on every run of the same look.
            let mut map = map.clone();
            map.retain(|k, _| {
                let k = k.to_ascii_lowercase();
                !(k.contains("duration") || k.contains("elapsed"))
            });
            Cow::Owned(Value::Object(map).to_string())
        }
        other => Cow::Owned(other.to_string()),
    }
}

/// Timestamps, times of day, durations and epoch seconds (`date +%s`, 1000000000 to
/// 1999999999): what differs between two runs of any command.
static CHANGES_ANYWAY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?|(?-u:\b)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?-u:\b)|(?-u:\b)[0-9]+(\.[0-9]+)? ?(ms|s)(?-u:\b)|(?-u:\b)1[0-9]{9}(\.[0-9]+)?(?-u:\b)")
        .expect("static regex")
});

/// What a call computes from the clock (`julianday('now')`, `date`, `time.time()`):
/// its numbers move with time (a heartbeat's age), news or not.
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)'now'|current_(timestamp|time|date)|(?-u:\b)date(?-u:\b)|epoch|\$seconds|time\.time|datetime\.now|date\.now|(?-u:\b)now\(\)")
        .expect("static regex")
});

/// Any number: in the result of a call that reads the clock, the numbers are no news.
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[0-9]+(\.[0-9]+)?").expect("static regex"));

/// Whether the call reads the clock ([`CLOCK`]): a command run, or an MCP tool's query
/// (a file read or written computes nothing).
fn reads_the_clock(tool: &str, input: &Value) -> bool {
    if let Some(command) = input.get("command").and_then(Value::as_str) {
        return CLOCK.is_match(command);
    }
    tool.starts_with("mcp__") && CLOCK.is_match(&input.to_string())
}

/// The hash of what a result says: times and durations aside (every number, where the
/// call reads the clock), each distinct line once, in the order first seen (a file the
/// loop appends the same row to, read back whole, says nothing new). Hashed as it is
/// walked: `maestro usage` runs this on every tool result of every subagent.
fn result_hash(text: &str, clocked: bool) -> u64 {
    // Only a text with a digit can hold a time (no pattern compiled for the rest).
    let steady = if !text.bytes().any(|b| b.is_ascii_digit()) {
        std::borrow::Cow::Borrowed(text)
    } else if clocked {
        NUMBER.replace_all(text, "#")
    } else {
        CHANGES_ANYWAY.replace_all(text, "#")
    };
    // A result has tens of lines: a list is cheaper than a set, up to a point.
    let mut few: Vec<u64> = Vec::new();
    let mut many = std::collections::HashSet::new();
    let mut hash = 0;
    // stdout and stderr (joined by a NUL) are lines alike.
    for line in steady.split(['\n', '\0']) {
        let mut words = LooseHash::default();
        words.feed(line.as_bytes());
        let line_hash = words.finish();
        let new = if few.len() < 64 {
            !few.contains(&line_hash) && {
                few.push(line_hash);
                true
            }
        } else {
            !few.contains(&line_hash) && many.insert(line_hash)
        };
        if new {
            hash = mixed(hash, line_hash);
        }
    }
    hash
}

/// The look a call made: its call, its result, and what it read or changed, after
/// `earlier` (the same agent's looks so far, for whether its result changed).
pub fn look(
    tool: &str,
    input: &Value,
    response: &Value,
    at_ms: i64,
    root: &std::path::Path,
    earlier: &[Look],
) -> Look {
    let call = call_hash(tool, input);
    let text = result_text(response);
    let result = result_hash(&text, reads_the_clock(tool, input));
    let reads = deeds::reads(tool, input, root).or_else(|| {
        deeds::shown_by(tool, input)
            .then(|| deeds::shows(&text))
            .flatten()
    });
    let is_look = reads.is_some() || !text.trim_matches(['\0', ' ', '\n']).is_empty();
    let changed = earlier
        .iter()
        .rev()
        .find(|l| l.call == call)
        .is_some_and(|l| l.result != result);
    Look {
        call,
        result,
        at_ms,
        reads,
        is_look,
        // An edit is progress, unless it is the very edit made before (a state file
        // written each cycle with what the loop saw: nothing new).
        progress: (deeds::is_edit(tool) && !earlier.iter().any(|l| l.call == call))
            || deeds::writes(tool, input)
            || changed,
    }
}

/// Whether the call `call`, about to be made at `now_ms` after `history` (oldest first),
/// closes a poll loop: the parts of the state the loop's calls read (empty: a loop over
/// nothing of the orchestration's), or `None` when it is no loop.
pub fn closes_loop(history: &[Look], call: u64, now_ms: i64) -> Option<Vec<State>> {
    let since = history
        .iter()
        .rposition(|l| l.progress)
        .map_or(0, |i| i + 1);
    let recent = &history[since..];
    let same: Vec<&Look> = recent.iter().filter(|l| l.call == call).collect();
    let before = same.get(same.len().checked_sub(SAME_LOOKS - 1)?..)?;
    let first = before.first()?;
    let seen_nothing_new = before.iter().all(|l| l.is_look && l.result == first.result);
    (seen_nothing_new && now_ms - first.at_ms >= MIN_SPAN_MS).then_some(())?;
    // What the loop reads is what its repeating calls read (this one, and any other
    // that repeats beside it with nothing new): a look made once (one comms.db read
    // before a flaky test run four times) makes no poller of a repeat.
    let repeats = |c: u64| {
        let mut same = recent.iter().filter(|l| l.call == c);
        let first = same.next().map(|l| l.result);
        1 + same.clone().count() >= SAME_LOOKS - 1 && same.all(|l| Some(l.result) == first)
    };
    let mut states = Vec::new();
    for s in recent
        .iter()
        .filter(|l| l.call == call || repeats(l.call))
        .filter_map(|l| l.reads)
    {
        if !states.contains(&s) {
            states.push(s);
        }
    }
    Some(states)
}

/// Whether `look`, a look already made (a monitor's event: its result came with it),
/// closes a poll loop after `history`: the third time it says the same, with time
/// passing and no progress between. The parts of the state read, as [`closes_loop`].
pub fn closed_by(history: &[Look], look: &Look) -> Option<Vec<State>> {
    (look.is_look && !look.progress).then_some(())?;
    closes_loop(history, look.call, look.at_ms)
}

/// Whether a finished run of looks (a transcript) held a poll loop over the
/// orchestration's state: the parts of the state it read.
pub fn loop_in(looks: &[Look]) -> Option<Vec<State>> {
    (0..looks.len()).find_map(|i| {
        closes_loop(&looks[..i], looks[i].call, looks[i].at_ms).filter(|s| !s.is_empty())
    })
}

/// A shell line in one spelling, so drift between cycles is not a new call: `&&`, `;`
/// and a newline join alike, a trailing `| cat` changes nothing, and a wait's length
/// (`sleep 10`, then `sleep 20`: a backoff) is any length.
fn same_spelling(line: &str) -> String {
    static JOINS: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r" ?(&&|;) ?").expect("static regex"));
    static CAT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r" ?\| ?cat ?($|&&|;)").expect("static regex"));
    static WAIT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?-u:\b)sleep [0-9]+(\.[0-9]+)?[smh]?(?-u:\b)").expect("static regex")
    });
    if !line.contains(['&', ';', '|']) && !line.contains("sleep") {
        return line.to_owned();
    }
    let line = CAT.replace_all(line, "$1");
    let line = WAIT.replace_all(&line, "sleep #");
    JOINS
        .replace_all(&line, " ; ")
        .trim_end_matches([' ', ';'])
        .to_owned()
}

/// Lower case, runs of whitespace as one space.
pub fn loose(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests;
