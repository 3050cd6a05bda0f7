//! One [`Action`] in, the [`Effect`]s the loop must carry out out.

use crate::core::domain::TaskId;
use crate::core::snapshot::Snapshot;
use crate::core::watchdog::control::WatchdogCmd;
use crate::tui::action::Action;
use crate::tui::app::overlays::{Confirm, Overlay};
use crate::tui::app::scrollback::LogView;
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
        match action {
            Action::Quit => return self.quit(snap),
            Action::Zoom => {
                self.zoomed = self.zoomed.is_none().then_some(self.focus);
            }
            Action::Approve
            | Action::Reject
            | Action::ProposeFix
            | Action::Instruct
            | Action::Relaunch
            | Action::KillWindow
            | Action::Freeze
            | Action::Thaw
            | Action::Headroom => return self.task_action(action, snap),
            Action::GoToWindow | Action::Session => return self.task_keys(action, snap),
            Action::NextProject | Action::PrevProject | Action::ProjectPicker => {
                self.note =
                    Some("one project is shown; pass --project more than once for several".into());
            }
            Action::Yes
            | Action::No
            | Action::PipelineStart
            | Action::PipelineStop
            | Action::PipelinePause
            | Action::PipelineTrust
            | Action::EditSteps
            | Action::SaveEdit
            | Action::ReplayPause
            | Action::ReplayStep
            | Action::ReplayBack
            | Action::ReplayForward
            | Action::ReplayBackFar
            | Action::ReplayForwardFar
            | Action::ReplayFaster
            | Action::ReplaySlower => {}
            Action::ToggleHold | Action::Sentinels | Action::RecoverNow => {
                return self.role_keys(action, snap);
            }
            Action::Suspend => return vec![Effect::Suspend],
            Action::Help => {
                self.overlay = Some(Overlay::Help);
                self.overlay_scroll = 0;
            }
            Action::Close => {
                self.search = None;
                self.log_pos.mark = None;
                // A filter kept with Enter is closed here, as the help says.
                if self.focus == Pane::Tasks && self.task_filter.take().is_some() {
                    self.selected_task = 0;
                }
            }
            Action::FocusNext => self.focus_step(true),
            Action::FocusPrev => self.focus_step(false),
            _ => return self.pane_action(action, snap),
        }
        vec![]
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
    fn role_keys(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        match action {
            Action::ToggleHold => {
                let Some(role) = &snap.watchdog.role else {
                    self.note = Some(
                        "no Souffleur role in this process (start it with `maestro souffleur`)"
                            .into(),
                    );
                    return vec![];
                };
                return vec![Effect::Watchdog(if role.held {
                    WatchdogCmd::Release
                } else {
                    WatchdogCmd::Hold
                })];
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
            _ => {}
        }
        vec![]
    }

    /// The keys that take the operator to a task: its window (the one waiting longest
    /// first), its session.
    fn task_keys(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        match action {
            Action::GoToWindow => {
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
                return vec![];
            }
            Action::Session => {
                match self.shown_tasks(snap).get(self.selected_task) {
                    Some(t) => self.overlay = Some(Overlay::Session(t.id().to_owned())),
                    None => self.note = Some("no task selected".into()),
                }
                return vec![];
            }
            // Overlay actions mean nothing without their overlay; the replay's are sent
            // to the replay by the dashboard's loop before keys get here.
            // The loop switches projects before keys get here; with one project there
            // is nothing to switch to.
            _ => {}
        }
        vec![]
    }

    /// The keys that move within the panes: focus, selection, scrolling, search, sort,
    /// the Log's views and marks, and the Messages' filters.
    fn pane_action(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        match action {
            Action::FocusTasks => self.focus = Pane::Tasks,
            Action::FocusHeartbeats => self.focus = Pane::Heartbeats,
            Action::FocusLog => self.focus = Pane::Log,
            Action::FocusAnomalies => self.focus = Pane::Anomalies,
            Action::FocusMessages => self.focus = Pane::Messages,
            Action::FocusWatchdog => self.focus = Pane::Watchdog,
            Action::Up => self.move_by(snap, -1),
            Action::Down => self.move_by(snap, 1),
            Action::PageUp => self.move_by(snap, -i64::from(self.log_height.max(2) - 1)),
            Action::PageDown => self.move_by(snap, i64::from(self.log_height.max(2) - 1)),
            Action::Top => self.move_by(snap, i64::MIN / 2),
            Action::Bottom => {
                if self.focus == Pane::Log {
                    self.follow();
                } else {
                    self.move_by(snap, i64::MAX / 2);
                }
            }
            Action::Open => self.open(snap),
            Action::Search => {
                // In the Tasks pane, `/` filters the tasks (live, as one types).
                self.filtering_tasks = self.focus == Pane::Tasks;
                self.search_input = Some(if self.filtering_tasks {
                    self.task_filter.clone().unwrap_or_default()
                } else {
                    String::new()
                });
            }
            Action::SortTasks => {
                // The selected task stays selected wherever the new order puts it.
                let selected = self
                    .shown_tasks(snap)
                    .get(self.selected_task)
                    .map(|t| t.id().to_owned());
                self.task_sort = self.task_sort.next();
                self.selected_task = selected
                    .and_then(|id| self.shown_tasks(snap).iter().position(|t| t.id() == id))
                    .unwrap_or(0);
                self.note = Some(format!("tasks sorted by {}", self.task_sort.label()));
            }
            Action::SearchNext => self.search_step(true),
            Action::SearchPrev => self.search_step(false),
            Action::PrevAnomaly => self.anomaly_step(false),
            Action::NextAnomaly => self.anomaly_step(true),
            Action::ToggleFollow => {
                if self.log_pos.follow {
                    self.unfollow();
                } else {
                    self.follow();
                }
            }
            Action::CycleLogView => {
                self.log_view = match self.log_view {
                    LogView::Merged => LogView::Status,
                    LogView::Status => LogView::Deviations,
                    LogView::Deviations => LogView::Merged,
                };
                self.follow();
            }
            Action::Mark
            | Action::Copy
            | Action::MarkAllRead
            | Action::FilterTask
            | Action::FilterType => return self.mark_and_filter(action, snap),
            _ => {}
        }
        vec![]
    }

    /// Marks in the Log, copying, read marks, and the Messages' filters.
    fn mark_and_filter(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        match action {
            Action::Mark => {
                if self.log_pos.follow {
                    self.unfollow();
                }
                self.log_pos.mark = Some(self.log_pos.cursor);
            }
            Action::Copy => return self.copy(),
            Action::MarkAllRead => {
                for a in &mut self.anomalies {
                    a.unread = false;
                }
            }
            Action::FilterTask => {
                self.message_task_filter = match self.message_task_filter {
                    Some(_) => None,
                    None => self
                        .shown_tasks(snap)
                        .get(self.selected_task)
                        .map(|t| t.id().to_owned()),
                };
                self.selected_message = 0;
            }
            Action::FilterType => {
                let mut types: Vec<&str> = self
                    .messages
                    .iter()
                    .filter_map(|m| m.message_type.as_deref())
                    .collect();
                types.sort_unstable();
                types.dedup();
                let next = match &self.message_type_filter {
                    None => types.first().copied(),
                    Some(cur) => types.iter().skip_while(|t| *t != cur).nth(1).copied(),
                };
                self.message_type_filter = next.map(str::to_owned);
                self.selected_message = 0;
            }
            _ => {}
        }
        vec![]
    }
}
