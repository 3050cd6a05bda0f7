//! What makes a happening the same fact another run already told (see
//! [`crate::core::told`]): an anomaly's line, a message's id and content, a task's state,
//! a stale heartbeat's stamp, a watchdog reason's stamp, a session found, lost or
//! missing. Live observations (a session's activity and usage, sources, errors, links,
//! clock gaps, forecasts) have none: each is news. The hooks' events (`needs_you`,
//! `poller_replaced`) carry theirs from `needs_you.rs`: each event a slot of its own.

use super::Hub;
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::domain::{CONDUCTOR_ID, SOUFFLEUR_ID, dedupe_detail};
use crate::core::event::What;
use crate::core::told::Identity;

impl Hub {
    pub(super) fn identity(&self, what: &What) -> Option<Identity> {
        match what {
            What::Anomaly(a) => {
                // Its line by where it starts in the file, which no later read moves;
                // by its number only where the reader could not say (a recording).
                let line = a
                    .line
                    .as_ref()
                    .map(|l| match l.offset {
                        Some(at) => format!("{}|@{at}", l.kind.suffix()),
                        None => format!("{}|{}", l.kind.suffix(), l.index),
                    })
                    .unwrap_or_default();
                Some(Identity::new(
                    format!(
                        "anomaly|{}|{}|{line}|{}",
                        a.task_id,
                        a.kind,
                        dedupe_detail(a.kind, &a.detail)
                    ),
                    "",
                ))
            }
            // Ids start again in a new comms.db: the content tells them apart.
            What::Message(m) => Some(Identity::new(
                format!("message|{}", m.id),
                serde_json::to_string(m).unwrap_or_default(),
            )),
            What::Task { task_id, state, .. } => {
                Some(Identity::new(format!("task|{task_id}"), state.clone()))
            }
            What::Stale { task_id, .. } => Some(Identity::new(
                format!("stale|{task_id}"),
                self.heartbeat_text(task_id),
            )),
            What::Watchdog { reason, .. } => {
                let whose = if matches!(reason, WatchdogReason::WatcherDead) {
                    SOUFFLEUR_ID
                } else {
                    CONDUCTOR_ID
                };
                Some(Identity::new(
                    format!("watchdog|{reason}"),
                    self.heartbeat_text(whose),
                ))
            }
            // A session's finding, loss or absence is a fact of that session: one slot
            // each, so a restart that finds it again restates it (never retells it).
            What::Session {
                status: status @ ("found" | "lost" | "missing"),
                task_id,
                session_id,
                ..
            } => Some(Identity::new(
                format!(
                    "session|{status}|{task_id}|{}",
                    session_id.as_deref().unwrap_or_default()
                ),
                "",
            )),
            _ => None,
        }
    }

    /// A row's heartbeat as written (what a restatement of its staleness shares).
    fn heartbeat_text(&self, task_id: &str) -> String {
        self.tasks
            .get(task_id)
            .and_then(|t| t.row.last_heartbeat.clone())
            .unwrap_or_default()
    }
}
