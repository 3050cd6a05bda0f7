//! Messages: the `orchestration_messages` feed, newest first, filterable by task and
//! type; Enter shows one in full.

pub mod state;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{List, ListItem, ListState, Paragraph};

use crate::core::event::MessageRow;
use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::{Effect, Overlay, Pane, UiState};
use crate::tui::panes::{PaneComponent, moved};
use crate::tui::panes::ctx::{DrawCtx, more_marks, printable, read_in_full, window_start, wrap};

/// Who wrote a message and its text, as a row shows them: a message the operator sent
/// through maestro (its text starts with the store's mark) is "you", its text without
/// the mark, so the mark never takes the room of what was said.
pub fn author_and_text(m: &MessageRow) -> (String, &str) {
    let text = m.message.as_deref().unwrap_or_default();
    match text.strip_prefix(crate::core::store::OPERATOR_MARK) {
        Some(rest) => ("you".to_owned(), rest),
        None => (printable(m.from_session.as_deref().unwrap_or("-")), text),
    }
}

/// Columns one message's line needs whole (its first line of text).
pub fn row_width(m: &MessageRow) -> usize {
    let field = |v: &Option<String>| printable(v.as_deref().unwrap_or("-")).chars().count();
    let (from, text) = author_and_text(m);
    let first = text.lines().next().unwrap_or_default();
    6.max(m.id.to_string().len() + 2)
        + 9
        + field(&m.task_id)
        + 1
        + field(&m.message_type)
        + 1
        + from.chars().count()
        + 2
        + printable(first).chars().count()
}

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let ui = ctx.ui;
    let block = ctx.block_within(Pane::Messages, &title(ui), area.width);
    let inner = block.inner(area);
    let rows = inner.height;
    let start = window_start(ui.panes.messages.selected, rows);
    let below = ui
        .panes
        .messages
        .filtered()
        .count()
        .saturating_sub(start + usize::from(rows));
    let block = match more_marks(start, below) {
        Some(marks) => {
            block.title_bottom(Line::from(Span::styled(marks, ctx.theme.accent)).right_aligned())
        }
        None => block,
    };
    let focused = ui.focus == Pane::Messages;
    let width = usize::from(inner.width);
    let shown: Vec<(usize, &MessageRow)> = ui
        .panes
        .messages
        .filtered()
        .enumerate()
        .skip(start)
        .take(usize::from(rows))
        .collect();
    // The selected row, read in full, takes the rows it needs up to what is left
    // below the rows before it (each one line): never more than the pane holds.
    let rows_n = usize::from(rows).max(1);
    let budget = (rows_n - (ui.panes.messages.selected - start).min(rows_n - 1)).min(5);
    // What it takes: its line, and its text wrapped below (when focused and cut).
    let selected_lines = ui
        .panes
        .messages
        .filtered()
        .nth(ui.panes.messages.selected)
        .filter(|x| focused && row_width(x) > width)
        .map_or(1, |x| {
            (1 + wrap(&printable(author_and_text(x).1), width.saturating_sub(4)).len()).min(budget)
        });
    let mut spare = usize::from(rows)
        .saturating_sub(shown.len())
        .saturating_sub(selected_lines - 1);
    // Rows an item may take: what the pane has left once each row after it has one
    // (a row folded past the pane's end would be cut by it, unmarked).
    let count = shown.len();
    let mut used = 0;
    let items: Vec<ListItem> = shown
        .into_iter()
        .enumerate()
        .map(|(k, (i, m))| {
            let prefix = row_prefix(m, ctx);
            let text = printable(author_and_text(m).1);
            let cut = row_width(m) > width;
            let room = rows_n.saturating_sub(used + (count - k - 1)).max(1);
            // The selected one, when cut, is read in full below its line (Enter opens it).
            let lines = if focused && i == ui.panes.messages.selected && cut {
                read_in_full(prefix, &text, width, budget.min(room))
            } else {
                // Each cut row folds onto up to three spare lines, first come first
                // served; the last row shown onto all that are left.
                let share = if k + 1 == count { spare } else { spare.min(3) };
                let fold = if cut { share.min(room - 1) } else { 0 };
                // One indent for every folded message, the one the selected one reads at.
                let lines =
                    crate::tui::panes::text::fold_under(prefix, &text, width, fold, Some(4));
                spare = spare.saturating_sub(lines.len() - 1);
                lines
            };
            used += lines.len();
            ListItem::new(lines)
        })
        .collect();
    if items.is_empty() {
        let inner = block.inner(area);
        frame.render_widget(block, area);
        frame.render_widget(Paragraph::new("No messages.").style(ctx.theme.muted), inner);
        return;
    }
    let list = List::new(items).block(block).highlight_style(if focused {
        ctx.theme.selection
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    });
    let mut state = ListState::default().with_selected(Some(ui.panes.messages.selected - start));
    frame.render_stateful_widget(list, area, &mut state);
}

