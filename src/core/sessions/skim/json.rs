//! The pieces of JSON the skims read, on bytes: an object's members in order, a string
//! skipped from quote to quote with `memchr`, any other value skipped by counting its
//! brackets. Strict where a value is read (a string without escapes, a whole number
//! that fits in `u64`): whatever else it meets sends the line to the full parse.

/// The string whose opening quote is at `at`: its raw text and the index after it.
/// Only quotes stop the search (a newline's `\n` does not): a quote ends the string
/// unless an odd run of backslashes escapes it.
pub(super) fn string(line: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let mut i = at + 1;
    loop {
        let quote = i + memchr::memchr(b'"', line.get(i..)?)?;
        let escapes = line[at + 1..quote]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if escapes % 2 == 0 {
            return Some((&line[at + 1..quote], quote + 1));
        }
        i = quote + 1;
    }
}

/// A string value without escapes or control characters (ids, timestamps, types,
/// models never have one).
pub(super) fn plain_string(line: &[u8], at: usize) -> Option<(&str, usize)> {
    if line.get(at) != Some(&b'"') {
        return None;
    }
    let (text, after) = string(line, at)?;
    if text.iter().any(|&b| b == b'\\' || b < 0x20) {
        return None;
    }
    Some((std::str::from_utf8(text).ok()?, after))
}

/// A plain string, or `null` (absent).
pub(super) fn plain_or_null(line: &[u8], at: usize) -> Option<(Option<&str>, usize)> {
    if let Some(after) = null(line, at) {
        return Some((None, after));
    }
    plain_string(line, at).map(|(text, after)| (Some(text), after))
}

/// Any string, or `null`: the type a field must have for the full parse to read it.
pub(super) fn string_or_null(line: &[u8], at: usize) -> Option<usize> {
    match line.get(at) {
        Some(b'"') => string(line, at).map(|(_, after)| after),
        _ => null(line, at),
    }
}

/// `true`, `false` or `null` (absent).
pub(super) fn boolean(line: &[u8], at: usize) -> Option<(Option<bool>, usize)> {
    let rest = line.get(at..)?;
    [
        (b"true".as_slice(), Some(true)),
        (b"false", Some(false)),
        (b"null", None),
    ]
    .into_iter()
    .find(|(word, _)| rest.starts_with(word))
    .map(|(word, value)| (value, at + word.len()))
}

/// A count of tokens: `null` (absent) or a whole number without sign, fraction,
/// exponent or leading zero that fits in `u64`, as serde reads an `Option<u64>`.
pub(super) fn count(line: &[u8], at: usize) -> Option<(Option<u64>, usize)> {
    if let Some(after) = null(line, at) {
        return Some((None, after));
    }
    let digits = line
        .get(at..)?
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let end = at + digits;
    let leading_zero = digits > 1 && line[at] == b'0';
    if digits == 0 || leading_zero || matches!(line.get(end), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    let value = line[at..end].iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    Some((Some(value), end))
}

fn null(line: &[u8], at: usize) -> Option<usize> {
    line.get(at..)?.starts_with(b"null").then_some(at + 4)
}

/// The members of the object whose `{` is at `open`, in order: `member` gets each key
/// and where its value starts, and answers where the value ends. The index after the
/// closing `}`; `None` for a key with an escape or anything but `,` or `}` after a value.
pub(super) fn object<'a>(
    line: &'a [u8],
    open: usize,
    mut member: impl FnMut(&'a [u8], usize) -> Option<usize>,
) -> Option<usize> {
    if line.get(open) != Some(&b'{') {
        return None;
    }
    let mut at = skip_space(line, open + 1);
    if line.get(at) == Some(&b'}') {
        return Some(at + 1);
    }
    loop {
        if line.get(at) != Some(&b'"') {
            return None;
        }
        let (key, after) = string(line, at)?;
        let colon = skip_space(line, after);
        if key.contains(&b'\\') || line.get(colon) != Some(&b':') {
            return None;
        }
        let end = member(key, skip_space(line, colon + 1))?;
        at = skip_space(line, end);
        match line.get(at) {
            Some(b',') => at = skip_space(line, at + 1),
            Some(b'}') => return Some(at + 1),
            _ => return None,
        }
    }
}

/// The index after the value that starts at `at`: a string, an object or an array
/// (its brackets counted, its strings skipped: what is inside is not checked), a
/// literal or a number.
pub(super) fn skip_value(line: &[u8], at: usize) -> Option<usize> {
    match *line.get(at)? {
        b'"' => string(line, at).map(|(_, after)| after),
        b'{' => skip_nested(line, at, b'{', b'}'),
        b'[' => skip_nested(line, at, b'[', b']'),
        b't' | b'f' | b'n' => [b"true".as_slice(), b"false", b"null"]
            .into_iter()
            .find(|word| line[at..].starts_with(word))
            .map(|word| at + word.len()),
        _ => number(line, at),
    }
}

/// The index after the number at `at`, in JSON's grammar: `-`, no leading zero, a
/// fraction and an exponent with digits.
fn number(line: &[u8], at: usize) -> Option<usize> {
    let digits = |from: usize| {
        line.get(from..).map_or(0, |rest| {
            rest.iter().take_while(|b| b.is_ascii_digit()).count()
        })
    };
    let mut i = at + usize::from(line.get(at) == Some(&b'-'));
    let whole = digits(i);
    if whole == 0 || (whole > 1 && line[i] == b'0') {
        return None;
    }
    i += whole;
    if line.get(i) == Some(&b'.') {
        let fraction = digits(i + 1);
        if fraction == 0 {
            return None;
        }
        i += 1 + fraction;
    }
    if matches!(line.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(line.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exponent = digits(i);
        if exponent == 0 {
            return None;
        }
        i += exponent;
    }
    Some(i)
}

/// An object or array whose opening bracket is at `at`: the index after its match.
fn skip_nested(line: &[u8], at: usize, open: u8, close: u8) -> Option<usize> {
    let mut depth = 0usize;
    let mut at = at;
    while let Some(found) = memchr::memchr3(b'"', open, close, &line[at..]) {
        let i = at + found;
        if line[i] == b'"' {
            at = string(line, i)?.1;
            continue;
        }
        at = i + 1;
        if line[i] == open {
            depth += 1;
        } else {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(at);
            }
        }
    }
    None
}

/// JSON's four spaces (a form feed is not one).
pub(super) fn skip_space(line: &[u8], mut at: usize) -> usize {
    while matches!(line.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}
