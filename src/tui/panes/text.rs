//! The one rule for drawing text from outside, for every pane: wrapped at word
//! boundaries, a word longer than the row broken across rows (never dropped), widths in
//! terminal cells (CJK and emoji count two); where a design cuts (a cell, a row), the
//! cut ends in `…` (or `↓` where more follows below) and the whole text is one key away.

use ratatui::text::{Line, Span};

pub use crate::core::text::fit;

/// A line cut to `width` columns, ending in `…` where it was cut (never cut without a
/// mark).
pub fn fit_line(line: Line<'_>, width: usize) -> Line<'_> {
    if line.width() <= width {
        return line;
    }
    let mut left = width.saturating_sub(1);
    let mut spans = Vec::new();
    for span in line.spans {
        if left == 0 {
            break;
        }
        let mut kept = String::new();
        for ch in span.content.chars() {
            let w = Span::raw(ch.to_string()).width();
            if w > left {
                left = 0;
                break;
            }
            left -= w;
            kept.push(ch);
        }
        spans.push(Span::styled(kept, span.style));
    }
    spans.push(Span::raw("…"));
    Line::from(spans).style(line.style)
}

/// The selected row of a list, when cut: its line ending in `…`, then its text in full
/// below it, in at most `max_lines` lines all told; when even that is too few, the last
/// line shown ends in `↓` (Enter opens the whole text).
pub fn read_in_full<'a>(
    mut prefix: Vec<Span<'a>>,
    text: &str,
    width: usize,
    max_lines: usize,
) -> Vec<Line<'a>> {
    prefix.push(Span::raw(text.to_owned()));
    let mut lines = vec![fit_line(Line::from(prefix), width)];
    let parts = wrap(text, width.saturating_sub(4));
    let room = max_lines.saturating_sub(1);
    for (n, part) in parts.iter().enumerate().take(room) {
        let last_shown = n + 1 == room && parts.len() > room;
        if last_shown {
            let cut = fit(part, width.saturating_sub(6));
            lines.push(Line::from(format!("    {cut} ↓")));
        } else {
            lines.push(Line::from(format!("    {part}")));
        }
    }
    lines
}

/// One row of a list: whole when it fits; else its text folded under itself onto up to
/// `fold` more lines (the rows the pane has to spare), the rest cut with `…`.
pub fn fold_or_cut<'a>(
    prefix: Vec<Span<'a>>,
    text: &str,
    width: usize,
    fold: usize,
) -> Vec<Line<'a>> {
    fold_under(prefix, text, width, fold, None)
}

/// [`fold_or_cut`] with the folded rows at column `under` (`None`: under the text where
/// that leaves room to read, else at 4).
pub fn fold_under<'a>(
    prefix: Vec<Span<'a>>,
    text: &str,
    width: usize,
    fold: usize,
    under: Option<usize>,
) -> Vec<Line<'a>> {
    let indent: usize = prefix.iter().map(Span::width).sum();
    let whole = Line::from(
        prefix
            .iter()
            .cloned()
            .chain([Span::raw(text.to_owned())])
            .collect::<Vec<_>>(),
    );
    // A prefix as wide as the row leaves nothing to fold under it: one row, cut.
    if whole.width() <= width || fold == 0 || width < 12 || indent >= width {
        return vec![fit_line(whole, width)];
    }
    // A prefix that leaves the text no room beside it: the text starts on the row below.
    let beside = indent + 8 <= width;
    let parts = if beside {
        wrap(text, width - indent)
    } else {
        Vec::new()
    };
    let mut first = parts.first().cloned().unwrap_or_default();
    // A first word longer than the room beside the prefix goes whole to the next row.
    let source = text.trim_start();
    if source
        .strip_prefix(first.as_str())
        .is_some_and(|r| !r.is_empty() && !r.starts_with(char::is_whitespace))
    {
        first.clear();
    }
    // The rest is the source text after the first row, as written (a word broken
    // across the rows is not given a space).
    let rest = source.strip_prefix(first.as_str()).map_or_else(
        || parts.get(1..).unwrap_or_default().join(" "),
        |r| r.trim_start().to_owned(),
    );
    let head = Line::from(
        prefix
            .into_iter()
            .chain([Span::raw(first)])
            .collect::<Vec<_>>(),
    );
    // Under the text where that leaves room to read; else a short indent.
    let under = under.unwrap_or(if indent <= width / 2 { indent } else { 4 });
    let mut lines = vec![fit_line(head, width)];
    let tail = wrap(&rest, width - under);
    for (n, part) in tail.iter().enumerate().take(fold) {
        let last = n + 1 == fold && tail.len() > fold;
        let part = if last {
            // The rest of the text on this row, cut with its mark (`tail` may hold a
            // word broken across rows: its pieces are not joined with a space).
            let from_here: String = tail[n..].join(" ");
            let cut = fit(&from_here, width - under);
            if cut.ends_with('…') {
                cut
            } else {
                fit(&format!("{part}…"), width - under)
            }
        } else {
            part.clone()
        };
        lines.push(Line::from(format!("{:under$}{part}", "")));
    }
    lines
}

