//! A confirmation: a destructive or outward action waits for an explicit yes or no,
//! its question shown whole (with the text typed for it).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::core::actions::TaskRequest;
use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::overlays::kinds::{Confirm, Overlay};
use crate::tui::app::overlays::{Extent, Component, Keys};
use crate::tui::app::state::{Effect, Pane, UiState};
use crate::tui::keymap::Mode;
use crate::tui::panes::ctx::{DrawCtx, centered, clear};
use crate::tui::panes::text;

pub struct Confirmation;

impl Component for Confirmation {
    fn keys(&self) -> Keys {
        Keys::Own(Mode::Confirm)
    }

    /// Only an explicit answer leaves a confirmation.
    fn on_action(&self, ui: &mut UiState, action: Action, _: &Snapshot) -> Vec<Effect> {
        let Some(Overlay::Confirm(c)) = ui.overlay.clone() else {
            return vec![];
        };
        match action {
            Action::No | Action::Close => ui.confirm(c, false),
            Action::Yes | Action::Open => ui.confirm(c, true),
            _ => vec![],
        }
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        if let Some(Overlay::Confirm(c)) = &ctx.ui.overlay {
            draw(frame, area, ctx, c);
        }
        None
    }
}

impl UiState {
    /// The answer to a confirmation: `y`/Enter (true) or `n`/Esc (false).
    pub fn confirm(&mut self, what: Confirm, yes: bool) -> Vec<Effect> {
        self.overlay = None;
        if !yes {
            self.note = Some("cancelled".into());
            self.restore_draft("not sent; your message is back in the editor");
            return vec![];
        }
        match what {
            Confirm::Recover => {
                self.note = Some("recovery requested".into());
                vec![Effect::Watchdog(
                    crate::core::watchdog::control::WatchdogCmd::Recover(
                        crate::core::domain::souffleur::RecoveryKind::Relaunch,
                    ),
                )]
            }
            Confirm::QuitRole => vec![Effect::Quit],
            Confirm::Task { request, .. } => {
                self.actions_in_flight += 1;
                self.note = Some(format!("{}: sent", request.task()));
                vec![Effect::Task(request)]
            }
            Confirm::Trust { name, hash, .. } => {
                self.overlay = Some(Overlay::Sentinels);
                vec![Effect::Trust { name, hash }]
            }
        }
    }

    /// What a task action will do is known: ask before doing it.
    pub fn ask_confirmation(&mut self, request: TaskRequest, question: String) {
        self.overlay = Some(Overlay::Confirm(Confirm::Task { request, question }));
    }
}

/// A confirmation: the question whole, and the keys that answer it.
fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, c: &Confirm) {
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
