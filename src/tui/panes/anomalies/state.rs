//! The Anomalies pane's own state: what the Sentinel found (the newest [`KEPT`]), newest
//! first by when it happened, which of it is unread, and the one selected. The
//! dashboard's state holds one; the pane's component moves it.

use std::collections::VecDeque;

use time::OffsetDateTime;

use crate::core::domain::{AnomalyKind, SourceLine, TaskId};

/// The most anomalies kept (the count of all taken in is kept beside them).
pub const KEPT: usize = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnomalyEntry {
    pub at: OffsetDateTime,
    pub task: TaskId,
    pub kind: AnomalyKind,
    pub detail: String,
    /// The caused line's absolute position in the task's merged view.
    pub line: Option<u64>,
    /// The caused line as the Sentinel named it (its log, position there and text):
    /// found in the file when the merged view no longer holds it.
    pub source: Option<SourceLine>,
    pub unread: bool,
}

#[derive(Debug, Clone, Default)]
pub struct AnomaliesState {
    /// Newest first.
    pub rows: VecDeque<AnomalyEntry>,
    /// Anomalies taken in, of which the newest [`KEPT`] are kept.
    pub seen: u64,
    pub selected: usize,
}

impl AnomaliesState {
    /// An anomaly taken in, where its time puts it (a restatement after a restart keeps
    /// its first time); the selection stays on the entry it was on.
    pub fn take(&mut self, entry: AnomalyEntry) {
        self.seen += 1;
        let at = self
            .rows
            .iter()
            .position(|e| e.at <= entry.at)
            .unwrap_or(self.rows.len());
        let full = self.rows.len() == KEPT;
        if full && at == self.rows.len() {
            return;
        }
        if full {
            self.rows.pop_back();
        }
        self.rows.insert(at, entry);
        // The top one follows the newest.
        if self.selected > 0 && at <= self.selected {
            self.selected += 1;
        }
    }

    /// Forgets what was taken in (a replay starting over).
    pub fn forget(&mut self) {
        *self = Self::default();
    }

    pub fn unread(&self) -> usize {
        self.rows.iter().filter(|a| a.unread).count()
    }
}
