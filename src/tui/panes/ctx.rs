//! What every pane draws from ([`DrawCtx`]) and the small helpers they share:
//! visible windows of long lists, centred overlays, ages, fitting text.

use std::time::Duration;

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear};
use time::OffsetDateTime;

use crate::core::clock::Clock;
use crate::core::snapshot::Snapshot;
use crate::tui::app::{Pane, UiState};
use crate::tui::keymap::Keymap;
use crate::tui::theme::Theme;

/// Heartbeat deadlines, for colouring ages.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub task_stale: Duration,
    pub conductor_stale: Duration,
    pub souffleur_stale: Duration,
}

/// Everything a frame is drawn from.
pub struct DrawCtx<'a> {
    pub snap: &'a Snapshot,
    pub ui: &'a UiState,
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    pub project: &'a str,
    pub limits: Limits,
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

/// Cuts text to `width` characters with an ellipsis.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// Removes control characters (database and log text may hold escape codes).
pub fn printable(text: &str) -> String {
    crate::core::text::printable(text).into_owned()
}

/// "1 anomaly", "2 anomalies": a count with the word that agrees with it.
pub fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A line cut to `width` columns, ending in `…` where it was cut (never cut without a
/// mark).
pub fn fit_line(line: Line<'_>, width: usize) -> Line<'_> {
    if line.width() <= width {
        return line;
    }
    let mut left = width.saturating_sub(1);
    let mut spans = Vec::new();
    for span in line.spans {
        if left == 0 {
            break;
        }
        let mut kept = String::new();
        for ch in span.content.chars() {
            let w = Span::raw(ch.to_string()).width();
            if w > left {
                left = 0;
                break;
            }
            left -= w;
            kept.push(ch);
        }
        spans.push(Span::styled(kept, span.style));
    }
    spans.push(Span::raw("…"));
    Line::from(spans).style(line.style)
}

/// The selected row of a list, when cut: its line ending in `…`, then its text in full
/// below it (up to four lines).
pub fn read_in_full<'a>(mut prefix: Vec<Span<'a>>, text: &str, width: usize) -> Vec<Line<'a>> {
    prefix.push(Span::raw(text.to_owned()));
    let mut lines = vec![fit_line(Line::from(prefix), width)];
    for part in wrap(text, width.saturating_sub(4)).into_iter().take(4) {
        lines.push(Line::from(format!("    {part}")));
    }
    lines
}

/// One row of a list: whole when it fits; else its text folded under itself onto a
/// second line when `fold` (the pane has a line to spare), the rest cut with `…`.
pub fn fold_or_cut<'a>(
    prefix: Vec<Span<'a>>,
    text: &str,
    width: usize,
    fold: bool,
) -> Vec<Line<'a>> {
    let indent: usize = prefix.iter().map(Span::width).sum();
    let whole = Line::from(
        prefix
            .iter()
            .cloned()
            .chain([Span::raw(text.to_owned())])
            .collect::<Vec<_>>(),
    );
    if whole.width() <= width || !fold || indent + 8 > width {
        return vec![fit_line(whole, width)];
    }
    let parts = wrap(text, width - indent);
    let first = parts.first().cloned().unwrap_or_default();
    let rest = parts.get(1..).unwrap_or_default().join(" ");
    let head = Line::from(
        prefix
            .into_iter()
            .chain([Span::raw(first)])
            .collect::<Vec<_>>(),
    );
    // Under the text where that leaves room to read; else a short indent.
    let under = if indent <= width / 2 { indent } else { 4 };
    let tail = Line::from(format!("{:under$}{rest}", ""));
    vec![fit_line(head, width), fit_line(tail, width)]
}

/// Words folded into lines of at most `width` characters (a longer word is cut).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if needed > width && !line.is_empty() {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.extend(word.chars().take(width));
    }
    if !line.is_empty() || out.is_empty() {
        out.push(line);
    }
    out
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
