//! Responses, most of a transcript's lines, read without parsing them: the fields the
//! tally counts are taken from an `assistant` line by walking its members
//! (`skim::json`), the values it reads held to the types the full parse would demand
//! and every other value skipped whole. A field met twice, a string with an escape
//! where a value is read, a number that is not a plain count, an API error: the line
//! goes to the full parse. The property test in `tests` checks both ways agree.

use super::Head;
use super::calls::{Call, calls_at};
use super::json::{Line, Seen, boolean, count, null, object, plain_or_null, skip_value};
use crate::core::sessions::prices::Tokens;

/// What a response line says that the tally counts, however it was read.
#[derive(Debug, Default, PartialEq)]
pub struct Response<'a> {
    pub timestamp: Option<&'a str>,
    pub sidechain: bool,
    pub request_id: Option<&'a str>,
    /// Claude Code's own line for an answer the API refused (`isApiErrorMessage`, model
    /// `<synthetic>`); never set by the skim, which leaves those to the full parse.
    pub api_error: bool,
    pub id: Option<&'a str>,
    pub model: Option<&'a str>,
    /// The message's content: its tool calls when the skim read it.
    pub content: Content<'a>,
    pub stop_reason: Option<&'a str>,
    pub usage: Option<Tokens>,
}

/// A response's content, as the way that read the line left it.
#[derive(Debug, PartialEq)]
pub enum Content<'a> {
    /// JSON text, unparsed (the full parse), or absent.
    Raw(Option<&'a str>),
    /// Its tool calls, read as the skim walked the line: the content is walked once.
    Calls(Vec<Call<'a>>),
}

impl Default for Content<'_> {
    fn default() -> Self {
        Self::Raw(None)
    }
}

impl<'a> Content<'a> {
    /// The JSON text, when the content was left unparsed.
    pub fn raw(&self) -> Option<&'a str> {
        match self {
            Self::Raw(raw) => *raw,
            Self::Calls(_) => None,
        }
    }
}

/// The fields of a message and of its usage the full parse reads: each may appear once.
const MESSAGE_FIELDS: &[&[u8]] = &[b"id", b"model", b"content", b"stop_reason", b"usage"];
const USAGE_FIELDS: &[&[u8]] = &[
    b"input_tokens",
    b"output_tokens",
    b"cache_creation_input_tokens",
    b"cache_read_input_tokens",
    b"cache_creation",
];

/// The response an `assistant` line holds; `None` sends the line to the full parse.
pub fn response(bytes: &[u8]) -> Option<Response<'_>> {
    // The line's UTF-8 checked once, not string by string (a dozen are read); a line
    // that is not UTF-8 is left to the full parse.
    let line = &Line::of_text(std::str::from_utf8(bytes).ok()?);
    let mut head = Head::wanting("assistant");
    let mut r = Response::default();
    let end = object(line, 0, |key, at| match key {
        b"requestId" if head.once(key) => plain_or_null(line, at).map(|(id, after)| {
            r.request_id = id;
            after
        }),
        b"isApiErrorMessage" if head.once(key) => {
            boolean(line, at).and_then(|(error, after)| (error != Some(true)).then_some(after))
        }
        b"message" if head.once(key) => message(line, at, &mut r),
        _ => head.field(line, key, at),
    })?;
    r.timestamp = head.timestamp;
    r.sidechain = head.sidechain;
    head.is_whole(line, end).then_some(r)
}

fn message<'a>(line: &Line<'a>, at: usize, r: &mut Response<'a>) -> Option<usize> {
    let mut seen = Seen::default();
    object(line, at, |key, at| {
        seen.once(key, MESSAGE_FIELDS)?;
        let (slot, after) = match key {
            b"id" => (&mut r.id, plain_or_null(line, at)?),
            b"model" => (&mut r.model, plain_or_null(line, at)?),
            b"stop_reason" => (&mut r.stop_reason, plain_or_null(line, at)?),
            b"content" => return content(line, at, &mut r.content),
            b"usage" => return usage(line, at, &mut r.usage),
            _ => return skip_value(line, at),
        };
        *slot = after.0;
        Some(after.1)
    })
}

/// The content's tool calls: an array of blocks walked once (the text of what is not
/// read skipped unchecked); anything else has none.
fn content<'a>(line: &Line<'a>, at: usize, content: &mut Content<'a>) -> Option<usize> {
    let (calls, after) = match line.get(at) {
        Some(b'[') => calls_at(line, at)?,
        _ => (Vec::new(), skip_value(line, at)?),
    };
    *content = Content::Calls(calls);
    Some(after)
}

fn usage(line: &Line<'_>, at: usize, usage: &mut Option<Tokens>) -> Option<usize> {
    if let Some(after) = null(line, at) {
        return Some(after);
    }
    let mut tokens = Tokens::default();
    let mut seen = Seen::default();
    let end = object(line, at, |key, at| {
        seen.once(key, USAGE_FIELDS)?;
        let slot = match key {
            b"input_tokens" => &mut tokens.input,
            b"output_tokens" => &mut tokens.output,
            b"cache_creation_input_tokens" => &mut tokens.cache_write,
            b"cache_read_input_tokens" => &mut tokens.cache_read,
            b"cache_creation" => return cache_creation(line, at, &mut tokens.cache_write_1h),
            _ => return skip_value(line, at),
        };
        let (n, after) = count(line, at)?;
        *slot = n.unwrap_or(0);
        Some(after)
    })?;
    *usage = Some(tokens);
    Some(end)
}

fn cache_creation(line: &Line<'_>, at: usize, one_hour: &mut u64) -> Option<usize> {
    if let Some(after) = null(line, at) {
        return Some(after);
    }
    let mut seen = Seen::default();
    object(line, at, |key, at| {
        seen.once(key, &[b"ephemeral_1h_input_tokens"])?;
        if key != b"ephemeral_1h_input_tokens" {
            return skip_value(line, at);
        }
        let (n, after) = count(line, at)?;
        *one_hour = n.unwrap_or(0);
        Some(after)
    })
}
