//! Moving through panes and lines: selection, scrolling, following the end, search,
//! anomaly jumps, marks and copy.

use crossterm::event::KeyCode;

use crate::core::domain::TaskId;
use crate::tui::app::state::{Effect, Pane, UiState};
use crate::tui::panes::log::scrollback::{LogEntry, LogView, SCROLLBACK, Scrollback, TAIL_KEPT};

impl UiState {
    /// A key typed into the prompt: Enter keeps what was typed, Esc drops it, Backspace
    /// and characters edit it.
    pub fn prompt_key(&mut self, code: KeyCode) {
        match code {
            KeyCode::Enter => self.search_finish(true),
            KeyCode::Esc => self.search_finish(false),
            KeyCode::Backspace => self.search_type(None),
            KeyCode::Char(c) => self.search_type(Some(c)),
            _ => {}
        }
    }

    /// Typing into the search prompt: `Some(c)` adds a character, `None` is backspace.
    pub fn search_type(&mut self, c: Option<char>) {
        if let Some(input) = &mut self.search_input {
            match c {
                Some(c) => input.push(c),
                None => {
                    input.pop();
                }
            }
            if self.panes.tasks.filtering {
                self.panes.tasks.filter = Some(input.clone()).filter(|f| !f.is_empty());
                self.selected_task = 0;
            }
        }
    }

    /// Enter (true) or Esc (false) in the search prompt.
    pub fn search_finish(&mut self, accept: bool) {
        let Some(input) = self.search_input.take() else {
            return;
        };
        if std::mem::take(&mut self.panes.tasks.filtering) {
            // Enter keeps the filter, Esc drops it.
            self.panes.tasks.filter = Some(input).filter(|f| accept && !f.is_empty());
            self.selected_task = 0;
            return;
        }
        if !accept || input.is_empty() {
            return;
        }
        self.panes.log.search = Some(input);
        self.focus = Pane::Log;
        if self.panes.log.pos.follow {
            self.unfollow();
            // From the end: the newest match first.
            if let Some(log) = self.current_log() {
                self.panes.log.pos.cursor = log.end();
            }
        }
        self.search_step(false);
    }

    pub(crate) fn show_task(&mut self, task: Option<TaskId>) {
        if task != self.panes.log.task {
            // The task left keeps a tail; the one shown keeps a scrollback.
            if let Some(log) = self
                .panes
                .log
                .task
                .as_ref()
                .and_then(|t| self.panes.log.logs.get_mut(t))
            {
                log.keep(TAIL_KEPT);
            }
            if let Some(log) = task.as_ref().and_then(|t| self.panes.log.logs.get_mut(t)) {
                log.keep(SCROLLBACK);
            }
            self.panes.log.task = task;
            self.panes.log.search = None;
            self.follow();
        }
    }

    /// Shows a line the merged view no longer holds in its own log's view, read back
    /// from the file (a history skimmed at start, or lines scrolled out): whether it is
    /// there, or being read.
    pub(crate) fn open_in_file(&mut self, line: &crate::core::domain::SourceLine) -> bool {
        if !self.panes.log.older.reads_back() {
            return false;
        }
        self.panes.log.view = match line.kind {
            crate::core::domain::LogKind::Status => LogView::Status,
            crate::core::domain::LogKind::Deviations => LogView::Deviations,
        };
        self.unfollow();
        let h = u64::from(self.panes.log.height.max(1));
        self.load_rows(line.index, line.index + h);
        if self.reading_back() {
            // The cursor goes there once the file is read.
            return true;
        }
        let found = self
            .current_rows()
            .and_then(|r| r.get(line.index).map(|e| e.text == line.text))
            .unwrap_or(false);
        if found {
            self.panes.log.pos.cursor = line.index;
            self.panes.log.pos.top = line.index.saturating_sub(h / 2);
            self.keep_cursor_visible();
            self.load_rows(self.panes.log.pos.top, self.panes.log.pos.top + h);
        } else {
            self.panes.log.view = LogView::Merged;
        }
        found
    }

    pub(crate) fn follow(&mut self) {
        self.panes.log.pos.follow = true;
        self.panes.log.pos.new_lines = 0;
        self.panes.log.pos.mark = None;
    }

    pub(crate) fn unfollow(&mut self) {
        let end = self.current_log().map_or(0, Scrollback::end);
        self.panes.log.pos.follow = false;
        self.panes.log.pos.new_lines = 0;
        self.panes.log.pos.cursor = end.saturating_sub(1);
        self.panes.log.pos.top = end.saturating_sub(u64::from(self.panes.log.height));
    }

