//! The pieces of JSON the skims read, on bytes: an object's members in order, a string
//! skipped from quote to quote with `memchr`, any other value skipped by counting its
//! brackets. Strict where a value is read (a string without escapes, a whole number
//! that fits in `u64`): whatever else it meets sends the line to the full parse.

use std::cell::Cell;

use wide::u8x16;

/// The string whose opening quote is at `at`: its raw text and the index after it.
pub(super) fn string<'a>(line: &Line<'a>, at: usize) -> Option<(&'a [u8], usize)> {
    let close = closing_quote(line, at + 1, Check::Controls)?;
    Some((&line.bytes[at + 1..close], close + 1))
}

/// The index after the value at `at`; a string's text is not checked for control
/// characters (text that is only skipped, as a tool's output: a third less work).
pub(super) fn skip_unread(line: &Line<'_>, at: usize) -> Option<usize> {
    if line.get(at) == Some(&b'"') {
        return closing_quote(line, at + 1, Check::QuotesOnly).map(|close| close + 1);
    }
    skip_value(line, at)
}

/// What a string's skip checks besides where it ends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Check {
    /// That it holds no control character, as JSON wants.
    Controls,
    /// Only where it ends.
    QuotesOnly,
}

/// A line being walked, with the masks of the 64 bytes it read last: a key and the
/// short strings after it are found from one reading.
pub(super) struct Line<'a> {
    pub(super) bytes: &'a [u8],
    /// The same bytes, when they are known to be UTF-8 (a part of a line already read).
    text: Option<&'a str>,
    /// Where the block read last starts (`usize::MAX`: none yet), and its masks.
    last: Cell<(usize, Masks, Check)>,
}

impl<'a> Line<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            text: None,
            last: Cell::new((usize::MAX, Masks::default(), Check::QuotesOnly)),
        }
    }

    /// Text already known to be UTF-8: its parts are not checked again.
    pub(super) fn of_text(text: &'a str) -> Self {
        Self {
            text: Some(text),
            ..Self::new(text.as_bytes())
        }
    }

    /// The bytes from `at` to `end` as text, `None` when they are not UTF-8.
    pub(super) fn text(&self, at: usize, end: usize) -> Option<&'a str> {
        match self.text {
            Some(text) => text.get(at..end),
            None => std::str::from_utf8(self.bytes.get(at..end)?).ok(),
        }
    }

    /// The masks of the 64 bytes from `start` (fewer at the line's end); the control
    /// characters' only when `check` asks for them.
    fn masks_at(&self, start: usize, check: Check) -> Masks {
        let (last, masks, checked) = self.last.get();
        if last == start && (checked == Check::Controls || check == Check::QuotesOnly) {
            return masks;
        }
        let masks = Masks::of(&self.bytes[start..], check);
        self.last.set((start, masks, check));
        masks
    }
}

impl std::ops::Deref for Line<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.bytes
    }
}

/// The first quote from `from` on that no backslash escapes (a newline's `\n` does not
/// stop it); `None` past a control character, which JSON wants escaped. Read 64 bytes
/// at a time as bit masks (SIMD compares), the way simdjson tells an escaped quote
/// from one after an escaped backslash: code and its output escape a quote every few
/// words, and a search that stopped at each would stop every few words.
pub(super) fn closing_quote(line: &Line<'_>, from: usize, check: Check) -> Option<usize> {
    // Blocks start at multiples of 64 from the line's start, so that strings near
    // each other share one; the bytes before `from` are not the string's.
    let mut start = from & !63;
    let mut keep = u64::MAX << (from - start);
    // The block before ended in a backslash that escapes this block's first byte.
    let mut carry = 0;
    while start < line.len() {
        let masks = line.masks_at(start, check);
        let quotes = masks.quotes & !escaped(masks.backslashes & keep, &mut carry) & keep;
        // The string's bytes in this block: up to the closing quote, or all of them.
        let inside = (quotes & quotes.wrapping_neg()).wrapping_sub(1) & keep;
        if masks.controls & inside != 0 {
            return None;
        }
        if quotes != 0 {
            return Some(start + quotes.trailing_zeros() as usize);
        }
        start += 64;
        keep = u64::MAX;
    }
    None
}

/// Where a block of up to 64 bytes has a quote, a backslash and a control character,
/// as bits (bit i for byte i).
#[derive(Clone, Copy, Default)]
struct Masks {
    quotes: u64,
    backslashes: u64,
    controls: u64,
}

