//! Text from logs and the database is data, never terminal control: every presenter
//! (the dashboard, headless text, error messages that quote it, notifications) passes
//! it through [`printable`] before it reaches a terminal.

use std::borrow::Cow;

/// Replaces control characters (ESC, BEL, CR, newlines, C1 codes…) with `·`, so an
/// escape sequence in a Musician's log cannot retitle, clear or write the clipboard of
/// the operator's terminal. Borrows when there is nothing to replace.
pub fn printable(text: &str) -> Cow<'_, str> {
    if text.chars().any(char::is_control) {
        Cow::Owned(
            text.chars()
                .map(|c| if c.is_control() { '·' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
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
}
