//! The step editor (`e` in the pipelines overlay): a text area on a pipeline's steps
//! as JSON, checked before it is saved; the check's complaint shows below the text.

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Span;
use ratatui::widgets::Paragraph;

use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::overlays::{Extent, Component, Keys, Overlay, text_area};
use crate::tui::app::state::{Effect, Pane, UiState};
use crate::tui::keymap::Mode;
use crate::tui::panes::ctx::{DrawCtx, centered, clear, printable};

pub struct StepEditor;

impl Component for StepEditor {
    fn keys(&self) -> Keys {
        Keys::Text(Mode::Editor)
    }

    fn on_action(&self, ui: &mut UiState, action: Action, _: &Snapshot) -> Vec<Effect> {
        match action {
            Action::SaveEdit => ui.close_editor(true),
            Action::Close => ui.close_editor(false),
            _ => vec![],
        }
    }

    fn on_text(&self, ui: &mut UiState, key: KeyEvent) {
        if let Some(editor) = ui.editor.as_mut() {
            editor.input(key);
        }
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        if let Some(Overlay::Editor(name)) = &ctx.ui.overlay {
            draw(frame, area, ctx, name);
        }
        None
    }
}

impl UiState {
    /// The steps were written and taken: back to the pipelines.
    pub fn steps_saved(&mut self) {
        self.editor = None;
        self.overlay = Some(Overlay::Sentinels);
    }

    /// Opens the step editor on a pipeline's steps (pretty JSON).
    pub fn open_editor(&mut self, name: String, steps: &str) {
        self.editor = Some(text_area(steps));
        self.overlay = Some(Overlay::Editor(name));
    }

    /// Closes the editor; with `save`, asks for the text to be written.
    pub fn close_editor(&mut self, save: bool) -> Vec<Effect> {
        let name = match &self.overlay {
            Some(Overlay::Editor(name)) => name.clone(),
            _ => return vec![],
        };
        let text = self
            .editor
            .as_ref()
            .map(|e| e.lines().join("\n"))
            .unwrap_or_default();
        if save {
            // Stays open until the write is accepted (the loop closes it then).
            vec![Effect::SaveSteps { name, steps: text }]
        } else {
            self.editor = None;
            self.overlay = Some(Overlay::Sentinels);
            vec![]
        }
    }
}

fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, name: &str) {
    let popup = centered(
        area,
        area.width.saturating_sub(8),
        area.height.saturating_sub(4),
    );
    clear(frame, popup);
    let block = ctx.block(
        Pane::Log,
        &format!(
            "Steps of {name} · {} check and save · {} cancel",
            ctx.keymap.keys_in(Mode::Editor, Action::SaveEdit),
            ctx.keymap.keys_in(Mode::Editor, Action::Close)
        ),
    );
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    let [text, note] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(inner);
    if let Some(editor) = &ctx.ui.editor {
        frame.render_widget(editor, text);
    }
    if let Some(n) = &ctx.ui.note {
        frame.render_widget(
            Paragraph::new(Span::styled(printable(n), ctx.theme.error)),
            note,
        );
    }
}
