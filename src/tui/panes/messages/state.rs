//! The Messages pane's own state: the messages taken in (the newest [`KEPT`]), the one
//! selected, and the filters by task and by type. The dashboard's state holds one; the
//! pane's component moves it, and nothing else reaches into its parts.

use std::collections::VecDeque;

use crate::core::event::MessageRow;

/// The most messages kept (the count of all taken in is kept beside them).
pub const KEPT: usize = 5_000;

#[derive(Debug, Clone, Default)]
pub struct MessagesState {
    /// Oldest first.
    pub rows: VecDeque<MessageRow>,
    /// Messages taken in, of which the newest [`KEPT`] are kept.
    pub seen: u64,
    /// The selected row among those the filters pass, newest first.
    pub selected: usize,
    pub task_filter: Option<String>,
    pub type_filter: Option<String>,
}

impl MessagesState {
    /// A message taken in: kept, the oldest let go past [`KEPT`].
    pub fn take(&mut self, m: &MessageRow) {
        self.seen += 1;
        if self.rows.len() == KEPT {
            self.rows.pop_front();
        }
        self.rows.push_back(m.clone());
    }

    /// Forgets what was taken in (a replay starting over); the filters stay.
    pub fn forget(&mut self) {
        self.rows.clear();
        self.seen = 0;
        self.selected = 0;
    }

    /// The messages passing the filters, newest first.
    pub fn filtered(&self) -> impl Iterator<Item = &MessageRow> {
        self.rows.iter().rev().filter(|m| {
            self.task_filter
                .as_ref()
                .is_none_or(|t| m.task_id.as_ref() == Some(t))
                && self
                    .type_filter
                    .as_ref()
                    .is_none_or(|t| m.message_type.as_ref() == Some(t))
        })
    }
}