    pub(crate) fn keep_cursor_visible(&mut self) {
        let h = u64::from(self.panes.log.height.max(1));
        let pos = &mut self.panes.log.pos;
        if pos.cursor < pos.top {
            pos.top = pos.cursor;
        } else if pos.cursor >= pos.top + h {
            pos.top = pos.cursor + 1 - h;
        }
        if let Some(start) = self.current_rows().map(|r| r.start()) {
            self.panes.log.pos.top = self.panes.log.pos.top.max(start);
        }
    }

    /// Moves the cursor to the next (`forward`) or previous line containing the search.
    pub(crate) fn search_step(&mut self, forward: bool) {
        let Some(term) = self.panes.log.search.clone() else {
            self.note = Some("no search: press / to search".into());
            return;
        };
        let text_hit = |t: &str| t.contains(term.as_str());
        self.step_to(
            forward,
            |e| e.text.contains(term.as_str()),
            Some(&text_hit),
            "no more matches",
        );
    }

    pub(crate) fn anomaly_step(&mut self, forward: bool) {
        // Only the lines held know their anomalies.
        self.step_to(forward, |e| e.anomaly, None, "no more anomaly lines");
    }

    /// The next (`forward`) or previous line `hit` accepts, going round past the end;
    /// with `text_hit`, the file's older lines are searched too, a block at a time.
    pub(crate) fn step_to(
        &mut self,
        forward: bool,
        hit: impl Fn(&LogEntry) -> bool,
        text_hit: Option<&dyn Fn(&str) -> bool>,
        none: &str,
    ) {
        let Some(held) = self.current_rows().map(|r| (r.held.start(), r.end())) else {
            return;
        };
        let (held_start, end) = held;
        if self.panes.log.pos.follow {
            self.panes.log.pos.cursor = end;
        }
        let cur = self.panes.log.pos.cursor;
        // The file's part lies before what is held: searched after it going back,
        // before it going forward.
        let older = |ui: &mut Self, range: (u64, u64)| {
            text_hit.and_then(|t| ui.find_older(range, forward, t))
        };
        let in_held = |ui: &Self, range: (u64, u64)| {
            let log = ui.current_rows()?;
            let (from, to) = (range.0.max(held_start), range.1.min(end));
            if forward {
                (from..to).find(|&a| log.get(a).is_some_and(&hit))
            } else {
                (from..to).rev().find(|&a| log.get(a).is_some_and(&hit))
            }
        };
        let ahead = if forward {
            let range = (cur.saturating_add(1), end);
            older(self, range).or_else(|| in_held(self, range))
        } else {
            let range = (0, cur.min(end));
            in_held(self, range).or_else(|| older(self, range))
        };
        // Past the last match, the search goes round to the first (and says so).
        let wrapped = ahead.is_none();
        let found = ahead.or_else(|| {
            if forward {
                older(self, (0, end)).or_else(|| in_held(self, (0, end)))
            } else {
                in_held(self, (0, end)).or_else(|| older(self, (0, end)))
            }
        });
        match found {
            Some(at) => {
                if self.panes.log.pos.follow {
                    self.unfollow();
                }
                self.panes.log.pos.cursor = at;
                self.keep_cursor_visible();
                let h = u64::from(self.panes.log.height.max(1));
                self.load_rows(self.panes.log.pos.top, self.panes.log.pos.top + h);
                if wrapped {
                    self.note = Some(format!(
                        "{none} · wrapping to the {}",
                        if forward { "first" } else { "last" }
                    ));
                }
            }
            None => self.note = Some(none.replace("no more", "no")),
        }
        // Older lines not read yet are not "no match": say so instead.
        if let (Some(done), Some(_)) = (self.panes.log.older.indexing(), text_hit)
            && (found.is_none() || wrapped)
        {
            self.note = Some(format!(
                "the file's older lines are still being read ({done}%): search again in a moment"
            ));
        }
    }

    pub(crate) fn copy(&mut self) -> Vec<Effect> {
        let Some(log) = self.current_rows() else {
            return vec![];
        };
        if log.is_empty() {
            return vec![];
        }
        let cursor = if self.panes.log.pos.follow {
            log.end() - 1
        } else {
            self.panes.log.pos.cursor
        };
        let mark = self.panes.log.pos.mark.unwrap_or(cursor);
        let (from, to) = (mark.min(cursor), mark.max(cursor));
        let text: Vec<&str> = (from..=to)
            .filter_map(|a| log.get(a))
            .map(|e| &*e.text)
            .collect();
        let n = text.len();
        let joined = text.join("\n");
        self.panes.log.pos.mark = None;
        self.note = Some(format!("copied {n} line{}", if n == 1 { "" } else { "s" }));
        vec![Effect::Copy(joined)]
    }
}
