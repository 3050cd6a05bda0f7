//! The projects bar: one line above the panes when the dashboard shows several
//! projects, one tab each (its number for `alt-N`, name, tasks by state, unread
//! anomalies, the Conductor's state, the sessions' cost), the shown one highlighted.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::panes::ctx::{DrawCtx, printable};
use crate::tui::project_tab::ProjectTab;

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    // Every figure when they fit; else each tab's number, name and unread count.
    let full = spans(ctx, true);
    let line = if full.iter().map(Span::width).sum::<usize>() <= usize::from(area.width) {
        Line::from(full)
    } else {
        Line::from(spans(ctx, false))
    };
    frame.render_widget(Paragraph::new(line), area);
}

fn spans<'a>(ctx: &DrawCtx<'a>, full: bool) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    for (i, tab) in ctx.projects.iter().enumerate() {
        let selected = i == ctx.project_index;
        let name_style = if selected {
            ctx.theme.title(true).add_modifier(Modifier::REVERSED)
        } else {
            ctx.theme.title(false)
        };
        spans.push(Span::styled(
            format!(" {} {} ", i + 1, printable(&tab.name)),
            name_style,
        ));
        if tab.link_down {
            spans.push(Span::styled("link down ", ctx.theme.error));
        }
        spans.extend(figures(ctx, tab, full, false));
        spans.push(Span::raw(if full { "  " } else { " " }));
    }
    spans
}

/// A tab's figures: tasks by state, trouble, tasks that need the operator, unread
/// anomalies, the Conductor's state and the cost (`full`: all of them; `words`: with
/// their names, for the picker).
pub(crate) fn figures<'a>(
    ctx: &DrawCtx<'a>,
    tab: &ProjectTab,
    full: bool,
    words: bool,
) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    if full {
        spans.push(Span::styled(
            format!(" {}w {}r {}d", tab.working, tab.review, tab.done),
            ctx.theme.muted,
        ));
        if tab.trouble > 0 {
            spans.push(Span::styled(format!(" {}!", tab.trouble), ctx.theme.error));
        }
    }
    let (need, unread) = if words {
        (" need you", " unread")
    } else {
        ("", "")
    };
    if tab.needs_you > 0 {
        spans.push(Span::styled(
            format!(" ⚑{}{need}", tab.needs_you),
            ctx.theme.error,
        ));
    }
    if tab.unread > 0 {
        spans.push(Span::styled(
            format!(" ●{}{unread}", tab.unread),
            ctx.theme.error,
        ));
    }
    if full {
        if let Some(c) = &tab.conductor {
            spans.push(Span::styled(
                format!(" C:{}", printable(c)),
                ctx.theme.state(c),
            ));
        }
        if let Some(cost) = tab.cost {
            spans.push(Span::styled(format!(" ${cost:.2}"), ctx.theme.accent));
        }
    }
    spans
}
