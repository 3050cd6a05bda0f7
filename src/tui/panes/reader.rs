//! A box of text read in place (help, a session, a task's headroom, a message, a log
//! line): folded to its width at word boundaries, as tall as it needs up to the screen,
//! and scrolled with the keys every list uses (j/k, PgUp/PgDn, ctrl-u/ctrl-d,
//! Home/End), its title saying "↓ more" while rows wait below. Nothing is cut: what does
//! not fit is a key away.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::app::Pane;
use crate::tui::panes::ctx::{DrawCtx, centered, clear};

/// How far a reader can scroll, as drawn: the loop keeps it for the next keys (the
/// draw itself writes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// The furthest it can scroll.
    pub max: u16,
    /// Its rows (a page for PgUp/PgDn).
    pub page: u16,
}

/// Draws `lines` in a box `width` wide (at most the screen's), centred, titled `title`;
/// says how far it can scroll.
pub fn draw(
    frame: &mut Frame,
    area: Rect,
    ctx: &DrawCtx,
    (title, pane): (&str, Pane),
    width: u16,
    lines: Vec<Line<'_>>,
) -> Extent {
    let width = width.min(area.width).max(12);
    let inner = usize::from(width - 2);
    let folded: Vec<Line> = lines.into_iter().flat_map(|l| fold(l, inner)).collect();
    let height = u16::try_from(folded.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height);
    let popup = centered(area, width, height);
    clear(frame, popup);
    let rows = popup.height.saturating_sub(2);
    let max = u16::try_from(folded.len())
        .unwrap_or(u16::MAX)
        .saturating_sub(rows);
    let scroll = ctx.ui.overlay_scroll.min(max);
    let more = if scroll < max {
        " · ↓ more"
    } else if scroll > 0 {
        " · ↑ above"
    } else {
        ""
    };
    let block = ctx.block_within(pane, &format!("{title}{more}"), popup.width);
    frame.render_widget(
        Paragraph::new(folded).block(block).scroll((scroll, 0)),
        popup,
    );
    Extent {
        max,
        page: rows.max(1),
    }
}

/// One styled line as rows of at most `width` columns, broken between words; a word
/// longer than a row is broken at the row's edge (marked `…`), its rest on the next. Rows after the
/// first are indented under the text of a line that starts with a label column (a first
/// span ending in spaces), so a value reads as one block.
pub fn fold(line: Line<'_>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    if line.width() <= width {
        return vec![owned(line)];
    }
    let indent = match line.spans.first() {
        Some(first) if line.spans.len() > 1 && first.content.ends_with(' ') => {
            first.width().min(width / 2)
        }
        _ => 0,
    };
    let mut rows: Vec<Vec<Span<'static>>> = vec![Vec::new()];
    let mut used = 0;
    let mut row_has_word = false;
    let new_row = |rows: &mut Vec<Vec<Span<'static>>>| {
        rows.push(vec![Span::raw(" ".repeat(indent))]);
    };
    let mut line = line;
    if indent > 0 {
        // The label column as it is, padding and all; the value's words after it.
        let label = line.spans.remove(0);
        used = label.width();
        push(
            &mut rows,
            label.content.into_owned(),
            line.style.patch(label.style),
        );
    }
    for (word, style) in words(&line) {
        if row_has_word {
            if used + 1 + Span::raw(word.as_str()).width() <= width {
                push(&mut rows, " ".into(), style);
                used += 1;
            } else {
                new_row(&mut rows);
                used = indent;
            }
        }
        let mut rest = word.as_str();
        while used + Span::raw(rest).width() > width {
            // As much of the word as the row holds, marked `…` where it breaks (the box
            // may end on that row); the rest goes on below.
            let mut cut = String::new();
            let mut taken = 0;
            for ch in rest.chars() {
                let w = Span::raw(ch.to_string()).width();
                if used + taken + w + 1 > width {
                    break;
                }
                taken += w;
                cut.push(ch);
            }
            if cut.is_empty() && used == indent {
                // Not even one character fits beside the indent: take one anyway.
                cut = rest.chars().take(1).collect();
            }
            rest = &rest[cut.len()..];
            push(&mut rows, format!("{cut}…"), style);
            new_row(&mut rows);
            used = indent;
        }
        used += Span::raw(rest).width();
        push(&mut rows, rest.to_owned(), style);
        row_has_word = true;
    }
    rows.into_iter().map(Line::from).collect()
}

/// The words of a line, each with its span's style (the spaces between are dropped:
/// the fold puts one back between words on a row).
fn words(line: &Line<'_>) -> Vec<(String, Style)> {
    let mut out: Vec<(String, Style)> = Vec::new();
    let mut glued = false;
    for span in &line.spans {
        let style = line.style.patch(span.style);
        let text = span.content.as_ref();
        for (i, word) in text.split(' ').enumerate() {
            // A span that continues a word of the one before (no space between).
            if i == 0
                && glued
                && !word.is_empty()
                && let Some(last) = out.last_mut()
            {
                last.0.push_str(word);
                continue;
            }
            if !word.is_empty() {
                out.push((word.to_owned(), style));
            }
        }
        glued = !text.ends_with(' ') && !text.is_empty();
    }
    out
}

fn push(rows: &mut [Vec<Span<'static>>], text: String, style: Style) {
    if let Some(row) = rows.last_mut() {
        row.push(Span::styled(text, style));
    }
}

fn owned(line: Line<'_>) -> Line<'static> {
    Line::from(
        line.spans
            .into_iter()
            .map(|s| Span::styled(s.content.into_owned(), s.style))
            .collect::<Vec<_>>(),
    )
    .style(line.style)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(rows: &[Line<'_>]) -> Vec<String> {
        rows.iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn a_line_folds_between_words_under_its_label() {
        let line = Line::from(vec![
            Span::raw("state       "),
            Span::raw("keeps the heartbeat fresh and exits"),
        ]);
        let rows = fold(line, 30);
        assert_eq!(
            text(&rows),
            [
                "state       keeps the",
                "            heartbeat fresh",
                "            and exits"
            ]
        );
        assert!(rows.iter().all(|r| r.width() <= 30));
    }

    #[test]
    fn a_word_longer_than_a_row_is_broken_at_the_edge_and_goes_on_below() {
        let rows = fold(Line::raw("see /a/very/long/path/to/the/file_txt now"), 12);
        let joined: String = text(&rows).concat().replace('…', "");
        assert!(
            joined.contains("/a/very/long/path/to/the/file_txt"),
            "{rows:?}"
        );
        assert!(rows.iter().all(|r| r.width() <= 12), "{rows:?}");
    }
}
