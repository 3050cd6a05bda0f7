//! Tasks: one row per Musician (state by meaning, heartbeat age, context trend, retries,
//! last anomaly), with the Conductor and the Souffleur on their own line above.

pub mod state;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table, TableState};

use crate::core::domain::TaskId;
use crate::core::snapshot::{Snapshot, TaskView};
use crate::tui::action::Action;
use crate::tui::app::{Effect, Overlay, Pane, UiState};
use crate::tui::panes::{PaneComponent, moved};
use crate::tui::panes::ctx::{DrawCtx, fit, fit_line, printable, short_age};
use crate::tui::panes::conductor_line::{conductors_turn, leaders_line, waiting_for_conductor};
use crate::tui::panes::session_cells;

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

pub fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let shown = ctx.ui.shown_tasks(ctx.snap);
    let count = shown.len();
    let total = ctx.snap.musicians().count();
    let mut title = if count == total {
        format!("Tasks ({count})")
    } else {
        format!("Tasks ({count} of {total})")
    };
    if let Some(f) = &ctx.ui.panes.tasks.filter {
        title.push_str(&format!(" · /{}", printable(f)));
    }
    if ctx.ui.panes.tasks.sort != crate::tui::panes::tasks::state::TaskSort::Id {
        title.push_str(&format!(" · by {}", ctx.ui.panes.tasks.sort.label()));
    }
    let mut block = ctx.block_within(Pane::Tasks, &title, area.width);
    // Where rows are hidden, the bottom border says how many (borders, the leaders'
    // line and the header take four lines).
    let fits = area.height.saturating_sub(4);
    let first = crate::tui::panes::ctx::window_start(ctx.ui.selected_task, fits);
    let (above, below) = (first, count.saturating_sub(first + usize::from(fits)));
    if let Some(marks) = crate::tui::panes::ctx::more_marks(above, below) {
        block =
            block.title_bottom(Line::from(Span::styled(marks, ctx.theme.accent)).right_aligned());
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [leaders, table_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    frame.render_widget(
        Paragraph::new(leaders_line(ctx, usize::from(leaders.width))),
        leaders,
    );

    if count == 0 {
        let hint = if ctx.snap.tasks.is_empty() {
            "No tasks yet. No project here? `maestro init` starts one, `maestro demo` shows one."
        } else {
            "No Musicians yet."
        };
        frame.render_widget(Paragraph::new(hint).style(ctx.theme.muted), table_area);
        return;
    }
    // With room to spare under the rows, the selected task said in full.
    let table_area = if usize::from(table_area.height) > count + 1 && ctx.ui.focus == Pane::Tasks {
        let [table, detail] =
            Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(table_area);
        if let Some(t) = shown.get(ctx.ui.selected_task) {
            let line = fit_line(detail_line(t, ctx), usize::from(detail.width));
            frame.render_widget(Paragraph::new(line), detail);
        }
        table
    } else {
        table_area
    };
    draw_table(frame, table_area, ctx, &shown);
}

/// The table of Musicians: the columns that fit, each as wide as its cells need, only
/// the rows on screen built.
fn draw_table(frame: &mut Frame, table_area: Rect, ctx: &DrawCtx, shown: &[&TaskView]) {
    // The columns that fit, by priority; the session's only once one is known.
    let sessions = ctx.snap.tasks.iter().any(|t| !t.sessions.is_empty());
    let columns = Column::fitting(
        table_area.width.saturating_sub(2),
        sessions,
        !ctx.snap.watchers.is_empty(),
    );
    let header = Row::new(columns.iter().map(|c| c.title()))
        .style(ctx.theme.muted.add_modifier(Modifier::BOLD));
    // Only the rows on screen are built (one line is the header).
    let visible = usize::from(table_area.height.saturating_sub(1));
    let start = crate::tui::panes::ctx::window_start(
        ctx.ui.selected_task,
        table_area.height.saturating_sub(1),
    );
    let table_cells: Vec<Vec<Line>> = shown
        .iter()
        .copied()
        .skip(start)
        .take(visible)
        .map(|t| cells(t, ctx, &columns))
        .collect();
    // What each column's cells on screen need: ids and names read whole before any
    // column pads.
    let needs: Vec<u16> = (0..columns.len())
        .map(|i| {
            let cells = table_cells.iter().map(|r| r[i].width()).max().unwrap_or(0);
            u16::try_from(cells).unwrap_or(u16::MAX)
        })
        .collect();
    let widths = widths(&columns, table_area.width.saturating_sub(2), &needs);
    // A cell longer than its column ends in `…`, never cut without a mark.
    let rows = table_cells.into_iter().map(|r| {
        Row::new(
            r.into_iter()
                .zip(&widths)
                .map(|(cell, w)| fit_line(cell, usize::from(*w))),
        )
    });
    let widths = widths.iter().map(|w| Constraint::Length(*w));
    let focused = ctx.ui.focus == Pane::Tasks;
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(if focused {
            ctx.theme.selection
        } else {
            Style::new().add_modifier(Modifier::BOLD)
        })
        .highlight_symbol("▶ ");
    let mut state = TableState::default().with_selected(Some(ctx.ui.selected_task - start));
    frame.render_stateful_widget(table, table_area, &mut state);
}


/// When the task should reach 75 % context (the Musician's exit), counting down; a
/// finished task (`complete`, `exited`) has nothing left to forecast.
fn forecast_cell<'a>(t: &TaskView, ctx: &DrawCtx<'a>) -> Line<'a> {
    let finished = crate::core::domain::TaskState(t.row.state.clone()).is_terminal();
    let forecast = t.forecast.as_ref().filter(|_| !finished);
    let Some(at) = forecast.and_then(|f| f.exit_at) else {
        return Line::from(Span::styled("—", ctx.theme.muted));
    };
    if at <= ctx.now {
        // "now" only for a context that is there: a trend past its crossing with the
        // value still below it is overdue, not a fact.
        let reached = t
            .ctx
            .back()
            .is_some_and(|v| *v >= crate::core::forecast::EXIT_AT);
        return Line::from(if reached {
            Span::styled("now", ctx.theme.error)
        } else {
            Span::styled("due", ctx.theme.warn)
        });
    }
    let left: std::time::Duration = (at - ctx.now).try_into().unwrap_or_default();
    let style = if left.as_secs() < 600 {
        ctx.theme.warn
    } else {
        ctx.theme.muted
    };
    Line::from(Span::styled(short_age(left), style))
}

