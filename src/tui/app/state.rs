//! [`UiState`]: everything the dashboard remembers between frames, the panes and the
//! effects an update asks the loop for.

use crate::core::actions::TaskRequest;
use crate::core::domain::TaskId;
use crate::core::snapshot::Snapshot;
pub use crate::tui::pane_kinds::Pane;
use crate::tui::panes::states::PaneStates;
use crate::tui::panes::tasks::state::TaskSort;

use crate::tui::app::overlays::kinds::{Compose, Overlay};

/// Something the loop must do outside the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Quit,
    Copy(String),
    Suspend,
    Watchdog(crate::core::watchdog::control::WatchdogCmd),
    /// A request to the pipeline host: `start`, `stop`, `pause`, `resume`.
    Pipeline {
        op: &'static str,
        name: String,
    },
    /// Load the steps of a pipeline into the editor.
    EditSteps(String),
    /// Read a definition and ask whether to trust it, showing its steps.
    DescribeTrust(String),
    /// Trust this content (by hash) of a definition, then have the host take it.
    Trust {
        name: String,
        hash: String,
    },
    /// Check and write new steps, then ask the host to take them.
    SaveSteps {
        name: String,
        steps: String,
    },
    /// Find out what a task action will do, then ask for confirmation.
    DescribeTask(TaskRequest),
    /// Carry out a confirmed task action.
    Task(TaskRequest),
    /// Read a task's context headroom for its panel.
    Headroom(TaskId),
    /// Bring a task's kitty window to the front.
    Focus(TaskId),
}

/// A desktop notification to raise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub title: String,
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct UiState {
    /// The panes in the order Tab visits them: as laid out on screen (empty: the
    /// default order).
    pub tab_order: Vec<Pane>,
    /// Set when this user cannot write the project's database: actions are disabled and
    /// the status line says so.
    pub read_only: Option<String>,
    /// Tasks whose window this dashboard froze (SIGSTOP) and has not thawed.
    pub frozen: std::collections::BTreeSet<String>,
    pub focus: Pane,
    pub overlay: Option<Overlay>,
    /// How far the open reading overlay (help, session, headroom, message, log line) is
    /// scrolled; 0 when one opens.
    pub overlay_scroll: u16,
    /// The furthest it can scroll, as last drawn (the keys stop there).
    pub overlay_scroll_max: u16,
    /// Its rows, as last drawn (a page for PgUp/PgDn).
    pub overlay_page: u16,
    /// Index into the snapshot's Musicians.
    pub selected_task: usize,
    /// The search being typed, while typing.
    pub search_input: Option<String>,
    /// Each pane's own state (`panes.messages`, …).
    pub panes: PaneStates,
    /// A short note for the status bar ("copied 3 lines", "no match").
    pub note: Option<String>,
    /// The note did not fit the status bar at the last draw and shows whole in a box
    /// above it ("answer (any key closes)"): the next key closes the box, and only that.
    pub note_boxed: bool,
    /// The last LLM poller the hook refused, as the status bar says it.
    pub last_poller: Option<String>,
    pub selected_pipeline: usize,
    /// The step editor's text while it is open.
    pub editor: Option<ratatui_textarea::TextArea<'static>>,
    /// The message being written for a task action.
    pub compose: Option<ratatui_textarea::TextArea<'static>>,
    /// A message sent from the editor and not yet carried out: it comes back to the
    /// editor if the action is refused or not confirmed (nothing typed is lost).
    pub draft: Option<(Compose, String)>,
    /// The pane shown on the whole screen, if one is zoomed.
    pub zoomed: Option<Pane>,
    /// Task actions sent and not answered yet (the status bar says so).
    pub actions_in_flight: usize,
    /// The replay clock and its state, while replaying.
    pub replay: Option<String>,
}

impl Default for UiState {
    fn default() -> Self {
        Self {
            tab_order: Vec::new(),
            read_only: None,
            frozen: std::collections::BTreeSet::new(),
            focus: Pane::Tasks,
            overlay: None,
            overlay_scroll: 0,
            overlay_scroll_max: u16::MAX,
            overlay_page: 1,
            selected_task: 0,
            note_boxed: false,
            search_input: None,
            panes: PaneStates::default(),
            note: None,
            last_poller: None,
            selected_pipeline: 0,
            editor: None,
            compose: None,
            draft: None,
            zoomed: None,
            actions_in_flight: 0,
            replay: None,
        }
    }
}

impl UiState {
    /// The Musicians the Tasks pane shows, filtered and in its order: what the
    /// selection indexes.
    pub fn shown_tasks<'s>(&self, snap: &'s Snapshot) -> Vec<&'s crate::core::snapshot::TaskView> {
        let filter = self.panes.tasks.filter.as_deref().map(str::to_lowercase);
        let mut shown: Vec<_> = snap
            .musicians()
            .filter(|t| {
                filter.as_deref().is_none_or(|f| {
                    let activity = t.session().map(|s| s.activity.as_str()).unwrap_or_default();
                    [
                        t.id(),
                        t.row.state.as_str(),
                        t.row.worked_by.as_deref().unwrap_or_default(),
                        activity,
                    ]
                    .iter()
                    .any(|field| field.to_lowercase().contains(f))
                })
            })
            .collect();
        let context = |t: &crate::core::snapshot::TaskView| {
            t.session()
                .map(|s| s.context_percent)
                .or_else(|| t.context().map(f64::from))
                .unwrap_or(-1.0)
        };
        match self.panes.tasks.sort {
            TaskSort::Id => {}
            TaskSort::State => shown.sort_by(|a, b| a.row.state.cmp(&b.row.state)),
            TaskSort::Context => shown.sort_by(|a, b| context(b).total_cmp(&context(a))),
            TaskSort::Cost => shown.sort_by(|a, b| {
                b.cost_usd()
                    .unwrap_or(-1.0)
                    .total_cmp(&a.cost_usd().unwrap_or(-1.0))
            }),
        }
        // Tasks that wait for the operator come first, longest waiting first.
        shown.sort_by_key(|t| {
            t.needs_you
                .as_ref()
                .map_or((1, None), |(_, since)| (0, Some(*since)))
        });
        shown
    }
}
