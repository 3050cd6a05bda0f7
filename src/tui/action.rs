//! What the operator can ask for: the keymap's vocabulary (`"ctrl-k" = "kill_task"` in
//! the config names these in `snake_case`). Each action is one line of the list below:
//! its name, where it is answered ([`Scope`]), its line in the help and, for the keys
//! an operator reaches for first, its word in the footer's hints.

use serde::Deserialize;

use crate::tui::pane_kinds::{Pane, pane_list};

/// Where an action is answered, outside an open overlay (which takes every key while
/// it is open). Every action has one, so a new action cannot fall through unrouted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Above the panes: quit, help, Tab, the moves and Enter (which the focused pane's
    /// component answers), search, the Souffleur's keys.
    Global,
    /// The pane whose component lists it as its own (that component answers it).
    Pane,
    /// Focuses the pane whose line in the list of panes names it.
    Focus,
    /// Only an overlay's (a dialog's, the pipelines', the editor's).
    Overlay,
    /// A replay's controls: the loop sends them to the replay.
    Replay,
    /// Switching project: the loop, when several are shown.
    Screens,
}

/// Declares [`Action`] and its table from the list, with a focus action for each pane
/// of the list of panes.
macro_rules! declare_actions {
    (
        $( $variant:ident: $scope:ident, $describe:literal $(=> $hint:literal)?; )+
        [$( $pane:ident $focus:ident; )+]
    ) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Action {
            $( $variant, )+
            $( $focus, )+
        }

        impl Action {
            /// Every action, in the list's order.
            pub const ALL: [Self; [$( stringify!($variant), )+ $( stringify!($focus), )+].len()] =
                [$( Self::$variant, )+ $( Self::$focus, )+];

            /// Where it is answered.
            pub fn scope(self) -> Scope {
                match self {
                    $( Self::$variant => Scope::$scope, )+
                    $( Self::$focus => Scope::Focus, )+
                }
            }

            /// The one-line description shown in help.
            pub fn describe(self) -> &'static str {
                match self {
                    $( Self::$variant => $describe, )+
                    $( Self::$focus => concat!("focus ", stringify!($pane)), )+
                }
            }

            /// A word or two for the footer's key hints (the pane keys an operator
            /// reaches for first); `None` for the rest, which `?` lists.
            pub fn hint(self) -> Option<&'static str> {
                match self {
                    $( Self::$variant => None $(.or(Some($hint)))?, )+
                    $( Self::$focus => None, )+
                }
            }

            /// The pane a focus action focuses.
            pub fn focused_pane(self) -> Option<Pane> {
                match self {
                    $( Self::$focus => Some(Pane::$pane), )+
                    _ => None,
                }
            }
        }
    };
}

/// The list of actions, handed the list of panes (each pane's focus action is its).
macro_rules! with_panes {
    ($(
        $(#[$doc:meta])*
        $pane:ident $name:literal $focus:ident => $module:ident::$component:ident with $($state:ident)::+,
    )+) => {
        declare_actions! {
            Quit: Global, "quit";
            Help: Global, "show or hide this help";
            Close: Global, "close the overlay, search or filter";
            FocusNext: Global, "focus the next pane";
            FocusPrev: Global, "focus the previous pane";
            Up: Global, "move up / scroll up";
            Down: Global, "move down / scroll down";
            PageUp: Global, "page up";
            PageDown: Global, "page down";
            Top: Global, "go to the first line";
            Bottom: Global, "go to the last line (Log: follow again)";
            Open: Global, "open: task → its log, anomaly → its line, message → full text" => "open";
            Search: Global, "search the log (in Tasks: filter the tasks)" => "filter/search";
            SearchNext: Pane, "next search match";
            SearchPrev: Pane, "previous search match";
            PrevAnomaly: Pane, "previous anomaly line in the log";
            NextAnomaly: Pane, "next anomaly line in the log" => "next anomaly";
            ToggleFollow: Pane, "follow the end of the log on/off" => "follow";
            CycleLogView: Pane, "log view: merged / status / deviations" => "view";
            Mark: Pane, "mark the cursor line (copy copies mark..cursor)";
            Copy: Pane, "copy the marked lines to the clipboard (OSC 52)" => "copy";
            MarkAllRead: Pane, "mark every anomaly read" => "all read";
            FilterTask: Pane, "messages: only the selected task / all" => "by task";
            FilterType: Pane, "messages: cycle the message-type filter" => "by type";
            Suspend: Global, "suspend to the shell (fg to return)";
            ToggleHold: Global, "Souffleur: hold / release automatic recovery";
            RecoverNow: Global, "Souffleur: recover the Conductor now (asks first)";
            Sentinels: Global, "pipelines: start, stop, pause, edit steps";
            Yes: Overlay, "yes: do what the dialog says";
            No: Overlay, "no: leave everything as it is";
            PipelineStart: Overlay, "start the selected pipeline";
            PipelineStop: Overlay, "stop it (its step's processes are ended)";
            PipelinePause: Overlay, "pause or resume it";
            EditSteps: Overlay, "edit its steps while it runs";
            PipelineTrust: Overlay, "trust it as it is now (shows its steps first)";
            SaveEdit: Overlay, "editor: check and save steps / send the message";
            Approve: Pane, "approve the task's review (-> review_approved)" => "approve";
            Reject: Pane, "reject its review with a reason (-> review_failed)" => "reject";
            ProposeFix: Pane, "propose a fix for its error (-> fix_proposed)";
            Instruct: Pane, "send it an instruction (its state is unchanged)" => "instruct";
            Relaunch: Pane, "relaunch its Musician by the handoff procedure" => "relaunch";
            KillWindow: Pane, "kill its window (SIGTERM, then SIGKILL)";
            Freeze: Pane, "freeze its window (SIGSTOP)";
            Thaw: Pane, "thaw its window (SIGCONT)";
            Headroom: Pane, "its context headroom report";
            NextProject: Screens, "show the next project (alt-1 … alt-9: that project)";
            PrevProject: Screens, "show the previous project";
            Session: Pane, "its Claude Code session: tokens, cost, context, tool calls" => "session";
            SortTasks: Pane, "sort the tasks by id / state / context / cost" => "sort";
            ProjectPicker: Screens, "pick a project from the list of all of them";
            GoToWindow: Global, "go to the kitty window of a task that needs you" => "go to window";
            Zoom: Global, "zoom the focused pane to the whole screen / back";
            ReplayPause: Replay, "replay: pause / play";
            ReplayStep: Replay, "replay: step to the next recorded moment (pauses)";
            ReplayBack: Replay, "replay: one minute back";
            ReplayForward: Replay, "replay: one minute on";
            ReplayBackFar: Replay, "replay: ten minutes back";
            ReplayForwardFar: Replay, "replay: ten minutes on";
            ReplayFaster: Replay, "replay: faster";
            ReplaySlower: Replay, "replay: slower";
            [$( $pane $focus; )+]
        }
    };
}

pane_list!(with_panes);
