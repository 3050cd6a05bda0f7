//! What the operator can ask for: the keymap's vocabulary (`"ctrl-k" = "kill_task"` in
//! the config names these in `snake_case`).

use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Quit,
    Help,
    Close,
    FocusNext,
    FocusPrev,
    FocusTasks,
    FocusHeartbeats,
    FocusLog,
    FocusAnomalies,
    FocusMessages,
    FocusWatchdog,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Open,
    Search,
    SearchNext,
    SearchPrev,
    PrevAnomaly,
    NextAnomaly,
    ToggleFollow,
    CycleLogView,
    Mark,
    Copy,
    MarkAllRead,
    FilterTask,
    FilterType,
    Suspend,
    ToggleHold,
    RecoverNow,
    Sentinels,
    /// Confirmation dialog: do it.
    Yes,
    /// Confirmation dialog: do not.
    No,
    PipelineStart,
    PipelineStop,
    /// Pause a running pipeline, resume a paused one.
    PipelinePause,
    EditSteps,
    /// Step editor: check and save.
    SaveEdit,
}

impl Action {
    /// The one-line description shown in help.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Quit => "quit",
            Self::Help => "show or hide this help",
            Self::Close => "close the overlay, search or filter",
            Self::FocusNext => "focus the next pane",
            Self::FocusPrev => "focus the previous pane",
            Self::FocusTasks => "focus Tasks",
            Self::FocusHeartbeats => "focus Heartbeats",
            Self::FocusLog => "focus Log",
            Self::FocusAnomalies => "focus Anomalies",
            Self::FocusMessages => "focus Messages",
            Self::FocusWatchdog => "focus Watchdog",
            Self::Up => "move up / scroll up",
            Self::Down => "move down / scroll down",
            Self::PageUp => "page up",
            Self::PageDown => "page down",
            Self::Top => "go to the first line",
            Self::Bottom => "go to the last line (Log: follow again)",
            Self::Open => "open: task → its log, anomaly → its line, message → full text",
            Self::Search => "search the log",
            Self::SearchNext => "next search match",
            Self::SearchPrev => "previous search match",
            Self::PrevAnomaly => "previous anomaly line in the log",
            Self::NextAnomaly => "next anomaly line in the log",
            Self::ToggleFollow => "follow the end of the log on/off",
            Self::CycleLogView => "log view: merged / status / deviations",
            Self::Mark => "mark the cursor line (copy copies mark..cursor)",
            Self::Copy => "copy the marked lines to the clipboard (OSC 52)",
            Self::MarkAllRead => "mark every anomaly read",
            Self::FilterTask => "messages: only the selected task / all",
            Self::FilterType => "messages: cycle the message-type filter",
            Self::Suspend => "suspend to the shell (fg to return)",
            Self::ToggleHold => "Souffleur: hold / release automatic recovery",
            Self::RecoverNow => "Souffleur: recover the Conductor now (asks first)",
            Self::Sentinels => "pipelines: start, stop, pause, edit steps",
            Self::Yes => "yes: do what the dialog says",
            Self::No => "no: leave everything as it is",
            Self::PipelineStart => "start the selected pipeline",
            Self::PipelineStop => "stop it (its step's processes are ended)",
            Self::PipelinePause => "pause or resume it",
            Self::EditSteps => "edit its steps while it runs",
            Self::SaveEdit => "check the steps and save them",
        }
    }
}
