//! The headroom panel (`H` on a task): the report of `maestro headroom`, with the
//! time forecast and the transcript's own count beside it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::core::domain::TaskId;
use crate::tui::app::overlays::{Extent, Component, Overlay};
use crate::tui::app::state::{Pane, UiState};
use crate::tui::panes::ctx::{DrawCtx, printable};

pub struct Headroom;

impl Component for Headroom {
    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        if let Some(Overlay::Headroom(task, report)) = &ctx.ui.overlay {
            return Some(draw(frame, area, ctx, (task, report)));
        }
        None
    }
}

impl UiState {
    /// The headroom report arrived: show it.
    pub fn show_panel(&mut self, task: &TaskId, text: String) {
        self.overlay = Some(Overlay::Headroom(task.to_string(), text));
    }
}

fn draw(
    frame: &mut Frame,
    area: Rect,
    ctx: &DrawCtx,
    (task, text): (&str, &str),
) -> Extent {
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
    )
}
