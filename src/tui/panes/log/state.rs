//! The Log pane's own state: the task it shows (following the selection), each task's
//! bounded scrollback, the view (merged, status, deviations), the position (following
//! the end, or parked on a cursor), its height as last laid out, a local log's older
//! lines read back, and the search. The dashboard's state holds one; the Anomalies pane
//! and the navigation move it too (a jump to a caused line).

use std::collections::HashMap;

use crate::core::domain::TaskId;
use crate::tui::panes::log::older::OlderLines;
use crate::tui::panes::log::scrollback::{LogPosition, LogView, TaskLog};

#[derive(Debug, Clone)]
pub struct LogState {
    /// The task shown (follows the selection).
    pub task: Option<TaskId>,
    pub logs: HashMap<TaskId, TaskLog>,
    pub view: LogView,
    pub pos: LogPosition,
    /// Rows shown the last time it was laid out.
    pub height: u16,
    /// A local project's logs read back past what is held (status and deviations views).
    pub older: OlderLines,
    pub search: Option<String>,
}

impl Default for LogState {
    fn default() -> Self {
        Self {
            task: None,
            logs: HashMap::new(),
            view: LogView::Merged,
            pos: LogPosition {
                follow: true,
                ..LogPosition::default()
            },
            height: 10,
            older: OlderLines::default(),
            search: None,
        }
    }
}
