//! A response's tool calls read from its content without parsing it: each call's id,
//! name and input (a tool's input can hold a whole file, for `Write`), and the few
//! members of an input that say what the tool works on. Where the walk is unsure (a
//! field twice, an escape where a value is read) the caller parses instead.

use super::BLOCK_FIELDS;
use super::json::{
    Line, Seen, array, boolean, object, plain_or_null, plain_string, skip_unread, skip_value,
    string_or_null,
};

/// The keys of a tool's input that say what it works on, the first found wins.
pub const ARGUMENT_KEYS: [&str; 7] = [
    "file_path",
    "command",
    "pattern",
    "path",
    "url",
    "description",
    "prompt",
];

/// An input's values under [`ARGUMENT_KEYS`] (JSON text, unparsed), the last of a key
/// written twice; all `None` for an input that is not an object.
pub type Arguments<'a> = [Option<&'a str>; ARGUMENT_KEYS.len()];

/// One `tool_use` block of a response's content.
#[derive(Debug, PartialEq, Eq)]
pub struct Call<'a> {
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    /// What the tool works on, read from its input; the rest of the input (a whole
    /// file, for `Write`) skipped unread.
    pub arguments: Arguments<'a>,
    /// The whole input, as JSON text (unparsed: the loop rule reads a subagent's).
    pub input: Option<&'a str>,
}

/// The tool calls of a response's content (JSON text), in order; `None` sends the
/// content to the full parse.
pub fn tool_calls(content: &str) -> Option<Vec<Call<'_>>> {
    let line = &Line::of_text(content);
    let (calls, end) = calls_at(line, 0)?;
    (end == content.len()).then_some(calls)
}

/// The tool calls of the content array at `at`, and the index after it.
pub(super) fn calls_at<'a>(line: &Line<'a>, at: usize) -> Option<(Vec<Call<'a>>, usize)> {
    let mut calls = Vec::new();
    let end = array(line, at, |at| block(line, at, &mut calls))?;
    Some((calls, end))
}

/// A content block, read as the full parse would read it (`activity::Block`): the
/// call pushed to `calls` when it is a `tool_use`.
fn block<'a>(line: &Line<'a>, at: usize, calls: &mut Vec<Call<'a>>) -> Option<usize> {
    let mut kind = None;
    let mut call = Call {
        id: None,
        name: None,
        arguments: [None; ARGUMENT_KEYS.len()],
        input: None,
    };
    let mut seen = Seen::default();
    let end = object(line, at, |key, at| {
        seen.once(key, BLOCK_FIELDS)?;
        let (slot, after) = match key {
            b"type" => {
                return plain_string(line, at).map(|(k, after)| {
                    kind = Some(k);
                    after
                });
            }
            b"id" => (&mut call.id, plain_or_null(line, at)?),
            b"name" => (&mut call.name, plain_or_null(line, at)?),
            b"input" => {
                let end = members_at(line, at, &ARGUMENT_KEYS, &mut call.arguments)?;
                // `null` is no input, as the full parse reads it.
                call.input = line.text(at, end).filter(|t| *t != "null");
                return Some(end);
            }
            b"tool_use_id" | b"text" => return string_or_null(line, at),
            b"is_error" => return boolean(line, at).map(|(_, after)| after),
            _ => return skip_value(line, at),
        };
        *slot = after.0;
        Some(after.1)
    })?;
    // A block without a type is one the full parse refuses.
    if kind? == "tool_use" {
        calls.push(call);
    }
    Some(end)
}

/// The values (JSON text) of an object's members under `keys`, the last of a key
/// written twice; all `None` for JSON that is not an object; `None` when the walk
/// cannot read it.
pub fn members<'a, const N: usize>(
    json: &'a str,
    keys: &[&str; N],
) -> Option<[Option<&'a str>; N]> {
    let mut values = [None; N];
    let end = members_at(&Line::of_text(json), 0, keys, &mut values)?;
    (end == json.len()).then_some(values)
}

/// [`members`] of the value at `at` into `values`, and the index after it; the values
/// under other keys skipped unread.
fn members_at<'a, const N: usize>(
    line: &Line<'a>,
    at: usize,
    keys: &[&str; N],
    values: &mut [Option<&'a str>; N],
) -> Option<usize> {
    if line.get(at) != Some(&b'{') {
        return skip_value(line, at);
    }
    object(line, at, |key, at| {
        let Some(i) = keys.iter().position(|k| k.as_bytes() == key) else {
            return skip_unread(line, at);
        };
        let end = skip_value(line, at)?;
        values[i] = Some(line.text(at, end)?);
        Some(end)
    })
}