impl Masks {
    fn of(bytes: &[u8], check: Check) -> Self {
        let mut padded = [0; 64];
        let (block, present) = if let Some(block) = bytes.get(..64) {
            (block, u64::MAX)
        } else {
            padded[..bytes.len()].copy_from_slice(bytes);
            (&padded[..], (1 << bytes.len()) - 1)
        };
        let (quote, backslash) = (u8x16::splat(b'"'), u8x16::splat(b'\\'));
        let last_control = u8x16::splat(0x1f);
        let mut masks = Masks::default();
        for (i, chunk) in block.chunks_exact(16).enumerate() {
            let mut bytes = [0; 16];
            bytes.copy_from_slice(chunk);
            let bytes = u8x16::new(bytes);
            // `move_mask` gathers the 16 compares' high bits into the low 16 bits.
            let bits = |eq: u8x16| u64::from(eq.move_mask() as u16) << (16 * i);
            masks.quotes |= bits(bytes.cmp_eq(quote));
            masks.backslashes |= bits(bytes.cmp_eq(backslash));
            if check == Check::Controls {
                masks.controls |= bits(bytes.min(last_control).cmp_eq(bytes));
            }
        }
        // The padding's zeros are no control characters of the line's.
        masks.controls &= present;
        masks
    }
}

/// Of a block's bytes, those a backslash escapes: a run of backslashes escapes the
/// byte after it when the run is odd. `carry` comes in and goes out as the escape
/// that crosses into the next block.
fn escaped(backslashes: u64, carry: &mut u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    if backslashes == 0 && *carry == 0 {
        return 0;
    }
    let backslashes = backslashes & !*carry;
    let follows_escape = (backslashes << 1) | *carry;
    let odd_starts = backslashes & !EVEN & !follows_escape;
    let (even_starts, overflow) = odd_starts.overflowing_add(backslashes);
    *carry = u64::from(overflow);
    (EVEN ^ (even_starts << 1)) & follows_escape
}

/// A string value without escapes or control characters (ids, timestamps, types,
/// models never have one).
pub(super) fn plain_string<'a>(line: &Line<'a>, at: usize) -> Option<(&'a str, usize)> {
    if line.get(at) != Some(&b'"') {
        return None;
    }
    let (text, after) = string(line, at)?;
    if text.iter().any(|&b| b == b'\\' || b < 0x20) {
        return None;
    }
    // Checked here only when the line's text is not already known to be UTF-8.
    Some((line.text(at + 1, after - 1)?, after))
}

/// A plain string, or `null` (absent).
pub(super) fn plain_or_null<'a>(line: &Line<'a>, at: usize) -> Option<(Option<&'a str>, usize)> {
    if let Some(after) = null(line, at) {
        return Some((None, after));
    }
    plain_string(line, at).map(|(text, after)| (Some(text), after))
}

/// Any string, or `null`: the type a field must have for the full parse to read it.
pub(super) fn string_or_null(line: &Line<'_>, at: usize) -> Option<usize> {
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

/// Any value as JSON text (unparsed), or `null` (absent).
pub(super) fn json_or_null<'a>(line: &Line<'a>, at: usize) -> Option<(Option<&'a str>, usize)> {
    if let Some(after) = null(line, at) {
        return Some((None, after));
    }
    let end = skip_value(line, at)?;
    Some((Some(line.text(at, end)?), end))
}

/// The index after a `null` at `at`.
pub(super) fn null(line: &[u8], at: usize) -> Option<usize> {
    line.get(at..)?.starts_with(b"null").then_some(at + 4)
}

/// The members of the object whose `{` is at `open`, in order: `member` gets each key
/// and where its value starts, and answers where the value ends. The index after the
/// closing `}`; `None` for a key with an escape or anything but `,` or `}` after a value.
pub(super) fn object<'a>(
    line: &Line<'a>,
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

/// The index after the value that starts at `at`, its grammar checked all the way
/// down (as deep as serde reads, 128 levels); the text of its strings is not read.
pub(super) fn skip_value(line: &Line<'_>, at: usize) -> Option<usize> {
    skip_nested(line, at, 0)
}

fn skip_nested(line: &Line<'_>, at: usize, depth: usize) -> Option<usize> {
    const DEEPEST: usize = 128;
    match *line.get(at)? {
        b'"' => string(line, at).map(|(_, after)| after),
        b'{' if depth < DEEPEST => object(line, at, |_, value| skip_nested(line, value, depth + 1)),
        b'[' if depth < DEEPEST => array(line, at, |value| skip_nested(line, value, depth + 1)),
        b't' | b'f' | b'n' => [b"true".as_slice(), b"false", b"null"]
            .into_iter()
            .find(|word| line[at..].starts_with(word))
            .map(|word| at + word.len()),
        _ => number(line, at),
    }
}

