//! The dashboard's own state ([`UiState`]) and how it changes: `ingest` takes the hub's
//! happenings (log lines, anomalies, messages), `update` takes an [`Action`] and returns
//! the [`Effect`]s the loop must carry out. No terminal and no clock here, so the key
//! handling is tested on plain values (an overlay draws into a frame it is given). The
//! one I/O is the Log pane's read-back of a local log's older lines, when the operator
//! scrolls past what is held (`rows` asks for them, before a frame).
//!
//! - `state`: [`UiState`] itself and the effects;
//! - `ingest`: happenings in (log lines, anomalies linked to their lines, messages);
//! - `update`: one [`Action`] in, [`Effect`]s out;
//! - `navigation`: moving, scrolling, following, search, marks and copy;
//! - `overlays`: the overlays over the panes, one component each (its keys, what an
//!   action does while it is open, its drawing), and where a screen's key is routed;
//! - `task_actions`: the task action keys, quitting, and what an action's outcome does.
//!
//! [`Action`]: crate::tui::action::Action

mod content;
mod ingest;
mod navigation;
pub mod overlays;
mod rows;
pub mod state;
mod task_actions;
mod update;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_actions;
#[cfg(test)]
mod tests_memory;

pub use overlays::{Compose, ComposeKind, Confirm, Overlay};
pub use state::{Effect, Notification, Pane, UiState};
