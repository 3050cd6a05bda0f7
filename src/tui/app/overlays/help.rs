//! The `?` overlay, generated from the effective keymap: every key the dashboard
//! answers, grouped by where it applies.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::overlays::{Extent, Component, close, read};
use crate::tui::app::state::{Effect, Pane, UiState};
use crate::tui::keymap::Mode;
use crate::tui::panes::ctx::{DrawCtx, centered, wrap};

pub struct Help;

impl Component for Help {
    /// `?` again closes it; the rest as in every reading overlay.
    fn on_action(&self, ui: &mut UiState, action: Action, snap: &Snapshot) -> Vec<Effect> {
        if action == Action::Help {
            close(ui);
            return vec![];
        }
        read(ui, action, snap)
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        Some(draw(frame, area, ctx))
    }
}

fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Extent {
    // As wide as the screen allows (up to 110), every line folded to fit, a little
    // screen left round it.
    let width = area.width.saturating_sub(4).clamp(40, 110);
    let room = Rect {
        height: area.height.saturating_sub(4).max(3),
        ..centered(area, area.width, area.height.saturating_sub(4).max(3))
    };
    let text_width = usize::from(width.saturating_sub(2)).max(20);
    let help = ctx.keymap.help();
    let key_width = help
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|(keys, _)| keys.chars().count()))
        .max()
        .unwrap_or(8)
        .min(text_width / 3)
        + 2;
    let mut lines: Vec<Line> = Vec::new();
    for part in wrap(
        "Panes: 1 Tasks · 2 Log · 3 Anomalies · 4 Messages · 5 Heartbeats · 6 Watchdog",
        text_width,
    ) {
        lines.push(Line::from(Span::styled(part, ctx.theme.accent)));
    }
    for part in wrap(
        "Mouse: wheel scrolls the pane under it, a click focuses it.",
        text_width,
    ) {
        lines.push(Line::from(Span::styled(part, ctx.theme.muted)));
    }
    for part in wrap(
        "Marks: in CTX, 68%≠51 is the transcript's context (68%) beside the Musician's own report (51%) when they differ by more than 10 points; ▶ the selected row, ⚑ a task that needs you, ❄ a window this dashboard froze, ● unread.",
        text_width,
    ) {
        lines.push(Line::from(Span::styled(part, ctx.theme.muted)));
    }
    for (mode, rows) in help {
        lines.push(Line::raw(""));
        let heading = match mode {
            Mode::Global => "Everywhere".to_owned(),
            other => format!("In {}", title_of(other)),
        };
        lines.push(Line::from(Span::styled(heading, ctx.theme.title(true))));
        for (keys, action) in rows {
            let described = wrap(
                action.describe(),
                text_width.saturating_sub(key_width + 2).max(10),
            );
            for (i, part) in described.into_iter().enumerate() {
                let key = if i == 0 { keys.as_str() } else { "" };
                lines.push(Line::from(vec![
                    Span::styled(format!("  {key:<key_width$}"), ctx.theme.accent),
                    Span::raw(part),
                ]));
            }
        }
    }
    // The scroll stops at the last line: never past the end into an empty box.
    crate::tui::panes::reader::draw(
        frame,
        room,
        ctx,
        ("Help · ? or Esc to close · j/k, PgDn scroll", Pane::Tasks),
        width,
        lines,
    )
}

fn title_of(mode: Mode) -> &'static str {
    match mode {
        Mode::Pane(pane) => pane.component().title(),
        Mode::Global => "all panes",
        Mode::Confirm => "a confirmation",
        Mode::Pipelines => "the pipelines overlay (S)",
        Mode::Editor => "the step editor (any other key edits)",
        Mode::Replay => "a replay (`maestro replay`)",
    }
}
