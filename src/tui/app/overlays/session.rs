//! The Session overlay (`s` on a task): everything its Claude Code transcript says,
//! tokens, cost, burn, context, what it does, its last error and its tool calls.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::core::sessions::figures::{dollars, short_tokens};
use crate::tui::app::overlays::{Extent, Component, Overlay};
use crate::tui::app::state::Pane;
use crate::tui::panes::ctx::{DrawCtx, printable};
use crate::tui::panes::session_cells::activity_text;

pub struct Session;

impl Component for Session {
    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        if let Some(Overlay::Session(task)) = &ctx.ui.overlay {
            return Some(draw(frame, area, ctx, task));
        }
        None
    }
}

/// The Session overlay for one task.
fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx, task: &str) -> Extent {
    let view = ctx.snap.tasks.iter().find(|t| t.id() == task);
    let lines = match view.and_then(|t| t.session().map(|s| (t, s))) {
        None => vec![Line::raw(
            "No Claude Code session is known for this task (yet): maestro looks for a transcript whose first prompt names it, a claude process below its window, or the session id in the database.",
        )],
        Some((t, s)) => {
            // The overlay's inner width, as the reader draws it.
            let inner = usize::from(OVERLAY_WIDTH.min(area.width).max(12) - 2);
            let mut lines = session_facts(t, s, ctx, inner);
            lines.extend(session_calls(s, ctx));
            lines
        }
    };
    crate::tui::panes::reader::draw(
        frame,
        area,
        ctx,
        (
            &format!("Session · {} · Esc close", printable(task)),
            Pane::Tasks,
        ),
        OVERLAY_WIDTH,
        lines,
    )
}

/// The overlay's widest.
const OVERLAY_WIDTH: u16 = 100;

/// The label column's width.
const LABEL: usize = 12;

/// A path under its label, folded after a `/` where the row ends: each row a whole
/// run of folders, so no piece of it reads as cut. A single name longer than a row is
/// left to the reader's fold, which marks where it breaks.
fn path_rows<'a>(label: &str, path: &str, inner: usize, ctx: &DrawCtx<'a>) -> Vec<Line<'a>> {
    let room = inner.saturating_sub(LABEL).max(1);
    let mut rows: Vec<String> = vec![String::new()];
    for piece in printable(path).split_inclusive('/') {
        let row = rows.last_mut().expect("one row at least");
        if !row.is_empty() && Span::raw(&*row).width() + Span::raw(piece).width() > room {
            rows.push(piece.to_owned());
        } else {
            row.push_str(piece);
        }
    }
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| {
            let head = if i == 0 { label } else { "" };
            Line::from(vec![
                Span::styled(format!("{head:<LABEL$}"), ctx.theme.muted),
                Span::raw(row),
            ])
        })
        .collect()
}

/// A session's figures: its id and file, model, tokens, cost, burn, context, what it
/// does and its last error.
fn session_facts<'a>(
    t: &crate::core::snapshot::TaskView,
    s: &crate::core::sessions::figures::SessionFigures,
    ctx: &DrawCtx<'a>,
    inner: usize,
) -> Vec<Line<'a>> {
    let mut lines: Vec<Line> = Vec::new();
    let kv = |k: &str, v: String| {
        Line::from(vec![
            Span::styled(format!("{k:<12}"), ctx.theme.muted),
            Span::raw(printable(&v)),
        ])
    };
    lines.push(kv(
        "session",
        format!("{} (found by {})", s.session_id, s.found_by),
    ));
    lines.extend(path_rows("file", &s.file, inner, ctx));
    if t.session_lost {
        lines.push(Line::from(Span::styled(
            "the transcript can no longer be read",
            ctx.theme.warn,
        )));
    }
    lines.push(kv("model", s.models.join(", ")));
    lines.push(kv(
        "tokens",
        format!(
            "{} in · {} out · {} cache write · {} cache read · {} total",
            short_tokens(s.input_tokens),
            short_tokens(s.output_tokens),
            short_tokens(s.cache_write_tokens),
            short_tokens(s.cache_read_tokens),
            short_tokens(s.total_tokens)
        ),
    ));
    lines.push(kv(
        "cost",
        format!(
            "{} this session · {} all {} session(s) of the task · API list prices",
            dollars(s.cost_usd),
            dollars(t.cost_usd()),
            t.sessions.len()
        ),
    ));
    lines.push(kv(
        "burn",
        format!(
            "{} tokens, {} in the last 10 minutes",
            short_tokens(s.burn_tokens_10m),
            dollars(s.burn_cost_usd_10m)
        ),
    ));
    let width = 30usize;
    let filled = ((s.context_percent / 100.0) * width as f64).round() as usize;
    let bar = "█".repeat(filled.min(width)) + &"░".repeat(width - filled.min(width));
    let own = t
        .context()
        .map_or_else(String::new, |c| format!(" · self-report {c}%"));
    lines.push(Line::from(vec![
        Span::styled(format!("{:<12}", "context"), ctx.theme.muted),
        Span::styled(bar, ctx.theme.accent),
        Span::raw(format!(
            " {:.1}% of {}{own} · {} compaction(s)",
            s.context_percent,
            short_tokens(s.context_window),
            s.compactions
        )),
    ]));
    lines.push(kv("doing", activity_text(s, ctx)));
    if let Some(e) = &s.last_error {
        lines.push(Line::from(vec![
            Span::styled(format!("{:<12}", "last error"), ctx.theme.muted),
            Span::styled(printable(e), ctx.theme.error),
        ]));
    }
    lines
}

/// The LLM pollers a session pays for and its last tool calls, newest first.
fn session_calls<'a>(
    s: &crate::core::sessions::figures::SessionFigures,
    ctx: &DrawCtx<'a>,
) -> Vec<Line<'a>> {
    let mut lines: Vec<Line> = Vec::new();
    // The LLM pollers it pays for (docs/orchestration.md, "Switching the LLM
    // pollers off"), each with what it cost and when it last ran.
    for p in &s.pollers {
        lines.push(Line::from(vec![
            Span::styled(format!("{:<12}", "poller"), ctx.theme.muted),
            Span::styled(p.role.clone(), ctx.theme.warn),
            Span::raw(format!(
                " (agent {}) {} tokens, {} · last {}",
                printable(p.agent.as_deref().unwrap_or("?")),
                short_tokens(p.total_tokens),
                dollars(p.cost_usd),
                printable(p.last_activity.as_deref().unwrap_or("-"))
            )),
        ]));
    }
    lines.push(Line::from(Span::styled(
        match s.recent.len() {
            0 => "no tool calls yet".to_owned(),
            1 => "its last tool call".to_owned(),
            n => format!("its last {n} tool calls"),
        },
        ctx.theme.muted,
    )));
    for call in s.recent.iter().rev() {
        let style = match call.result.as_str() {
            "error" => ctx.theme.error,
            "waiting" => ctx.theme.warn,
            _ => ctx.theme.ok,
        };
        let when = call
            .at
            .as_deref()
            .and_then(|a| a.get(11..19))
            .unwrap_or("--:--:--");
        lines.push(Line::from(vec![
            Span::styled(format!("{when} {:<8}", call.result), style),
            Span::raw(printable(&format!(
                "{} {}",
                call.name,
                call.argument.as_deref().unwrap_or_default()
            ))),
        ]));
    }
    lines
}
