//! What the Tasks pane shows of a task's Claude Code session (TOKENS, COST, CTX,
//! ACTIVITY), and the Session overlay (`s`): everything the transcript says.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use crate::core::sessions::figures::{SessionFigures, dollars, short_tokens};
use crate::core::sessions::tally::epoch_ms;
use crate::core::snapshot::TaskView;
use crate::tui::app::Pane;
use crate::tui::panes::ctx::{DrawCtx, printable, short_age};

/// A self-report this many points away from the transcript's context is marked.
pub const MISMATCH_POINTS: f64 = 10.0;

/// How long ago an RFC 3339 time was, as of the frame.
fn age_of(ctx: &DrawCtx, at: Option<&str>) -> Option<std::time::Duration> {
    let at = epoch_ms(at?)?;
    let now = (ctx.now.unix_timestamp_nanos() / 1_000_000) as i64;
    Some(std::time::Duration::from_millis(
        u64::try_from(now - at).unwrap_or(0),
    ))
}

pub fn tokens_cell<'a>(t: &TaskView, ctx: &DrawCtx<'a>) -> Line<'a> {
    if t.sessions.is_empty() {
        return Line::from(Span::styled("—", ctx.theme.muted));
    }
    let total: u64 = t.sessions.iter().map(|s| s.total_tokens).sum();
    Line::raw(short_tokens(total))
}

pub fn cost_cell<'a>(t: &TaskView, ctx: &DrawCtx<'a>) -> Line<'a> {
    if t.sessions.is_empty() {
        return Line::from(Span::styled("—", ctx.theme.muted));
    }
    Line::raw(dollars(t.cost_usd()).replace("unknown", "?"))
}

/// The transcript's context %, followed by `≠N` (the Musician's own report, N%) when
/// that is more than [`MISMATCH_POINTS`] away; `?` names the mark.
pub fn context_cell<'a>(t: &TaskView, ctx: &DrawCtx<'a>) -> Line<'a> {
    let Some(s) = t.session() else {
        return Line::from(Span::styled("—", ctx.theme.muted));
    };
    let v = s.context_percent;
    let style = if v >= 75.0 {
        ctx.theme.error
    } else if v >= 60.0 {
        ctx.theme.warn
    } else {
        ctx.theme.accent
    };
    let mismatch = t
        .context()
        .filter(|own| (f64::from(*own) - v).abs() > MISMATCH_POINTS);
    let mut spans = vec![Span::styled(format!("{v:>3.0}%"), style)];
    if let Some(own) = mismatch {
        spans.push(Span::styled(format!("≠{own}"), ctx.theme.warn));
    }
    Line::from(spans)
}

/// What the session does: `waits 40s Bash cargo test`, `Edit src/lib.rs`, `idle 3m`.
pub fn activity_text(s: &SessionFigures, ctx: &DrawCtx) -> String {
    match s.activity.as_str() {
        "waiting" => {
            let age = age_of(ctx, s.tool.as_ref().and_then(|t| t.at.as_deref()));
            format!(
                "waits {} {}",
                age.map_or_else(|| "?".into(), short_age),
                s.doing()
            )
        }
        "idle" => match age_of(ctx, s.last_activity.as_deref()) {
            Some(age) => format!("idle {}", short_age(age)),
            None => "idle".into(),
        },
        // Stopped on the API's refusal: its own words (the session overlay has them whole).
        crate::core::sessions::activity::API_ERROR => format!(
            "stopped: {}",
            s.last_error.as_deref().unwrap_or("API error")
        ),
        _ => s.doing(),
    }
}

pub fn activity_cell<'a>(t: &TaskView, ctx: &DrawCtx<'a>) -> Line<'a> {
    let Some(s) = t.session() else {
        return Line::from(Span::styled("—", ctx.theme.muted));
    };
    if t.session_lost {
        return Line::from(Span::styled("transcript gone", ctx.theme.warn));
    }
    let style = match s.activity.as_str() {
        "waiting" => ctx.theme.warn,
        "idle" => ctx.theme.muted,
        crate::core::sessions::activity::API_ERROR => ctx.theme.error,
        _ => ctx.theme.ok,
    };
    Line::from(Span::styled(printable(&activity_text(s, ctx)), style))
}

/// ` · $1.23 · ctx 42% · idle 3m` for the Conductor's line.
pub fn leader_suffix(t: &TaskView, ctx: &DrawCtx) -> Option<String> {
    let s = t.session()?;
    Some(format!(
        " · {} · ctx {:.0}% · {}",
        dollars(t.cost_usd()),
        s.context_percent,
        printable(&activity_text(s, ctx))
    ))
}

/// The Session overlay for one task.
pub fn draw_overlay(frame: &mut Frame, area: Rect, ctx: &DrawCtx, task: &str) {
    let view = ctx.snap.tasks.iter().find(|t| t.id() == task);
    let lines = match view.and_then(|t| t.session().map(|s| (t, s))) {
        None => vec![Line::raw(
            "No Claude Code session is known for this task (yet): maestro looks for a transcript whose first prompt names it, a claude process below its window, or the session id in the database.",
        )],
        Some((t, s)) => {
            let mut lines = session_facts(t, s, ctx);
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
        100,
        lines,
    );
}

/// A session's figures: its id and file, model, tokens, cost, burn, context, what it
/// does and its last error.
fn session_facts<'a>(
    t: &crate::core::snapshot::TaskView,
    s: &crate::core::sessions::figures::SessionFigures,
    ctx: &DrawCtx<'a>,
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
    lines.push(kv("file", s.file.clone()));
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
