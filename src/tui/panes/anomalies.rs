//! Anomalies: the Sentinel's reports, newest first, unread ones marked.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{List, ListItem, ListState, Paragraph};

use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
pub mod state;

use crate::tui::app::{Effect, Pane, UiState};
use crate::tui::panes::log::scrollback::LogView;
use state::AnomalyEntry;
use crate::tui::panes::{PaneComponent, moved};
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
    let count = crate::tui::panes::ctx::kept_of(ui.panes.anomalies.rows.len(), ui.panes.anomalies.seen);
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
    if ui.panes.anomalies.rows.is_empty() {
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
    let start = window_start(ui.panes.anomalies.selected, rows);
    let below = ui.panes.anomalies.rows.len().saturating_sub(start + usize::from(rows));
    let block = match more_marks(start, below) {
        Some(marks) => {
            block.title_bottom(Line::from(Span::styled(marks, ctx.theme.accent)).right_aligned())
        }
        None => block,
    };
    let focused = ui.focus == Pane::Anomalies;
    let width = usize::from(inner.width);
    let shown: Vec<(usize, &AnomalyEntry)> = ui
        .panes
        .anomalies
        .rows
        .iter()
        .enumerate()
        .skip(start)
        .take(usize::from(rows))
        .collect();
    // Lines the pane has beyond one a row: a row too long folds into one of them.
    // The selected row, read in full, takes the rows it needs up to what is left
    // below the rows before it (each one line): never more than the pane holds.
    let rows_n = usize::from(rows).max(1);
    let budget = (rows_n - (ui.panes.anomalies.selected - start).min(rows_n - 1)).min(5);
    // What it takes: its line, and its text wrapped below (when focused and cut).
    let selected_lines = ui
        .panes
        .anomalies
        .rows
        .get(ui.panes.anomalies.selected)
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
            if focused && i == ui.panes.anomalies.selected && cut {
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
    let mut state = ListState::default().with_selected(Some(ui.panes.anomalies.selected - start));
    frame.render_stateful_widget(list, area, &mut state);
}

/// The Anomalies pane: read marks; Enter takes the Log to the anomaly's line.
pub struct Anomalies;

impl PaneComponent for Anomalies {
    fn title(&self) -> &'static str {
        "Anomalies"
    }

    fn actions(&self) -> &'static [Action] {
        &[Action::MarkAllRead]
    }

    fn on_action(&self, ui: &mut UiState, action: Action, _snap: &Snapshot) -> Vec<Effect> {
        if action == Action::MarkAllRead {
            for a in &mut ui.panes.anomalies.rows {
                a.unread = false;
            }
        }
        vec![]
    }

    fn move_by(&self, ui: &mut UiState, _snap: &Snapshot, delta: i64) {
        ui.panes.anomalies.selected = moved(ui.panes.anomalies.selected, ui.panes.anomalies.rows.len(), delta);
    }

    fn open(&self, ui: &mut UiState, snap: &Snapshot) {
        open_line(ui, snap);
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
        draw(frame, area, ctx);
    }

    fn summary<'a>(&self, ctx: &DrawCtx<'a>) -> (&'static str, Vec<Span<'a>>) {
        ("Anomalies", folded(ctx))
    }
}

/// Enter on an anomaly: read, its task selected (a filter hiding it dropped), and the
/// Log on its line, or its file read back there when the scrollback no longer holds it.
fn open_line(ui: &mut UiState, snap: &Snapshot) {
    let Some(a) = ui.panes.anomalies.rows.get_mut(ui.panes.anomalies.selected) else {
        return;
    };
    a.unread = false;
    let (task, line, source) = (a.task.clone(), a.line, a.source.clone());
    // A filter that hides the anomaly's task is dropped: the table shows
    // the task the Log jumps to, selected.
    if ui.panes.tasks.filter.is_some()
        && snap.tasks.iter().any(|t| t.id() == task.as_str())
        && !ui
            .shown_tasks(snap)
            .iter()
            .any(|t| t.id() == task.as_str())
    {
        ui.panes.tasks.filter = None;
    }
    if let Some(i) = ui
        .shown_tasks(snap)
        .iter()
        .position(|t| t.id() == task.as_str())
    {
        ui.selected_task = i;
    }
    ui.show_task(Some(task));
    ui.panes.log.view = LogView::Merged;
    ui.focus = Pane::Log;
    match line {
        Some(line) if ui.current_log().is_some_and(|l| l.get(line).is_some()) => {
            ui.unfollow();
            ui.panes.log.pos.cursor = line;
            ui.panes.log.pos.top = line.saturating_sub(u64::from(ui.panes.log.height / 2));
            ui.keep_cursor_visible();
        }
        _ => {
            if !source.is_some_and(|s| ui.open_in_file(&s)) {
                ui.follow();
                ui.note = Some("that line is no longer in the scrollback".into());
            }
        }
    }
}

fn folded<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let ui = ctx.ui;
    let Some(newest) = ui.panes.anomalies.rows.front() else {
        return vec![Span::styled("none", ctx.theme.muted)];
    };
    let unread = ui.unread_anomalies();
    let count = crate::tui::panes::ctx::counted(ui.panes.anomalies.rows.len(), "anomaly", "anomalies");
    vec![
        Span::styled(
            if unread > 0 {
                format!("{count}, {unread} unread · ")
            } else {
                format!("{count} · ")
            },
            if unread > 0 {
                ctx.theme.error
            } else {
                ctx.theme.muted
            },
        ),
        Span::styled(
            format!("{} {}: ", newest.task, newest.kind.as_str()),
            ctx.theme.error,
        ),
        Span::raw(printable(&newest.detail)),
    ]
}
