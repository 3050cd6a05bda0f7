//! Drawing: `draw(frame, &DrawCtx)` renders the whole dashboard from the snapshot and
//! the UI state. It reads no clock, file or global: `now` comes in the context, so
//! snapshot tests render fixed fixtures through ratatui's `TestBackend`.

pub mod anomalies;
pub mod compose;
pub mod ctx;
pub mod heartbeats;
pub mod help;
pub mod log;
pub mod messages;
pub mod projects_bar;
pub mod reader;
pub mod segments;
pub mod sentinels;
pub mod session_cells;
pub mod status_bar;
pub mod summary;
pub mod tasks;
pub mod text;
pub mod watchdog;

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use crate::tui::action::Action;
use crate::tui::app::Pane;
use crate::tui::keymap::Mode;
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
use ctx::{centered, clear};

pub fn draw(frame: &mut Frame, ctx: &DrawCtx) {
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
        return;
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
    draw_overlay(frame, area, ctx);
}

/// The overlay open over the panes, if any.
fn draw_overlay(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    match &ctx.ui.overlay {
        Some(crate::tui::app::Overlay::Help) => help::draw(frame, area, ctx),
        Some(crate::tui::app::Overlay::Message(_)) => messages::draw_detail(frame, area, ctx),
        Some(crate::tui::app::Overlay::Sentinels) => sentinels::draw(frame, area, ctx),
        Some(crate::tui::app::Overlay::Editor(name)) => {
            sentinels::draw_editor(frame, area, ctx, name);
        }
        Some(crate::tui::app::Overlay::Compose(c)) => compose::draw(frame, area, ctx, c),
        Some(crate::tui::app::Overlay::Headroom(task)) => {
            compose::draw_panel(frame, area, ctx, task);
        }
        Some(crate::tui::app::Overlay::Projects(selected)) => {
            projects_bar::draw_picker(frame, area, ctx, *selected);
        }
        Some(crate::tui::app::Overlay::Session(task)) => {
            session_cells::draw_overlay(frame, area, ctx, task);
        }
        Some(crate::tui::app::Overlay::Confirm(c)) => draw_confirm(frame, area, ctx, c),
        Some(crate::tui::app::Overlay::LogLine(task, text)) => {
            log::draw_line(frame, area, ctx, task, text);
        }
        None => {}
    }
}

/// A confirmation: the question whole, and the keys that answer it.
fn draw_confirm(frame: &mut Frame, area: Rect, ctx: &DrawCtx, c: &crate::tui::app::Confirm) {
    // Short questions keep the small dialog; a task action's (with the text typed for
    // it) takes the rows it needs, folded: the typed text reads whole.
    let question = crate::core::text::printable(c.question()).into_owned();
    let width = if question.chars().count() <= 2 * 62 {
        64
    } else {
        96
    }
    .min(area.width.saturating_sub(4))
    .max(20);
    let inner = usize::from(width - 2);
    let rows = text::wrap(&question, inner);
    let room = usize::from(area.height.saturating_sub(4)).max(1);
    let mut lines = text::lines_within(rows, (inner, room), "", ctx.theme.muted);
    lines.push(Line::from(Span::styled(
        format!(
            "{}: yes    {}: no",
            ctx.keymap.keys_in(Mode::Confirm, Action::Yes),
            ctx.keymap.keys_in(Mode::Confirm, Action::No)
        ),
        ctx.theme.accent,
    )));
    let height = u16::try_from(lines.len() + 2)
        .unwrap_or(u16::MAX)
        .min(area.height);
    let popup = centered(area, width, height);
    clear(frame, popup);
    let block = ctx.block(Pane::Watchdog, "Confirm");
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}
