//! Where each pane goes for a terminal size. Shared by drawing and by mouse handling
//! (a click focuses the pane under it), so the two always agree.

use ratatui::layout::{Constraint, Direction, Layout, Rect};

use crate::tui::app::Pane;

/// Smallest terminal the dashboard draws in; below it, a "too small" message.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 18;
/// From this width on, panes sit in two columns.
const WIDE: u16 = 110;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaneRects {
    pub tasks: Rect,
    pub log: Rect,
    pub anomalies: Rect,
    pub messages: Rect,
    pub heartbeats: Rect,
    pub watchdog: Rect,
    pub status: Rect,
}

impl PaneRects {
    pub fn get(&self, pane: Pane) -> Rect {
        match pane {
            Pane::Tasks => self.tasks,
            Pane::Log => self.log,
            Pane::Anomalies => self.anomalies,
            Pane::Messages => self.messages,
            Pane::Heartbeats => self.heartbeats,
            Pane::Watchdog => self.watchdog,
        }
    }

    /// The pane under a cell, if any.
    pub fn pane_at(&self, column: u16, row: u16) -> Option<Pane> {
        Pane::ALL.into_iter().find(|p| {
            let r = self.get(*p);
            column >= r.x && column < r.x + r.width && row >= r.y && row < r.y + r.height
        })
    }
}

/// The panes for a snapshot: room for its Musicians, and a taller Watchdog pane while
/// this process holds the Souffleur role.
pub fn for_snapshot(area: Rect, snap: &crate::core::snapshot::Snapshot) -> Option<PaneRects> {
    let watchdog = if snap.watchdog.role.is_some() { 11 } else { 7 };
    layout(area, crate::tui::app::musicians(snap).count(), watchdog)
}

/// The panes for `area` with `task_rows` Musician rows to show; `None` when too small.
pub fn layout(area: Rect, task_rows: usize, watchdog_height: u16) -> Option<PaneRects> {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        return None;
    }
    let [main, status] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
    // Tasks: header + rows + borders + the Conductor/Souffleur line, at most ~45%.
    let tasks_height = (task_rows as u16 + 5).clamp(6, main.height * 45 / 100);
    if area.width >= WIDE {
        let [left, right] =
            Layout::horizontal([Constraint::Percentage(62), Constraint::Percentage(38)])
                .areas(main);
        let [tasks, log] =
            Layout::vertical([Constraint::Length(tasks_height), Constraint::Min(5)]).areas(left);
        let hb_height = (task_rows as u16 + 4).clamp(5, right.height * 30 / 100);
        let [heartbeats, anomalies, messages, watchdog] = Layout::vertical([
            Constraint::Length(hb_height),
            Constraint::Percentage(35),
            Constraint::Min(4),
            Constraint::Length(watchdog_height),
        ])
        .areas(right);
        Some(PaneRects {
            tasks,
            log,
            anomalies,
            messages,
            heartbeats,
            watchdog,
            status,
        })
    } else {
        let rows = Layout::default()
            .direction(Direction::Vertical)
            .constraints([
                Constraint::Length(tasks_height.min(main.height * 30 / 100).max(6)),
                Constraint::Fill(2),
                Constraint::Fill(1),
                Constraint::Fill(1),
                Constraint::Length(watchdog_height - 1),
            ])
            .split(main);
        let [heartbeats, watchdog] =
            Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)])
                .areas(rows[4]);
        Some(PaneRects {
            tasks: rows[0],
            log: rows[1],
            anomalies: rows[2],
            messages: rows[3],
            heartbeats,
            watchdog,
            status,
        })
    }
}
