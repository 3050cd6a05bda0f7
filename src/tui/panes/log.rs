//! Log: the selected task's status and deviation lines, following the end or parked on
//! a cursor. Only the visible rows are built, whatever the scrollback holds.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::core::domain::LogKind;
use crate::tui::app::{LogEntry, Pane};
use crate::tui::panes::ctx::{DrawCtx, printable};
use crate::tui::theme::Theme;

/// The pane's title: its task and view, following or paused (and what arrived since),
/// the search, and where the cursor is when the file is read back.
fn title(ui: &crate::tui::app::UiState) -> String {
    let task = ui
        .log_task
        .as_ref()
        .map_or_else(|| "no task selected".to_owned(), ToString::to_string);
    let mut title = format!("Log: {task} · {}", ui.log_view.label());
    if ui.log_pos.follow {
        title.push_str(" · following");
    } else if ui.log_pos.new_lines > 0 {
        title.push_str(&format!(
            " · ▼ {} new lines (G to follow)",
            ui.log_pos.new_lines
        ));
    } else {
        title.push_str(" · paused (G to follow)");
    }
    if let Some(s) = &ui.search {
        title.push_str(&format!(" · /{s}"));
    }
    // Rows before what is held come from the file: said, with where the cursor is.
    if let Some(rows) = ui.current_rows().filter(|r| r.start() < r.held.start())
        && !ui.log_pos.follow
        && ui.log_pos.cursor < rows.held.start()
    {
        title.push_str(&format!(
            " · line {} of {}, read back from the file",
            ui.log_pos.cursor - rows.start() + 1,
            rows.end() - rows.start()
        ));
    }
    if let Some(done) = ui.older.indexing() {
        title.push_str(&format!(" · reading the file: {done}%"));
    }
    // The merged view holds what arrived; the files hold the rest, one log at a time.
    if let Some(rows) = ui.current_rows().filter(|r| r.start() > 0)
        && ui.older.reads_back()
        && ui.single_kind().is_none()
        && !ui.log_pos.follow
        && ui.log_pos.cursor == rows.start()
    {
        title.push_str(" · older lines: v for a log read back from its file");
    }
    title
}

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let ui = ctx.ui;
    let title = title(ui);
    let block = ctx.block_within(Pane::Log, &title, area.width);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(log) = ui.current_rows().filter(|l| !l.is_empty()) else {
        frame.render_widget(
            Paragraph::new("No lines yet.").style(ctx.theme.muted),
            inner,
        );
        return;
    };
    let height = u64::from(inner.height);
    let (top, cursor) = if ui.log_pos.follow {
        (log.end().saturating_sub(height).max(log.start()), None)
    } else {
        let cursor = ui.log_pos.cursor.clamp(log.start(), log.end() - 1);
        // The stored top, pulled back if the cursor left the window.
        let top = ui
            .log_pos
            .top
            .clamp(cursor.saturating_sub(height - 1), cursor)
            .max(log.start());
        (top, Some(cursor))
    };
    let marked = ui
        .log_pos
        .mark
        .zip(cursor)
        .map(|(m, c)| (m.min(c), m.max(c)));
    let lines: Vec<Line> = (top..log.end().min(top + height))
        .filter_map(|abs| log.get(abs).map(|e| (abs, e)))
        .map(|(abs, e)| {
            // A line wider than the pane ends in `…`, never cut without a mark.
            let mut l = crate::tui::panes::ctx::fit_line(
                render_line(e, ui.search.as_deref(), ctx.theme),
                usize::from(inner.width),
            );
            if Some(abs) == cursor {
                l = l.patch_style(ctx.theme.selection);
            } else if marked.is_some_and(|(a, b)| (a..=b).contains(&abs)) {
                l = l.patch_style(Style::new().add_modifier(Modifier::REVERSED));
            }
            l
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

/// One log line with its markers: kind, anomaly gutter, and highlights for
/// `self-correction`, `High:`, `[ctx: …]` and the search.
pub fn render_line<'a>(e: &LogEntry, search: Option<&str>, theme: &Theme) -> Line<'a> {
    let text = printable(&e.text);
    let gutter = if e.anomaly {
        Span::styled("! ", theme.error)
    } else {
        Span::raw("  ")
    };
    let kind = match e.kind {
        LogKind::Status => Span::styled("S ", theme.muted),
        LogKind::Deviations => Span::styled("D ", theme.muted),
    };
    let mut spans = vec![gutter, kind];
    spans.extend(highlight(&text, search, theme));
    Line::from(spans)
}

/// Splits text into styled spans. Search matches win over the fixed highlights.
fn highlight<'a>(text: &str, search: Option<&str>, theme: &Theme) -> Vec<Span<'a>> {
    use crate::core::domain::words::{CONTEXT_STAMP, Mark, WORDS};
    let mut marks: Vec<(usize, usize, Style)> = Vec::new();
    // The Sentinel's marks, from its table: an anomaly's word in red, a context stamp
    // (up to its `]`) in the accent.
    for w in &WORDS {
        match w.mark {
            Mark::Anywhere(word) => {
                if let Some(at) = text.find(word) {
                    marks.push((at, at + word.len(), theme.error));
                }
            }
            Mark::LineStart(word) if text.starts_with(word) => {
                marks.push((0, word.len(), theme.error));
            }
            Mark::ContextStamp => {
                if let Some(at) = text.find(CONTEXT_STAMP)
                    && let Some(end) = text[at..].find(']')
                {
                    marks.push((at, at + end + 1, theme.accent));
                }
            }
            Mark::LineStart(_) | Mark::Silence => {}
        }
    }
    if let Some(term) = search.filter(|s| !s.is_empty()) {
        marks.retain(|_| true);
        let mut from = 0;
        while let Some(at) = text[from..].find(term) {
            let start = from + at;
            marks.push((start, start + term.len(), theme.highlight));
            from = start + term.len();
        }
    }
    // Later marks (search) take precedence: paint into a per-byte style map of runs.
    let mut cuts: Vec<usize> = vec![0, text.len()];
    for (a, b, _) in &marks {
        cuts.push(*a);
        cuts.push(*b);
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut spans = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a >= b || !text.is_char_boundary(a) || !text.is_char_boundary(b) {
            continue;
        }
        let style = marks
            .iter()
            .rev()
            .find(|(s, e, _)| *s <= a && b <= *e)
            .map_or(theme.text, |(_, _, st)| *st);
        spans.push(Span::styled(text[a..b].to_owned(), style));
    }
    spans
}
