//! The task action overlays: the message editor (reject, propose a fix, instruct) and
//! the headroom panel.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::tui::action::Action;
use crate::tui::app::Pane;
use crate::tui::app::state::Compose;
use crate::tui::keymap::Mode;
use crate::tui::panes::ctx::{DrawCtx, centered, clear, printable};

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, c: &Compose) {
    let popup = centered(
        area,
        area.width.saturating_sub(10).min(100),
        14.min(area.height),
    );
    clear(frame, popup);
    let block = ctx.block(
        Pane::Log,
        &format!(
            "{} · {} · {} send · {} discard",
            c.kind.title(),
            c.task,
            ctx.keymap.keys_in(Mode::Editor, Action::SaveEdit),
            ctx.keymap.keys_in(Mode::Editor, Action::Close)
        ),
    );
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    if let Some(editor) = &ctx.ui.compose {
        frame.render_widget(editor, inner);
    }
}

pub fn draw_panel(frame: &mut Frame, area: Rect, ctx: &DrawCtx, task: &str) {
    let text = ctx.ui.panel.as_deref().unwrap_or_default();
    // The time forecast needs arrival times: the running core has them.
    let view = ctx.snap.tasks.iter().find(|t| t.id() == task);
    let forecast = view.and_then(|t| t.forecast.as_ref()).map(|f| {
        let when = |at: Option<time::OffsetDateTime>| {
            at.map_or_else(|| "—".to_owned(), |at| ctx.clock.hms(at))
        };
        format!(
            "Forecast:    65% at {}, 75% at {} (~{:.1}% per minute lately)",
            when(f.handoff_at),
            when(f.exit_at),
            f.rate_per_min
        )
    });
    // The transcript's own count, beside the Musician's estimate.
    let transcript = view.and_then(|t| {
        let s = t.session()?;
        Some(format!(
            "Transcript:  {:.1}% of a {}-token window ({} tokens in use){}",
            s.context_percent,
            s.context_window,
            s.context_tokens,
            t.context()
                .map_or_else(String::new, |c| format!("; the Musician reports {c}%"))
        ))
    });
    let lines: Vec<Line> = text
        .lines()
        .map(|l| {
            if l.starts_with("===") {
                Line::from(Span::styled(printable(l), ctx.theme.accent))
            } else {
                Line::raw(printable(l))
            }
        })
        .collect();
    let mut lines = lines;
    if let Some(f) = forecast {
        lines.push(Line::from(Span::styled(f, ctx.theme.warn)));
    }
    if let Some(t) = transcript {
        lines.push(Line::from(Span::styled(t, ctx.theme.accent)));
    }
    crate::tui::panes::reader::draw(
        frame,
        area,
        ctx,
        (
            &format!("Headroom · {} · Esc close", printable(task)),
            Pane::Tasks,
        ),
        80,
        lines,
    );
}
