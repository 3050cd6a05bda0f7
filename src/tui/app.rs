//! The dashboard's own state ([`UiState`]) and how it changes: `ingest` takes the hub's
//! happenings (log lines, anomalies, messages), `update` takes an [`Action`] and returns
//! the [`Effect`]s the loop must carry out. No terminal, no clock, no I/O here, so the
//! key handling is tested on plain values.

use std::collections::VecDeque;
use std::sync::Arc;

use time::OffsetDateTime;

use crate::core::domain::{AnomalyKind, LogKind, TaskId, context_percent};
use crate::core::event::{Happening, MessageRow, What};
use crate::core::snapshot::Snapshot;
use crate::core::watchdog::role::WatchdogCmd;
use crate::tui::action::Action;
use crate::tui::keymap::Mode;

/// Lines kept per task and view (merged keeps twice as many, holding both logs).
pub const SCROLLBACK: usize = 10_000;
const ANOMALIES_KEPT: usize = 1_000;
const MESSAGES_KEPT: usize = 5_000;
/// How far back an anomaly looks for the line that caused it.
const LINK_SCAN: usize = 4_096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pane {
    Tasks,
    Log,
    Anomalies,
    Messages,
    Heartbeats,
    Watchdog,
}

impl Pane {
    /// Tab order.
    pub const ALL: [Self; 6] = [
        Self::Tasks,
        Self::Log,
        Self::Anomalies,
        Self::Messages,
        Self::Heartbeats,
        Self::Watchdog,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Self::Tasks => "Tasks",
            Self::Log => "Log",
            Self::Anomalies => "Anomalies",
            Self::Messages => "Messages",
            Self::Heartbeats => "Heartbeats",
            Self::Watchdog => "Watchdog",
        }
    }

    /// The key table consulted first while this pane has focus.
    pub fn mode(self) -> Mode {
        match self {
            Self::Tasks => Mode::Tasks,
            Self::Log => Mode::Log,
            Self::Anomalies => Mode::Anomalies,
            Self::Messages => Mode::Messages,
            Self::Heartbeats | Self::Watchdog => Mode::Global,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogView {
    Merged,
    Status,
    Deviations,
}

impl LogView {
    pub fn label(self) -> &'static str {
        match self {
            Self::Merged => "status+deviations",
            Self::Status => "status",
            Self::Deviations => "deviations",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    Help,
    /// Full text of the message with this id.
    Message(i64),
    /// A destructive action waiting for y/n.
    Confirm(Confirm),
    /// The pipelines this process hosts.
    Sentinels,
    /// Editing the steps of this pipeline (the text is in `UiState::editor`).
    Editor(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirm {
    /// Kill and relaunch the Conductor now.
    Recover,
    /// Quit, which stops the Souffleur role this process holds.
    QuitRole,
}

impl Confirm {
    pub fn question(self) -> &'static str {
        match self {
            Self::Recover => {
                "Recover the Conductor now? Its window is killed and a new generation launched."
            }
            Self::QuitRole => {
                "Quit? This process holds the Souffleur role: the Conductor will be unwatched."
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub kind: LogKind,
    pub text: Arc<str>,
    /// An anomaly was raised on this line.
    pub anomaly: bool,
}

/// A bounded list that remembers how many entries fell off its front, so positions
/// stay valid ("absolute") while old lines are dropped.
#[derive(Debug, Default, Clone)]
pub struct Scrollback {
    entries: VecDeque<LogEntry>,
    dropped: u64,
    cap: usize,
}

impl Scrollback {
    fn with_cap(cap: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            dropped: 0,
            cap,
        }
    }

    fn push(&mut self, e: LogEntry) {
        if self.entries.len() == self.cap {
            self.entries.pop_front();
            self.dropped += 1;
        }
        self.entries.push_back(e);
    }

    fn clear(&mut self) {
        self.dropped += self.entries.len() as u64;
        self.entries.clear();
    }

    /// Absolute position of the first kept entry.
    pub fn start(&self) -> u64 {
        self.dropped
    }

    /// One past the absolute position of the last entry.
    pub fn end(&self) -> u64 {
        self.dropped + self.entries.len() as u64
    }

    pub fn get(&self, abs: u64) -> Option<&LogEntry> {
        abs.checked_sub(self.dropped)
            .and_then(|i| self.entries.get(usize::try_from(i).ok()?))
    }

    fn get_mut(&mut self, abs: u64) -> Option<&mut LogEntry> {
        abs.checked_sub(self.dropped)
            .and_then(|i| self.entries.get_mut(usize::try_from(i).ok()?))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One task's log lines in the three views.
#[derive(Debug, Clone)]
pub struct TaskLog {
    pub merged: Scrollback,
    pub status: Scrollback,
    pub deviations: Scrollback,
}

impl Default for TaskLog {
    fn default() -> Self {
        Self {
            merged: Scrollback::with_cap(SCROLLBACK * 2),
            status: Scrollback::with_cap(SCROLLBACK),
            deviations: Scrollback::with_cap(SCROLLBACK),
        }
    }
}

impl TaskLog {
    pub fn view(&self, view: LogView) -> &Scrollback {
        match view {
            LogView::Merged => &self.merged,
            LogView::Status => &self.status,
            LogView::Deviations => &self.deviations,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnomalyEntry {
    pub at: OffsetDateTime,
    pub task: TaskId,
    pub kind: AnomalyKind,
    pub detail: String,
    /// The caused line's absolute position in the task's merged view.
    pub line: Option<u64>,
    pub unread: bool,
}

/// The Log pane's position: following the end, or parked on a cursor line.
#[derive(Debug, Clone, Default)]
pub struct LogPosition {
    pub follow: bool,
    /// Absolute position in the current view (meaningful when not following).
    pub cursor: u64,
    /// First line shown when not following.
    pub top: u64,
    pub mark: Option<u64>,
    /// Lines that arrived since following stopped.
    pub new_lines: u64,
}

/// Something the loop must do outside the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Quit,
    Copy(String),
    Suspend,
    Watchdog(crate::core::watchdog::role::WatchdogCmd),
    /// A request to the pipeline host: `start`, `stop`, `pause`, `resume`.
    Pipeline {
        op: &'static str,
        name: String,
    },
    /// Load the steps of a pipeline into the editor.
    EditSteps(String),
    /// Check and write new steps, then ask the host to take them.
    SaveSteps {
        name: String,
        steps: String,
    },
}

/// A desktop notification to raise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub title: String,
    pub body: String,
}

#[derive(Debug, Clone)]
pub struct UiState {
    pub focus: Pane,
    pub overlay: Option<Overlay>,
    pub help_scroll: u16,
    /// Index into the snapshot's Musicians.
    pub selected_task: usize,
    /// The task the Log pane shows (follows the selection).
    pub log_task: Option<TaskId>,
    pub logs: std::collections::HashMap<TaskId, TaskLog>,
    pub log_view: LogView,
    pub log_pos: LogPosition,
    /// Rows the Log pane showed last time it was laid out.
    pub log_height: u16,
    pub search: Option<String>,
    /// The search being typed, while typing.
    pub search_input: Option<String>,
    pub anomalies: VecDeque<AnomalyEntry>,
    pub selected_anomaly: usize,
    pub messages: VecDeque<MessageRow>,
    pub selected_message: usize,
    pub message_task_filter: Option<String>,
    pub message_type_filter: Option<String>,
    /// A short note for the status bar ("copied 3 lines", "no match").
    pub note: Option<String>,
    pub selected_pipeline: usize,
    /// The step editor's text while it is open.
    pub editor: Option<ratatui_textarea::TextArea<'static>>,
}

impl Default for UiState {
    fn default() -> Self {
        Self {
            focus: Pane::Tasks,
            overlay: None,
            help_scroll: 0,
            selected_task: 0,
            log_task: None,
            logs: std::collections::HashMap::new(),
            log_view: LogView::Merged,
            log_pos: LogPosition {
                follow: true,
                ..LogPosition::default()
            },
            log_height: 10,
            search: None,
            search_input: None,
            anomalies: VecDeque::new(),
            selected_anomaly: 0,
            messages: VecDeque::new(),
            selected_message: 0,
            message_task_filter: None,
            message_type_filter: None,
            note: None,
            selected_pipeline: 0,
            editor: None,
        }
    }
}

/// The Musicians of a snapshot, in display order.
pub fn musicians(snap: &Snapshot) -> impl Iterator<Item = &crate::core::snapshot::TaskView> {
    snap.tasks
        .iter()
        .filter(|t| !t.is_conductor() && !t.is_souffleur())
}

impl UiState {
    /// Takes one happening in; returns a notification to raise, if it deserves one.
    pub fn ingest(&mut self, h: &Happening) -> Option<Notification> {
        match &h.what {
            What::Log {
                task,
                kind,
                lines,
                reset,
            } => {
                self.on_log(task, *kind, lines, *reset);
                None
            }
            What::Anomaly(a) => {
                let line = self.link_anomaly(&a.task_id, a.kind, &a.detail, a.spike.map(|s| s.1));
                if self.anomalies.len() == ANOMALIES_KEPT {
                    self.anomalies.pop_back();
                }
                self.anomalies.push_front(AnomalyEntry {
                    at: h.at,
                    task: a.task_id.clone(),
                    kind: a.kind,
                    detail: a.detail.clone(),
                    line,
                    unread: true,
                });
                // Keep the operator's selection on the same entry.
                if self.selected_anomaly > 0 {
                    self.selected_anomaly += 1;
                }
                Some(Notification {
                    title: format!("{} {}", a.task_id, a.kind),
                    body: format!("{} — press 3 then Enter to see the line", a.detail),
                })
            }
            What::Message(m) => {
                if self.messages.len() == MESSAGES_KEPT {
                    self.messages.pop_front();
                }
                self.messages.push_back(m.clone());
                None
            }
            What::Stale { task_id, age_s } => Some(Notification {
                title: format!("{task_id} heartbeat stale"),
                body: format!("no heartbeat for {age_s}s — press 1 to see the task"),
            }),
            What::Watchdog { reason, .. } => Some(Notification {
                title: format!("watchdog: {reason}"),
                body: "press 6 to see the watchdog".into(),
            }),
            What::Recovery(r) => Some(Notification {
                title: format!("recovery {} {}", r.provider.as_str(), r.status.as_str()),
                body: format!(
                    "Conductor (S{}) — press 6 to see the watchdog",
                    r.generation
                ),
            }),
            What::Task { .. } | What::Error { .. } | What::RoleEnded | What::Pipeline(_) => None,
        }
    }

    fn on_log(&mut self, task: &TaskId, kind: LogKind, lines: &[String], reset: bool) {
        let log = self.logs.entry(task.clone()).or_default();
        if reset {
            // A truncated file starts over; what was shown stays until replaced.
            if kind == LogKind::Status {
                log.status.clear();
            } else {
                log.deviations.clear();
            }
        }
        for line in lines {
            let e = LogEntry {
                kind,
                text: Arc::from(line.as_str()),
                anomaly: false,
            };
            match kind {
                LogKind::Status => log.status.push(e.clone()),
                LogKind::Deviations => log.deviations.push(e.clone()),
            }
            log.merged.push(e);
        }
        if self.log_task.as_ref() == Some(task) && !self.log_pos.follow {
            let shown = matches!(
                (self.log_view, kind),
                (LogView::Merged, _)
                    | (LogView::Status, LogKind::Status)
                    | (LogView::Deviations, LogKind::Deviations)
            );
            if shown {
                self.log_pos.new_lines += lines.len() as u64;
            }
        }
    }

    /// Finds (from the end, within a bounded window) the line an anomaly is about and
    /// flags it in every view; returns its merged position.
    fn link_anomaly(
        &mut self,
        task: &TaskId,
        kind: AnomalyKind,
        detail: &str,
        spike_to: Option<u8>,
    ) -> Option<u64> {
        let log = self.logs.get_mut(task)?;
        let quoted = detail.strip_prefix('"').and_then(|d| d.strip_suffix('"'));
        let want_kind = if kind == AnomalyKind::HighDeviation {
            LogKind::Deviations
        } else {
            LogKind::Status
        };
        let matches = |e: &LogEntry| {
            e.kind == want_kind
                && match kind {
                    AnomalyKind::SelfCorrection | AnomalyKind::HighDeviation => {
                        quoted.is_some_and(|q| &*e.text == q)
                    }
                    AnomalyKind::ContextSpike => context_percent(&e.text) == spike_to,
                    AnomalyKind::Stalled => true,
                }
        };
        let start = log
            .merged
            .start()
            .max(log.merged.end().saturating_sub(LINK_SCAN as u64));
        let at = (start..log.merged.end())
            .rev()
            .find(|&abs| {
                log.merged
                    .get(abs)
                    .is_some_and(|e| matches(e) && !e.anomaly)
            })
            .or_else(|| {
                (start..log.merged.end())
                    .rev()
                    .find(|&abs| log.merged.get(abs).is_some_and(&matches))
            })?;
        let text = log.merged.get(at).map(|e| e.text.clone())?;
        if let Some(e) = log.merged.get_mut(at) {
            e.anomaly = true;
        }
        let single = if want_kind == LogKind::Status {
            &mut log.status
        } else {
            &mut log.deviations
        };
        let s_start = single
            .start()
            .max(single.end().saturating_sub(LINK_SCAN as u64));
        if let Some(abs) = (s_start..single.end())
            .rev()
            .find(|&a| single.get(a).is_some_and(|e| e.text == text && !e.anomaly))
            && let Some(e) = single.get_mut(abs)
        {
            e.anomaly = true;
        }
        Some(at)
    }

    /// The task whose log is shown.
    pub fn current_log(&self) -> Option<&Scrollback> {
        self.log_task
            .as_ref()
            .and_then(|t| self.logs.get(t))
            .map(|l| l.view(self.log_view))
    }

    /// Messages passing the filters, newest first.
    pub fn filtered_messages(&self) -> impl Iterator<Item = &MessageRow> {
        self.messages.iter().rev().filter(|m| {
            self.message_task_filter
                .as_ref()
                .is_none_or(|t| m.task_id.as_ref() == Some(t))
                && self
                    .message_type_filter
                    .as_ref()
                    .is_none_or(|t| m.message_type.as_ref() == Some(t))
        })
    }

    pub fn unread_anomalies(&self) -> usize {
        self.anomalies.iter().filter(|a| a.unread).count()
    }

    /// Keeps the selection valid against a new snapshot and points the Log pane at the
    /// selected task.
    pub fn sync_with(&mut self, snap: &Snapshot) {
        let n = musicians(snap).count();
        if n > 0 && self.selected_task >= n {
            self.selected_task = n - 1;
        }
        if self.log_task.is_none()
            && let Some(t) = musicians(snap).nth(self.selected_task)
        {
            self.log_task = TaskId::parse(t.id());
        }
    }

    /// Applies one action.
    pub fn update(&mut self, action: Action, snap: &Snapshot) -> Vec<Effect> {
        self.note = None;
        if let Some(Overlay::Confirm(c)) = self.overlay {
            // Only an explicit answer leaves a confirmation (see `confirm`).
            return match action {
                Action::Close => self.confirm(c, false),
                Action::Open => self.confirm(c, true),
                _ => vec![],
            };
        }
        if let Some(overlay) = &self.overlay {
            return match (overlay, action) {
                (_, Action::Quit) => self.quit(snap),
                (Overlay::Help, Action::Help) | (_, Action::Close | Action::Open) => {
                    self.overlay = None;
                    vec![]
                }
                (Overlay::Help, Action::Down) => {
                    self.help_scroll = self.help_scroll.saturating_add(1);
                    vec![]
                }
                (Overlay::Help, Action::Up) => {
                    self.help_scroll = self.help_scroll.saturating_sub(1);
                    vec![]
                }
                _ => vec![],
            };
        }
        match action {
            Action::Quit => return self.quit(snap),
            Action::ToggleHold => {
                let Some(role) = &snap.watchdog.role else {
                    self.note = Some(
                        "no Souffleur role in this process (start it with `maestro souffleur`)"
                            .into(),
                    );
                    return vec![];
                };
                return vec![Effect::Watchdog(if role.held {
                    WatchdogCmd::Release
                } else {
                    WatchdogCmd::Hold
                })];
            }
            Action::Sentinels => {
                self.overlay = Some(Overlay::Sentinels);
                self.selected_pipeline = self
                    .selected_pipeline
                    .min(snap.pipelines.len().saturating_sub(1));
            }
            Action::RecoverNow => {
                if snap.watchdog.role.is_none() {
                    self.note = Some(
                        "no Souffleur role in this process (start it with `maestro souffleur`)"
                            .into(),
                    );
                } else {
                    self.overlay = Some(Overlay::Confirm(Confirm::Recover));
                }
            }
            Action::Suspend => return vec![Effect::Suspend],
            Action::Help => {
                self.overlay = Some(Overlay::Help);
                self.help_scroll = 0;
            }
            Action::Close => {
                self.search = None;
                self.log_pos.mark = None;
            }
            Action::FocusNext | Action::FocusPrev => {
                let i = Pane::ALL.iter().position(|p| *p == self.focus).unwrap_or(0);
                let n = Pane::ALL.len();
                let next = if action == Action::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.focus = Pane::ALL[next];
            }
            Action::FocusTasks => self.focus = Pane::Tasks,
            Action::FocusHeartbeats => self.focus = Pane::Heartbeats,
            Action::FocusLog => self.focus = Pane::Log,
            Action::FocusAnomalies => self.focus = Pane::Anomalies,
            Action::FocusMessages => self.focus = Pane::Messages,
            Action::FocusWatchdog => self.focus = Pane::Watchdog,
            Action::Up => self.move_by(snap, -1),
            Action::Down => self.move_by(snap, 1),
            Action::PageUp => self.move_by(snap, -i64::from(self.log_height.max(2) - 1)),
            Action::PageDown => self.move_by(snap, i64::from(self.log_height.max(2) - 1)),
            Action::Top => self.move_by(snap, i64::MIN / 2),
            Action::Bottom => {
                if self.focus == Pane::Log {
                    self.follow();
                } else {
                    self.move_by(snap, i64::MAX / 2);
                }
            }
            Action::Open => self.open(snap),
            Action::Search => {
                self.search_input = Some(String::new());
            }
            Action::SearchNext => self.search_step(true),
            Action::SearchPrev => self.search_step(false),
            Action::PrevAnomaly => self.anomaly_step(false),
            Action::NextAnomaly => self.anomaly_step(true),
            Action::ToggleFollow => {
                if self.log_pos.follow {
                    self.unfollow();
                } else {
                    self.follow();
                }
            }
            Action::CycleLogView => {
                self.log_view = match self.log_view {
                    LogView::Merged => LogView::Status,
                    LogView::Status => LogView::Deviations,
                    LogView::Deviations => LogView::Merged,
                };
                self.follow();
            }
            Action::Mark => {
                if self.log_pos.follow {
                    self.unfollow();
                }
                self.log_pos.mark = Some(self.log_pos.cursor);
            }
            Action::Copy => return self.copy(),
            Action::MarkAllRead => {
                for a in &mut self.anomalies {
                    a.unread = false;
                }
            }
            Action::FilterTask => {
                self.message_task_filter = match self.message_task_filter {
                    Some(_) => None,
                    None => musicians(snap)
                        .nth(self.selected_task)
                        .map(|t| t.id().to_owned()),
                };
                self.selected_message = 0;
            }
            Action::FilterType => {
                let mut types: Vec<&str> = self
                    .messages
                    .iter()
                    .filter_map(|m| m.message_type.as_deref())
                    .collect();
                types.sort_unstable();
                types.dedup();
                let next = match &self.message_type_filter {
                    None => types.first().copied(),
                    Some(cur) => types.iter().skip_while(|t| *t != cur).nth(1).copied(),
                };
                self.message_type_filter = next.map(str::to_owned);
                self.selected_message = 0;
            }
        }
        vec![]
    }

    /// A key in the pipelines overlay: move, start (`s`), stop (`x`), pause or resume
    /// (`p`), edit steps (`e`), close (Esc, `q`).
    pub fn sentinels_key(&mut self, c: Option<char>, snap: &Snapshot) -> Vec<Effect> {
        let selected = snap.pipelines.get(self.selected_pipeline);
        let request = |op: &'static str| {
            selected.map_or_else(Vec::new, |p| {
                vec![Effect::Pipeline {
                    op,
                    name: p.name.clone(),
                }]
            })
        };
        match c {
            Some('j') => {
                self.selected_pipeline =
                    (self.selected_pipeline + 1).min(snap.pipelines.len().saturating_sub(1));
                vec![]
            }
            Some('k') => {
                self.selected_pipeline = self.selected_pipeline.saturating_sub(1);
                vec![]
            }
            Some('s') => request("start"),
            Some('x') => request("stop"),
            Some('p') => request(if selected.is_some_and(|p| p.status == "paused") {
                "resume"
            } else {
                "pause"
            }),
            Some('e') => {
                selected.map_or_else(Vec::new, |p| vec![Effect::EditSteps(p.name.clone())])
            }
            None | Some('q') => {
                self.overlay = None;
                vec![]
            }
            Some(_) => vec![],
        }
    }

    /// Opens the step editor on a pipeline's steps (pretty JSON).
    pub fn open_editor(&mut self, name: String, steps: &str) {
        let mut area = ratatui_textarea::TextArea::new(steps.lines().map(str::to_owned).collect());
        area.set_cursor_line_style(ratatui::style::Style::default());
        self.editor = Some(area);
        self.overlay = Some(Overlay::Editor(name));
    }

    /// Closes the editor; with `save`, asks for the text to be written.
    pub fn close_editor(&mut self, save: bool) -> Vec<Effect> {
        let name = match &self.overlay {
            Some(Overlay::Editor(name)) => name.clone(),
            _ => return vec![],
        };
        let text = self
            .editor
            .as_ref()
            .map(|e| e.lines().join("\n"))
            .unwrap_or_default();
        if save {
            // Stays open until the write is accepted (the loop closes it then).
            vec![Effect::SaveSteps { name, steps: text }]
        } else {
            self.editor = None;
            self.overlay = Some(Overlay::Sentinels);
            vec![]
        }
    }

    /// Quitting stops a Souffleur role held here: ask first.
    fn quit(&mut self, snap: &Snapshot) -> Vec<Effect> {
        if snap
            .watchdog
            .role
            .as_ref()
            .is_some_and(|r| r.phase != "exited")
        {
            self.overlay = Some(Overlay::Confirm(Confirm::QuitRole));
            vec![]
        } else {
            vec![Effect::Quit]
        }
    }

    /// The answer to a confirmation: `y`/Enter (true) or `n`/Esc (false).
    pub fn confirm(&mut self, what: Confirm, yes: bool) -> Vec<Effect> {
        self.overlay = None;
        if !yes {
            self.note = Some("cancelled".into());
            return vec![];
        }
        match what {
            Confirm::Recover => {
                self.note = Some("recovery requested".into());
                vec![Effect::Watchdog(
                    crate::core::watchdog::role::WatchdogCmd::Recover(
                        crate::core::watchdog::machine::RecoveryKind::Relaunch,
                    ),
                )]
            }
            Confirm::QuitRole => vec![Effect::Quit],
        }
    }

    /// Typing into the search prompt: `Some(c)` adds a character, `None` is backspace.
    pub fn search_type(&mut self, c: Option<char>) {
        if let Some(input) = &mut self.search_input {
            match c {
                Some(c) => input.push(c),
                None => {
                    input.pop();
                }
            }
        }
    }

    /// Enter (true) or Esc (false) in the search prompt.
    pub fn search_finish(&mut self, accept: bool) {
        let Some(input) = self.search_input.take() else {
            return;
        };
        if !accept || input.is_empty() {
            return;
        }
        self.search = Some(input);
        self.focus = Pane::Log;
        if self.log_pos.follow {
            self.unfollow();
            // From the end: the newest match first.
            if let Some(log) = self.current_log() {
                self.log_pos.cursor = log.end();
            }
        }
        self.search_step(false);
    }

    fn move_by(&mut self, snap: &Snapshot, delta: i64) {
        let clamp = |cur: usize, len: usize| -> usize {
            if len == 0 {
                return 0;
            }
            let next = cur as i64 + delta;
            next.clamp(0, len as i64 - 1) as usize
        };
        match self.focus {
            Pane::Tasks | Pane::Heartbeats => {
                let n = musicians(snap).count();
                let next = clamp(self.selected_task, n);
                if next != self.selected_task || self.log_task.is_none() {
                    self.selected_task = next;
                    self.show_task(
                        musicians(snap)
                            .nth(next)
                            .and_then(|t| TaskId::parse(t.id())),
                    );
                }
            }
            Pane::Anomalies => {
                self.selected_anomaly = clamp(self.selected_anomaly, self.anomalies.len());
            }
            Pane::Messages => {
                let n = self.filtered_messages().count();
                self.selected_message = clamp(self.selected_message, n);
            }
            Pane::Log => {
                let Some((start, end)) = self.current_log().map(|l| (l.start(), l.end())) else {
                    return;
                };
                if end == start {
                    return;
                }
                if self.log_pos.follow {
                    if delta > 0 {
                        return;
                    }
                    self.unfollow();
                }
                let cur = self.log_pos.cursor as i64 + delta;
                let last = end as i64 - 1;
                if cur > last && delta > 0 {
                    self.follow();
                    return;
                }
                self.log_pos.cursor = cur.clamp(start as i64, last) as u64;
                self.keep_cursor_visible();
            }
            Pane::Watchdog => {}
        }
    }

    fn show_task(&mut self, task: Option<TaskId>) {
        if task != self.log_task {
            self.log_task = task;
            self.search = None;
            self.follow();
        }
    }

    fn open(&mut self, snap: &Snapshot) {
        match self.focus {
            Pane::Tasks | Pane::Heartbeats => {
                self.show_task(
                    musicians(snap)
                        .nth(self.selected_task)
                        .and_then(|t| TaskId::parse(t.id())),
                );
                self.focus = Pane::Log;
            }
            Pane::Anomalies => {
                let Some(a) = self.anomalies.get_mut(self.selected_anomaly) else {
                    return;
                };
                a.unread = false;
                let (task, line) = (a.task.clone(), a.line);
                if let Some(i) = musicians(snap).position(|t| t.id() == task.as_str()) {
                    self.selected_task = i;
                }
                self.log_task = Some(task);
                self.log_view = LogView::Merged;
                self.focus = Pane::Log;
                match line {
                    Some(line) if self.current_log().is_some_and(|l| l.get(line).is_some()) => {
                        self.unfollow();
                        self.log_pos.cursor = line;
                        self.log_pos.top = line.saturating_sub(u64::from(self.log_height / 2));
                        self.keep_cursor_visible();
                    }
                    _ => {
                        self.follow();
                        self.note = Some("that line is no longer in the scrollback".into());
                    }
                }
            }
            Pane::Messages => {
                let id = self
                    .filtered_messages()
                    .nth(self.selected_message)
                    .map(|m| m.id);
                if let Some(id) = id {
                    self.overlay = Some(Overlay::Message(id));
                }
            }
            Pane::Log | Pane::Watchdog => {}
        }
    }

    fn follow(&mut self) {
        self.log_pos.follow = true;
        self.log_pos.new_lines = 0;
        self.log_pos.mark = None;
    }

    fn unfollow(&mut self) {
        let end = self.current_log().map_or(0, Scrollback::end);
        self.log_pos.follow = false;
        self.log_pos.new_lines = 0;
        self.log_pos.cursor = end.saturating_sub(1);
        self.log_pos.top = end.saturating_sub(u64::from(self.log_height));
    }

    fn keep_cursor_visible(&mut self) {
        let h = u64::from(self.log_height.max(1));
        let pos = &mut self.log_pos;
        if pos.cursor < pos.top {
            pos.top = pos.cursor;
        } else if pos.cursor >= pos.top + h {
            pos.top = pos.cursor + 1 - h;
        }
        if let Some(start) = self.current_log().map(Scrollback::start) {
            self.log_pos.top = self.log_pos.top.max(start);
        }
    }

    /// Moves the cursor to the next (`forward`) or previous line containing the search.
    fn search_step(&mut self, forward: bool) {
        let Some(term) = self.search.clone() else {
            self.note = Some("no search: press / to search".into());
            return;
        };
        self.step_to(
            forward,
            |e| e.text.contains(term.as_str()),
            "no more matches",
        );
    }

    fn anomaly_step(&mut self, forward: bool) {
        self.step_to(forward, |e| e.anomaly, "no more anomaly lines");
    }

    fn step_to(&mut self, forward: bool, hit: impl Fn(&LogEntry) -> bool, none: &str) {
        let Some((start, end)) = self.current_log().map(|l| (l.start(), l.end())) else {
            return;
        };
        if self.log_pos.follow {
            self.log_pos.cursor = end;
        }
        let cur = self.log_pos.cursor;
        let Some(log) = self.current_log() else {
            return;
        };
        let found = if forward {
            (cur.saturating_add(1)..end).find(|&a| log.get(a).is_some_and(&hit))
        } else {
            (start..cur.min(end))
                .rev()
                .find(|&a| log.get(a).is_some_and(&hit))
        };
        match found {
            Some(at) => {
                if self.log_pos.follow {
                    self.unfollow();
                }
                self.log_pos.cursor = at;
                self.keep_cursor_visible();
            }
            None => self.note = Some(none.to_owned()),
        }
    }

    fn copy(&mut self) -> Vec<Effect> {
        let Some(log) = self.current_log() else {
            return vec![];
        };
        if log.is_empty() {
            return vec![];
        }
        let cursor = if self.log_pos.follow {
            log.end() - 1
        } else {
            self.log_pos.cursor
        };
        let mark = self.log_pos.mark.unwrap_or(cursor);
        let (from, to) = (mark.min(cursor), mark.max(cursor));
        let text: Vec<&str> = (from..=to)
            .filter_map(|a| log.get(a))
            .map(|e| &*e.text)
            .collect();
        let n = text.len();
        let joined = text.join("\n");
        self.log_pos.mark = None;
        self.note = Some(format!("copied {n} line{}", if n == 1 { "" } else { "s" }));
        vec![Effect::Copy(joined)]
    }

    /// The message shown in the overlay, if any.
    pub fn overlay_message(&self) -> Option<&MessageRow> {
        match &self.overlay {
            Some(Overlay::Message(id)) => self.messages.iter().find(|m| m.id == *id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::domain::Anomaly;
    use crate::core::event::TaskRow;
    use crate::core::snapshot::TaskView;

    fn snap(ids: &[&str]) -> Snapshot {
        Snapshot {
            tasks: ids
                .iter()
                .map(|id| TaskView {
                    row: TaskRow::new(*id, "working"),
                    heartbeat: None,
                    ctx: VecDeque::new(),
                    last_anomaly: None,
                    watched: true,
                })
                .collect(),
            ..Snapshot::default()
        }
    }

    fn at() -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH
    }

    fn log(ui: &mut UiState, task: &str, kind: LogKind, lines: &[&str]) {
        ui.ingest(&Happening {
            at: at(),
            what: What::Log {
                task: TaskId::parse(task).unwrap(),
                kind,
                lines: lines
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect::<Vec<_>>()
                    .into(),
                reset: false,
            },
        });
    }

    fn anomaly(
        ui: &mut UiState,
        task: &str,
        kind: AnomalyKind,
        detail: &str,
    ) -> Option<Notification> {
        ui.ingest(&Happening {
            at: at(),
            what: What::Anomaly(Anomaly {
                task_id: TaskId::parse(task).unwrap(),
                kind,
                detail: detail.into(),
                spike: None,
            }),
        })
    }

    fn ready(lines: usize) -> (UiState, Snapshot) {
        let s = snap(&["task-01", "task-02", "task-00"]);
        let mut ui = UiState::default();
        ui.sync_with(&s);
        let text: Vec<String> = (0..lines).map(|i| format!("line {i}")).collect();
        let refs: Vec<&str> = text.iter().map(String::as_str).collect();
        log(&mut ui, "task-01", LogKind::Status, &refs);
        (ui, s)
    }

    #[test]
    fn tab_cycles_focus_and_number_keys_jump() {
        let (mut ui, s) = ready(0);
        let order: Vec<Pane> = (0..6)
            .map(|_| {
                ui.update(Action::FocusNext, &s);
                ui.focus
            })
            .collect();
        assert_eq!(
            order,
            [
                Pane::Log,
                Pane::Anomalies,
                Pane::Messages,
                Pane::Heartbeats,
                Pane::Watchdog,
                Pane::Tasks
            ]
        );
        ui.update(Action::FocusPrev, &s);
        assert_eq!(ui.focus, Pane::Watchdog);
        ui.update(Action::FocusMessages, &s);
        assert_eq!(ui.focus, Pane::Messages);
    }

    #[test]
    fn selecting_a_task_points_the_log_at_it_and_skips_the_conductor() {
        let (mut ui, s) = ready(0);
        assert_eq!(ui.log_task.as_ref().map(TaskId::as_str), Some("task-01"));
        ui.update(Action::Down, &s);
        assert_eq!(ui.log_task.as_ref().map(TaskId::as_str), Some("task-02"));
        ui.update(Action::Down, &s);
        assert_eq!(ui.selected_task, 1, "task-00 is not a Musician row");
        ui.update(Action::Open, &s);
        assert_eq!(ui.focus, Pane::Log);
    }

    #[test]
    fn scrolling_up_stops_following_and_counts_new_lines() {
        let (mut ui, s) = ready(50);
        ui.log_height = 10;
        ui.update(Action::FocusLog, &s);
        assert!(ui.log_pos.follow);
        ui.update(Action::Up, &s);
        assert!(!ui.log_pos.follow);
        assert_eq!(ui.log_pos.cursor, 48);
        log(&mut ui, "task-01", LogKind::Status, &["new 1", "new 2"]);
        log(&mut ui, "task-02", LogKind::Status, &["elsewhere"]);
        assert_eq!(ui.log_pos.new_lines, 2);
        ui.update(Action::Bottom, &s);
        assert!(ui.log_pos.follow);
        assert_eq!(ui.log_pos.new_lines, 0);
        // Moving down past the end resumes following too.
        ui.update(Action::Up, &s);
        ui.update(Action::Down, &s);
        ui.update(Action::Down, &s);
        assert!(ui.log_pos.follow);
    }

    #[test]
    fn scrollback_is_bounded_and_positions_stay_valid() {
        let (mut ui, s) = ready(SCROLLBACK + 500);
        let log = ui.current_log().unwrap();
        assert_eq!(
            log.end() - log.start(),
            SCROLLBACK as u64 + 500,
            "merged keeps twice as many"
        );
        let status = &ui.logs[&TaskId::parse("task-01").unwrap()].status;
        assert_eq!(status.end() - status.start(), SCROLLBACK as u64);
        assert_eq!(&*status.get(status.start()).unwrap().text, "line 500");
        ui.update(Action::FocusLog, &s);
        ui.update(Action::Top, &s);
        assert_eq!(ui.log_pos.cursor, ui.current_log().unwrap().start());
    }

    #[test]
    fn search_finds_newest_first_then_steps() {
        let (mut ui, s) = ready(0);
        log(
            &mut ui,
            "task-01",
            LogKind::Status,
            &["alpha", "needle 1", "beta", "needle 2", "gamma"],
        );
        ui.update(Action::Search, &s);
        for c in "needle".chars() {
            ui.search_type(Some(c));
        }
        ui.search_finish(true);
        assert_eq!(ui.focus, Pane::Log);
        assert_eq!(ui.log_pos.cursor, 3);
        ui.update(Action::SearchPrev, &s);
        assert_eq!(ui.log_pos.cursor, 1);
        ui.update(Action::SearchPrev, &s);
        assert_eq!(ui.log_pos.cursor, 1);
        assert_eq!(ui.note.as_deref(), Some("no more matches"));
        ui.update(Action::SearchNext, &s);
        assert_eq!(ui.log_pos.cursor, 3);
    }

    #[test]
    fn enter_on_an_anomaly_jumps_to_its_line_and_marks_it_read() {
        let (mut ui, s) = ready(30);
        log(
            &mut ui,
            "task-02",
            LogKind::Status,
            &["a", "step 2 self-correction: x", "b"],
        );
        log(&mut ui, "task-02", LogKind::Deviations, &["High: y"]);
        let n = anomaly(
            &mut ui,
            "task-02",
            AnomalyKind::SelfCorrection,
            "\"step 2 self-correction: x\"",
        );
        assert!(n.unwrap().title.contains("task-02 self-correction"));
        anomaly(
            &mut ui,
            "task-02",
            AnomalyKind::HighDeviation,
            "\"High: y\"",
        );
        assert_eq!(ui.unread_anomalies(), 2);
        ui.update(Action::FocusAnomalies, &s);
        ui.update(Action::Down, &s); // the older one: the self-correction
        ui.update(Action::Open, &s);
        assert_eq!(ui.focus, Pane::Log);
        assert_eq!(ui.log_task.as_ref().map(TaskId::as_str), Some("task-02"));
        assert_eq!(ui.selected_task, 1);
        assert_eq!(ui.log_pos.cursor, 1);
        assert!(!ui.log_pos.follow);
        assert_eq!(ui.unread_anomalies(), 1);
        // ] and [ move between anomaly lines.
        ui.update(Action::NextAnomaly, &s);
        assert_eq!(
            &*ui.current_log()
                .unwrap()
                .get(ui.log_pos.cursor)
                .unwrap()
                .text,
            "High: y"
        );
        ui.update(Action::PrevAnomaly, &s);
        assert_eq!(ui.log_pos.cursor, 1);
        ui.update(Action::FocusAnomalies, &s);
        ui.update(Action::MarkAllRead, &s);
        assert_eq!(ui.unread_anomalies(), 0);
    }

    #[test]
    fn copy_takes_mark_to_cursor() {
        let (mut ui, s) = ready(5);
        ui.update(Action::FocusLog, &s);
        ui.update(Action::Up, &s); // cursor on line 3
        ui.update(Action::Mark, &s);
        ui.update(Action::Up, &s); // cursor on line 2
        let fx = ui.update(Action::Copy, &s);
        assert_eq!(fx, [Effect::Copy("line 2\nline 3".into())]);
        assert_eq!(ui.note.as_deref(), Some("copied 2 lines"));
    }

    #[test]
    fn messages_filter_and_open_full_text() {
        let (mut ui, s) = ready(0);
        for (id, task, kind) in [
            (1, "task-01", "review_request"),
            (2, "task-02", "error"),
            (3, "task-01", "approval"),
        ] {
            ui.ingest(&Happening {
                at: at(),
                what: What::Message(MessageRow {
                    id,
                    task_id: Some(task.into()),
                    from_session: None,
                    message_type: Some(kind.into()),
                    message: Some(format!("text {id}")),
                    timestamp: None,
                }),
            });
        }
        assert_eq!(
            ui.filtered_messages().map(|m| m.id).collect::<Vec<_>>(),
            [3, 2, 1]
        );
        ui.update(Action::FocusMessages, &s);
        ui.update(Action::FilterTask, &s);
        assert_eq!(
            ui.filtered_messages().map(|m| m.id).collect::<Vec<_>>(),
            [3, 1]
        );
        ui.update(Action::FilterType, &s);
        assert_eq!(ui.message_type_filter.as_deref(), Some("approval"));
        assert_eq!(
            ui.filtered_messages().map(|m| m.id).collect::<Vec<_>>(),
            [3]
        );
        ui.update(Action::Open, &s);
        assert_eq!(
            ui.overlay_message().and_then(|m| m.message.as_deref()),
            Some("text 3")
        );
        ui.update(Action::Close, &s);
        assert!(ui.overlay.is_none());
    }

    #[test]
    fn recovery_and_quit_ask_first_when_the_role_runs() {
        use crate::core::event::RoleView;
        use crate::core::watchdog::role::WatchdogCmd;
        let (mut ui, mut s) = ready(0);
        assert!(ui.update(Action::RecoverNow, &s).is_empty());
        assert!(ui.note.as_deref().unwrap().contains("no Souffleur role"));
        s.watchdog.role = Some(RoleView {
            phase: "watching".into(),
            mode: "normal".into(),
            generation: 1,
            no_progress: 0,
            held: false,
            conductor_pid: Some(42),
            session_id: "s".into(),
            next_check: None,
            last_provider: None,
            alert: None,
        });
        assert_eq!(
            ui.update(Action::ToggleHold, &s),
            [Effect::Watchdog(WatchdogCmd::Hold)]
        );
        assert!(ui.update(Action::RecoverNow, &s).is_empty());
        assert_eq!(ui.overlay, Some(Overlay::Confirm(Confirm::Recover)));
        assert!(
            ui.update(Action::Quit, &s).is_empty(),
            "other keys do not answer"
        );
        assert_eq!(
            ui.confirm(Confirm::Recover, true),
            [Effect::Watchdog(WatchdogCmd::Recover(
                crate::core::watchdog::machine::RecoveryKind::Relaunch
            ))]
        );
        assert!(ui.update(Action::Quit, &s).is_empty());
        assert_eq!(ui.overlay, Some(Overlay::Confirm(Confirm::QuitRole)));
        assert!(ui.update(Action::Close, &s).is_empty());
        assert!(ui.overlay.is_none());
        ui.update(Action::Quit, &s);
        assert_eq!(ui.update(Action::Open, &s), [Effect::Quit]);
    }

    #[test]
    fn the_pipelines_overlay_and_the_step_editor() {
        use crate::core::snapshot::PipelineView;
        let (mut ui, mut s) = ready(0);
        let view = |name: &str, status: &str| PipelineView {
            name: name.into(),
            steps: 1,
            status: status.into(),
            iteration: 0,
            step: None,
            outcome: None,
        };
        s.pipelines = vec![view("build", "running"), view("lint", "paused")];
        ui.update(Action::Sentinels, &s);
        assert_eq!(ui.overlay, Some(Overlay::Sentinels));
        assert_eq!(
            ui.sentinels_key(Some('x'), &s),
            [Effect::Pipeline {
                op: "stop",
                name: "build".into()
            }]
        );
        ui.sentinels_key(Some('j'), &s);
        ui.sentinels_key(Some('j'), &s);
        assert_eq!(ui.selected_pipeline, 1, "stays on the last row");
        assert_eq!(
            ui.sentinels_key(Some('p'), &s),
            [Effect::Pipeline {
                op: "resume",
                name: "lint".into()
            }]
        );
        assert_eq!(
            ui.sentinels_key(Some('e'), &s),
            [Effect::EditSteps("lint".into())]
        );
        ui.open_editor("lint".into(), "[\n  {}\n]");
        assert_eq!(ui.overlay, Some(Overlay::Editor("lint".into())));
        assert_eq!(
            ui.close_editor(true),
            [Effect::SaveSteps {
                name: "lint".into(),
                steps: "[\n  {}\n]".into()
            }]
        );
        assert!(ui.editor.is_some(), "open until the save is accepted");
        assert!(ui.close_editor(false).is_empty());
        assert_eq!(ui.overlay, Some(Overlay::Sentinels));
        ui.sentinels_key(None, &s);
        assert!(ui.overlay.is_none());
    }

    #[test]
    fn help_overlay_takes_keys_until_closed_and_q_always_quits() {
        let (mut ui, s) = ready(0);
        ui.update(Action::Help, &s);
        assert_eq!(ui.overlay, Some(Overlay::Help));
        ui.update(Action::FocusNext, &s);
        assert_eq!(
            ui.focus,
            Pane::Tasks,
            "keys do not reach the panes under an overlay"
        );
        ui.update(Action::Help, &s);
        assert!(ui.overlay.is_none());
        ui.update(Action::Help, &s);
        assert_eq!(ui.update(Action::Quit, &s), [Effect::Quit]);
    }
}
