//! A pane folded to one line, when the layout has no room for its borders: what it
//! holds said in a line (the newest anomaly, the last log line, each heartbeat's age
//! against its limit, the watchdog's mode and last event), so nothing with items ever
//! shows zero of them. `z` zooms any pane to the whole screen.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::app::Pane;
use crate::tui::panes::ctx::{DrawCtx, fit, printable, short_age};

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, pane: Pane) {
    let title_style = ctx
        .theme
        .title(ctx.ui.focus == pane)
        .add_modifier(Modifier::BOLD);
    let (title, body) = match pane {
        Pane::Tasks => (
            "Tasks",
            vec![Span::raw(format!(
                "{} Musicians",
                crate::tui::app::musicians(ctx.snap).count()
            ))],
        ),
        Pane::Log => ("Log", log(ctx)),
        Pane::Anomalies => ("Anomalies", anomalies(ctx)),
        Pane::Messages => ("Messages", messages(ctx)),
        Pane::Heartbeats => ("♥", heartbeats(ctx)),
        Pane::Watchdog => ("Watchdog", watchdog(ctx)),
    };
    // Side by side (the heartbeats/watchdog strip), the right one starts with a bar.
    let lead = if area.x > 0 { "│ " } else { "" };
    let mut spans = vec![
        Span::styled(lead, ctx.theme.muted),
        Span::styled(format!("{title} "), title_style),
    ];
    spans.extend(body);
    frame.render_widget(
        Paragraph::new(crate::tui::panes::ctx::fit_line(
            Line::from(spans),
            usize::from(area.width),
        )),
        Rect { height: 1, ..area },
    );
}

fn log<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let task = ctx
        .ui
        .log_task
        .as_ref()
        .map_or_else(|| "—".to_owned(), ToString::to_string);
    let last = ctx
        .ui
        .current_log()
        .filter(|l| !l.is_empty())
        .and_then(|l| l.get(l.end() - 1))
        .map(|e| printable(&e.text));
    vec![
        Span::styled(format!("{task}: "), ctx.theme.muted),
        match last {
            Some(text) => Span::raw(text),
            None => Span::styled("no lines yet", ctx.theme.muted),
        },
    ]
}

fn anomalies<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let ui = ctx.ui;
    let Some(newest) = ui.anomalies.front() else {
        return vec![Span::styled("none", ctx.theme.muted)];
    };
    let unread = ui.unread_anomalies();
    let count = crate::tui::panes::ctx::counted(ui.anomalies.len(), "anomaly", "anomalies");
    vec![
        Span::styled(
            if unread > 0 {
                format!("{count}, {unread} unread · ")
            } else {
                format!("{count} · ")
            },
            if unread > 0 {
                ctx.theme.error
            } else {
                ctx.theme.muted
            },
        ),
        Span::styled(
            format!("{} {}: ", newest.task, newest.kind.as_str()),
            ctx.theme.error,
        ),
        Span::raw(printable(&newest.detail)),
    ]
}

fn messages<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let Some(last) = ctx.ui.messages.back() else {
        return vec![Span::styled("none", ctx.theme.muted)];
    };
    vec![
        Span::styled(
            format!(
                "{} · #{} {} [{}] ",
                crate::tui::panes::ctx::counted(ctx.ui.messages.len(), "message", "messages"),
                last.id,
                printable(last.task_id.as_deref().unwrap_or("—")),
                printable(last.message_type.as_deref().unwrap_or("—"))
            ),
            ctx.theme.muted,
        ),
        Span::raw(printable(last.message.as_deref().unwrap_or_default())),
    ]
}

/// Each live participant's heartbeat age against its own limit.
fn heartbeats<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    for t in crate::tui::panes::heartbeats::beating(ctx.snap) {
        let Some(hb) = t.heartbeat else { continue };
        if t.is_conductor() && t.row.state == "complete" {
            spans.push(Span::raw(format!("{} ", fit(&printable(t.id()), 10))));
            spans.push(Span::styled("complete  ", ctx.theme.ok));
            continue;
        }
        let limit = ctx.limits.of(t);
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
        let ended = crate::tui::app::musicians(ctx.snap).next().is_some()
            && crate::tui::app::musicians(ctx.snap).all(|t| t.row.state == "complete");
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

fn watchdog<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
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