/// Which `maestro musician watch` is attached: `bg` (background), `pause`, `bg+p`.
fn watch_cell<'a>(t: &TaskView, ctx: &DrawCtx<'a>) -> Line<'a> {
    match ctx.snap.watchers.get(t.id()).map(String::as_str) {
        Some("background") => Line::from(Span::styled("bg", ctx.theme.ok)),
        Some("pause") => Line::from(Span::styled("pause", ctx.theme.warn)),
        Some(_) => Line::from(Span::styled("bg+p", ctx.theme.ok)),
        None => Line::from(Span::styled("—", ctx.theme.muted)),
    }
}

/// A column of the Tasks table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Id,
    State,
    WorkedBy,
    Beat,
    Watch,
    Context,
    TrueContext,
    Forecast,
    Retry,
    Tokens,
    Cost,
    Activity,
    Anomaly,
}

impl Column {
    /// In the order shown.
    const ALL: [Column; 13] = [
        Column::Id,
        Column::State,
        Column::WorkedBy,
        Column::Beat,
        Column::Watch,
        Column::Context,
        Column::TrueContext,
        Column::Forecast,
        Column::Retry,
        Column::Tokens,
        Column::Cost,
        Column::Activity,
        Column::Anomaly,
    ];
    /// In the order kept when the pane is narrow.
    const PRIORITY: [Column; 13] = [
        Column::Id,
        Column::State,
        Column::Context,
        Column::TrueContext,
        Column::Cost,
        Column::Activity,
        Column::Beat,
        Column::Forecast,
        Column::Anomaly,
        Column::Tokens,
        Column::WorkedBy,
        Column::Retry,
        Column::Watch,
    ];

