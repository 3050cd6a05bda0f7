//! Anomalies: the Sentinel's reports, newest first, unread ones marked.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{List, ListItem, ListState, Paragraph};

use crate::tui::app::Pane;
use crate::tui::panes::ctx::{DrawCtx, printable, window_start};

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let ui = ctx.ui;
    let unread = ui.unread_anomalies();
    let title = if unread > 0 {
        format!("Anomalies ({} · {unread} unread)", ui.anomalies.len())
    } else {
        format!("Anomalies ({})", ui.anomalies.len())
    };
    let block = ctx.block(Pane::Anomalies, &title);
    if ui.anomalies.is_empty() {
        let inner = block.inner(area);
        frame.render_widget(block, area);
        frame.render_widget(
            Paragraph::new("No anomalies reported.").style(ctx.theme.muted),
            inner,
        );
        return;
    }
    let rows = block.inner(area).height;
    let start = window_start(ui.selected_anomaly, rows);
    let items: Vec<ListItem> = ui
        .anomalies
        .iter()
        .skip(start)
        .take(usize::from(rows))
        .map(|a| {
            let dot = if a.unread {
                Span::styled("● ", ctx.theme.warn)
            } else {
                Span::raw("  ")
            };
            ListItem::new(Line::from(vec![
                dot,
                Span::styled(format!("{} ", ctx.clock.hms(a.at)), ctx.theme.muted),
                Span::raw(format!("{} ", a.task)),
                Span::styled(format!("{:<15} ", a.kind.as_str()), ctx.theme.error),
                Span::raw(printable(&a.detail)),
            ]))
        })
        .collect();
    let focused = ui.focus == Pane::Anomalies;
    let list = List::new(items).block(block).highlight_style(if focused {
        ctx.theme.selection
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    });
    let mut state = ListState::default().with_selected(Some(ui.selected_anomaly - start));
    frame.render_stateful_widget(list, area, &mut state);
}
