//! Log: the selected task's status and deviation lines, following the end or parked on
//! a cursor. Only the visible rows are built, whatever the scrollback holds.

pub mod older;
pub mod scrollback;
pub mod state;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::core::domain::LogKind;
use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::{Effect, Overlay, Pane, UiState};
use scrollback::{LogEntry, LogView};
use crate::tui::panes::PaneComponent;
use crate::tui::panes::ctx::{DrawCtx, printable};
use crate::tui::theme::Theme;

/// The pane's title: its task and view, following or paused (and what arrived since),
/// the search, and where the cursor is when the file is read back.
fn title(ui: &crate::tui::app::UiState) -> String {
    let task = ui
        .panes
        .log
        .task
        .as_ref()
        .map_or_else(|| "no task selected".to_owned(), ToString::to_string);
    let mut title = format!("Log: {task} · {}", ui.panes.log.view.label());
    if ui.panes.log.pos.follow {
        title.push_str(" · following");
    } else if ui.panes.log.pos.new_lines > 0 {
        title.push_str(&format!(
            " · ▼ {} new lines (G to follow)",
            ui.panes.log.pos.new_lines
        ));
    } else {
        title.push_str(" · paused (G to follow)");
    }
    if let Some(s) = &ui.panes.log.search {
        title.push_str(&format!(" · /{s}"));
    }
    // Rows before what is held come from the file: said, with where the cursor is.
    if let Some(rows) = ui.current_rows().filter(|r| r.start() < r.held.start())
        && !ui.panes.log.pos.follow
        && ui.panes.log.pos.cursor < rows.held.start()
    {
        title.push_str(&format!(
            " · line {} of {}, read back from the file",
            ui.panes.log.pos.cursor - rows.start() + 1,
            rows.end() - rows.start()
        ));
    }
    if let Some(done) = ui.panes.log.older.indexing() {
        title.push_str(&format!(" · reading the file: {done}%"));
    }
    // The merged view holds what arrived; the files hold the rest, one log at a time.
    if let Some(rows) = ui.current_rows().filter(|r| r.start() > 0)
        && ui.panes.log.older.reads_back()
        && ui.single_kind().is_none()
        && !ui.panes.log.pos.follow
        && ui.panes.log.pos.cursor == rows.start()
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
    let (top, cursor) = if ui.panes.log.pos.follow {
        (log.end().saturating_sub(height).max(log.start()), None)
    } else {
        let cursor = ui.panes.log.pos.cursor.clamp(log.start(), log.end() - 1);
        // The stored top, pulled back if the cursor left the window.
        let top = ui
            .panes
            .log
            .pos
            .top
            .clamp(cursor.saturating_sub(height - 1), cursor)
            .max(log.start());
        (top, Some(cursor))
    };
    let marked = ui
        .panes
        .log
        .pos
        .mark
        .zip(cursor)
        .map(|(m, c)| (m.min(c), m.max(c)));
    let lines: Vec<Line> = (top..log.end().min(top + height))
        .filter_map(|abs| log.get(abs).map(|e| (abs, e)))
        .map(|(abs, e)| {
            // A line wider than the pane ends in `…`, never cut without a mark.
            let mut l = crate::tui::panes::ctx::fit_line(
                render_line(e, ui.panes.log.search.as_deref(), ctx.theme),
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

/// The Log pane: search steps, anomaly jumps, following, its views, marks and copy.
pub struct Log;

impl PaneComponent for Log {
    fn title(&self) -> &'static str {
        "Log"
    }

    fn actions(&self) -> &'static [Action] {
        &[
            Action::SearchNext,
            Action::SearchPrev,
            Action::PrevAnomaly,
            Action::NextAnomaly,
            Action::ToggleFollow,
            Action::CycleLogView,
            Action::Mark,
            Action::Copy,
        ]
    }

    fn on_action(&self, ui: &mut UiState, action: Action, _snap: &Snapshot) -> Vec<Effect> {
        match action {
            Action::SearchNext => ui.search_step(true),
            Action::SearchPrev => ui.search_step(false),
            Action::PrevAnomaly => ui.anomaly_step(false),
            Action::NextAnomaly => ui.anomaly_step(true),
            Action::ToggleFollow => {
                if ui.panes.log.pos.follow {
                    ui.unfollow();
                } else {
                    ui.follow();
                }
            }
            Action::CycleLogView => {
                ui.panes.log.view = match ui.panes.log.view {
                    LogView::Merged => LogView::Status,
                    LogView::Status => LogView::Deviations,
                    LogView::Deviations => LogView::Merged,
                };
                ui.follow();
            }
            Action::Mark => {
                if ui.panes.log.pos.follow {
                    ui.unfollow();
                }
                ui.panes.log.pos.mark = Some(ui.panes.log.pos.cursor);
            }
            Action::Copy => return ui.copy(),
            _ => {}
        }
        vec![]
    }

    fn move_by(&self, ui: &mut UiState, _snap: &Snapshot, delta: i64) {
        move_in_log(ui, delta);
    }

    /// The end follows the log again.
    fn to_end(&self, ui: &mut UiState, _snap: &Snapshot) {
        ui.follow();
    }

    /// The selected line whole, however long: the pane shows it on one row.
    fn open(&self, ui: &mut UiState, _snap: &Snapshot) {
    // Following, the line read is the newest.
    let line = ui.current_rows().and_then(|r| {
        let at = if ui.panes.log.pos.follow {
            r.end().saturating_sub(1)
        } else {
            ui.panes.log.pos.cursor
        };
        r.get(at).map(|e| e.text.clone())
    });
    if let (Some(text), Some(task)) = (line, &ui.panes.log.task) {
        ui.overlay = Some(Overlay::LogLine(task.to_string(), text));
    }
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
        draw(frame, area, ctx);
    }

    fn summary<'a>(&self, ctx: &DrawCtx<'a>) -> (&'static str, Vec<Span<'a>>) {
        ("Log", folded(ctx))
    }
}

/// A move in the Log: the cursor, reading the file's older lines first when it goes
/// above what is held; past the last line it follows again.
fn move_in_log(ui: &mut UiState, delta: i64) {
    // Moving up past what is held reads the file's lines there first.
    if delta < 0
        && let Some(held_start) = ui.current_rows().map(|r| r.held.start())
    {
        let at = if ui.panes.log.pos.follow {
            ui.current_rows().map_or(0, |r| r.end())
        } else {
            ui.panes.log.pos.cursor
        };
        let target =
            u64::try_from((at as i64).saturating_add(delta).max(0)).unwrap_or(0);
        if target < held_start {
            ui.load_rows(target, target + u64::from(ui.panes.log.height.max(1)));
        }
    }
    let Some((start, end)) = ui.current_rows().map(|l| (l.start(), l.end())) else {
        return;
    };
    if end == start {
        return;
    }
    if ui.panes.log.pos.follow {
        if delta > 0 {
            return;
        }
        ui.unfollow();
    }
    let cur = ui.panes.log.pos.cursor as i64 + delta;
    let last = end as i64 - 1;
    if cur > last && delta > 0 {
        ui.follow();
        return;
    }
    ui.panes.log.pos.cursor = cur.clamp(start as i64, last) as u64;
    ui.keep_cursor_visible();
}

fn folded<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let task = ctx
        .ui
        .panes
        .log
        .task
        .as_ref()
        .map_or_else(|| "—".to_owned(), ToString::to_string);
    let last = ctx
        .ui
        .current_log()
        .filter(|l| !l.is_empty())
        .and_then(|l| l.get(l.end() - 1))
        .map(|e| printable(&e.text));
    vec![
        Span::styled(format!("{task}: "), ctx.theme.muted),
        match last {
            Some(text) => Span::raw(text),
            None => Span::styled("no lines yet", ctx.theme.muted),
        },
    ]
}
