//! The task action keys (approve, reject, relaunch, kill, freeze, …), quitting, and what
//! an action's outcome does to the state.

use crate::core::actions::TaskRequest;
use crate::core::domain::TaskId;
use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::overlays::{Compose, ComposeKind, Confirm, Overlay};
use crate::tui::app::state::{Effect, UiState};

impl UiState {
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
            ui.open_compose(Compose {
                kind,
                task: task.clone(),
                discard_armed: false,
            });
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
            Action::Reject => Some((
                crate::core::actions::REJECTION.from,
                "a rejection answers a review request",
            )),
            Action::ProposeFix => Some((
                crate::core::actions::FIX_PROPOSAL.from,
                "a fix proposal answers an error",
            )),
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

    /// A freeze or thaw delivered: the task's row says so (or no longer).
    pub fn window_signalled(&mut self, request: &TaskRequest) {
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

    /// A task action ended: its outcome on the status line (a refusal brings the
    /// message typed for it back to the editor).
    pub fn action_done(&mut self, outcome: Result<String, impl std::fmt::Display>) {
        self.actions_in_flight = self.actions_in_flight.saturating_sub(1);
        match outcome {
            Ok(text) => {
                self.forget_draft();
                self.note = Some(text);
            }
            Err(e) => self.refused(&e.to_string()),
        }
    }
}
