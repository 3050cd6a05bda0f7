//! The bottom line: project, database health, counts, the last error or note, and the
//! keys to get help and quit (from the effective keymap). While searching, the prompt.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::core::snapshot::DatabaseHealth;
use crate::tui::action::Action;
use crate::tui::panes::ctx::{DrawCtx, counted, fit, printable};
use crate::tui::panes::segments::{self, Segment};

/// Draws the line; returns whether the operator's note (an action's answer) did not
/// fit there whole, so the caller shows it in full above the line.
///
/// The line is a list of segments laid out by need ([`segments`]): what needs the
/// operator, the database's health, an action's answer, the counts, an error, the keys
/// for help and quit, the project's name, the cost, the pane's keys; each is drawn
/// whole or not at all, and only quoted text (an answer, an error) is cut, ending in `…`.
pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> bool {
    if let Some(input) = &ctx.ui.search_input {
        frame.render_widget(Paragraph::new(search_prompt(input, ctx)), area);
        return false;
    }
    let width = usize::from(area.width);
    let Laid {
        segments: laid,
        tail,
        tail_at,
        note_cut,
    } = lay_out_line(ctx, width);
    let used: usize = laid.iter().map(|(_, s)| s.width()).sum();
    let with_tail = laid.iter().any(|(i, _)| *i == tail_at);
    let left: Vec<Span> = laid
        .into_iter()
        .filter(|(i, _)| *i != tail_at)
        .map(|(_, s)| s)
        .collect();
    // The focused pane's keys take what the facts leave, before help and quit.
    let hints = if with_tail {
        format!("{}{tail}", pane_hints(ctx, width.saturating_sub(used)))
    } else {
        String::new()
    };
    let [left_area, right_area] = Layout::horizontal([
        Constraint::Min(0),
        Constraint::Length(hints.chars().count() as u16),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(Line::from(left)), left_area);
    frame.render_widget(
        Paragraph::new(Span::styled(hints, ctx.theme.muted)),
        right_area,
    );
    note_cut
}

/// Whether the note is shown whole in a box above a status line `width` wide (it does
/// not fit the line, or holds several lines), as [`draw`] decides it.
pub fn note_boxed(ctx: &DrawCtx, width: u16) -> bool {
    if ctx.ui.search_input.is_some() || ctx.ui.overlay.is_some() || ctx.ui.note.is_none() {
        return false;
    }
    lay_out_line(ctx, usize::from(width)).note_cut
}

/// The status line laid out: its segments (each with its place in the order), where
/// the help-and-quit tail is, and whether the note was cut or left out (then it shows
/// whole in a box above the line).
struct Laid<'a> {
    segments: Vec<(usize, Span<'a>)>,
    tail: String,
    tail_at: usize,
    note_cut: bool,
}

fn lay_out_line<'a>(ctx: &DrawCtx<'a>, width: usize) -> Laid<'a> {
    let key = |a: Action| ctx.keymap.key_for(a).unwrap_or_default();
    let tail = format!(" {} help · {} quit ", key(Action::Help), key(Action::Quit));
    let (mut parts, note) = left_segments(ctx);
    let tail_at = parts.len();
    parts.push(Segment::new(Span::raw(tail.clone()), 4));
    let laid = segments::lay_out(parts, width);
    let note_cut = match (&ctx.ui.note, note) {
        (Some(text), Some((at, full))) => {
            text.contains('\n')
                || laid
                    .iter()
                    .find(|(i, _)| *i == at)
                    .is_none_or(|(_, s)| s.width() < full)
        }
        _ => false,
    };
    Laid {
        segments: laid,
        tail,
        tail_at,
        note_cut,
    }
}

