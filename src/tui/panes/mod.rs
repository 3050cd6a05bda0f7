//! Drawing: `draw(frame, &DrawCtx)` renders the whole dashboard from the snapshot and
//! the UI state. It reads no clock, file or global: `now` comes in the context, so
//! snapshot tests render fixed fixtures through ratatui's `TestBackend`.

pub mod anomalies;
pub mod heartbeats;
pub mod help;
pub mod log;
pub mod messages;
pub mod sentinels;
pub mod status_bar;
pub mod tasks;
pub mod watchdog;

use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Wrap};
use time::OffsetDateTime;

use crate::core::clock::Clock;
use crate::core::snapshot::Snapshot;
use crate::tui::app::{Pane, UiState};
use crate::tui::keymap::Keymap;
use crate::tui::layout::{MIN_HEIGHT, MIN_WIDTH, for_snapshot};
use crate::tui::theme::Theme;

/// Heartbeat deadlines, for colouring ages.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub task_stale: Duration,
    pub conductor_stale: Duration,
    pub souffleur_stale: Duration,
}

/// Everything a frame is drawn from.
pub struct DrawCtx<'a> {
    pub snap: &'a Snapshot,
    pub ui: &'a UiState,
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    pub project: &'a str,
    pub limits: Limits,
    /// The moment ages are measured against.
    pub now: OffsetDateTime,
    /// Formats stamps in the operator's time zone (never read for the time).
    pub clock: &'a Clock,
}

impl DrawCtx<'_> {
    fn block(&self, pane: Pane, title: &str) -> Block<'static> {
        let focused = self.ui.focus == pane;
        Block::bordered()
            .border_type(if focused {
                BorderType::Thick
            } else {
                BorderType::Plain
            })
            .border_style(self.theme.border(focused))
            .title(Span::styled(
                format!(" {title} "),
                self.theme.title(focused),
            ))
    }

    /// Seconds since a moment, never negative.
    fn age(&self, at: OffsetDateTime) -> Duration {
        (self.now - at).try_into().unwrap_or_default()
    }
}

pub fn draw(frame: &mut Frame, ctx: &DrawCtx) {
    let area = frame.area();
    let Some(rects) = for_snapshot(area, ctx.snap) else {
        let msg = format!(
            "Terminal too small: {}x{}.\nmaestro needs at least {MIN_WIDTH}x{MIN_HEIGHT}.\nEnlarge the window, or press q to quit.",
            area.width, area.height
        );
        let [middle] = Layout::vertical([Constraint::Length(3)])
            .flex(Flex::Center)
            .areas(area);
        frame.render_widget(
            Paragraph::new(msg)
                .alignment(Alignment::Center)
                .style(ctx.theme.warn)
                .wrap(Wrap { trim: true }),
            middle,
        );
        return;
    };
    tasks::draw(frame, rects.tasks, ctx);
    log::draw(frame, rects.log, ctx);
    anomalies::draw(frame, rects.anomalies, ctx);
    messages::draw(frame, rects.messages, ctx);
    heartbeats::draw(frame, rects.heartbeats, ctx);
    watchdog::draw(frame, rects.watchdog, ctx);
    status_bar::draw(frame, rects.status, ctx);
    match &ctx.ui.overlay {
        Some(crate::tui::app::Overlay::Help) => help::draw(frame, area, ctx),
        Some(crate::tui::app::Overlay::Message(_)) => messages::draw_detail(frame, area, ctx),
        Some(crate::tui::app::Overlay::Sentinels) => sentinels::draw(frame, area, ctx),
        Some(crate::tui::app::Overlay::Editor(name)) => {
            sentinels::draw_editor(frame, area, ctx, name);
        }
        Some(crate::tui::app::Overlay::Confirm(c)) => {
            let popup = centered(area, 64, 5);
            clear(frame, popup);
            let block = ctx.block(Pane::Watchdog, "Confirm");
            let text = vec![
                Line::raw(c.question()),
                Line::from(Span::styled(
                    "y / Enter: yes    n / Esc: no",
                    ctx.theme.accent,
                )),
            ];
            frame.render_widget(
                Paragraph::new(text).block(block).wrap(Wrap { trim: true }),
                popup,
            );
        }
        None => {}
    }
}

/// The first row to show so that `selected` is visible in `height` rows; lists build
/// only the rows on screen, whatever their length.
pub fn window_start(selected: usize, height: u16) -> usize {
    selected.saturating_sub(usize::from(height.max(1)) - 1)
}

/// A centred rectangle for overlays.
fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [cell] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(row);
    cell
}

fn clear(frame: &mut Frame, area: Rect) {
    frame.render_widget(Clear, area);
}

/// "12s", "4m05s", "2h03m".
pub fn short_age(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// Cuts text to `width` characters with an ellipsis.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Removes control characters (database and log text may hold escape codes).
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '·' } else { c })
        .collect()
}
