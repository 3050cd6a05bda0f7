//! Overlays over the panes (help, a message's full text, a confirmation, the pipelines
//! and the step editor) and the keys that answer them.

use crate::core::actions::TaskRequest;
use crate::core::domain::TaskId;
use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::state::{Compose, ComposeKind, Confirm, Effect, Overlay, UiState};

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
            Action::PipelineTrust => {
                selected.map_or_else(Vec::new, |p| vec![Effect::DescribeTrust(p.name.clone())])
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
        // Long lines fold (soft wrap): what is typed stays in view.
        area.set_wrap_mode(ratatui_textarea::WrapMode::WordOrGlyph);
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

    /// A task action key on the selected Musician: a message action opens the editor,
    /// the others first find out what they will do (then a confirmation opens).
    pub(crate) fn task_action(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        if let Some(why) = &self.read_only
            && action != Action::Headroom
        {
            self.note = Some(why.clone());
            return vec![];
        }
        let Some(task) = self
            .shown_tasks(snap)
            .get(self.selected_task)
            .and_then(|t| TaskId::parse(t.id()))
            .filter(TaskId::is_musician)
        else {
            self.note = Some("select a Musician's task first (Tasks pane)".into());
            return vec![];
        };
        let compose = |ui: &mut Self, kind| {
            let mut area = ratatui_textarea::TextArea::default();
            area.set_cursor_line_style(ratatui::style::Style::default());
            // Long lines fold (soft wrap): what is typed stays in view.
            area.set_wrap_mode(ratatui_textarea::WrapMode::WordOrGlyph);
            ui.compose = Some(area);
            ui.overlay = Some(Overlay::Compose(Compose {
                kind,
                task: task.clone(),
            }));
            vec![]
        };
        let ask = |request| vec![Effect::DescribeTask(request)];
        // An answer the task cannot take is refused before anything is typed.
        let state = self
            .shown_tasks(snap)
            .get(self.selected_task)
            .map(|t| t.row.state.clone())
            .unwrap_or_default();
        let needs = match action {
            Action::Reject => Some(("needs_review", "a rejection answers a review request")),
            Action::ProposeFix => Some(("error", "a fix proposal answers an error")),
            _ => None,
        };
        if let Some((wanted, why)) = needs
            && !state.is_empty()
            && state != wanted
        {
            self.note = Some(format!(
                "{task} is {state}, not {wanted}: {why}; nothing opened (i sends an instruction in any state)."
            ));
            return vec![];
        }
        match action {
            Action::Approve => ask(TaskRequest::Approve {
                task,
                message: None,
            }),
            Action::Reject => compose(self, ComposeKind::Reject),
            Action::ProposeFix => compose(self, ComposeKind::Fix),
            Action::Instruct => compose(self, ComposeKind::Instruct),
            Action::Relaunch => ask(TaskRequest::Relaunch { task }),
            Action::KillWindow => ask(TaskRequest::Kill { task }),
            Action::Freeze => ask(TaskRequest::Freeze { task }),
            Action::Thaw => ask(TaskRequest::Thaw { task }),
            Action::Headroom => vec![Effect::Headroom(task)],
            _ => vec![],
        }
    }

    /// Keys in the message editor: send (to the confirmation) or discard.
    pub(crate) fn compose_action(&mut self, action: Action) -> Vec<Effect> {
        let Some(Overlay::Compose(c)) = self.overlay.clone() else {
            return vec![];
        };
        match action {
            Action::Close => {
                let lines = self.compose.as_ref().map_or(0, |e| {
                    e.lines().iter().filter(|l| !l.trim().is_empty()).count()
                });
                if lines > 1 && !self.discard_armed {
                    self.discard_armed = true;
                    self.note = Some(format!(
                        "Esc again discards these {lines} lines; ctrl-s sends them"
                    ));
                    return vec![];
                }
                self.discard_armed = false;
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
                self.discard_armed = false;
                self.draft = Some((c.clone(), text.clone()));
                let task = c.task;
                let message = text.trim_end().to_owned();
                vec![Effect::DescribeTask(match c.kind {
                    ComposeKind::Reject => TaskRequest::Reject { task, message },
                    ComposeKind::Fix => TaskRequest::Fix { task, message },
                    ComposeKind::Instruct => TaskRequest::Instruct { task, message },
                })]
            }
            _ => {
                self.discard_armed = false;
                vec![]
            }
        }
    }

    /// Opens the editor again on the message that was sent, saying why.
    fn restore_draft(&mut self, why: &str) {
        let Some((compose, text)) = self.draft.take() else {
            return;
        };
        let mut area = ratatui_textarea::TextArea::new(text.lines().map(str::to_owned).collect());
        area.set_cursor_line_style(ratatui::style::Style::default());
        // Long lines fold (soft wrap): what is typed stays in view.
        area.set_wrap_mode(ratatui_textarea::WrapMode::WordOrGlyph);
        self.compose = Some(area);
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

    /// What a task action will do is known: ask before doing it.
    pub fn ask_confirmation(&mut self, request: TaskRequest, question: String) {
        self.overlay = Some(Overlay::Confirm(Confirm::Task { request, question }));
    }

    /// The headroom report arrived: show it.
    pub fn show_panel(&mut self, task: &TaskId, text: String) {
        self.panel = Some(text);
        self.overlay = Some(Overlay::Headroom(task.to_string()));
    }

    /// A task action ended: its outcome on the status line.
    /// A freeze or thaw delivered: the task's row says so (or no longer).
    pub fn window_signalled(&mut self, request: &crate::core::actions::TaskRequest) {
        use crate::core::actions::TaskRequest;
        match request {
            TaskRequest::Freeze { task } => {
                self.frozen.insert(task.to_string());
            }
            // Relaunched or killed: whatever runs now is not the frozen window.
            TaskRequest::Thaw { task }
            | TaskRequest::Relaunch { task }
            | TaskRequest::Kill { task } => {
                self.frozen.remove(task.as_str());
            }
            _ => {}
        }
    }

    pub fn action_done(&mut self, outcome: Result<String, String>) {
        self.actions_in_flight = self.actions_in_flight.saturating_sub(1);
        match outcome {
            Ok(text) => {
                self.draft = None;
                self.note = Some(text);
            }
            Err(e) => self.refused(&e),
        }
    }
}