/// The line's facts, in the order drawn, each with how much it is needed; and where
/// the operator's note is among them, with its whole width.
fn left_segments<'a>(ctx: &DrawCtx<'a>) -> (Vec<Segment<'a>>, Option<(usize, usize)>) {
    let mut parts = vec![
        Segment::shrinking(
            needs_you(
                ctx,
                &ctx.keymap.key_for(Action::GoToWindow).unwrap_or_default(),
            ),
            10,
        ),
        Segment::new(Span::styled(" maestro ·", ctx.theme.title(false)), 1),
        Segment::new(
            Span::styled(
                format!(" {} · ", fit(&printable(ctx.project), 32)),
                ctx.theme.title(false),
            ),
            3,
        ),
    ];
    if let Some(replay) = &ctx.ui.replay {
        parts.push(Segment::new(
            Span::styled(format!("{replay} · "), ctx.theme.accent),
            8,
        ));
    }
    parts.push(Segment::new(db_span(ctx), 9));
    if ctx.snap.logs_waiting.is_some() {
        parts.push(Segment::new(
            Span::styled(" · temp/ missing (waiting)", ctx.theme.warn),
            8,
        ));
    }
    parts.push(Segment::shrinking(link_span(ctx), 8));
    let musicians = ctx.snap.musicians().count();
    for (text, keep) in [
        (counted(musicians, "task", "tasks"), 7),
        (
            counted(ctx.snap.anomaly_count as usize, "anomaly", "anomalies"),
            6,
        ),
        (
            counted(ctx.snap.message_count as usize, "message", "messages"),
            5,
        ),
    ] {
        parts.push(Segment::new(Span::raw(format!(" · {text}")), keep));
    }
    let replaced: u64 = ctx.snap.counts.pollers_replaced.values().sum();
    if replaced > 0 {
        let last = ctx.ui.last_poller.as_deref().unwrap_or_default();
        let text = format!(
            " · {} replaced{}{last}",
            counted(replaced as usize, "LLM poller", "LLM pollers"),
            if last.is_empty() { "" } else { ": " }
        );
        parts.push(Segment::shrinking(Span::styled(text, ctx.theme.accent), 4));
    }
    if let Some(cost) = cost_span(ctx) {
        parts.push(Segment::new(cost, 2));
    }
    let mut note = None;
    if let Some(said) = note_gap_or_error(ctx) {
        if ctx.ui.note.is_some() {
            note = Some((parts.len(), said.span.width()));
        }
        parts.push(said);
    }
    (parts, note)
}

/// The database's health, as the line says it.
fn db_span<'a>(ctx: &DrawCtx<'a>) -> Span<'a> {
    match &ctx.snap.database {
        DatabaseHealth::Ok if ctx.ui.read_only.is_some() => {
            Span::styled("db read-only: actions disabled", ctx.theme.warn)
        }
        DatabaseHealth::Ok => Span::styled("db ok", ctx.theme.ok),
        DatabaseHealth::Absent => Span::styled("no db yet (waiting; temp only)", ctx.theme.warn),
        DatabaseHealth::Failing(_) => Span::styled("db failing", ctx.theme.error),
    }
}

/// The last gap in maestro's running, told for ten minutes unless a newer error takes
/// the place (by then every age it restarted has been judged afresh).
fn recent_gap(ctx: &DrawCtx<'_>) -> Option<String> {
    ctx.snap
        .last_gap
        .filter(|(at, ..)| ctx.snap.last_error.as_ref().is_none_or(|(e, _)| at >= e))
        .filter(|(at, ..)| ctx.now - *at < time::Duration::minutes(10))
        .map(|(at, kind, secs)| {
            format!(
                "resumed {} after a {} ({}): ages restarted",
                ctx.clock.hms(at),
                kind,
                crate::core::sentinel::human_duration(std::time::Duration::from_secs(secs))
            )
        })
}

/// The search (or task filter) prompt, with its keys.
fn search_prompt<'a>(input: &str, ctx: &DrawCtx<'a>) -> Line<'a> {
    let (lead, keys) = if ctx.ui.panes.tasks.filtering {
        ("filter tasks: ", "   Enter keep · Esc clear")
    } else {
        ("/", "   Enter search · Esc cancel")
    };
    Line::from(vec![
        Span::styled(lead, ctx.theme.accent),
        Span::raw(printable(input)),
        Span::styled("█", ctx.theme.accent),
        Span::styled(keys, ctx.theme.muted),
    ])
}