    fn title(self) -> &'static str {
        match self {
            Column::Id => "ID",
            Column::State => "STATE",
            Column::WorkedBy => "WORKED BY",
            Column::Beat => "BEAT",
            Column::Watch => "WATCH",
            Column::Context => "CONTEXT",
            Column::TrueContext => "CTX",
            Column::Forecast => "→75%",
            Column::Retry => "RETRY",
            Column::Tokens => "TOKENS",
            Column::Cost => "COST",
            Column::Activity => "ACTIVITY",
            Column::Anomaly => "LAST ANOMALY",
        }
    }

    /// Its width (the least, for the one that takes the rest).
    fn width(self) -> u16 {
        match self {
            Column::Id | Column::WorkedBy => 11,
            // The longest state and the longest anomaly kind (`self-correction`): shown
            // whole or not at all.
            Column::State | Column::Anomaly => 15,
            Column::Context => 13,
            Column::Beat | Column::Forecast => 6,
            Column::Watch | Column::Retry | Column::TrueContext => 5,
            Column::Tokens | Column::Cost => 7,
            Column::Activity => 16,
        }
    }

    fn of_session(self) -> bool {
        matches!(
            self,
            Column::TrueContext | Column::Tokens | Column::Cost | Column::Activity
        )
    }

    /// The columns that fit in `width`, most important first, shown in their order. An
    /// attached watcher is news the row must show: its column (5 wide) is then kept
    /// right after the state, before any wider column.
    fn fitting(width: u16, sessions: bool, watched: bool) -> Vec<Column> {
        let mut used = 0u16;
        let mut kept = Vec::new();
        let mut order: Vec<Column> = Self::PRIORITY.to_vec();
        if watched {
            order.retain(|c| *c != Column::Watch);
            order.insert(2, Column::Watch);
        }
        for c in order {
            if c.of_session() && !sessions {
                continue;
            }
            let need = c.width() + u16::from(!kept.is_empty());
            if used + need <= width {
                used += need;
                kept.push(c);
            }
        }
        Self::ALL.into_iter().filter(|c| kept.contains(c)).collect()
    }
}

/// One task's cells, in the order of `columns`, not yet fitted to their widths.
fn cells<'a>(t: &TaskView, ctx: &DrawCtx<'a>, columns: &[Column]) -> Vec<Line<'a>> {
    let state = t.row.state.as_str();
    let beat = match t.heartbeat {
        // A remote project out of reach: the last state is known, the age is not.
        Some(_) if ctx.snap.link_down() => Span::styled("?", ctx.theme.muted),
        Some(hb) if crate::core::domain::TaskState(state.to_owned()).is_heartbeat_active() => {
            let age = ctx.age(hb);
            Span::styled(
                short_age(age),
                ctx.theme
                    .age(age.as_secs_f64() / ctx.rules.deadlines.task_stale_after.as_secs_f64().max(1.0)),
            )
        }
        Some(hb) => Span::styled(short_age(ctx.age(hb)), ctx.theme.muted),
        None => Span::styled("—", ctx.theme.muted),
    };
    let ctx_cell = match t.context() {
        Some(v) => {
            let trend: String = t
                .ctx
                .iter()
                .rev()
                .take(8)
                .rev()
                .map(|v| SPARK[usize::from(*v).min(99) * 8 / 100])
                .collect();
            let style = if v >= 80 {
                ctx.theme.error
            } else if v >= 60 {
                ctx.theme.warn
            } else {
                ctx.theme.accent
            };
            Line::from(vec![
                Span::styled(format!("{trend:<8}"), ctx.theme.muted),
                Span::styled(format!(" {v:>3}%"), style),
            ])
        }
        None => Line::from(Span::styled("—", ctx.theme.muted)),
    };
    let anomaly = t
        .last_anomaly
        .map_or(Span::styled("—", ctx.theme.muted), |k| {
            Span::styled(k.as_str(), ctx.theme.error)
        });
    let retry = if t.row.retry_count > 0 {
        Span::styled(t.row.retry_count.to_string(), ctx.theme.warn)
    } else {
        Span::styled("0", ctx.theme.muted)
    };
    let mut ctx_cell = Some(ctx_cell);
    let mut beat = Some(beat);
    let mut retry = Some(retry);
    let mut anomaly = Some(anomaly);
    columns
        .iter()
        .map(|c| match c {
            Column::Id => id_cell(t, ctx),
            Column::State => Line::from(Span::styled(fit(state, 15), ctx.theme.state(state))),
            // Cut to a bound (a name is written by someone else), else sized by the
            // column, which grows to it before any column pads.
            Column::WorkedBy => Line::from(fit(
                &printable(t.row.worked_by.as_deref().unwrap_or("—")),
                40,
            )),
            Column::Beat => Line::from(beat.take().unwrap_or_default()),
            Column::Watch => watch_cell(t, ctx),
            Column::Context => ctx_cell.take().unwrap_or_default(),
            Column::TrueContext => session_cells::context_cell(t, ctx),
            Column::Forecast => forecast_cell(t, ctx),
            Column::Retry => Line::from(retry.take().unwrap_or_default()),
            Column::Tokens => session_cells::tokens_cell(t, ctx),
            Column::Cost => session_cells::cost_cell(t, ctx),
            Column::Activity => match (&t.needs_you, waiting_for_conductor(t, ctx)) {
                (Some((text, _)), _) => Line::from(Span::styled(
                    format!("needs you: {}", printable(text)),
                    ctx.theme.error,
                )),
                (None, Some(_)) => {
                    Line::from(Span::styled(conductors_turn(t, ctx), ctx.theme.warn))
                }
                (None, None) => session_cells::activity_cell(t, ctx),
            },
            Column::Anomaly => Line::from(anomaly.take().unwrap_or_default()),
        })
        .collect()
}

