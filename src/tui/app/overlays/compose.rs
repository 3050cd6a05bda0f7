//! The message editor of a task action (reject, propose a fix, instruct): typed, sent
//! to a confirmation, and never lost on the way (a refused or cancelled action brings
//! the text back).

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::Rect;

use crate::core::actions::TaskRequest;
use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::overlays::kinds::{Compose, ComposeKind, Overlay};
use crate::tui::app::overlays::{Extent, Component, Keys, text_area};
use crate::tui::app::state::{Effect, Pane, UiState};
use crate::tui::keymap::Mode;
use crate::tui::panes::ctx::{DrawCtx, centered, clear};

pub struct MessageEditor;

impl Component for MessageEditor {
    fn keys(&self) -> Keys {
        Keys::Text(Mode::Editor)
    }

    fn on_action(&self, ui: &mut UiState, action: Action, _: &Snapshot) -> Vec<Effect> {
        ui.compose_action(action)
    }

    fn on_text(&self, ui: &mut UiState, key: KeyEvent) {
        if let Some(editor) = ui.compose.as_mut() {
            editor.input(key);
        }
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        if let Some(Overlay::Compose(c)) = &ctx.ui.overlay {
            draw(frame, area, ctx, c);
        }
        None
    }
}

impl UiState {
    /// Opens the message editor, empty, for a task action.
    pub(crate) fn open_compose(&mut self, compose: Compose) {
        self.compose = Some(text_area(""));
        self.overlay = Some(Overlay::Compose(compose));
    }

    /// The action the message was written for was carried out: nothing to bring back.
    pub(crate) fn forget_draft(&mut self) {
        self.draft = None;
    }

    /// Keys in the message editor: send (to the confirmation) or discard.
    pub(crate) fn compose_action(&mut self, action: Action) -> Vec<Effect> {
        let filled = self.compose.as_ref().map_or(0, |e| {
            e.lines().iter().filter(|l| !l.trim().is_empty()).count()
        });
        let Some(Overlay::Compose(c)) = &mut self.overlay else {
            return vec![];
        };
        // Escape on more than a line arms the discard; the next key discards (a second
        // Escape) or disarms it.
        c.discard_armed = action == Action::Close && filled > 1 && !c.discard_armed;
        if c.discard_armed {
            self.note = Some(format!(
                "Esc again discards these {filled} lines; ctrl-s sends them"
            ));
            return vec![];
        }
        let c = c.clone();
        match action {
            Action::Close => {
                self.overlay = None;
                self.compose = None;
                self.note = Some("message discarded".into());
                vec![]
            }
            Action::SaveEdit => {
                let text = self
                    .compose
                    .as_ref()
                    .map(|e| e.lines().join("\n"))
                    .unwrap_or_default();
                if text.trim().is_empty() {
                    self.note =
                        Some("the message is empty; say what the Musician should do".into());
                    return vec![];
                }
                self.overlay = None;
                self.compose = None;
                self.draft = Some((c.clone(), text.clone()));
                let task = c.task;
                let message = text.trim_end().to_owned();
                vec![Effect::DescribeTask(match c.kind {
                    ComposeKind::Reject => TaskRequest::Reject { task, message },
                    ComposeKind::Fix => TaskRequest::Fix { task, message },
                    ComposeKind::Instruct => TaskRequest::Instruct { task, message },
                })]
            }
            _ => vec![],
        }
    }

    /// Opens the editor again on the message that was sent, saying why.
    pub(crate) fn restore_draft(&mut self, why: &str) {
        let Some((compose, text)) = self.draft.take() else {
            return;
        };
        self.compose = Some(text_area(&text));
        self.overlay = Some(Overlay::Compose(compose));
        if let Some(note) = &mut self.note {
            note.push_str(&format!(" ({why})"));
        } else {
            self.note = Some(why.to_owned());
        }
    }

    /// A task action was refused before its confirmation (the dashboard asked what it
    /// would do): the refusal, whole, and the message typed for it back in the editor.
    pub fn refused(&mut self, why: &str) {
        self.note = Some(format!("refused: {why}"));
        self.restore_draft("your message is back in the editor");
    }
}

fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, c: &Compose) {
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
