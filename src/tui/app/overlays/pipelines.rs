//! The pipelines overlay (`S`): every definition this process hosts with its state and
//! history; keys start, stop, pause or resume one, trust it, or open its steps in the
//! step editor.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Row, Table, TableState};

use crate::core::snapshot::Snapshot;
use crate::tui::action::Action;
use crate::tui::app::overlays::{Extent, Component, Keys, Overlay};
use crate::tui::app::state::{Effect, Pane, UiState};
use crate::tui::keymap::Mode;
use crate::tui::panes::ctx::{DrawCtx, centered, clear, fit, printable};

pub struct Pipelines;

impl Component for Pipelines {
    fn keys(&self) -> Keys {
        Keys::Own(Mode::Pipelines)
    }

    fn on_action(&self, ui: &mut UiState, action: Action, snap: &Snapshot) -> Vec<Effect> {
        ui.pipelines_action(action, snap)
    }

    fn draw(&self, frame: &mut Frame, area: Rect, ctx: &DrawCtx) -> Option<Extent> {
        draw(frame, area, ctx);
        None
    }
}

impl UiState {
    /// Opens the pipelines overlay, the selection kept on a row that still exists.
    pub(crate) fn open_pipelines(&mut self, snap: &Snapshot) {
        self.overlay = Some(Overlay::Sentinels);
        self.selected_pipeline = self
            .selected_pipeline
            .min(snap.pipelines.len().saturating_sub(1));
    }

    /// An action in the pipelines overlay: move, start, stop, pause or resume, edit
    /// steps, close (the keys are the keymap's `[keys.pipelines]`).
    pub(crate) fn pipelines_action(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        let selected = snap.pipelines.get(self.selected_pipeline);
        let request = |op: &'static str| {
            selected.map_or_else(Vec::new, |p| {
                vec![Effect::Pipeline {
                    op,
                    name: p.name.clone(),
                }]
            })
        };
        match action {
            Action::Down => {
                self.selected_pipeline =
                    (self.selected_pipeline + 1).min(snap.pipelines.len().saturating_sub(1));
                vec![]
            }
            Action::Up => {
                self.selected_pipeline = self.selected_pipeline.saturating_sub(1);
                vec![]
            }
            Action::PipelineStart => request("start"),
            Action::PipelineStop => request("stop"),
            Action::PipelinePause => request(if selected.is_some_and(|p| p.status == "paused") {
                "resume"
            } else {
                "pause"
            }),
            Action::EditSteps => {
                selected.map_or_else(Vec::new, |p| vec![Effect::EditSteps(p.name.clone())])
            }
            Action::PipelineTrust => {
                selected.map_or_else(Vec::new, |p| vec![Effect::DescribeTrust(p.name.clone())])
            }
            Action::Close => {
                self.overlay = None;
                vec![]
            }
            Action::Quit => self.quit(snap),
            _ => vec![],
        }
    }
}

fn draw(frame: &mut Frame, area: Rect, ctx: &DrawCtx) {
    let popup = centered(area, 100, area.height.saturating_sub(6).min(20));
    clear(frame, popup);
    let keys = |a| ctx.keymap.keys_in(Mode::Pipelines, a);
    let block = ctx.block_within(
        Pane::Tasks,
        &format!(
            "Pipelines · {} start · {} stop · {} pause/resume · {} edit steps · {} trust · {} close",
            keys(Action::PipelineStart),
            keys(Action::PipelineStop),
            keys(Action::PipelinePause),
            keys(Action::EditSteps),
            keys(Action::PipelineTrust),
            keys(Action::Close)
        ),
        popup.width,
    );
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
    let pipelines = &ctx.snap.pipelines;
    if pipelines.is_empty() {
        let text = "No pipelines hosted here: put definitions in .maestro/sentinels/<name>.json (maestro sentinel list shows them).";
        frame.render_widget(
            Paragraph::new(text)
                .style(ctx.theme.muted)
                .wrap(ratatui::widgets::Wrap { trim: true }),
            inner,
        );
        return;
    }
    let selected = pipelines.get(ctx.ui.selected_pipeline);
    let history_rows = selected.map_or(0, |p| p.history.len().min(6) as u16);
    let [table_area, history_area, note] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(if history_rows > 0 {
            history_rows + 1
        } else {
            0
        }),
        Constraint::Length(1),
    ])
    .areas(inner);
    let mut state = TableState::default().with_selected(Some(ctx.ui.selected_pipeline));
    frame.render_stateful_widget(table(ctx, table_area.width), table_area, &mut state);
    if let Some(p) = selected.filter(|_| history_rows > 0) {
        let width = usize::from(history_area.width);
        let lines: Vec<Line> = history_lines(p, history_rows, ctx)
            .into_iter()
            .map(|l| crate::tui::panes::text::fit_line(l, width))
            .collect();
        frame.render_widget(Paragraph::new(lines), history_area);
    }
    if let Some(n) = &ctx.ui.note {
        frame.render_widget(
            Paragraph::new(Span::styled(printable(n), ctx.theme.accent)),
            note,
        );
    }
}

