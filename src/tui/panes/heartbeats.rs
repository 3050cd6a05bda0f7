//! Heartbeats: how fresh each participant is relative to its own deadline.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::core::domain::state;
use crate::core::domain::TaskState;
use crate::core::snapshot::Snapshot;
use crate::tui::app::{Pane, UiState};
use crate::tui::panes::PaneComponent;
use crate::tui::panes::ctx::{DrawCtx, fit, printable, short_age};

/// Who has a heartbeat to keep: the Conductor and the Souffleur first, then the
/// Musicians (a finished one has no deadline left to meet).
pub fn beating(snap: &crate::core::snapshot::Snapshot) -> Vec<&crate::core::snapshot::TaskView> {
    let mut rows: Vec<_> = snap
        .tasks
        .iter()
        .map(AsRef::as_ref)
        .filter(|t| t.heartbeat.is_some() && !TaskState(t.row.state.clone()).is_terminal())
        .collect();
    rows.sort_by_key(|t| (!t.is_conductor(), !t.is_souffleur(), t.id().to_owned()));
    rows
}

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let block = ctx.block(Pane::Heartbeats, "Heartbeats");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let bar_width = usize::from(inner.width.saturating_sub(26)).clamp(4, 30);
    let mut lines = Vec::new();
    let (shown, hidden) = fitting(ctx, usize::from(inner.height));
    for t in shown {
        let limit = ctx.rules.deadlines.stale_after(t);
        let live = if t.is_conductor() {
            t.row.state != state::COMPLETE
        } else if t.is_souffleur() {
            t.row.state == state::CONFIRMED
        } else {
            TaskState(t.row.state.clone()).is_heartbeat_active()
        };
        let Some(hb) = t.heartbeat else { continue };
        if t.is_conductor() && t.row.state == state::COMPLETE {
            // Done, not overdue: no deadline is left to meet.
            lines.push(Line::from(vec![
                Span::raw(format!("{:<10} ", fit(&printable(t.id()), 10))),
                Span::styled(state::COMPLETE, ctx.theme.ok),
            ]));
            continue;
        }
        if ctx.snap.link_down() {
            // A remote project out of reach: no age to show, none to judge.
            lines.push(Line::from(vec![
                Span::raw(format!("{:<10} ", fit(&printable(t.id()), 10))),
                Span::styled("? (link down)", ctx.theme.muted),
            ]));
            continue;
        }
        let age = ctx.age(hb);
        let ratio = age.as_secs_f64() / limit.as_secs_f64().max(1.0);
        let filled = ((ratio.min(1.0)) * bar_width as f64).round() as usize;
        let style = if live {
            ctx.theme.age(ratio)
        } else {
            ctx.theme.muted
        };
        lines.push(Line::from(vec![
            Span::raw(format!("{:<10} ", fit(&printable(t.id()), 10))),
            Span::styled("█".repeat(filled), style),
            Span::styled("░".repeat(bar_width - filled), ctx.theme.muted),
            Span::styled(
                format!(" {:>6}/{}", short_age(age), short_age(limit)),
                if live { style } else { ctx.theme.muted },
            ),
        ]));
    }
    if hidden > 0 {
        lines.push(Line::from(Span::styled(
            format!("+{hidden} more (z shows all)"),
            ctx.theme.muted,
        )));
    }
    if lines.is_empty() {
        lines.push(Line::from(Span::styled(
            "No heartbeats yet.",
            ctx.theme.muted,
        )));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The rows that fit in `rows` lines and how many are left out. When not all fit, the
/// participants nearest their own deadline stay (a Musician past its limit before a
/// fresh Conductor: the one stalling is never the one hidden), shown in the usual order,
/// and one line says how many are not shown.
fn fitting<'a>(
    ctx: &DrawCtx<'a>,
    rows: usize,
) -> (Vec<&'a crate::core::snapshot::TaskView>, usize) {
    let all = beating(ctx.snap);
    if all.len() <= rows {
        return (all, 0);
    }
    let room = rows.saturating_sub(1);
    let ratio = |t: &crate::core::snapshot::TaskView| {
        let limit = ctx.rules.deadlines.stale_after(t);
        t.heartbeat.map_or(0.0, |hb| {
            ctx.age(hb).as_secs_f64() / limit.as_secs_f64().max(1.0)
        })
    };
    let mut nearest = all.clone();
    nearest.sort_by(|a, b| ratio(b).total_cmp(&ratio(a)));
    let mut shown: Vec<_> = nearest.into_iter().take(room).collect();
    // Shown in the usual order: leaders first, then by id.
    shown.sort_by_key(|t| (!t.is_conductor(), !t.is_souffleur(), t.id().to_owned()));
    let hidden = all.len() - shown.len();
    (shown, hidden)
}

/// The Heartbeats pane: it lists the tasks, so its moves and Enter are the Tasks'.
pub struct Heartbeats;

impl PaneComponent for Heartbeats {
    fn title(&self) -> &'static str {
        "Heartbeats"
    }

    fn move_by(&self, ui: &mut UiState, snap: &Snapshot, delta: i64) {
        crate::tui::panes::tasks::select_by(ui, snap, delta);
    }

    fn open(&self, ui: &mut UiState, snap: &Snapshot) {
        crate::tui::panes::tasks::open_log(ui, snap);
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
        draw(frame, area, ctx);
    }

    fn summary<'a>(&self, ctx: &DrawCtx<'a>) -> (&'static str, Vec<Span<'a>>) {
        ("♥", folded(ctx))
    }
}

/// Each live participant's heartbeat age against its own limit.
fn folded<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    for t in beating(ctx.snap) {
        let Some(hb) = t.heartbeat else { continue };
        if t.is_conductor() && t.row.state == state::COMPLETE {
            spans.push(Span::raw(format!("{} ", fit(&printable(t.id()), 10))));
            spans.push(Span::styled("complete  ", ctx.theme.ok));
            continue;
        }
        let limit = ctx.rules.deadlines.stale_after(t);
        let age = ctx.age(hb);
        spans.push(Span::raw(format!("{} ", fit(&printable(t.id()), 10))));
        spans.push(Span::styled(
            format!("{}/{}  ", short_age(age), short_age(limit)),
            ctx.theme
                .age(age.as_secs_f64() / limit.as_secs_f64().max(1.0)),
        ));
    }
    if spans.is_empty() {
        // After the end there is nothing left to beat; before it, nothing has yet.
        let ended = ctx.snap.musicians().next().is_some()
            && ctx.snap.musicians().all(|t| t.row.state == state::COMPLETE);
        spans.push(Span::styled(
            if ended {
                "no heartbeats: every task is complete"
            } else {
                "no heartbeats yet"
            },
            ctx.theme.muted,
        ));
    }
    spans
}
