//! Tool results, most of a transcript's bytes, read without parsing them. A `user` line
//! that carries only tool results adds nothing to the bill: all the tally takes from it
//! is its timestamp, whether it is a subagent's, which tool calls got their result and
//! the text of an error. Those are found by walking the line's structure (the text of
//! a tool's output, most of the bytes, is skipped 64 bytes at a time: `skim::json`),
//! and only when the line has exactly the shape Claude Code writes; anything else (a
//! prompt, a line of another shape, a key seen twice) is left to the full parse. A
//! property test (`tests`) checks both ways agree. Two things the full parse would
//! check are left unread, as ccusage leaves them (such a line bills nothing either
//! way): the tool's own copy of its output (`toolUseResult`, half the line) and what
//! follows it, once the line's type, chain, time and results are read; and whether
//! the text of a result that is no error is UTF-8 without control characters.
//! Responses have their own walk (`skim::response`).

mod calls;
mod json;
mod response;

pub use calls::{ARGUMENT_KEYS, Arguments, Call, members, tool_calls};
use json::{
    Line, Seen, array, boolean, json_or_null, object, plain_or_null, plain_string, skip_unread,
    skip_value, string_or_null,
};
pub use response::{Content, Response, response};

/// What a tool-results line says.
#[derive(Debug, PartialEq, Eq)]
pub struct ToolResults<'a> {
    pub timestamp: Option<&'a str>,
    pub sidechain: bool,
    /// The tool calls answered, each with its content (JSON text, unparsed) when
    /// the result is an error.
    pub results: Vec<(&'a str, Option<&'a str>)>,
}

/// The fields of a line the full parse reads (`tally::Line`): each may appear once.
const LINE_FIELDS: &[&[u8]] = &[
    b"type",
    b"sessionId",
    b"cwd",
    b"timestamp",
    b"isSidechain",
    b"requestId",
    b"isApiErrorMessage",
    b"agentId",
    b"subtype",
    b"message",
];

/// The fields of a content block the full parse reads (`activity::Block`).
const BLOCK_FIELDS: &[&[u8]] = &[
    b"type",
    b"id",
    b"name",
    b"input",
    b"tool_use_id",
    b"is_error",
    b"content",
    b"text",
];

/// The line's tool results, when it is a `user` line whose message content is only
/// tool results; `None` sends it to the full parse. The line is walked member by
/// member (`skim::json`): its grammar checked, the text of its strings skipped.
pub fn tool_results(bytes: &[u8]) -> Option<ToolResults<'_>> {
    let line = &Line::new(bytes);
    let mut head = Head::wanting("user");
    let mut results = Vec::new();
    let mut read_all_it_needs = false;
    let end = object(line, 0, |key, at| match key {
        b"isApiErrorMessage" if head.once(key) => boolean(line, at).map(|(_, after)| after),
        b"requestId" if head.once(key) => string_or_null(line, at),
        b"message" if head.once(key) => user_message(line, at, &mut results),
        // The tool's own copy of its results, half the line's bytes, says nothing the
        // tally reads: once the line's type, chain, time and results are known, the
        // walk ends at it (the newline already told where the line ends).
        b"toolUseResult" if head.knows_all() && !results.is_empty() => {
            read_all_it_needs = true;
            None
        }
        _ => head.field(line, key, at),
    });
    let end = if read_all_it_needs { line.len() } else { end? };
    let only_results = head.is_whole(line, end) && !results.is_empty();
    only_results.then_some(ToolResults {
        timestamp: head.timestamp,
        sidechain: head.sidechain,
        results,
    })
}

/// What both walks read of a line: its type (one other than wanted ends the walk),
/// its time and chain, and the fields the full parse types, each met once.
struct Head<'a> {
    wanted: &'static str,
    kind: Option<&'a str>,
    timestamp: Option<&'a str>,
    sidechain: bool,
    seen: Seen,
    /// A field of [`LINE_FIELDS`] met twice: the line is refused.
    twice: bool,
}