/// Each column's width: its own, and what is left to the text columns, ACTIVITY first
/// up to what its longest cell needs, the last text column the rest.
fn widths(columns: &[Column], width: u16, needs: &[u16]) -> Vec<u16> {
    let mut out: Vec<u16> = columns.iter().map(|c| c.width()).collect();
    let spacing = u16::try_from(columns.len().saturating_sub(1)).unwrap_or(u16::MAX);
    let mut left = width.saturating_sub(out.iter().sum::<u16>() + spacing);
    // Each column grows to what its cells need, the most important first; what is left
    // goes to the last free-text column.
    for c in Column::PRIORITY {
        if let Some(i) = columns.iter().position(|x| *x == c) {
            let more = needs
                .get(i)
                .map_or(0, |n| n.saturating_sub(out[i]))
                .min(left);
            out[i] += more;
            left -= more;
        }
    }
    if let Some(i) = columns
        .iter()
        .rposition(|c| matches!(c, Column::Activity | Column::Anomaly))
    {
        out[i] += left;
    }
    out
}

/// The task's id with the marks the guide names: ❄ frozen by this dashboard (its state
/// is what it was, its window stopped), ⚑ waiting for the operator; both when both.
fn id_cell<'a>(t: &TaskView, ctx: &DrawCtx<'a>) -> Line<'a> {
    let id = printable(t.id());
    let frozen = ctx.ui.frozen.contains(t.id());
    match (frozen, t.needs_you.is_some()) {
        (true, true) => Line::from(vec![
            Span::styled("❄", ctx.theme.warn),
            Span::styled("⚑", ctx.theme.error),
            Span::styled(fit(&id, 9), ctx.theme.warn),
        ]),
        (true, false) => Line::from(vec![
            Span::styled("❄", ctx.theme.warn),
            Span::styled(fit(&id, 10), ctx.theme.warn),
        ]),
        (false, true) => Line::from(vec![
            Span::styled("⚑", ctx.theme.error),
            Span::styled(fit(&id, 10), ctx.theme.error),
        ]),
        (false, false) => Line::from(fit(&id, 11)),
    }
}

