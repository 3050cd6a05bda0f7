//! Watchdog: the Conductor's liveness and the last reason, and, when this process holds
//! the Souffleur role, where its state machine stands (mode, generation, retries, next
//! check countdown, last provider result, hold).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

use crate::core::domain::state;
use crate::tui::app::Pane;
use crate::tui::panes::PaneComponent;
use crate::tui::panes::ctx::{DrawCtx, printable, short_age};

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let block = ctx.block(Pane::Watchdog, "Watchdog");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let w = &ctx.snap.watchdog;
    let label = |k: &str| Span::styled(format!("{k:<10}"), ctx.theme.muted);
    let state = w.conductor_state.clone().unwrap_or_else(|| "—".into());
    let beat = match w.conductor_heartbeat {
        // A finished Conductor has no deadline: its last beat is history.
        Some(hb) if w.conductor_state.as_deref() == Some(state::COMPLETE) => Span::styled(
            format!("stopped at {} (complete)", ctx.clock.hms(hb)),
            ctx.theme.muted,
        ),
        Some(hb) => {
            let age = ctx.age(hb);
            let limit = ctx.rules.deadlines.conductor_stale_after;
            Span::styled(
                format!("{} of {}", short_age(age), short_age(limit)),
                ctx.theme
                    .age(age.as_secs_f64() / limit.as_secs_f64().max(1.0)),
            )
        }
        None => Span::styled("—", ctx.theme.muted),
    };
    let last = match &w.last_reason {
        Some((at, reason)) => Span::styled(
            format!("{reason} at {}", ctx.clock.hms(*at)),
            ctx.theme.warn,
        ),
        None => Span::styled("none", ctx.theme.muted),
    };
    let mut lines = match &w.role {
        None => vec![Line::from(vec![label("mode"), Span::raw("observe-only")])],
        Some(r) => role_lines(r, ctx),
    };
    lines.extend([
        Line::from(vec![
            label("conductor"),
            Span::styled(state.clone(), ctx.theme.state(&state)),
        ]),
        Line::from(vec![label("heartbeat"), beat]),
        Line::from(vec![label("last"), last]),
        // The Souffleur's "task count": every row of orchestration_tasks, the Conductor's
        // and its own included (the Tasks pane counts Musicians).
        Line::from(vec![
            label("rows"),
            Span::raw(format!("{} in orchestration_tasks", w.task_count)),
        ]),
    ]);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), inner);
}

/// The Souffleur role's lines, when this process holds it: its phase, PID, next check,
/// last recovery, settings and note.
fn role_lines<'a>(r: &crate::core::event::RoleView, ctx: &DrawCtx<'a>) -> Vec<Line<'a>> {
    let label = |k: &str| Span::styled(format!("{k:<10}"), ctx.theme.muted);
    let mut lines = Vec::new();
    let held = if r.held {
        Span::styled(" · HELD", ctx.theme.error)
    } else {
        Span::raw("")
    };
    lines.push(Line::from(vec![
        label("souffleur"),
        Span::styled(
            r.phase.clone(),
            ctx.theme.state(if r.phase == "watching" {
                state::WORKING
            } else {
                state::NEEDS_REVIEW
            }),
        ),
        Span::raw(format!(
            " · {} · S{} · retries {}",
            r.mode, r.generation, r.no_progress
        )),
        held,
    ]));
    let next = r.next_check.map_or_else(
        || "—".to_owned(),
        |at| {
            format!(
                "in {}",
                short_age((at - ctx.now).try_into().unwrap_or_default())
            )
        },
    );
    lines.push(Line::from(vec![
        label("pid"),
        Span::raw(
            r.conductor_pid
                .map_or_else(|| "unknown".into(), |p| p.to_string()),
        ),
        Span::styled("  next check ", ctx.theme.muted),
        Span::raw(next),
    ]));
    if let Some((provider, status)) = &r.last_provider {
        lines.push(Line::from(vec![
            label("recovery"),
            Span::raw(format!("{provider} {status}")),
        ]));
    }
    if !r.settings.is_empty() {
        lines.push(Line::from(vec![
            label("settings"),
            Span::styled(printable(&r.settings), ctx.theme.muted),
        ]));
    }
    if let Some(alert) = &r.alert {
        lines.push(Line::from(vec![
            label("note"),
            Span::styled(printable(alert), ctx.theme.warn),
        ]));
    }
    lines
}

/// The Watchdog pane: it shows; its keys (hold, recover now) are global.
pub struct Watchdog;

impl PaneComponent for Watchdog {
    fn title(&self) -> &'static str {
        "Watchdog"
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
        draw(frame, area, ctx);
    }

    fn summary<'a>(&self, ctx: &DrawCtx<'a>) -> (&'static str, Vec<Span<'a>>) {
        ("Watchdog", folded(ctx))
    }
}

fn folded<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let w = &ctx.snap.watchdog;
    let mode = match &w.role {
        Some(role) => format!("{} · {} · ", role.phase, role.mode),
        None => "observing · ".to_owned(),
    };
    let last = match &w.last_reason {
        Some((at, reason)) => Span::styled(
            format!("last {reason} at {}", ctx.clock.hms(*at)),
            ctx.theme.warn,
        ),
        None => Span::styled("no event", ctx.theme.muted),
    };
    vec![Span::styled(mode, ctx.theme.muted), last]
}
