//! Drawing: `draw(frame, &DrawCtx)` renders the whole dashboard from the snapshot and
//! the UI state. It reads no clock, file or global: `now` comes in the context, so
//! snapshot tests render fixed fixtures through ratatui's `TestBackend`.

pub mod anomalies;
pub mod ctx;
pub mod heartbeats;
pub mod log;
pub mod messages;
pub mod projects_bar;
pub mod reader;
pub mod segments;
pub mod session_cells;
pub mod status_bar;
pub mod summary;
pub mod tasks;
pub mod text;
pub mod watchdog;

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Flex, Layout, Rect};
use ratatui::widgets::{Paragraph, Wrap};

use crate::tui::app::Pane;
use crate::tui::layout::{MIN_HEIGHT, MIN_WIDTH, for_snapshot};
pub use ctx::{DrawCtx, Limits};

/// Where the panes go: the whole screen, or below the projects bar when several
/// projects are shown.
pub fn panes_area(screen: Rect, projects: usize) -> Rect {
    if projects > 1 {
        Rect {
            y: screen.y + 1,
            height: screen.height.saturating_sub(1),
            ..screen
        }
    } else {
        screen
    }
}

/// Draws the dashboard. It reads the state and writes none: what only the drawing
/// can measure (how far the open reader scrolls) is returned for the loop to keep.
pub fn draw(frame: &mut Frame, ctx: &DrawCtx) -> Option<reader::Extent> {
    let area = panes_area(frame.area(), ctx.projects.len());
    if ctx.projects.len() > 1 {
        projects_bar::draw(
            frame,
            Rect {
                height: 1,
                ..frame.area()
            },
            ctx,
        );
    }
    let Some(rects) = for_snapshot(area, ctx.snap, ctx.ui) else {
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
        return None;
    };
    if let Some(pane) = ctx.ui.zoomed {
        // One pane on the whole screen (the status bar stays).
        let whole = Rect {
            height: area.height.saturating_sub(1),
            ..area
        };
        match pane {
            Pane::Tasks => tasks::draw(frame, whole, ctx),
            Pane::Log => log::draw(frame, whole, ctx),
            Pane::Anomalies => anomalies::draw(frame, whole, ctx),
            Pane::Messages => messages::draw(frame, whole, ctx),
            Pane::Heartbeats => heartbeats::draw(frame, whole, ctx),
            Pane::Watchdog => watchdog::draw(frame, whole, ctx),
        }
    } else {
        for pane in Pane::ALL {
            let rect = rects.get(pane);
            if rect.height < crate::tui::layout::SUMMARY_BELOW {
                summary::draw(frame, rect, ctx, pane);
                continue;
            }
            match pane {
                Pane::Tasks => tasks::draw(frame, rect, ctx),
                Pane::Log => log::draw(frame, rect, ctx),
                Pane::Anomalies => anomalies::draw(frame, rect, ctx),
                Pane::Messages => messages::draw(frame, rect, ctx),
                Pane::Heartbeats => heartbeats::draw(frame, rect, ctx),
                Pane::Watchdog => watchdog::draw(frame, rect, ctx),
            }
        }
    }
    if status_bar::draw(frame, rects.status, ctx) && ctx.ui.overlay.is_none() {
        status_bar::draw_note_box(frame, area, ctx);
    }
    crate::tui::app::overlays::draw(frame, area, ctx)
}
