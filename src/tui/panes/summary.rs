//! A pane folded to one line, when the layout has no room for its borders: what it
//! holds said in a line (the newest anomaly, the last log line, each heartbeat's age
//! against its limit, the watchdog's mode and last event), so nothing with items ever
//! shows zero of them; each pane's component says its line. `z` zooms any pane to the
//! whole screen.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::app::Pane;
use crate::tui::panes::ctx::DrawCtx;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, pane: Pane) {
    let title_style = ctx
        .theme
        .title(ctx.ui.focus == pane)
        .add_modifier(Modifier::BOLD);
    let (title, body) = pane.component().summary(ctx);
    // Side by side (the heartbeats/watchdog strip), the right one starts with a bar.
    let lead = if area.x > 0 { "│ " } else { "" };
    let mut spans = vec![
        Span::styled(lead, ctx.theme.muted),
        Span::styled(format!("{title} "), title_style),
    ];
    spans.extend(body);
    frame.render_widget(
        Paragraph::new(crate::tui::panes::ctx::fit_line(
            Line::from(spans),
            usize::from(area.width),
        )),
        Rect { height: 1, ..area },
    );
}