/// The orchestration's cost at list prices, once a session is known (unknown, not
/// zero, when no model of it has a price).
fn cost_span<'a>(ctx: &DrawCtx<'a>) -> Option<Span<'a>> {
    ctx.snap.session_cost_usd.map(|cost| {
        let unpriced =
            || crate::core::text::printable(&ctx.snap.unpriced_models.join(", ")).into_owned();
        let text = match (ctx.snap.session_cost_unknown, cost > 0.0) {
            (false, _) => format!(" · ${cost:.2} at list prices"),
            (true, true) => format!(
                " · ${cost:.2}+? at list prices (no price for {})",
                unpriced()
            ),
            // Nothing priced: a figure of $0.00 would be wrong, not unknown.
            (true, false) => format!(
                " · cost unknown: no price for {} (add it under [sessions.prices])",
                unpriced()
            ),
        };
        Span::styled(text, ctx.theme.accent)
    })
}

/// An action's answer, else a recent gap in maestro's running, else the last error:
/// quoted text, cut (marked) to the room the line leaves.
fn note_gap_or_error<'a>(ctx: &DrawCtx<'a>) -> Option<Segment<'a>> {
    if let Some(note) = &ctx.ui.note {
        let note = printable(note).replace('\n', " ");
        return Some(Segment::shrinking(
            Span::styled(format!(" · {note}"), ctx.theme.accent),
            8,
        ));
    }
    if let Some(gap) = recent_gap(ctx) {
        return Some(Segment::shrinking(
            Span::styled(format!(" · {gap}"), ctx.theme.warn),
            5,
        ));
    }
    let (at, err) = ctx.snap.last_error.as_ref()?;
    // A message of several lines (a configuration error with its excerpt) is not
    // flattened into one: its first line, and where the rest is.
    let mut lines = err.lines();
    let first = lines.next().unwrap_or_default().trim_end();
    let shown = if lines.next().is_some() {
        format!("{first} (more: `maestro doctor`)")
    } else {
        first.to_owned()
    };
    Some(Segment::shrinking(
        Span::styled(
            format!(" · {} {}", ctx.clock.hms(*at), printable(&shown)),
            ctx.theme.error,
        ),
        5,
    ))
}

