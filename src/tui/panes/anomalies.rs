//! Anomalies: the Sentinel's reports, newest first, unread ones marked.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{List, ListItem, ListState, Paragraph};

use crate::tui::app::{AnomalyEntry, Pane};
use crate::tui::panes::ctx::{
    DrawCtx, fold_or_cut, more_marks, printable, read_in_full, window_start, wrap,
};

/// Columns one anomaly's line needs whole: the mark, the time, the task, the kind (padded
/// to 15) and the detail. The layout gives the pane this width when it can.
pub fn row_width(a: &AnomalyEntry) -> usize {
    2 + 9
        + a.task.as_str().chars().count()
        + 1
        + a.kind.as_str().len().max(15)
        + 1
        + printable(&a.detail).chars().count()
}

/// `Anomalies (N)`, with the unread among them.
fn title(ui: &crate::tui::app::UiState) -> String {
    let unread = ui.unread_anomalies();
    let count = crate::tui::panes::ctx::kept_of(ui.anomalies.len(), ui.anomalies_seen);
    if unread > 0 {
        format!("Anomalies ({count} · {unread} unread)")
    } else {
        format!("Anomalies ({count})")
    }
}

/// A row's start: the unread mark, the time, the task and the kind.
fn row_prefix<'a>(a: &AnomalyEntry, ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let dot = if a.unread {
        Span::styled("● ", ctx.theme.warn)
    } else {
        Span::raw("  ")
    };
    vec![
        dot,
        Span::styled(format!("{} ", ctx.clock.hms(a.at)), ctx.theme.muted),
        Span::raw(format!("{} ", a.task)),
        Span::styled(format!("{:<15} ", a.kind.as_str()), ctx.theme.error),
    ]
}

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let ui = ctx.ui;
    let block = ctx.block_within(Pane::Anomalies, &title(ui), area.width);
    if ui.anomalies.is_empty() {
        let inner = block.inner(area);
        frame.render_widget(block, area);
        frame.render_widget(
            Paragraph::new("No anomalies reported.").style(ctx.theme.muted),
            inner,
        );
        return;
    }
    let inner = block.inner(area);
    let rows = inner.height;
    let start = window_start(ui.selected_anomaly, rows);
    let below = ui.anomalies.len().saturating_sub(start + usize::from(rows));
    let block = match more_marks(start, below) {
        Some(marks) => {
            block.title_bottom(Line::from(Span::styled(marks, ctx.theme.accent)).right_aligned())
        }
        None => block,
    };
    let focused = ui.focus == Pane::Anomalies;
    let width = usize::from(inner.width);
    let shown: Vec<(usize, &AnomalyEntry)> = ui
        .anomalies
        .iter()
        .enumerate()
        .skip(start)
        .take(usize::from(rows))
        .collect();
    // Lines the pane has beyond one a row: a row too long folds into one of them.
    // The selected row, read in full, takes the rows it needs up to what is left
    // below the rows before it (each one line): never more than the pane holds.
    let rows_n = usize::from(rows).max(1);
    let budget = (rows_n - (ui.selected_anomaly - start).min(rows_n - 1)).min(5);
    // What it takes: its line, and its text wrapped below (when focused and cut).
    let selected_lines = ui
        .anomalies
        .get(ui.selected_anomaly)
        .filter(|x| focused && row_width(x) > width)
        .map_or(1, |x| {
            (1 + wrap(&printable(&x.detail), width.saturating_sub(4)).len()).min(budget)
        });
    let mut spare = usize::from(rows)
        .saturating_sub(shown.len())
        .saturating_sub(selected_lines - 1);
    let items: Vec<ListItem> = shown
        .into_iter()
        .map(|(i, a)| {
            let prefix = row_prefix(a, ctx);
            let detail = printable(&a.detail);
            let cut = row_width(a) > width;
            // The selected one, when cut, is read in full below its line.
            if focused && i == ui.selected_anomaly && cut {
                ListItem::new(read_in_full(prefix, &detail, width, budget))
            } else {
                // Each cut row folds onto up to three spare lines, first come first served.
                let fold = if cut { spare.min(3) } else { 0 };
                let lines = fold_or_cut(prefix, &detail, width, fold);
                spare -= lines.len() - 1;
                ListItem::new(lines)
            }
        })
        .collect();
    let list = List::new(items).block(block).highlight_style(if focused {
        ctx.theme.selection
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    });
    let mut state = ListState::default().with_selected(Some(ui.selected_anomaly - start));
    frame.render_stateful_widget(list, area, &mut state);
}
