//! The panes, listed once: each pane's variant, its key table's name in the config
//! (`[keys.tasks]`), the action that focuses it (declared from this line in
//! `tui::action`), its component (the type in its file under `tui/panes/`, which owns
//! its actions, its moves and its drawing) and its own state (its type under `tui::panes`; `NoState`: none; the
//! dashboard's state holds one of each, `ui.panes.<module>`). Adding a pane is its file
//! and one line here: the [`Pane`] enum is declared from this list, the components'
//! registry and the panes' states in `tui::panes`. Plain data, below everything that
//! reads it.

/// Every pane, in the order Tab visits them by default. Handed to a macro.
macro_rules! pane_list {
    ($then:ident) => {
        $then! {
            /// The Musicians' tasks: state, heartbeat, context, cost, what waits.
            Tasks "tasks" FocusTasks => tasks::Tasks
                with tasks::state::TasksState,
            /// The selected task's log, merged or one file, scrolled and searched.
            Log "log" FocusLog => log::Log with log::state::LogState,
            /// What the Sentinel found, newest first.
            Anomalies "anomalies" FocusAnomalies => anomalies::Anomalies
                with anomalies::state::AnomaliesState,
            /// The orchestration's messages, filtered by task or type.
            Messages "messages" FocusMessages => messages::Messages
                with messages::state::MessagesState,
            /// Each role's heartbeat against its limit.
            Heartbeats "heartbeats" FocusHeartbeats => heartbeats::Heartbeats with NoState,
            /// The Souffleur's watch over the Conductor.
            Watchdog "watchdog" FocusWatchdog => watchdog::Watchdog with NoState,
        }
    };
}
pub(crate) use pane_list;

/// Declares [`Pane`] from the list (its components are the registry's).
macro_rules! declare_pane {
    ($(
        $(#[$doc:meta])*
        $variant:ident $name:literal $focus:ident => $module:ident::$component:ident with $($state:ident)::+,
    )+) => {
        /// A pane of the dashboard.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Pane {
            $( $(#[$doc])* $variant, )+
        }

        impl Pane {
            /// Tab order: the list's.
            pub const ALL: [Self; [$( stringify!($variant) ),+].len()] = [$( Self::$variant, )+];

            /// Its key table's name in the config.
            pub fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $name, )+
                }
            }
        }
    };
}

pane_list!(declare_pane);
