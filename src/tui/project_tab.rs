//! What one project's tab on the projects bar says: its tasks by state, unread
//! anomalies, tasks waiting for the operator, the Conductor's state, the sessions' cost.

use crate::core::domain::state;
use crate::core::snapshot::Snapshot;

#[derive(Debug, Clone, PartialEq)]
pub struct ProjectTab {
    pub name: String,
    pub working: usize,
    pub review: usize,
    pub done: usize,
    pub trouble: usize,
    pub unread: usize,
    /// Tasks whose session waits for the operator.
    pub needs_you: usize,
    pub conductor: Option<String>,
    pub cost: Option<f64>,
    /// A remote project whose link is down: what the tab shows is its last known state.
    pub link_down: bool,
}

impl ProjectTab {
    /// What a project's snapshot and unread count say.
    pub fn of(name: &str, snap: &Snapshot, unread: usize) -> Self {
        let mut tab = Self {
            name: name.to_owned(),
            working: 0,
            review: 0,
            done: 0,
            trouble: 0,
            unread,
            needs_you: snap.tasks.iter().filter(|t| t.needs_you.is_some()).count(),
            conductor: snap.watchdog.conductor_state.clone(),
            // Nothing priced is no figure at all, never $0.00.
            cost: snap
                .session_cost_usd
                .filter(|c| *c > 0.0 || !snap.session_cost_unknown),
            link_down: snap.link_down(),
        };
        for t in snap.musicians() {
            match t.row.state.as_str() {
                state::NEEDS_REVIEW | state::REVIEW_APPROVED | state::REVIEW_FAILED => {
                    tab.review += 1;
                }
                state::COMPLETE => tab.done += 1,
                state::ERROR | state::FIX_PROPOSED | state::EXITED => tab.trouble += 1,
                _ => tab.working += 1,
            }
        }
        tab
    }
}
