//! Hook events into the hub: a session mapped to its task, a task that waits for the
//! operator (`needs_you`) and the moment it goes on (`needs_you_cleared`).

use super::Hub;
use crate::core::event::What;
use crate::core::hooks::book::{Change, HookInput};
use crate::core::hooks::replace::Stage;
use crate::core::told::Identity;

impl Hub {
    pub(super) async fn on_hooks(&mut self, inputs: Vec<HookInput>) {
        let mut mapped = false;
        for input in inputs {
            let before = self
                .needs_you
                .task_of(&input.event.session_id)
                .map(str::to_owned);
            let tasks = &self.tasks;
            let sessions = &self.sessions;
            let with_database = self.settings.with_database;
            let changes = self.needs_you.write_then(
                |book| {
                    book.apply(
                        &input,
                        |t| tasks.contains_key(t) || !with_database,
                        |sid| {
                            tasks
                                .values()
                                .find(|e| e.row.session_id.as_deref() == Some(sid))
                                .map(|e| e.row.task_id.clone())
                                .or_else(|| sessions.task_of_session(sid))
                        },
                    )
                },
                |changes| changes.iter().map(waits_of).collect(),
            );
            mapped |= before.as_deref() != self.needs_you.task_of(&input.event.session_id);
            for change in changes {
                self.on_needs_you(change).await;
            }
            if input.event.event == crate::core::hooks::event::PROCESS_ENDED {
                self.session_process_ended(&input.event.session_id).await;
            } else if input.claude_alive && input.event.claude_pid.is_some() {
                // A live process speaks for the session again (`--resume`).
                self.sessions.ended.remove(&input.event.session_id);
            }
        }
        if mapped {
            self.send_task_facts();
        }
    }

    async fn on_needs_you(&mut self, change: Change) {
        match change {
            Change::Needs(w) => {
                let (tool, detail) = match &w.wait {
                    crate::core::hooks::event::Wait::Permission { tool, detail } => {
                        (tool.clone(), detail.clone())
                    }
                    crate::core::hooks::event::Wait::Input => (None, None),
                };
                // One wait is one fact, however often a restart reads its hook event: a
                // slot of its own (a slot per task would hold only the latest wait, and
                // a restart would retell the earlier ones as new).
                let identity = Identity::new(
                    format!("needs_you|{}|{}|{}", w.task_id, w.session_id, w.since_ms),
                    "",
                );
                let what = What::NeedsYou {
                    task_id: w.task_id.clone(),
                    session_id: w.session_id.clone(),
                    reason: w.wait.reason(),
                    tool,
                    detail,
                    text: w.wait.describe(),
                };
                let now = self.clock.now_utc();
                self.emit_told(now, what, Some(identity)).await;
            }
            Change::Cleared {
                task_id,
                waited_s,
                since_ms,
            } => {
                let identity = Identity::new(
                    format!("needs_you_cleared|{task_id}|{since_ms}|{waited_s}"),
                    "",
                );
                let now = self.clock.now_utc();
                self.emit_told(
                    now,
                    What::NeedsYouCleared { task_id, waited_s },
                    Some(identity),
                )
                .await;
            }
        }
    }

    /// Applies again the held events of sessions the tables now tie to a task (the
    /// session source found the transcript that names it).
    pub(super) async fn release_held_hooks(&mut self) {
        for sid in self.needs_you.untied() {
            let tied = self
                .tasks
                .values()
                .any(|e| e.row.session_id.as_deref() == Some(sid.as_str()))
                || self.sessions.task_of_session(&sid).is_some();
            if tied {
                // Held inputs are not what a view reads (the waits are).
                let inputs = self
                    .needs_you
                    .write_then(|book| book.take_held(&sid), |_| Vec::new());
                Box::pin(self.on_hooks(inputs)).await;
            }
        }
    }

    /// Each poller the hook refused (at its launch or in its loop), once (held events applied again later do
    /// not pass here): a `poller_replaced` happening, counted by role.
    pub(super) async fn on_pollers_replaced(&mut self, inputs: &[HookInput]) {
        for input in inputs {
            let Some(replaced) = &input.event.replaced else {
                continue;
            };
            // The spool is anyone's file: only a role maestro names is counted.
            let Some(role) = crate::core::sessions::pollers::ROLES
                .into_iter()
                .find(|r| *r == replaced.role)
            else {
                continue;
            };
            *self
                .draft
                .edit()
                .counts
                .pollers_replaced
                .entry(role)
                .or_default() += 1;
            let identity = Identity::new(
                format!(
                    "poller_replaced|{}|{}|{role}",
                    input.event.session_id, input.event.at_ms
                ),
                "",
            );
            let at = time::OffsetDateTime::from_unix_timestamp_nanos(
                i128::from(input.event.at_ms) * 1_000_000,
            )
            .unwrap_or_else(|_| self.clock.now_utc());
            let what = What::PollerReplaced {
                task_id: replaced.task_id.clone(),
                session_id: input.event.session_id.clone(),
                role,
                command: replaced.command.clone(),
                at: replaced.at.unwrap_or(Stage::Launch).name(),
            };
            self.emit_told(at, what, Some(identity)).await;
        }
    }

    /// The sessions the hooks tied to a task.
    pub(super) fn hook_sessions(&self, task: &str) -> Vec<String> {
        self.needs_you.sessions_of(task)
    }
}

/// The task whose wait a change starts or ends (its view shows the wait).
fn waits_of(change: &Change) -> String {
    match change {
        Change::Needs(w) => w.task_id.clone(),
        Change::Cleared { task_id, .. } => task_id.clone(),
    }
}
