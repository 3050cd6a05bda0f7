//! A response's tool calls read from its content without parsing it: each call's id,
//! name and input (a tool's input can hold a whole file, for `Write`), and the few
//! members of an input that say what the tool works on. Where the walk is unsure (a
//! field twice, an escape where a value is read) the caller parses instead.

use super::BLOCK_FIELDS;
use super::json::{
    Line, Seen, array, boolean, json_or_null, object, plain_or_null, plain_string, skip_value,
    string_or_null,
};

/// One `tool_use` block of a response's content.
#[derive(Debug, PartialEq, Eq)]
pub struct Call<'a> {
    pub id: Option<&'a str>,
    pub name: Option<&'a str>,
    /// The input as JSON text, unparsed.
    pub input: Option<&'a str>,
}

/// The tool calls of a response's content (JSON text), in order; `None` sends the
/// content to the full parse.
pub fn tool_calls(content: &str) -> Option<Vec<Call<'_>>> {
    let line = &Line::of_text(content);
    let mut calls = Vec::new();
    let end = array(line, 0, |at| {
        let (call, after) = block(line, at)?;
        calls.extend(call);
        Some(after)
    })?;
    (end == content.len()).then_some(calls)
}

/// A content block, read as the full parse would read it (`activity::Block`): the
/// call when it is a `tool_use`.
fn block<'a>(line: &Line<'a>, at: usize) -> Option<(Option<Call<'a>>, usize)> {
    let mut kind = None;
    let mut call = Call {
        id: None,
        name: None,
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
            b"input" => (&mut call.input, json_or_null(line, at)?),
            b"tool_use_id" | b"text" => return string_or_null(line, at),
            b"is_error" => return boolean(line, at).map(|(_, after)| after),
            _ => return skip_value(line, at),
        };
        *slot = after.0;
        Some(after.1)
    })?;
    // A block without a type is one the full parse refuses.
    Some(((kind? == "tool_use").then_some(call), end))
}

/// The values (JSON text) of an object's members under `keys`, the last of a key
/// written twice; all `None` for JSON that is not an object; `None` when the walk
/// cannot read it.
pub fn members<'a, const N: usize>(
    json: &'a str,
    keys: &[&str; N],
) -> Option<[Option<&'a str>; N]> {
    let mut values = [None; N];
    if !json.starts_with('{') {
        return Some(values);
    }
    let line = &Line::of_text(json);
    let end = object(line, 0, |key, at| {
        let end = skip_value(line, at)?;
        if let Some(i) = keys.iter().position(|k| k.as_bytes() == key) {
            values[i] = Some(line.text(at, end)?);
        }
        Some(end)
    })?;
    (end == json.len()).then_some(values)
}
