//! Overlays over the panes (help, a message's full text, a confirmation, the pipelines
//! and the step editor) and the keys that answer them.

use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::state::{Confirm, Effect, Overlay, UiState};

impl UiState {
    /// An action in the pipelines overlay: move, start, stop, pause or resume, edit
    /// steps, close (the keys are the keymap's `[keys.pipelines]`).
    pub(crate) fn pipelines_action(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        let selected = snap.pipelines.get(self.selected_pipeline);
        let request = |op: &'static str| {
            selected.map_or_else(Vec::new, |p| {
                vec![Effect::Pipeline {
                    op,
                    name: p.name.clone(),
                }]
            })
        };
        match action {
            Action::Down => {
                self.selected_pipeline =
                    (self.selected_pipeline + 1).min(snap.pipelines.len().saturating_sub(1));
                vec![]
            }
            Action::Up => {
                self.selected_pipeline = self.selected_pipeline.saturating_sub(1);
                vec![]
            }
            Action::PipelineStart => request("start"),
            Action::PipelineStop => request("stop"),
            Action::PipelinePause => request(if selected.is_some_and(|p| p.status == "paused") {
                "resume"
            } else {
                "pause"
            }),
            Action::EditSteps => {
                selected.map_or_else(Vec::new, |p| vec![Effect::EditSteps(p.name.clone())])
            }
            Action::Close => {
                self.overlay = None;
                vec![]
            }
            Action::Quit => self.quit(snap),
            _ => vec![],
        }
    }

    /// Opens the step editor on a pipeline's steps (pretty JSON).
    pub fn open_editor(&mut self, name: String, steps: &str) {
        let mut area = ratatui_textarea::TextArea::new(steps.lines().map(str::to_owned).collect());
        area.set_cursor_line_style(ratatui::style::Style::default());
        self.editor = Some(area);
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

    /// Quitting stops a Souffleur role held here: ask first.
    pub(crate) fn quit(&mut self, snap: &Snapshot) -> Vec<Effect> {
        if snap
            .watchdog
            .role
            .as_ref()
            .is_some_and(|r| r.phase != "exited")
        {
            self.overlay = Some(Overlay::Confirm(Confirm::QuitRole));
            vec![]
        } else {
            vec![Effect::Quit]
        }
    }

    /// The answer to a confirmation: `y`/Enter (true) or `n`/Esc (false).
    pub fn confirm(&mut self, what: Confirm, yes: bool) -> Vec<Effect> {
        self.overlay = None;
        if !yes {
            self.note = Some("cancelled".into());
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
        }
    }
}
