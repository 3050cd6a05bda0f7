//! The `?` overlay, generated from the effective keymap: every key the dashboard
//! answers, grouped by where it applies.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::app::Pane;
use crate::tui::keymap::Mode;
use crate::tui::panes::ctx::{DrawCtx, centered, clear};

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let popup = centered(area, 78, area.height.saturating_sub(4));
    clear(frame, popup);
    let mut lines = vec![
        Line::from(Span::styled(
            "Panes: 1 Tasks · 2 Log · 3 Anomalies · 4 Messages · 5 Heartbeats · 6 Watchdog",
            ctx.theme.accent,
        )),
        Line::from(Span::styled(
            "Mouse: wheel scrolls the pane under it, a click focuses it.",
            ctx.theme.muted,
        )),
    ];
    for (mode, rows) in ctx.keymap.help() {
        lines.push(Line::raw(""));
        let heading = match mode {
            Mode::Global => "Everywhere".to_owned(),
            other => format!("In {}", title_of(other)),
        };
        lines.push(Line::from(Span::styled(heading, ctx.theme.title(true))));
        for (keys, action) in rows {
            lines.push(Line::from(vec![
                Span::styled(format!("  {keys:<24}"), ctx.theme.accent),
                Span::raw(action.describe()),
            ]));
        }
    }
    let block = ctx.block(Pane::Tasks, "Help · ? or Esc to close · j/k scroll");
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((ctx.ui.help_scroll, 0)),
        popup,
    );
}

fn title_of(mode: Mode) -> &'static str {
    match mode {
        Mode::Tasks => "Tasks",
        Mode::Log => "Log",
        Mode::Anomalies => "Anomalies",
        Mode::Messages => "Messages",
        Mode::Global => "all panes",
        Mode::Confirm => "a confirmation",
        Mode::Pipelines => "the pipelines overlay (S)",
        Mode::Editor => "the step editor (any other key edits)",
        Mode::Replay => "a replay (`maestro replay`)",
    }
}
