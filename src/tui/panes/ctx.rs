//! What every pane draws from ([`DrawCtx`]) and the small helpers they share:
//! visible windows of long lists, centred overlays, ages; the text rule is `text`'s.

use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Block, BorderType, Clear};
use time::OffsetDateTime;

use crate::core::clock::Clock;
use crate::core::snapshot::Snapshot;
use crate::tui::app::{Pane, UiState};
use crate::tui::keymap::Keymap;
use crate::tui::theme::Theme;

pub use crate::tui::panes::text::{fit, fit_line, fold_or_cut, read_in_full, wrap};

/// Everything a frame is drawn from.
pub struct DrawCtx<'a> {
    pub snap: &'a Snapshot,
    pub ui: &'a UiState,
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    pub project: &'a str,
    /// What the hub judges by: the heartbeat deadlines colour the ages.
    pub rules: &'a crate::core::hub::Rules,
    /// The moment ages are measured against.
    pub now: OffsetDateTime,
    /// Formats stamps in the operator's time zone (never read for the time).
    pub clock: &'a Clock,
    /// The projects shown, when there are several (a bar above the panes).
    pub projects: &'a [crate::tui::project_tab::ProjectTab],
    /// Which of them this frame shows.
    pub project_index: usize,
}

impl DrawCtx<'_> {
    pub fn block(&self, pane: Pane, title: &str) -> Block<'static> {
        let focused = self.ui.focus == pane;
        Block::bordered()
            .border_type(if focused {
                BorderType::Thick
            } else {
                BorderType::Plain
            })
            .border_style(self.theme.border(focused))
            .title(Span::styled(
                format!(" {title} "),
                self.theme.title(focused),
            ))
    }

    /// [`Self::block`] whose title is cut with `…` to fit a box `width` wide (ratatui
    /// would cut it silently at the border).
    pub fn block_within(&self, pane: Pane, title: &str, width: u16) -> Block<'static> {
        self.block(pane, &fit(title, usize::from(width.saturating_sub(4))))
    }

    /// Seconds since a moment, never negative.
    pub fn age(&self, at: OffsetDateTime) -> Duration {
        (self.now - at).try_into().unwrap_or_default()
    }
}

/// The first row to show so that `selected` is visible in `height` rows; lists build
/// only the rows on screen, whatever their length.
pub fn window_start(selected: usize, height: u16) -> usize {
    selected.saturating_sub(usize::from(height.max(1)) - 1)
}

/// A centred rectangle for overlays.
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [row] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [cell] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(row);
    cell
}

pub fn clear(frame: &mut Frame, area: Rect) {
    frame.render_widget(Clear, area);
}

/// "12s", "4m05s", "2h03m".
pub fn short_age(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// Removes control characters (database and log text may hold escape codes).
pub fn printable(text: &str) -> String {
    crate::core::text::printable(text).into_owned()
}

/// "1 anomaly", "2 anomalies": a count with the word that agrees with it.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// "↑ 2 more · ↓ 3 more" for a list with rows hidden above and below; `None` when all show.
pub fn more_marks(above: usize, below: usize) -> Option<String> {
    let mut marks = Vec::new();
    if above > 0 {
        marks.push(format!("↑ {above} more"));
    }
    if below > 0 {
        marks.push(format!("↓ {below} more"));
    }
    (!marks.is_empty()).then(|| format!(" {} ", marks.join(" · ")))
}

/// "12", or "1000 newest of 12345" once the oldest are no longer kept: a count is true.
pub fn kept_of(kept: usize, seen: u64) -> String {
    if seen > kept as u64 {
        format!("{kept} newest of {seen}")
    } else {
        kept.to_string()
    }
}
