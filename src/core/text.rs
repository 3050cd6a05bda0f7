//! Text from logs and the database is data, never terminal control: every presenter
//! (the dashboard, headless text, error messages that quote it, notifications) passes
//! it through [`printable`] before it reaches a terminal.

use std::borrow::Cow;

/// Characters that change how a terminal shows the text around them without being
/// seen: bidi embeddings, overrides and isolates (a `task-01` can be drawn as another
/// id), and zero-width characters. Text from outside never carries them to a screen.
pub fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}'
        | '\u{2028}' | '\u{2029}')
}

fn unsafe_on_a_terminal(c: char) -> bool {
    c.is_control() || is_invisible_format(c)
}

/// Replaces control characters (ESC, BEL, CR, newlines, C1 codes…), bidi controls and
/// zero-width characters with `·`, so an escape sequence in a Musician's log cannot
/// retitle, clear or write the clipboard of the operator's terminal, and no text is drawn
/// as other text. Borrows when there is nothing to replace. The one sanitizer of every
/// presenter: the dashboard, headless text, notifications, error messages.
pub fn printable(text: &str) -> Cow<'_, str> {
    if text.chars().any(unsafe_on_a_terminal) {
        Cow::Owned(
            text.chars()
                .map(|c| if unsafe_on_a_terminal(c) { '·' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// One line of text: a newline inside is spelled `\n` (so "one event per line" holds),
/// the rest as [`printable`].
pub fn one_line(s: &str) -> String {
    printable(&s.replace('\r', "").replace('\n', "\\n")).into_owned()
}

/// Cuts text to `width` terminal cells, ending in `…` where it was cut (wide
/// characters, CJK and emoji, count for two): the one cut of every presenter and of
/// details that quote another program.
pub fn fit(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthStr;
    if text.width() <= width {
        return text.to_owned();
    }
    let mut left = width.saturating_sub(1);
    let mut s = String::new();
    for ch in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        if w > left {
            break;
        }
        left -= w;
        s.push(ch);
    }
    if width > 0 {
        s.push('…');
    }
    s
}

/// A JSON value as one line whose strings carry no terminal control: `serde_json` already
/// escapes C0 controls; C1 controls, DEL, bidi and zero-width characters are escaped as
/// `\uXXXX` too. The same data for a JSON reader, nothing active for a terminal.
pub fn json_line(value: &serde_json::Value) -> String {
    json_line_of(value).unwrap_or_else(|| value.to_string())
}

/// [`json_line`] of anything serializable (a struct's fields in their order), or `None`
/// if it does not serialize.
pub fn json_line_of(value: &impl serde::Serialize) -> Option<String> {
    struct Quiet;
    impl serde_json::ser::Formatter for Quiet {
        fn write_string_fragment<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            fragment: &str,
        ) -> std::io::Result<()> {
            let mut start = 0;
            for (i, c) in fragment.char_indices() {
                if c.is_control() || is_invisible_format(c) {
                    writer.write_all(&fragment.as_bytes()[start..i])?;
                    write!(writer, "\\u{:04x}", c as u32)?;
                    start = i + c.len_utf8();
                }
            }
            writer.write_all(&fragment.as_bytes()[start..])
        }
    }
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Quiet);
    serde::Serialize::serialize(value, &mut ser).ok()?;
    String::from_utf8(out).ok()
}

/// A prompt as Claude Code carries it: a string, or content blocks whose `text` parts
/// make it up.
pub fn prompt_text(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(blocks) => {
            let parts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(serde_json::Value::as_str))
                .collect();
            (!parts.is_empty()).then(|| parts.join("\n"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_become_dots() {
        assert_eq!(printable("a\x1b]0;title\x07b"), "a·]0;title·b");
        assert_eq!(printable("\x1b[2J"), "·[2J");
        assert_eq!(printable("x\u{9b}y"), "x·y");
        assert!(matches!(printable("plain text"), Cow::Borrowed(_)));
    }

    #[test]
    fn bidi_controls_and_zero_width_characters_are_shown_not_obeyed() {
        for c in [
            '\u{202E}', '\u{2066}', '\u{200B}', '\u{FEFF}', '\u{200D}', '\u{061C}',
        ] {
            assert_eq!(
                printable(&format!("task-0{c}1")),
                "task-0·1",
                "{:x}",
                c as u32
            );
        }
        assert_eq!(printable("déjà vu — ok ✓"), "déjà vu — ok ✓");
        assert_eq!(one_line("a\nb\r"), "a\\nb");
    }

    #[test]
    fn json_lines_escape_what_a_terminal_would_obey_and_keep_the_data() {
        let v = serde_json::json!({"t": "a\u{1b}]0;x\u{7}\u{9b}\u{202E}b é"});
        let line = json_line(&v);
        assert!(line.is_ascii() || line.contains('é'), "{line}");
        assert!(
            !line
                .chars()
                .any(|c| c.is_control() || is_invisible_format(c)),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&line).unwrap(), v);
    }
}