impl<'a> Head<'a> {
    fn wanting(wanted: &'static str) -> Self {
        Self {
            wanted,
            kind: None,
            timestamp: None,
            sidechain: false,
            seen: Seen::default(),
            twice: false,
        }
    }

    /// Marks `key` met; false (and the line refused) the second time.
    fn once(&mut self, key: &[u8]) -> bool {
        let first = self.seen.once(key, LINE_FIELDS).is_some();
        self.twice |= !first;
        first
    }

    /// Reads a member the caller does not: where its value ends, `None` to refuse.
    fn field(&mut self, line: &Line<'a>, key: &[u8], at: usize) -> Option<usize> {
        if self.twice || !self.once(key) {
            return None;
        }
        match key {
            b"type" => {
                let (kind, after) = plain_string(line, at)?;
                self.kind = Some(kind).filter(|k| *k == self.wanted);
                self.kind.map(|_| after)
            }
            b"timestamp" => plain_or_null(line, at).map(|(t, after)| {
                self.timestamp = t;
                after
            }),
            b"isSidechain" => boolean(line, at).map(|(side, after)| {
                self.sidechain = side.unwrap_or(false);
                after
            }),
            b"sessionId" | b"cwd" | b"agentId" | b"subtype" => string_or_null(line, at),
            _ => skip_value(line, at),
        }
    }

    /// The line's type (the one wanted), chain and time are read.
    fn knows_all(&self) -> bool {
        let met = |key: &[u8]| self.seen.has(key, LINE_FIELDS);
        !self.twice && self.kind.is_some() && met(b"isSidechain") && met(b"timestamp")
    }

    /// The walk ended at the line's end, on a line of the type wanted.
    fn is_whole(&self, line: &Line<'_>, end: usize) -> bool {
        !self.twice && end == line.len() && self.kind.is_some()
    }
}

/// A user message is its role and its content, a list of tool results, nothing else.
fn user_message<'a>(
    line: &Line<'a>,
    at: usize,
    results: &mut Vec<(&'a str, Option<&'a str>)>,
) -> Option<usize> {
    let mut seen = Seen::default();
    object(line, at, |key, at| {
        seen.once(key, &[b"role", b"content"])?;
        match key {
            // A response's message ends the walk here, before its content.
            b"role" => plain_string(line, at)
                .filter(|(role, _)| *role == "user")
                .map(|(_, after)| after),
            b"content" => array(line, at, |at| {
                let (id, error, after) = tool_result(line, at)?;
                results.push((id, error));
                Some(after)
            }),
            _ => None,
        }
    })
}

/// A `tool_result` block: the call it answers and, when it is an error, its content.
fn tool_result<'a>(line: &Line<'a>, at: usize) -> Option<(&'a str, Option<&'a str>, usize)> {
    let (mut kind, mut id, mut error, mut content) = (None, None, false, None);
    let mut seen = Seen::default();
    let end = object(line, at, |key, at| {
        seen.once(key, BLOCK_FIELDS)?;
        match key {
            // Another block (a prompt's text) ends the walk at its type.
            b"type" => plain_string(line, at)
                .filter(|(k, _)| *k == "tool_result")
                .map(|(k, after)| {
                    kind = Some(k);
                    after
                }),
            b"tool_use_id" => plain_string(line, at).map(|(i, after)| {
                id = Some(i);
                after
            }),
            b"is_error" => boolean(line, at).map(|(e, after)| {
                error = e == Some(true);
                after
            }),
            // Where it lies, read as text only for an error.
            b"content" => skip_unread(line, at).inspect(|&after| content = Some((at, after))),
            b"id" | b"name" | b"text" => string_or_null(line, at),
            _ => skip_value(line, at),
        }
    })?;
    let id = id.filter(|_| kind == Some("tool_result"))?;
    if !error {
        return Some((id, None, end));
    }
    let text = match content {
        Some((at, after)) => json_or_null(line, at)
            .filter(|&(_, end)| end == after)?
            .0
            .unwrap_or_default(),
        None => "",
    };
    Some((id, Some(text), end))
}

#[cfg(test)]
mod tests;