/// [`rows_in`] as lines, with a muted `↓ N more lines` line (and `where_whole`) when some were
/// left out: what does not fit is said, never dropped silently.
pub fn lines_within(
    rows: Vec<String>,
    (width, room): (usize, usize),
    where_whole: &str,
    muted: ratatui::style::Style,
) -> Vec<Line<'static>> {
    let (shown, hidden) = rows_in(rows, width, room);
    let mut lines: Vec<Line<'static>> = shown.into_iter().map(Line::from).collect();
    if hidden > 0 {
        lines.push(Line::from(Span::styled(
            format!("↓ {hidden} more lines{where_whole}"),
            muted,
        )));
    }
    lines
}

/// Folded rows that fit in `room`: when some do not, the last one shown ends in `…`
/// (cut to `width`) and how many rows were left out is returned, for a "↓ N more" line.
pub fn rows_in(rows: Vec<String>, width: usize, room: usize) -> (Vec<String>, usize) {
    if rows.len() <= room {
        return (rows, 0);
    }
    let kept = room.saturating_sub(1);
    let hidden = rows.len() - kept;
    let mut out: Vec<String> = rows.into_iter().take(kept).collect();
    if let Some(last) = out.last_mut() {
        *last = fit(&format!("{last}…"), width);
    }
    (out, hidden)
}

/// The one wrapping rule of every pane: words folded into lines of at most `width`
/// terminal cells at word boundaries; a word longer than a line breaks across lines,
/// never dropped or cut (`textwrap`, counting cells: CJK and emoji are two wide).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    // Words break only where they must (a path is not cut at its hyphens).
    let options = textwrap::Options::new(width.max(1))
        .break_words(true)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out: Vec<String> = textwrap::wrap(text, options)
        .into_iter()
        .map(std::borrow::Cow::into_owned)
        .collect();
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