/// "Messages (12)", or with a filter what it shows of what is kept: "Messages (1 of 4 ·
/// type approval)".
fn title(ui: &crate::tui::app::UiState) -> String {
    let kept = crate::tui::panes::ctx::kept_of(ui.panes.messages.rows.len(), ui.panes.messages.seen);
    let mut filters = String::new();
    if let Some(t) = &ui.panes.messages.task_filter {
        filters.push_str(&format!(" · task {}", printable(t)));
    }
    if let Some(t) = &ui.panes.messages.type_filter {
        filters.push_str(&format!(" · type {}", printable(t)));
    }
    if filters.is_empty() {
        format!("Messages ({kept})")
    } else {
        format!(
            "Messages ({} of {kept}{filters})",
            ui.panes.messages.filtered().count()
        )
    }
}

/// A message row's lead: "#12   14:02:11 task-03 instruction task-00: ".
fn row_prefix<'a>(m: &MessageRow, ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let time = m
        .timestamp
        .as_deref()
        .and_then(|t| t.get(11..19))
        .unwrap_or("--:--:--");
    vec![
        Span::styled(format!("#{:<4} {time} ", m.id), ctx.theme.muted),
        Span::raw(format!(
            "{} ",
            printable(m.task_id.as_deref().unwrap_or("-"))
        )),
        Span::styled(
            format!("{} ", printable(m.message_type.as_deref().unwrap_or("-"))),
            type_style(m.message_type.as_deref(), ctx),
        ),
        Span::styled(format!("{}: ", author_and_text(m).0), ctx.theme.muted),
    ]
}

fn type_style(kind: Option<&str>, ctx: &DrawCtx) -> Style {
    match kind {
        Some("error" | "emergency" | "rejection") => ctx.theme.error,
        Some("review_request" | "context_warning" | "claim_blocked" | "warning") => ctx.theme.warn,
        Some("approval" | "completion") => ctx.theme.ok,
        _ => ctx.theme.accent,
    }
}

/// The Messages pane: its filters by task and by type; Enter shows one whole.
pub struct Messages;

impl PaneComponent for Messages {
    fn title(&self) -> &'static str {
        "Messages"
    }

    fn actions(&self) -> &'static [Action] {
        &[Action::FilterTask, Action::FilterType]
    }

    fn on_action(&self, ui: &mut UiState, action: Action, snap: &Snapshot) -> Vec<Effect> {
        match action {
            Action::FilterTask => {
                ui.panes.messages.task_filter = match ui.panes.messages.task_filter {
                    Some(_) => None,
                    None => ui
                        .shown_tasks(snap)
                        .get(ui.selected_task)
                        .map(|t| t.id().to_owned()),
                };
                ui.panes.messages.selected = 0;
            }
            Action::FilterType => {
                let mut types: Vec<&str> = ui
                    .panes
                    .messages
                    .rows
                    .iter()
                    .filter_map(|m| m.message_type.as_deref())
                    .collect();
                types.sort_unstable();
                types.dedup();
                let next = match &ui.panes.messages.type_filter {
                    None => types.first().copied(),
                    Some(cur) => types.iter().skip_while(|t| *t != cur).nth(1).copied(),
                };
                ui.panes.messages.type_filter = next.map(str::to_owned);
                ui.panes.messages.selected = 0;
            }
            _ => {}
        }
        vec![]
    }

    fn move_by(&self, ui: &mut UiState, _snap: &Snapshot, delta: i64) {
        let shown = ui.panes.messages.filtered().count();
        ui.panes.messages.selected = moved(ui.panes.messages.selected, shown, delta);
    }

    fn open(&self, ui: &mut UiState, _snap: &Snapshot) {
        let id = ui.panes.messages.filtered().nth(ui.panes.messages.selected).map(|m| m.id);
        if let Some(id) = id {
            ui.overlay = Some(Overlay::Message(id));
        }
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
        draw(frame, area, ctx);
    }

    fn summary<'a>(&self, ctx: &DrawCtx<'a>) -> (&'static str, Vec<Span<'a>>) {
        ("Messages", folded(ctx))
    }
}

fn folded<'a>(ctx: &DrawCtx<'a>) -> Vec<Span<'a>> {
    let Some(last) = ctx.ui.panes.messages.rows.back() else {
        return vec![Span::styled("none", ctx.theme.muted)];
    };
    vec![
        Span::styled(
            format!(
                "{} · #{} {} [{}] ",
                crate::tui::panes::ctx::counted(ctx.ui.panes.messages.rows.len(), "message", "messages"),
                last.id,
                printable(last.task_id.as_deref().unwrap_or("—")),
                printable(last.message_type.as_deref().unwrap_or("—"))
            ),
            ctx.theme.muted,
        ),
        Span::raw(printable(last.message.as_deref().unwrap_or_default())),
    ]
}
