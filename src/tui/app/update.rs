//! One [`Action`] in, the [`Effect`]s the loop must carry out out. The one router of a
//! screen's actions: the open overlay takes them all; else each action goes where its
//! [`Scope`] says, a pane's own to the pane whose component lists it, the moves and
//! Enter to the focused pane's component. A new action without a scope does not compile.

use crate::core::domain::TaskId;
use crate::core::snapshot::Snapshot;
use crate::core::watchdog::control::WatchdogCmd;
use crate::tui::action::{Action, Scope};
use crate::tui::app::overlays::{Confirm, Overlay};
use crate::tui::app::state::{Effect, Pane, UiState};

impl UiState {
    /// Applies one action; then the selected row (▶) and the Log's task agree again at
    /// once (a filter or a sort on a quiet project has no next snapshot to wait for).
    pub fn update(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        let effects = self.apply(action, snap);
        self.log_follows_selection(snap);
        effects
    }

    fn apply(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        self.note = None;
        // An open overlay takes every action (its component says what it does).
        if let Some(component) = self.overlay.as_ref().map(Overlay::component) {
            return component.on_action(self, action, snap);
        }
        match action.scope() {
            Scope::Pane => match Pane::owning(action) {
                Some(pane) => pane.component().on_action(self, action, snap),
                None => vec![],
            },
            Scope::Global => self.global(action, snap).unwrap_or_default(),
            Scope::Focus => {
                if let Some(pane) = action.focused_pane() {
                    self.focus = pane;
                }
                vec![]
            }
            Scope::Screens => {
                // The loop switches projects before keys get here; with one project
                // there is nothing to switch to.
                self.note =
                    Some("one project is shown; pass --project more than once for several".into());
                vec![]
            }
            // An overlay's actions mean nothing without it; the replay's are sent to
            // the replay by the dashboard's loop before keys get here.
            Scope::Overlay | Scope::Replay => vec![],
        }
    }

    /// The actions above the panes; the moves and Enter go to the focused pane. `None`:
    /// an action this does not answer (one of another scope; a global one without its
    /// arm fails `tests_actions::every_global_action_is_answered`).
    pub(super) fn global(&mut self, action: Action, snap: &Snapshot) -> Option<Vec<Effect>> {
        let focused = self.focus.component();
        let page = i64::from(self.panes.log.height.max(2) - 1);
        match action {
            Action::Quit => return Some(self.quit(snap)),
            Action::Zoom => self.zoomed = self.zoomed.is_none().then_some(self.focus),
            Action::GoToWindow => return Some(self.go_to_window(snap)),
            Action::ToggleHold | Action::Sentinels | Action::RecoverNow => {
                return self.role_keys(action, snap);
            }
            Action::Suspend => return Some(vec![Effect::Suspend]),
            Action::Help => {
                self.overlay = Some(Overlay::Help);
                self.overlay_scroll = 0;
            }
            Action::Close => {
                self.panes.log.search = None;
                self.panes.log.pos.mark = None;
                // A filter kept with Enter is closed here, as the help says.
                if self.focus == Pane::Tasks && self.panes.tasks.filter.take().is_some() {
                    self.selected_task = 0;
                }
            }
            Action::FocusNext => self.focus_step(true),
            Action::FocusPrev => self.focus_step(false),
            Action::Up => focused.move_by(self, snap, -1),
            Action::Down => focused.move_by(self, snap, 1),
            Action::PageUp => focused.move_by(self, snap, -page),
            Action::PageDown => focused.move_by(self, snap, page),
            Action::Top => focused.move_by(self, snap, i64::MIN / 2),
            Action::Bottom => focused.to_end(self, snap),
            Action::Open => focused.open(self, snap),
            Action::Search => {
                // In the Tasks pane, `/` filters the tasks (live, as one types).
                self.panes.tasks.filtering = self.focus == Pane::Tasks;
                self.search_input = Some(if self.panes.tasks.filtering {
                    self.panes.tasks.filter.clone().unwrap_or_default()
                } else {
                    String::new()
                });
            }
            // Every other action has another scope.
            _ => return None,
        }
        Some(vec![])
    }

    /// Tab (`forward`) or shift-Tab: the next pane in the order the screen shows them.
    fn focus_step(&mut self, forward: bool) {
        let order: Vec<Pane> = if self.tab_order.is_empty() {
            Pane::ALL.to_vec()
        } else {
            self.tab_order.clone()
        };
        let i = order.iter().position(|p| *p == self.focus).unwrap_or(0);
        let n = order.len();
        self.focus = order[if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        }];
    }

    /// The Souffleur's keys (hold, recover now) and the pipelines list.
    fn role_keys(&mut self, action: Action, snap: &Snapshot) -> Option<Vec<Effect>> {
        match action {
            Action::ToggleHold => {
                let Some(role) = &snap.watchdog.role else {
                    self.note = Some(
                        "no Souffleur role in this process (start it with `maestro souffleur`)"
                            .into(),
                    );
                    return Some(vec![]);
                };
                return Some(vec![Effect::Watchdog(if role.held {
                    WatchdogCmd::Release
                } else {
                    WatchdogCmd::Hold
                })]);
            }
            Action::Sentinels => self.open_pipelines(snap),
            Action::RecoverNow => {
                if snap.watchdog.role.is_none() {
                    self.note = Some(
                        "no Souffleur role in this process (start it with `maestro souffleur`)"
                            .into(),
                    );
                } else {
                    self.overlay = Some(Overlay::Confirm(Confirm::Recover));
                }
            }
            _ => return None,
        }
        Some(vec![])
    }

    /// Bring the window of the task that has waited longest for the operator to the
    /// front, else the selected task's.
    fn go_to_window(&mut self, snap: &Snapshot) -> Vec<Effect> {
        // The task that has waited longest for the operator, else the selection.
        let waiting = snap
            .tasks
            .iter()
            .filter_map(|t| t.needs_you.as_ref().map(|(_, since)| (*since, t.id())))
            .min()
            .map(|(_, id)| id.to_owned());
        let selected = || {
            self.shown_tasks(snap)
                .get(self.selected_task)
                .map(|t| t.id().to_owned())
        };
        if let Some(raw) = waiting.or_else(selected) {
            // A path is built from a checked id only (the database is written
            // by others).
            let Some(task) = TaskId::parse(&raw) else {
                self.note = Some(format!(
                    "{} is not a task id maestro acts on (task-NN); its window cannot be looked up",
                    crate::core::text::printable(&raw)
                ));
                return vec![];
            };
            return vec![Effect::Focus(task)];
        }
        self.note = Some("no task needs you and none is selected".into());
        vec![]
    }
}
