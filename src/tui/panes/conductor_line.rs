//! The Conductor's and the Souffleur's line above the Tasks table, and the Conductor's
//! queue: who waits on it, and for how long.

use ratatui::text::{Line, Span};

use crate::core::snapshot::TaskView;
use crate::tui::panes::ctx::{DrawCtx, fit_line, printable, short_age};
use crate::tui::panes::session_cells;

/// The Conductor's and the Souffleur's state, in `width`: the Souffleur's part goes
/// whole when both do not fit, and the Conductor's is cut with `…`, never mid-word bare.
pub(crate) fn leaders_line<'a>(ctx: &DrawCtx<'a>, width: usize) -> Line<'a> {
    let mut parts: Vec<Vec<Span<'a>>> = Vec::new();
    for (label, id, limit) in [
        (
            "Conductor",
            crate::core::domain::CONDUCTOR_ID,
            ctx.rules.deadlines.conductor_stale_after,
        ),
        (
            "Souffleur",
            crate::core::domain::SOUFFLEUR_ID,
            ctx.rules.deadlines.souffleur_stale_after,
        ),
    ] {
        let mut spans = Vec::new();
        match ctx.snap.tasks.iter().find(|t| t.id() == id) {
            Some(t) => {
                spans.push(Span::styled(format!("{label} "), ctx.theme.muted));
                spans.push(Span::styled(
                    t.row.state.clone(),
                    ctx.theme.state(&t.row.state),
                ));
                if let Some(hb) = t.heartbeat {
                    let age = ctx.age(hb);
                    spans.push(Span::styled(
                        format!(" ♥ {}", short_age(age)),
                        ctx.theme
                            .age(age.as_secs_f64() / limit.as_secs_f64().max(1.0)),
                    ));
                }
                if let Some(session) = session_cells::leader_suffix(t, ctx) {
                    spans.push(Span::styled(session, ctx.theme.muted));
                }
                if t.is_conductor()
                    && let Some(queue) = conductor_queue(ctx)
                {
                    spans.push(Span::styled(queue, ctx.theme.warn));
                }
            }
            // Nobody has written the row: nothing runs, so nothing can be late.
            None => spans.push(Span::styled(format!("no {label} yet"), ctx.theme.muted)),
        }
        spans.push(Span::raw("   "));
        parts.push(spans);
    }
    let whole: usize = parts.iter().flatten().map(Span::width).sum::<usize>();
    // The last part's spacer needs no room.
    if whole.saturating_sub(3) > width {
        parts.truncate(1);
    }
    if let Some(last) = parts.last_mut() {
        last.pop();
    }
    fit_line(Line::from(parts.concat()), width)
}

/// The Activity cell of a Musician waiting on the Conductor: "Conductor's turn 12m"
/// (whole minutes: the cell is narrow; the detail line has the rest).
pub(crate) fn conductors_turn(t: &TaskView, ctx: &DrawCtx<'_>) -> String {
    match t.waiting_since.map(|since| ctx.age(since).as_secs()) {
        None => "Conductor's turn".to_owned(),
        Some(s) if s < 60 => "Conductor's turn <1m".to_owned(),
        Some(s) if s < 3600 => format!("Conductor's turn {}m", s / 60),
        Some(s) => format!("Conductor's turn {}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The Conductor's queue: " · 3 wait for the Conductor (task-02 longest, 12m05s)".
fn conductor_queue(ctx: &DrawCtx<'_>) -> Option<String> {
    let waiting: Vec<&TaskView> = ctx
        .snap
        .musicians()
        .filter(|t| crate::core::domain::TaskState(t.row.state.clone()).waits_on_conductor())
        .collect();
    if waiting.is_empty() {
        return None;
    }
    let longest = waiting
        .iter()
        .filter_map(|t| t.waiting_since.map(|since| (since, t.id())))
        .min()
        .map(|(since, id)| {
            format!(
                " ({} longest, {})",
                printable(id),
                short_age(ctx.age(since))
            )
        })
        .unwrap_or_default();
    let verb = if waiting.len() == 1 { "waits" } else { "wait" };
    Some(format!(
        " · {} {verb} for the Conductor{longest}",
        waiting.len()
    ))
}

/// "waiting for the Conductor 12m05s" for a Musician in a state that waits on it (the
/// Conductor's queue, not a stall), the time only when maestro saw the wait start.
pub fn waiting_for_conductor(t: &TaskView, ctx: &DrawCtx<'_>) -> Option<String> {
    if !crate::core::domain::TaskState(t.row.state.clone()).waits_on_conductor() {
        return None;
    }
    Some(t.waiting_since.map_or_else(
        || "waiting for the Conductor".to_owned(),
        |since| {
            format!(
                "waiting for the Conductor {}",
                crate::tui::panes::ctx::short_age(ctx.age(since))
            )
        },
    ))
}
