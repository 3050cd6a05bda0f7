//! The Log pane's rows as navigation and drawing see them: the lines held, and for a
//! local project's status or deviations view, the older lines of its file before them.

use crate::core::domain::LogKind;
use crate::tui::app::state::UiState;
use crate::tui::panes::log::older::LogRows;
use crate::tui::panes::log::scrollback::LogView;

impl UiState {
    /// The rows of the view shown.
    pub fn current_rows(&self) -> Option<LogRows<'_>> {
        let task = self.panes.log.task.as_ref()?;
        let held = self.panes.log.logs.get(task)?.view(self.panes.log.view);
        Some(self.panes.log.older.rows(task, self.single_kind(), held))
    }

    /// The log a single view shows; the merged view reads nothing back.
    pub(crate) fn single_kind(&self) -> Option<LogKind> {
        match self.panes.log.view {
            LogView::Merged => None,
            LogView::Status => Some(LogKind::Status),
            LogView::Deviations => Some(LogKind::Deviations),
        }
    }

    /// Makes the rows `[from, to)` readable, reading older lines from the file when
    /// they lie before what is held. What cannot be read is said on the status line.
    pub(crate) fn load_rows(&mut self, from: u64, to: u64) {
        let (Some(task), Some(kind)) = (self.panes.log.task.as_ref(), self.single_kind()) else {
            return;
        };
        let Some(log) = self.panes.log.logs.get(task) else {
            return;
        };
        let held = log.view(self.panes.log.view);
        if let Err(why) = self.panes.log.older.load(task, kind, held, from, to) {
            self.note = Some(why.to_string());
        }
    }

    /// Before a frame: the rows on screen are readable (the only file reading the
    /// dashboard does; drawing reads none).
    pub fn prepare_rows(&mut self) {
        // A file indexed for a view no longer parked in it is let go.
        let shown = self
            .panes
            .log
            .task
            .as_ref()
            .zip(self.single_kind())
            .filter(|_| !self.panes.log.pos.follow);
        self.panes.log.older.keep_indexing(shown);
        if self.panes.log.pos.follow {
            return;
        }
        let h = u64::from(self.panes.log.height.max(1));
        self.load_rows(self.panes.log.pos.top, self.panes.log.pos.top + h);
        // A file indexed on its thread: once done, the cursor goes where it was sent.
        if let Some(wanted) = self.panes.log.older.take_wanted()
            && let Some(start) = self.current_rows().map(|r| r.start())
        {
            self.panes.log.pos.cursor = wanted.max(start);
            self.keep_cursor_visible();
            self.load_rows(self.panes.log.pos.top, self.panes.log.pos.top + h);
        }
    }

    /// A file is being indexed: another frame is wanted to go on with it.
    pub fn reading_back(&self) -> bool {
        self.panes.log.older.indexing().is_some()
    }

    /// The nearest line matching `text_hit` in the file's part of the view, within
    /// `range`, searching a block at a time.
    pub(crate) fn find_older(
        &mut self,
        range: (u64, u64),
        forward: bool,
        text_hit: &dyn Fn(&str) -> bool,
    ) -> Option<u64> {
        let held_start = self.current_rows()?.held.start();
        if range.0 >= held_start {
            return None;
        }
        // Lined up (a row just before what is held), then searched through.
        self.load_rows(held_start.saturating_sub(1), held_start);
        let task = self.panes.log.task.as_ref()?;
        let kind = self.single_kind()?;
        let held = self.panes.log.logs.get(task)?.view(self.panes.log.view);
        self.panes
            .log
            .older
            .find(task, kind, held, range, forward, text_hit)
    }
}
