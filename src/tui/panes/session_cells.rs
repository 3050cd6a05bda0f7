//! What the Tasks pane shows of a task's Claude Code session (TOKENS, COST, CTX,
//! ACTIVITY); the Session overlay (`s`) is `app::overlays::session`.

use ratatui::text::{Line, Span};

use crate::core::sessions::figures::{SessionFigures, dollars, short_tokens};
use crate::core::sessions::timestamp::epoch_ms;
use crate::core::snapshot::TaskView;
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