/// Every pipeline, a row each, in a table `width` wide: the last column has what the
/// others leave (its text cut to it, marked).
fn table<'a>(ctx: &DrawCtx<'a>, width: u16) -> Table<'a> {
    let outcome_width = usize::from(width.saturating_sub(24 + 10 + 5 + 9 + 4 + 5));
    let rows = ctx
        .snap
        .pipelines
        .iter()
        .map(|p| pipeline_row(p, ctx, outcome_width));
    Table::new(
        rows,
        [
            Constraint::Length(24),
            Constraint::Length(10),
            Constraint::Length(5),
            Constraint::Length(9),
            Constraint::Length(4),
            Constraint::Min(10),
        ],
    )
    .header(
        Row::new([
            "NAME",
            "STATUS",
            "STEPS",
            "ITERATION",
            "STEP",
            "LAST OUTCOME",
        ])
        .style(ctx.theme.muted),
    )
    .row_highlight_style(ctx.theme.selection)
}

/// One pipeline's row: its name, status (untrusted until trusted), steps, iteration,
/// step and last outcome.
fn pipeline_row<'a>(
    p: &crate::core::snapshot::PipelineView,
    ctx: &DrawCtx<'a>,
    outcome_width: usize,
) -> Row<'a> {
    let style = match p.status.as_str() {
        "running" => ctx.theme.ok,
        "paused" => ctx.theme.warn,
        "failed" => ctx.theme.error,
        _ if !p.trusted => ctx.theme.warn,
        _ => ctx.theme.muted,
    };
    // A definition waiting for trust says so until it is trusted.
    let status = if p.trusted || matches!(p.status.as_str(), "running" | "paused") {
        p.status.clone()
    } else {
        "untrusted".to_owned()
    };
    Row::new(vec![
        Line::from(fit(&p.name, 24)),
        Line::from(Span::styled(status, style)),
        Line::from(p.steps.to_string()),
        Line::from(if p.iteration > 0 {
            p.iteration.to_string()
        } else {
            "—".into()
        }),
        Line::from(p.step.map_or_else(|| "—".into(), |s| s.to_string())),
        Line::from(fit(
            &printable(p.outcome.as_deref().unwrap_or("—")),
            outcome_width.max(1),
        )),
    ])
}

/// The selected pipeline's latest steps, newest last, under a line that names them.
fn history_lines<'a>(
    p: &crate::core::snapshot::PipelineView,
    history_rows: u16,
    ctx: &DrawCtx<'a>,
) -> Vec<Line<'a>> {
    // The selected pipeline's latest steps, newest last.
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "Recent steps of {} (maestro sentinel show {} --runs for all)",
            p.name, p.name
        ),
        ctx.theme.muted,
    ))];
    let skip = p.history.len().saturating_sub(usize::from(history_rows));
    for s in &p.history[skip..] {
        let time = s.started.get(11..19).unwrap_or_default();
        lines.push(Line::from(vec![
            Span::styled(format!("{time} "), ctx.theme.muted),
            Span::raw(format!(
                "it {} step {} {:<9} {:>6} ms  ",
                s.iteration, s.step, s.step_type, s.duration_ms
            )),
            Span::raw(fit(&printable(&s.outcome), 30)),
            Span::styled(
                format!("  {}", fit(&printable(s.excerpt.trim()), 40)),
                ctx.theme.muted,
            ),
        ]));
    }
    lines
}
