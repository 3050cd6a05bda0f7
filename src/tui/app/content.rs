//! What the dashboard's state has to show, as the layout weighs it ([`Content`]): the
//! rows of each pane and the widths of the first ones. The layout itself reads only this.

use ratatui::layout::Rect;

use crate::core::snapshot::Snapshot;
use crate::tui::app::state::UiState;
use crate::tui::layout::{Content, MEASURED_ROWS, PaneRects};

impl UiState {
    /// Where each pane goes on `area` for this snapshot and what this state holds.
    pub fn layout(&self, area: Rect, snap: &Snapshot) -> Option<PaneRects> {
        let content = Content {
            task_rows: self.shown_tasks(snap).len(),
            heartbeat_rows: snap.tasks.iter().filter(|t| t.heartbeat.is_some()).count(),
            anomalies: self.panes.anomalies.rows.len(),
            unread_anomalies: self.unread_anomalies(),
            messages: self.panes.messages.rows.len(),
            role: snap.watchdog.role.is_some(),
            message_width: self
                .panes
                .messages
                .rows
                .iter()
                .take(MEASURED_ROWS)
                .map(crate::tui::panes::messages::row_width)
                .max()
                .map_or(0, |w| u16::try_from(w).unwrap_or(u16::MAX)),
            wide_anomalies: self
                .panes
                .anomalies
                .rows
                .iter()
                .take(6)
                .filter(|a| {
                    crate::tui::panes::anomalies::row_width(a) + 2 > usize::from(area.width)
                })
                .count(),
            log_rows: self.current_rows().map_or(0, |r| {
                usize::try_from(r.end() - r.start())
                    .unwrap_or(usize::MAX)
                    .min(MEASURED_ROWS)
            }),
        };
        crate::tui::layout::layout(area, &content)
    }
}
