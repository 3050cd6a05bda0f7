//! A message's full text (Enter in Messages): who wrote it, to which task, its type and
//! time, then the text whole, folded and scrolled like every reader.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::core::event::MessageRow;
use crate::tui::app::overlays::{Extent, Component, Overlay};
use crate::tui::app::state::{Pane, UiState};
use crate::tui::panes::ctx::{DrawCtx, printable};

pub struct MessageText;

impl Component for MessageText {
    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        draw(frame, area, ctx)
    }
}

impl UiState {
    /// The message shown in the overlay, if any.
    pub fn overlay_message(&self) -> Option<&MessageRow> {
        match &self.overlay {
            Some(Overlay::Message(id)) => self.panes.messages.rows.iter().find(|m| m.id == *id),
            _ => None,
        }
    }
}

/// The full text of the opened message.
fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
    let m = ctx.ui.overlay_message()?;
    let width = area.width.saturating_sub(10).min(100);
    let field = |k: &str, v: Option<&str>| {
        Line::from(vec![
            Span::styled(format!("{k:<6} "), ctx.theme.muted),
            Span::raw(printable(v.unwrap_or("—"))),
        ])
    };
    let mut lines = vec![
        field("task", m.task_id.as_deref()),
        field("from", m.from_session.as_deref()),
        field("type", m.message_type.as_deref()),
        field("time", m.timestamp.as_deref()),
        Line::raw(""),
    ];
    // Newlines are the message's own; other control characters are not shown raw.
    lines.extend(
        m.message
            .as_deref()
            .unwrap_or_default()
            .lines()
            .map(|l| Line::raw(printable(l))),
    );
    Some(crate::tui::panes::reader::draw(
        frame,
        area,
        ctx,
        (&format!("Message #{} · Esc to close", m.id), Pane::Messages),
        width,
        lines,
    ))
}
