//! Watchdog: what the observe-only watchdog sees of the Conductor now.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{DrawCtx, short_age};
use crate::tui::app::Pane;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let block = ctx.block(Pane::Watchdog, "Watchdog");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let w = &ctx.snap.watchdog;
    let label = |k: &str| Span::styled(format!("{k:<10}"), ctx.theme.muted);
    let state = w.conductor_state.clone().unwrap_or_else(|| "—".into());
    let beat = match w.conductor_heartbeat {
        Some(hb) => {
            let age = ctx.age(hb);
            let limit = ctx.limits.conductor_stale;
            Span::styled(
                format!("{} of {}", short_age(age), short_age(limit)),
                ctx.theme
                    .age(age.as_secs_f64() / limit.as_secs_f64().max(1.0)),
            )
        }
        None => Span::styled("—", ctx.theme.muted),
    };
    let last = match &w.last_reason {
        Some((at, reason)) => Span::styled(
            format!("{reason} at {}", ctx.clock.hms(*at)),
            ctx.theme.warn,
        ),
        None => Span::styled("none", ctx.theme.muted),
    };
    let lines = vec![
        Line::from(vec![label("mode"), Span::raw("observe-only")]),
        Line::from(vec![
            label("conductor"),
            Span::styled(state.clone(), ctx.theme.state(&state)),
        ]),
        Line::from(vec![label("heartbeat"), beat]),
        Line::from(vec![label("last"), last]),
        Line::from(vec![label("tasks"), Span::raw(w.task_count.to_string())]),
    ];
    frame.render_widget(Paragraph::new(lines), inner);
}
