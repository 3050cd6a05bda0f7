//! The project picker (several projects): every project with its figures; j/k or the
//! arrows move, Enter or a digit shows one, Esc or q closes.

use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::overlays::{Extent, Component, Overlay, close};
use crate::tui::app::state::{Effect, Pane, UiState};
use crate::tui::panes::ctx::{DrawCtx, centered, clear, fit, printable};
use crate::tui::panes::projects_bar::figures;

pub struct Picker;

impl Component for Picker {
    /// Its own keys come first ([`answer`]); what reaches here only closes or quits.
    fn on_action(&self, ui: &mut UiState, action: Action, snap: &Snapshot) -> Vec<Effect> {
        match action {
            Action::Quit => return ui.quit(snap),
            Action::Close | Action::Open => close(ui),
            _ => {}
        }
        vec![]
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        if let Some(Overlay::Projects(selected)) = &ctx.ui.overlay {
            draw(frame, area, ctx, *selected);
        }
        None
    }
}

/// A key while the picker is open, among `count` projects: it moves the highlight or
/// closes the picker, or picks the project to show (`Some`).
pub fn answer(ui: &mut UiState, code: KeyCode, count: usize) -> Option<usize> {
    let Some(Overlay::Projects(sel)) = &mut ui.overlay else {
        return None;
    };
    match code {
        KeyCode::Up | KeyCode::Char('k') => *sel = sel.saturating_sub(1),
        KeyCode::Down | KeyCode::Char('j') => *sel = (*sel + 1).min(count.saturating_sub(1)),
        KeyCode::Enter => {
            let n = *sel;
            close(ui);
            return Some(n);
        }
        KeyCode::Esc | KeyCode::Char('q') => close(ui),
        KeyCode::Char(c) => {
            let picked = c
                .to_digit(10)
                .map(|n| n as usize)
                .filter(|n| (1..=count).contains(n));
            if let Some(n) = picked {
                close(ui);
                return Some(n - 1);
            }
        }
        _ => {}
    }
    None
}

/// The project picker: every project with its figures, the highlighted one marked.
fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, selected: usize) {
    let height = (ctx.projects.len() as u16 + 2).min(area.height.saturating_sub(2));
    let popup = centered(area, area.width.saturating_sub(8).min(100), height);
    clear(frame, popup);
    let block = ctx.block(Pane::Tasks, "Projects · j/k move · Enter show · Esc close");
    let lines: Vec<Line> = ctx
        .projects
        .iter()
        .enumerate()
        .map(|(i, tab)| {
            let mut spans = vec![Span::styled(
                format!(" {} {:<24}", i + 1, fit(&printable(&tab.name), 24)),
                if i == selected {
                    ctx.theme.selection
                } else {
                    ctx.theme.title(false)
                },
            )];
            spans.extend(figures(ctx, tab, true, true));
            if i == ctx.project_index {
                spans.push(Span::styled("  (shown)", ctx.theme.muted));
            }
            Line::from(spans)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), popup);
}
