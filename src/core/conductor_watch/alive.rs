//! A working Musician whose session died: the Conductor's watcher keeps, for each
//! Musician in a running state, the live sessions it saw (its window, the sessions the
//! hooks or its recorded session id tie to it), and tells the task's session gone once
//! every one of them has ended and none replaced it.
//!
//! Only from evidence: a task whose session was never seen alive is never called dead
//! (no PID file, no hooks: nothing is said), and a task being relaunched (its relaunch
//! lock held) is left alone until the relaunch is over.

use std::time::Duration;

use crate::core::domain::{TaskId, TaskState};
use crate::core::procs::ProcessId;

use super::seen::Seen;
use super::{ConductorEvent, Participant};

/// How often the sessions are looked for anew (a session that started since); the death
/// of one already seen is noticed at once, through its pidfd. Each look reads the hooks'
/// spool once a running Musician, so not more often than this.
pub const LOOK_EVERY: Duration = Duration::from_secs(15);

/// How the watcher learns a Musician's live sessions, handed down by the command that
/// runs it (the operator's actions know windows, hooks and recorded sessions): the
/// task's live sessions given its recorded session id, or `None` while the task is
/// being relaunched (its sessions are the relaunch's to end).
pub type FindSessions<'a> = dyn Fn(&TaskId, Option<&str>) -> Option<Vec<ProcessId>> + 'a;

/// Looks at each running Musician's sessions: records the live ones in `seen`, forgets
/// tasks no longer running, and returns a `SessionGone` for each task all of whose
/// recorded sessions ended with none alive now.
pub fn look(
    find: &FindSessions<'_>,
    tasks: &[Participant],
    seen: &mut Seen,
) -> Vec<ConductorEvent> {
    let mut events = Vec::new();
    seen.sessions.retain(|task, _| {
        tasks
            .iter()
            .any(|t| &t.task == task && TaskState::works(&t.state))
    });
    for t in tasks.iter().filter(|t| TaskState::works(&t.state)) {
        let Some(task) = TaskId::parse(&t.task).filter(TaskId::is_musician) else {
            continue;
        };
        let Some(live) = find(&task, t.session_id.as_deref()) else {
            continue;
        };
        let before = seen.sessions.remove(&t.task).unwrap_or_default();
        if live.is_empty() {
            if !before.is_empty() && before.iter().all(|p| !p.is_same_alive()) {
                events.push(ConductorEvent::SessionGone {
                    task_id: t.task.clone(),
                    state: t.state.clone(),
                    pids: before.iter().map(|p| p.pid).collect(),
                });
            }
        } else {
            seen.sessions.insert(t.task.clone(), live);
        }
    }
    events
}

/// The sessions `seen` holds that are alive now: what the watcher waits on.
pub fn watched(seen: &Seen) -> Vec<ProcessId> {
    seen.sessions
        .values()
        .flatten()
        .copied()
        .filter(ProcessId::is_same_alive)
        .collect()
}