/// `▸ task-03 review_approved · musician-3 · ctx 35% · waits 40s Bash cargo test · …`:
/// everything the row may have cut.
fn detail_line<'a>(t: &TaskView, ctx: &DrawCtx<'a>) -> Line<'a> {
    let mut parts = vec![format!("{} {}", printable(t.id()), printable(&t.row.state))];
    if ctx.ui.frozen.contains(t.id()) {
        let thaw = ctx
            .keymap
            .key_for(crate::tui::action::Action::Thaw)
            .unwrap_or_default();
        parts.push(format!("frozen ({thaw} thaws)"));
    }
    if let Some(w) = &t.row.worked_by {
        parts.push(printable(w));
    }
    if let Some(c) = t.context() {
        parts.push(format!("ctx {c}%"));
    }
    if let Some(s) = t.session() {
        let tool = s
            .tool
            .as_ref()
            .map(|tool| {
                let arg = tool
                    .argument
                    .as_deref()
                    .map(|a| format!(" {}", printable(a)));
                format!(" {}{}", printable(&tool.name), arg.unwrap_or_default())
            })
            .unwrap_or_default();
        parts.push(format!("{}{tool}", printable(&s.activity)));
    }
    if let Some(waiting) = waiting_for_conductor(t, ctx) {
        parts.push(waiting);
    }
    if let Some(a) = t.last_anomaly {
        parts.push(format!("last anomaly {}", a.as_str()));
    }
    if let Some(e) = &t.row.last_error {
        parts.push(format!("error {}", printable(e)));
    }
    let mut spans = vec![
        Span::styled("▸ ", ctx.theme.accent),
        Span::raw(parts.join(" · ")),
    ];
    if let Some((text, _)) = &t.needs_you {
        spans.push(Span::styled(
            format!(" · needs you: {}", printable(text)),
            ctx.theme.error,
        ));
    }
    Line::from(spans)
}

/// The Tasks pane: the task actions on the selected Musician, its session, the sort.
pub struct Tasks;

impl PaneComponent for Tasks {
    fn title(&self) -> &'static str {
        "Tasks"
    }

    fn actions(&self) -> &'static [Action] {
        &[
            Action::Approve,
            Action::Reject,
            Action::ProposeFix,
            Action::Instruct,
            Action::Relaunch,
            Action::KillWindow,
            Action::Freeze,
            Action::Thaw,
            Action::Headroom,
            Action::Session,
            Action::SortTasks,
        ]
    }

    fn on_action(&self, ui: &mut UiState, action: Action, snap: &Snapshot) -> Vec<Effect> {
        match action {
            Action::Session => {
                match ui.shown_tasks(snap).get(ui.selected_task) {
                    Some(t) => ui.overlay = Some(Overlay::Session(t.id().to_owned())),
                    None => ui.note = Some("no task selected".into()),
                }
                vec![]
            }
            Action::SortTasks => {
                sort(ui, snap);
                vec![]
            }
            _ => ui.task_action(action, snap),
        }
    }

    fn move_by(&self, ui: &mut UiState, snap: &Snapshot, delta: i64) {
        select_by(ui, snap, delta);
    }

    fn open(&self, ui: &mut UiState, snap: &Snapshot) {
        open_log(ui, snap);
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
        draw(frame, area, ctx);
    }

    fn summary<'a>(&self, ctx: &DrawCtx<'a>) -> (&'static str, Vec<Span<'a>>) {
        let count = ctx.snap.musicians().count();
        ("Tasks", vec![Span::raw(format!("{count} Musicians"))])
    }
}

/// The next order (id, state, context, cost); the selected task stays selected
/// wherever the new order puts it.
fn sort(ui: &mut UiState, snap: &Snapshot) {
    let selected = ui
        .shown_tasks(snap)
        .get(ui.selected_task)
        .map(|t| t.id().to_owned());
    ui.panes.tasks.sort = ui.panes.tasks.sort.next();
    ui.selected_task = selected
        .and_then(|id| ui.shown_tasks(snap).iter().position(|t| t.id() == id))
        .unwrap_or(0);
    ui.note = Some(format!("tasks sorted by {}", ui.panes.tasks.sort.label()));
}

/// A move in a list of the tasks (Tasks, Heartbeats): the selection, which the Log
/// follows.
pub(crate) fn select_by(ui: &mut UiState, snap: &Snapshot, delta: i64) {
    let shown = ui.shown_tasks(snap);
    let next = moved(ui.selected_task, shown.len(), delta);
    if next != ui.selected_task || ui.panes.log.task.is_none() {
        ui.selected_task = next;
        let task = shown.get(next).and_then(|t| TaskId::parse(t.id()));
        ui.show_task(task);
    }
}

/// Enter on a task: its log, in the Log pane.
pub(crate) fn open_log(ui: &mut UiState, snap: &Snapshot) {
    let task = ui
        .shown_tasks(snap)
        .get(ui.selected_task)
        .and_then(|t| TaskId::parse(t.id()));
    ui.show_task(task);
    ui.focus = Pane::Log;
}
