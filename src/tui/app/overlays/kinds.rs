//! What each overlay shows: the [`Overlay`] enum (which one is open, and its payload)
//! and the types it carries. Plain data, below the state that holds it and the
//! components that act on it; the list of overlays is here, once.

use crate::core::actions::TaskRequest;
use crate::core::domain::TaskId;

/// Every overlay: its variant (what it shows) and its component (the type in its file
/// under `overlays/`). Adding an overlay is its file and one line here. Handed to a
/// macro: the enum below is declared from it, the components' registry in `overlays`.
macro_rules! overlay_list {
    ($then:ident) => {
        $then! {
            /// Every key the dashboard answers, from the keymap.
            Help => help::Help,
            /// Full text of the message with this id.
            Message(i64) => message::MessageText,
            /// A destructive action waiting for y/n.
            Confirm(Confirm) => confirm::Confirmation,
            /// The pipelines this process hosts.
            Sentinels => pipelines::Pipelines,
            /// Editing the steps of this pipeline (the text is in `UiState::editor`).
            Editor(String) => editor::StepEditor,
            /// Writing the message of a task action (the text is in `UiState::compose`).
            Compose(Compose) => compose::MessageEditor,
            /// A task's context headroom report: the task, and the report.
            Headroom(String, String) => headroom::Headroom,
            /// A task's Claude Code session: tokens, cost, context, tool calls.
            Session(String) => session::Session,
            /// The project picker (several projects): the highlighted one.
            Projects(usize) => projects::Picker,
            /// The Log's selected line, whole: its task, and its text.
            LogLine(String, std::sync::Arc<str>) => log_line::LogLine,
        }
    };
}
pub(crate) use overlay_list;

/// Declares [`Overlay`] from the list (its components are the registry's).
macro_rules! declare_overlay {
    ($(
        $(#[$doc:meta])*
        $variant:ident $(($($payload:ty),+))? => $module:ident::$component:ident,
    )+) => {
        /// The overlay open over the panes, with what it shows.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Overlay {
            $( $(#[$doc])* $variant $(($($payload),+))?, )+
        }
    };
}

overlay_list!(declare_overlay);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    /// Kill and relaunch the Conductor now.
    Recover,
    /// Quit, which stops the Souffleur role this process holds.
    QuitRole,
    /// A task action, with what it will do (from `core::actions::describe`).
    Task {
        request: TaskRequest,
        question: String,
    },
    /// Trust a pipeline definition, with its steps in the question.
    Trust {
        name: String,
        hash: String,
        question: String,
    },
}

impl Confirm {
    pub fn question(&self) -> &str {
        match self {
            Self::Recover => {
                "Recover the Conductor now? Its window is killed and a new generation launched."
            }
            Self::QuitRole => {
                "Quit? This process holds the Souffleur role: the Conductor will be unwatched."
            }
            Self::Task { question, .. } | Self::Trust { question, .. } => question,
        }
    }
}

/// A task action that needs a message, waiting for it in the editor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComposeKind {
    Reject,
    Fix,
    Instruct,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compose {
    pub kind: ComposeKind,
    pub task: TaskId,
    /// Escape was pressed once on more than a line: the next one discards them.
    pub discard_armed: bool,
}

impl ComposeKind {
    pub fn title(self) -> &'static str {
        match self {
            Self::Reject => "Reject: why, and what to change",
            Self::Fix => "Propose a fix",
            Self::Instruct => "Instruction",
        }
    }
}