/// An answer too long for the status line, whole, in a box above it until the next key.
pub fn draw_note_box(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let Some(note) = &ctx.ui.note else { return };
    let width = usize::from(area.width.saturating_sub(2)).max(1);
    let rows: Vec<String> = printable(note)
        .lines()
        .flat_map(|l| crate::tui::panes::text::wrap(l, width))
        .collect();
    // Taller than the screen: what does not fit is said, never cut silently.
    let room = usize::from(area.height.saturating_sub(3));
    let lines = crate::tui::panes::text::lines_within(rows, (width, room), "", ctx.theme.muted);
    let height = (lines.len() as u16 + 2).min(area.height.saturating_sub(1));
    let rect = Rect {
        x: area.x,
        y: area.y + area.height.saturating_sub(height + 1),
        width: area.width,
        height,
    };
    crate::tui::panes::ctx::clear(frame, rect);
    let block = ratatui::widgets::Block::bordered()
        .border_style(ctx.theme.accent)
        .title(Span::styled(" answer (any key closes) ", ctx.theme.accent));
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

/// "⚑ task-03 needs you: permission for Bash `cargo publish` (w: go)", or with several
/// "⚑ 2 need you: task-03, task-05 (w: go)", longest waiting first; nothing when none.
fn needs_you<'a>(ctx: &DrawCtx<'a>, key: &str) -> Span<'a> {
    let mut waiting: Vec<_> = ctx
        .snap
        .tasks
        .iter()
        .filter_map(|t| {
            t.needs_you
                .as_ref()
                .map(|(text, since)| (*since, t.id(), text))
        })
        .collect();
    waiting.sort();
    let text = match waiting.as_slice() {
        [] => return Span::raw(""),
        [(_, id, what)] => format!(
            "⚑ {} needs you: {} ({key}: go) · ",
            printable(id),
            printable(what)
        ),
        many => format!(
            "⚑ {} need you: {} ({key}: go) · ",
            many.len(),
            many.iter()
                .map(|(_, id, _)| printable(id))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Span::styled(text, ctx.theme.error)
}

/// The focused pane's main keys, from the effective keymap, as many as `room` holds
/// (each followed by ` · `, before help and quit); a pane with no actions of its own
/// hints the global keys.
fn pane_hints(ctx: &DrawCtx, room: usize) -> String {
    let focus = ctx.ui.focus;
    let mode = if focus.component().actions().is_empty() {
        crate::tui::keymap::Mode::Global
    } else {
        focus.mode()
    };
    let mut out = String::new();
    for (keys, action) in ctx
        .keymap
        .help()
        .into_iter()
        .filter(|(m, _)| *m == mode)
        .flat_map(|(_, rows)| rows)
    {
        let Some(word) = action.hint() else { continue };
        let part = format!(" {} {word} ·", keys.split(' ').next().unwrap_or_default());
        if out.chars().count() + part.chars().count() > room {
            break;
        }
        out.push_str(&part);
    }
    out
}

/// A remote project whose link is down: since when, and that what shows is its last
/// known state; then the sessions the API stopped, said once for all of them.
fn link_span<'a>(ctx: &DrawCtx<'a>) -> Span<'a> {
    let mut text = match &ctx.snap.link {
        Some(link) if link.is_down() => format!(
            " · link down since {}: last known state",
            ctx.clock.hms(link.since)
        ),
        _ => String::new(),
    };
    let errors: Vec<&str> = ctx
        .snap
        .tasks
        .iter()
        .flat_map(|t| t.sessions.iter())
        .filter(|f| f.activity == crate::core::sessions::activity::API_ERROR)
        .map(|f| f.last_error.as_deref().unwrap_or_default())
        .collect();
    if let Some(stopped) = api_stopped(&errors) {
        text.push_str(" · ");
        text.push_str(&printable(&stopped));
    }
    if text.is_empty() {
        Span::raw("")
    } else {
        Span::styled(text, ctx.theme.error)
    }
}

/// "rate limit: 3 sessions stopped (resets 3pm)", or "API error: 1 session stopped",
/// from the API texts of the sessions in `api_error`; nothing when there are none.
fn api_stopped(errors: &[&str]) -> Option<String> {
    static RESET: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\bresets?\s+(?:at\s+)?([0-9]{1,2}(?::[0-9]{2})?\s*(?:am|pm)?(?:\s*\([^)]{1,40}\))?)")
            .expect("static regex")
    });
    if errors.is_empty() {
        return None;
    }
    let rate = errors
        .iter()
        .any(|e| e.contains("API Error: 429") || e.to_ascii_lowercase().contains("rate limit"));
    let reset = errors
        .iter()
        .find_map(|e| RESET.captures(e))
        .map(|c| format!(" (resets {})", c[1].trim()))
        .unwrap_or_default();
    Some(format!(
        "{}: {} stopped{reset}",
        if rate { "rate limit" } else { "API error" },
        counted(errors.len(), "session", "sessions")
    ))
}

#[cfg(test)]
mod tests {
    use super::api_stopped;

    #[test]
    fn sessions_the_api_stopped_are_said_once() {
        assert_eq!(api_stopped(&[]), None);
        assert_eq!(
            api_stopped(&["API Error: 400 bad request"]).as_deref(),
            Some("API error: 1 session stopped")
        );
        assert_eq!(
            api_stopped(&[
                "API Error: 429 rate_limit_error",
                "Claude AI usage limit reached · resets 3pm (Europe/Paris)",
                "API Error: 500",
            ])
            .as_deref(),
            Some("rate limit: 3 sessions stopped (resets 3pm (Europe/Paris))")
        );
    }
}
