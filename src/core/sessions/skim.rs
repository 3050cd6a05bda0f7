//! Tool results, most of a transcript's bytes, read without parsing them. A `user` line
//! that carries only tool results adds nothing to the bill: all the tally takes from it
//! is its timestamp, whether it is a subagent's, and which tool calls got their result.
//! Those are found by walking the line's structure at `memchr` speed (the text of a
//! tool's output, most of the bytes, is skipped from quote to quote), and only when
//! the line has exactly the shape Claude Code writes; anything else (an error result,
//! a prompt, a line of another shape, a key seen twice) is left to the full parse. A
//! property test (`tests`) checks both ways agree.

mod json;
mod response;

use json::{boolean, plain_string, skip_space, string};
pub use response::{Response, response};

/// What a tool-results line says.
#[derive(Debug, PartialEq, Eq)]
pub struct ToolResults<'a> {
    pub timestamp: Option<&'a str>,
    pub sidechain: bool,
    /// The tool calls answered, none of them an error.
    pub ids: Vec<&'a str>,
}

/// Where the walk is: which key of the line, of its message and of a content block
/// the bytes belong to.
#[derive(Default)]
struct Walk<'a> {
    depth: usize,
    in_message: bool,
    in_content: bool,
    kind: Option<&'a [u8]>,
    timestamp: Option<&'a str>,
    sidechain: Option<bool>,
    top_keys: Keys<'a, 24>,
    message_keys: Keys<'a, 2>,
    blocks: Vec<Block<'a>>,
}

#[derive(Default)]
struct Block<'a> {
    keys: Keys<'a, 8>,
    kind: Option<&'a [u8]>,
    id: Option<&'a str>,
}

/// The keys met in one object, to refuse a key seen twice, held where the walk is (no
/// allocation per line): more keys than `N` is a shape the full parse reads.
struct Keys<'a, const N: usize> {
    seen: [&'a [u8]; N],
    len: usize,
}

impl<const N: usize> Default for Keys<'_, N> {
    fn default() -> Self {
        Self {
            seen: [&[]; N],
            len: 0,
        }
    }
}

impl<'a, const N: usize> Keys<'a, N> {
    /// `None` for a key seen before, or one too many.
    fn insert(&mut self, key: &'a [u8]) -> Option<()> {
        if self.seen[..self.len].contains(&key) || self.len == N {
            return None;
        }
        self.seen[self.len] = key;
        self.len += 1;
        Some(())
    }
}

/// The line's tool results, when it is a `user` line whose message content is only
/// tool results, none an error; `None` sends it to the full parse. The line is walked
/// by its structure (strings skipped with `memchr`, braces counted), not parsed: it is
/// not checked to be valid JSON, which the follower's lines are (a half-written last
/// line waits for its newline).
pub fn tool_results(line: &[u8]) -> Option<ToolResults<'_>> {
    if line.first() != Some(&b'{') {
        return None;
    }
    let mut w = Walk::default();
    let mut at = 0;
    while let Some(found) = memchr::memchr3(b'"', b'{', b'}', &line[at..]) {
        let i = at + found;
        match line[i] {
            b'{' => {
                w.depth += 1;
                if w.depth == 3 && w.in_content {
                    w.blocks.push(Block::default());
                }
                at = i + 1;
            }
            b'}' => {
                w.depth = w.depth.checked_sub(1)?;
                at = i + 1;
                match w.depth {
                    // Nothing may follow the line's own object.
                    0 if at != line.len() => return None,
                    1 => {
                        w.in_message = false;
                        w.in_content = false;
                    }
                    // After a block: the next block, or the end of the content.
                    2 if w.in_content => {
                        let next = skip_space(line, at);
                        match line.get(next) {
                            Some(b']') => w.in_content = false,
                            Some(b',') => block_follows(line, next + 1)?,
                            _ => return None,
                        }
                    }
                    _ => {}
                }
            }
            _ => {
                let (text, after) = string(line, i)?;
                let value = skip_space(line, after);
                at = if line.get(value) == Some(&b':') {
                    w.key(line, text, skip_space(line, value + 1))?
                } else {
                    after
                };
            }
        }
    }
    w.finish()
}

impl<'a> Walk<'a> {
    /// A key at the walk's depth whose value starts at `value`; where to go on.
    fn key(&mut self, line: &'a [u8], key: &'a [u8], value: usize) -> Option<usize> {
        if key.contains(&b'\\') {
            return None;
        }
        match self.depth {
            1 => {
                self.top_keys.insert(key)?;
                match key {
                    b"type" => {
                        let (kind, after) = plain_string(line, value)?;
                        self.kind = Some(kind.as_bytes());
                        return Some(after);
                    }
                    b"timestamp" => {
                        let (ts, after) = plain_string(line, value)?;
                        self.timestamp = Some(ts);
                        return Some(after);
                    }
                    b"isSidechain" => {
                        let (side, after) = boolean(line, value)?;
                        self.sidechain = side;
                        return Some(after);
                    }
                    b"message" => self.in_message = line.get(value) == Some(&b'{'),
                    // The other fields the tally reads are strings (or null).
                    b"sessionId" | b"cwd" | b"requestId" | b"subtype"
                        if line.get(value) != Some(&b'"')
                            && !line[value..].starts_with(b"null") =>
                    {
                        return None;
                    }
                    _ => {}
                }
            }
            2 if self.in_message => {
                // A user message is its role and its content, nothing else.
                if !matches!(key, b"role" | b"content") {
                    return None;
                }
                self.message_keys.insert(key)?;
                self.in_content = key == b"content";
                if self.in_content {
                    // Every element of the content is a block (an object).
                    if line.get(value) != Some(&b'[') {
                        return None;
                    }
                    block_follows(line, value + 1)?;
                }
            }
            3 if self.in_content => {
                let block = self.blocks.last_mut()?;
                block.keys.insert(key)?;
                match key {
                    b"type" => {
                        let (kind, after) = plain_string(line, value)?;
                        block.kind = Some(kind.as_bytes());
                        return Some(after);
                    }
                    b"tool_use_id" => {
                        let (id, after) = plain_string(line, value)?;
                        block.id = Some(id);
                        return Some(after);
                    }
                    b"is_error" => {
                        let (error, after) = boolean(line, value)?;
                        return (error != Some(true)).then_some(after);
                    }
                    // Typed fields of a block (`sessions::activity`) the walk does not
                    // check: the full parse does.
                    b"id" | b"name" => return None,
                    _ => {}
                }
            }
            _ => {}
        }
        Some(value)
    }

    fn finish(self) -> Option<ToolResults<'a>> {
        if self.depth != 0 || self.kind != Some(b"user".as_slice()) || self.blocks.is_empty() {
            return None;
        }
        let ids = self
            .blocks
            .iter()
            .map(|b| (b.kind == Some(b"tool_result".as_slice())).then_some(b.id?))
            .collect::<Option<Vec<_>>>()?;
        Some(ToolResults {
            timestamp: self.timestamp,
            sidechain: self.sidechain.unwrap_or(false),
            ids,
        })
    }
}

/// `Some` when the next element, at `at` after spaces, is an object.
fn block_follows(line: &[u8], at: usize) -> Option<()> {
    (line.get(skip_space(line, at)) == Some(&b'{')).then_some(())
}

#[cfg(test)]
mod tests;
