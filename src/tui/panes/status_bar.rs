//! The bottom line: project, database health, counts, the last error or note, and the
//! keys to get help and quit (from the effective keymap). While searching, the prompt.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::core::snapshot::DatabaseHealth;
use crate::tui::action::Action;
use crate::tui::panes::ctx::{DrawCtx, counted, fit, printable};

/// Draws the line; returns whether the operator's note (an action's answer) did not
/// fit there whole, so the caller shows it in full above the line.
pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> bool {
    if let Some(input) = &ctx.ui.search_input {
        frame.render_widget(Paragraph::new(search_prompt(input, ctx)), area);
        return false;
    }
    let key = |a: Action| ctx.keymap.key_for(a).unwrap_or_default();
    let db = db_span(ctx);
    let musicians = crate::tui::app::musicians(ctx.snap).count();
    let counts = Span::raw(format!(
        " · {} · {} · {}",
        counted(musicians, "task", "tasks"),
        counted(ctx.snap.anomaly_count as usize, "anomaly", "anomalies"),
        counted(ctx.snap.message_count as usize, "message", "messages")
    ));
    let waiting = needs_you(ctx, &key(Action::GoToWindow));
    // A gap in maestro's running is told for ten minutes, unless a newer error takes
    // the place (by then every age it restarted has been judged afresh).
    let gap = recent_gap(ctx);
    // The pane's key hints take only what the facts leave (the name, a note, an error
    // and the cost come first).
    let replay_len = ctx.ui.replay.as_ref().map_or(0, |r| r.chars().count() + 3);
    let note_len = ctx
        .ui
        .note
        .as_ref()
        .map(|n| n.chars().count() + 3)
        .or_else(|| gap.as_ref().map(|g| g.chars().count() + 3))
        .or_else(|| {
            ctx.snap
                .last_error
                .as_ref()
                .map(|(_, e)| e.chars().count().min(60) + 12)
        })
        .unwrap_or(0);
    let cost_len = if ctx.snap.session_cost_usd.is_some() {
        28
    } else {
        0
    };
    let link = link_span(ctx);
    let essential = waiting.width()
        + db.width()
        + link.width()
        + counts.width()
        + replay_len
        + note_len
        + cost_len
        + 30;
    let hints = hints(ctx, usize::from(area.width).saturating_sub(essential), &key);
    let [left, right] = Layout::horizontal([
        Constraint::Min(0),
        Constraint::Length(hints.chars().count() as u16),
    ])
    .areas(area);
    // The project's name gives way first: what needs the operator, the database's
    // health, the counts and an action's answer are read before it.
    // An action's answer is read before the name too.
    let answer_len = ctx.ui.note.as_ref().map_or(0, |n| n.chars().count() + 3);
    let room = usize::from(left.width)
        .saturating_sub(waiting.width() + db.width() + link.width() + counts.width() + answer_len);
    let title = title(ctx, room);
    let mut spans = vec![
        waiting,
        Span::styled(title, ctx.theme.title(false)),
        match &ctx.ui.replay {
            Some(replay) => Span::styled(format!("{replay} · "), ctx.theme.accent),
            None => Span::raw(""),
        },
        db,
        if ctx.snap.logs_waiting.is_some() {
            Span::styled(" · temp/ missing (waiting)", ctx.theme.warn)
        } else {
            Span::raw("")
        },
        link,
        counts,
    ];
    // The orchestration's cost, once a session is known; an error or a note comes first
    // when both do not fit.
    let cost = cost_span(ctx);
    let used: usize = spans.iter().map(Span::width).sum();
    let wanted = match (&ctx.ui.note, &gap, &ctx.snap.last_error) {
        (Some(note), ..) => note.chars().count() + 3,
        (None, Some(gap), _) => gap.chars().count() + 3,
        (None, None, Some((_, err))) => err.chars().count() + 12,
        (None, None, None) => 0,
    };
    if let Some(cost) = cost
        && used + cost.width() + wanted <= usize::from(left.width)
    {
        spans.push(cost);
    }
    let note_cut = push_note_gap_or_error(&mut spans, usize::from(left.width), gap, ctx);
    frame.render_widget(Paragraph::new(Line::from(spans)), left);
    frame.render_widget(Paragraph::new(Span::styled(hints, ctx.theme.muted)), right);
    note_cut
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

/// "maestro · <project> · ", the name alone, or nothing, as `room` allows.
fn title(ctx: &DrawCtx<'_>, room: usize) -> String {
    let name = printable(ctx.project);
    if room >= 14 + name.chars().count().min(8) {
        format!(" maestro · {} · ", fit(&name, room - 14))
    } else if room >= 11 {
        format!(" {} · ", fit(&name, room - 4))
    } else {
        " ".to_owned()
    }
}

/// The search (or task filter) prompt, with its keys.
fn search_prompt<'a>(input: &str, ctx: &DrawCtx<'a>) -> Line<'a> {
    let (lead, keys) = if ctx.ui.filtering_tasks {
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

/// An action's answer, else a recent gap in maestro's running, else the last error,
/// in what the line leaves of `width`; true when the answer did not fit whole (it is
/// then shown in full above the line).
fn push_note_gap_or_error<'a>(
    spans: &mut Vec<Span<'a>>,
    width: usize,
    gap: Option<String>,
    ctx: &DrawCtx<'a>,
) -> bool {
    let mut note_cut = false;
    if let Some(note) = &ctx.ui.note {
        let room = width.saturating_sub(spans.iter().map(Span::width).sum::<usize>() + 3);
        let note = printable(note);
        note_cut =
            note.contains('\n') || unicode_width::UnicodeWidthStr::width(note.as_str()) > room;
        let shown = fit(&note.replace('\n', " "), room);
        spans.push(Span::styled(format!(" · {shown}"), ctx.theme.accent));
    } else if let Some(gap) = gap {
        let room = width.saturating_sub(spans.iter().map(Span::width).sum::<usize>() + 3);
        spans.push(Span::styled(
            format!(" · {}", fit(&gap, room)),
            ctx.theme.warn,
        ));
    } else if let Some((at, err)) = &ctx.snap.last_error {
        let room = width.saturating_sub(spans.iter().map(Span::width).sum::<usize>() + 16);
        // A message of several lines (a configuration error with its excerpt) is not
        // flattened into one: its first line, and where the rest is.
        let mut lines = err.lines();
        let first = lines.next().unwrap_or_default().trim_end();
        let shown = if lines.next().is_some() {
            format!("{first} (more: `maestro doctor`)")
        } else {
            first.to_owned()
        };
        spans.push(Span::styled(
            format!(
                " · {} {}",
                ctx.clock.hms(*at),
                fit(&printable(&shown), room)
            ),
            ctx.theme.error,
        ));
    }
    note_cut
}