/// The elements of the array whose `[` is at `open`: `element` gets where each
/// starts and answers where it ends. The index after the closing `]`.
pub(super) fn array(
    line: &Line<'_>,
    open: usize,
    mut element: impl FnMut(usize) -> Option<usize>,
) -> Option<usize> {
    if line.get(open) != Some(&b'[') {
        return None;
    }
    let mut at = skip_space(line, open + 1);
    if line.get(at) == Some(&b']') {
        return Some(at + 1);
    }
    loop {
        at = skip_space(line, element(at)?);
        match line.get(at) {
            Some(b',') => at = skip_space(line, at + 1),
            Some(b']') => return Some(at + 1),
            _ => return None,
        }
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

/// The fields of one object already met: the full parse refuses a field twice.
#[derive(Default)]
pub(super) struct Seen(u32);

impl Seen {
    /// `None` when `key` is one of `fields` (at most 32) and was met before.
    pub(super) fn once(&mut self, key: &[u8], fields: &[&[u8]]) -> Option<()> {
        let Some(i) = position(key, fields) else {
            return Some(());
        };
        let bit = 1 << i;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }

    /// Whether `key`, one of `fields`, was met.
    pub(super) fn has(&self, key: &[u8], fields: &[&[u8]]) -> bool {
        position(key, fields).is_some_and(|i| self.0 & (1 << i) != 0)
    }
}

/// Where `key` is in `fields`: the first bytes and lengths told apart before the
/// rest is compared (the fields differ there; this runs for every key of a line).
fn position(key: &[u8], fields: &[&[u8]]) -> Option<usize> {
    fields
        .iter()
        .position(|f| f.len() == key.len() && f.first() == key.first() && *f == key)
}

/// JSON's four spaces (a form feed is not one).
pub(super) fn skip_space(line: &[u8], mut at: usize) -> usize {
    while matches!(line.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// One byte at a time: the reading the block masks must agree with.
    fn closing_quote_slowly(line: &[u8], from: usize) -> Option<usize> {
        closing_quote_reading(line, from, true)
    }

    fn closing_quote_reading(line: &[u8], from: usize, controls: bool) -> Option<usize> {
        let mut escape = false;
        for (i, &b) in line.get(from..)?.iter().enumerate() {
            match b {
                0..0x20 if controls => return None,
                _ if escape => escape = false,
                b'\\' => escape = true,
                b'"' => return Some(from + i),
                _ => {}
            }
        }
        None
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Runs of backslashes and quotes across the blocks' edges, from any start.
        #[test]
        fn the_closing_quote_is_found_as_reading_byte_by_byte(
            bytes in prop::collection::vec(
                prop_oneof![8 => Just(b'\\'), 4 => Just(b'"'), 6 => Just(b'a'), 1 => Just(0u8), 1 => Just(0x1f), 1 => Just(0x20)],
                0..400,
            ),
            from in 0usize..400,
        ) {
            let from = from.min(bytes.len());
            prop_assert_eq!(super::closing_quote(&super::Line::new(&bytes), from, super::Check::Controls), closing_quote_slowly(&bytes, from));
            let line = super::Line::new(&bytes);
            prop_assert_eq!(super::closing_quote(&line, from, super::Check::QuotesOnly), closing_quote_reading(&bytes, from, false));
            // A block read without its control characters is read again when asked.
            prop_assert_eq!(super::closing_quote(&line, from, super::Check::Controls), closing_quote_slowly(&bytes, from));
        }

        /// Quotes are rare: the first one found is the one after the escapes.
        #[test]
        fn a_long_string_ends_at_its_first_unescaped_quote(
            runs in prop::collection::vec((0usize..6, 0usize..90), 1..12),
        ) {
            let mut bytes = Vec::new();
            for (backslashes, letters) in runs {
                bytes.extend(std::iter::repeat_n(b'\\', backslashes));
                bytes.push(b'"');
                bytes.extend(std::iter::repeat_n(b'x', letters));
            }
            prop_assert_eq!(super::closing_quote(&super::Line::new(&bytes), 0, super::Check::Controls), closing_quote_slowly(&bytes, 0));
        }
    }
}
