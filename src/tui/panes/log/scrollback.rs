//! The Log pane's data: bounded scrollbacks per task and view whose positions stay
//! valid while old lines fall off, and where the pane stands in them.
//!
//! Memory is set by the number of tasks, not by the bytes they log: every task keeps
//! its last [`TAIL_KEPT`] lines, the task the Log pane shows keeps [`SCROLLBACK`] while
//! it is shown, and a history skimmed at start arrives as its last lines only.

use std::collections::VecDeque;
use std::sync::Arc;

/// Lines kept per view of the task the Log pane shows (merged keeps twice as many,
/// holding both logs).
pub const SCROLLBACK: usize = 10_000;
/// Lines kept per view of every other task.
pub const TAIL_KEPT: usize = 256;

use crate::core::domain::LogKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogView {
    Merged,
    Status,
    Deviations,
}

impl LogView {
    pub fn label(self) -> &'static str {
        match self {
            Self::Merged => "status+deviations",
            Self::Status => "status",
            Self::Deviations => "deviations",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub kind: LogKind,
    pub text: Arc<str>,
    /// The line's position in the merged view (a single-kind view points there).
    pub merged_at: u64,
    /// An anomaly was raised on this line.
    pub anomaly: bool,
}

/// A bounded list that remembers how many entries fell off its front, so positions
/// stay valid ("absolute") while old lines are dropped.
#[derive(Debug, Default, Clone)]
pub struct Scrollback {
    pub(crate) entries: VecDeque<LogEntry>,
    pub(crate) dropped: u64,
    pub(crate) cap: usize,
}

impl Scrollback {
    pub(crate) fn with_cap(cap: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            dropped: 0,
            cap,
        }
    }

    pub(crate) fn push(&mut self, e: LogEntry) {
        if self.entries.len() == self.cap {
            self.entries.pop_front();
            self.dropped += 1;
        }
        self.entries.push_back(e);
    }

    /// Keeps at most `cap` entries from now on, dropping the oldest beyond it.
    pub(crate) fn set_cap(&mut self, cap: usize) {
        self.cap = cap;
        let excess = self.entries.len().saturating_sub(cap);
        self.entries.drain(..excess);
        self.dropped += excess as u64;
        if self.entries.capacity() > cap.max(64) * 2 {
            self.entries.shrink_to(cap);
        }
    }

    /// `n` lines that were counted, not sent, follow what is kept: positions count on
    /// past them, and what came before them is no longer next to what comes after.
    pub(crate) fn skip(&mut self, n: u64) {
        self.clear();
        self.dropped += n;
    }

    pub(crate) fn clear(&mut self) {
        self.dropped += self.entries.len() as u64;
        self.entries.clear();
    }

    /// Absolute position of the first kept entry.
    pub fn start(&self) -> u64 {
        self.dropped
    }

    /// One past the absolute position of the last entry.
    pub fn end(&self) -> u64 {
        self.dropped + self.entries.len() as u64
    }

    pub fn get(&self, abs: u64) -> Option<&LogEntry> {
        abs.checked_sub(self.dropped)
            .and_then(|i| self.entries.get(usize::try_from(i).ok()?))
    }

    pub(crate) fn get_mut(&mut self, abs: u64) -> Option<&mut LogEntry> {
        abs.checked_sub(self.dropped)
            .and_then(|i| self.entries.get_mut(usize::try_from(i).ok()?))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One task's log lines in the three views.
#[derive(Debug, Clone)]
pub struct TaskLog {
    pub merged: Scrollback,
    pub status: Scrollback,
    pub deviations: Scrollback,
}

impl TaskLog {
    /// A log keeping `lines` per view.
    pub fn keeping(lines: usize) -> Self {
        Self {
            merged: Scrollback::with_cap(lines * 2),
            status: Scrollback::with_cap(lines),
            deviations: Scrollback::with_cap(lines),
        }
    }

    /// Keeps `lines` per view from now on (the oldest beyond it are dropped).
    pub fn keep(&mut self, lines: usize) {
        self.merged.set_cap(lines * 2);
        self.status.set_cap(lines);
        self.deviations.set_cap(lines);
    }

    pub fn view(&self, view: LogView) -> &Scrollback {
        match view {
            LogView::Merged => &self.merged,
            LogView::Status => &self.status,
            LogView::Deviations => &self.deviations,
        }
    }
}

/// The Log pane's position: following the end, or parked on a cursor line.
#[derive(Debug, Clone, Default)]
pub struct LogPosition {
    pub follow: bool,
    /// Absolute position in the current view (meaningful when not following).
    pub cursor: u64,
    /// First line shown when not following.
    pub top: u64,
    pub mark: Option<u64>,
    /// Lines that arrived since following stopped.
    pub new_lines: u64,
}
