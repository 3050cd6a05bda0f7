//! The Log's selected line whole (Enter in the Log), folded to the box.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;

use crate::tui::app::overlays::{Extent, Component, Overlay};
use crate::tui::app::state::Pane;
use crate::tui::panes::ctx::{DrawCtx, printable};

pub struct LogLine;

impl Component for LogLine {
    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        if let Some(Overlay::LogLine(task, text)) = &ctx.ui.overlay {
            return Some(draw(frame, area, ctx, task, text));
        }
        None
    }
}

/// The selected line whole, folded to the box, over the panes (Enter in the Log).
fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, task: &str, text: &str) -> Extent {
    let width = area.width.saturating_sub(10).clamp(20, 100);
    crate::tui::panes::reader::draw(
        frame,
        area,
        ctx,
        (
            &format!("{} · the selected line · Esc close", printable(task)),
            Pane::Log,
        ),
        width,
        vec![Line::raw(printable(text))],
    )
}