/// The render oracle for the rule: what a helper draws from a text is that text, in
/// order, whole or visibly cut, and no row is wider than its width.
#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use unicode_width::UnicodeWidthStr;

    use super::*;

    /// The visible characters of a text, in order (the rule only moves whitespace).
    fn ink(text: &str) -> String {
        text.chars().filter(|c| !c.is_whitespace()).collect()
    }

    /// Checks a wrapping function against the rule: rows no wider than `width` (a
    /// single character wider than the row excepted), every character kept, in order.
    fn check_wrap(
        wrap: fn(&str, usize) -> Vec<String>,
        text: &str,
        width: usize,
    ) -> Result<(), String> {
        let rows = wrap(text, width);
        for row in &rows {
            if row.width() > width && row.chars().count() > 1 {
                return Err(format!("{row:?} is wider than {width}"));
            }
        }
        let drawn: String = rows.iter().map(|r| ink(r)).collect();
        if drawn == ink(text) {
            Ok(())
        } else {
            Err(format!("{text:?} drawn as {rows:?}"))
        }
    }

    /// Drawn rows read as one: the source's characters in order, whole, or ending in
    /// `…` / `↓` where the rest was cut; no row wider than `width`.
    fn check_piece(rows: &[String], source: &str, width: usize) -> Result<(), String> {
        for row in rows {
            if row.width() > width {
                return Err(format!("{row:?} is wider than {width}"));
            }
        }
        let drawn: String = rows.iter().map(|r| ink(r)).collect();
        let whole = ink(source);
        let body = drawn.trim_end_matches(['…', '↓']);
        if drawn == whole || (body.len() < drawn.len() && whole.starts_with(body)) {
            Ok(())
        } else {
            Err(format!("{source:?} drawn as {rows:?}"))
        }
    }

    fn plain(line: &Line<'_>) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    /// Words as they come from outside: paths, long words, CJK, emoji, combining marks.
    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z]{1,8}",
            "[a-z]{20,70}",
            "/[a-z]{2,8}(/[a-z0-9.-]{2,12}){1,6}",
            "[一-龥]{1,12}",
            "[😀-🙏]{1,6}",
            "([a-z]\u{301}){1,6}",
        ]
    }

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(word(), 1..14).prop_map(|w| w.join(" "))
    }

    proptest! {
        #[test]
        fn wrap_keeps_every_character_in_rows_that_fit(t in text(), width in 1usize..250) {
            prop_assert_eq!(check_wrap(wrap, &t, width), Ok(()));
        }

        #[test]
        fn fit_is_the_text_or_its_start_and_a_mark(t in text(), width in 1usize..250) {
            let f = fit(&t, width);
            prop_assert!(f.width() <= width, "{f:?}");
            prop_assert!(f == t || (f.ends_with('…') && t.starts_with(f.trim_end_matches('…'))), "{f:?}");
        }

        #[test]
        fn a_folded_or_cut_row_is_the_text_in_order(t in text(), width in 30usize..250, fold in 0usize..4) {
            let prefix = "#12   14:02:11 task-01 instruction conductor: ";
            let rows: Vec<String> = fold_or_cut(vec![Span::raw(prefix)], &t, width, fold).iter().map(plain).collect();
            prop_assert_eq!(check_piece(&rows, &format!("{prefix}{t}"), width), Ok(()));
        }

        #[test]
        fn a_selected_row_read_in_full_fits_its_rows(t in text(), width in 30usize..250, rows in 1usize..6) {
            let prefix = "● 14:02:11 task-01 self-correction ";
            let drawn: Vec<String> = read_in_full(vec![Span::raw(prefix)], &t, width, rows).iter().map(plain).collect();
            prop_assert!(drawn.len() <= rows.max(1), "{drawn:?}");
            // Its line (cut), then the text again from its start, below it.
            prop_assert_eq!(check_piece(&drawn[..1], &format!("{prefix}{t}"), width), Ok(()));
            if drawn.len() > 1 {
                prop_assert_eq!(check_piece(&drawn[1..], &t, width), Ok(()));
            }
        }
    }

    /// The wrap this rule replaced cut every word longer than the row: the oracle says so.
    #[test]
    fn the_oracle_fails_a_wrap_that_cuts_words() {
        fn cutting(text: &str, width: usize) -> Vec<String> {
            let mut out = Vec::new();
            let mut line = String::new();
            for word in text.split_whitespace() {
                let needed =
                    line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
                if needed > width && !line.is_empty() {
                    out.push(std::mem::take(&mut line));
                }
                if !line.is_empty() {
                    line.push(' ');
                }
                line.extend(word.chars().take(width));
            }
            out.push(line);
            out
        }
        let message = "Report at /srv/orch/temp/task-01-report-final-version.txt please";
        assert!(check_wrap(cutting, message, 20).is_err());
        assert_eq!(check_wrap(wrap, message, 20), Ok(()));
        // Wide characters: two cells each.
        assert!(check_wrap(cutting, "検査検査検査検査検査", 8).is_err());
        assert_eq!(check_wrap(wrap, "検査検査検査検査検査", 8), Ok(()));
    }
}