/// An answer too long for the status line, whole, in a box above it until the next key.
pub fn draw_note_box(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let Some(note) = &ctx.ui.note else { return };
    let width = usize::from(area.width.saturating_sub(2)).max(1);
    let lines: Vec<Line> = printable(note)
        .lines()
        .flat_map(|l| crate::tui::panes::text::wrap(l, width))
        .map(Line::from)
        .collect();
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

/// The focused pane's main keys, from the effective keymap, then help and quit; only as
/// many as leave the left part of the line room (80 columns keep help and quit alone).
fn hints(ctx: &DrawCtx, room: usize, key: &dyn Fn(Action) -> String) -> String {
    let tail = format!("{} help · {} quit ", key(Action::Help), key(Action::Quit));
    let room = room.saturating_sub(tail.chars().count() + 1);
    let mode = ctx.ui.focus.mode();
    let mut parts: Vec<String> = Vec::new();
    for (keys, action) in ctx
        .keymap
        .help()
        .into_iter()
        .filter(|(m, _)| *m == mode)
        .flat_map(|(_, rows)| rows)
    {
        let Some(word) = action.hint() else { continue };
        let part = format!("{} {word}", keys.split(' ').next().unwrap_or_default());
        let used: usize = parts.iter().map(|p| p.chars().count() + 3).sum();
        if used + part.chars().count() + 3 > room {
            break;
        }
        parts.push(part);
    }
    parts.push(tail);
    format!(" {}", parts.join(" · "))
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
