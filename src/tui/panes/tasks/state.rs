//! The Tasks pane's own state: the filter (`/`) and whether it is being typed, and the
//! order (`o`). The selection is not the pane's: Heartbeats, the Log and the task
//! actions read it too.

/// The Tasks pane's own state.
#[derive(Debug, Clone, Default)]
pub struct TasksState {
    /// Only the tasks whose id, state, worker or activity holds this.
    pub filter: Option<String>,
    /// The prompt being typed filters the tasks, not the log.
    pub filtering: bool,
    pub sort: TaskSort,
}

/// How the Tasks pane orders its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TaskSort {
    #[default]
    Id,
    State,
    Context,
    Cost,
}

impl TaskSort {
    #[must_use]
    pub fn next(self) -> Self {
        match self {
            Self::Id => Self::State,
            Self::State => Self::Context,
            Self::Context => Self::Cost,
            Self::Cost => Self::Id,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Id => "id",
            Self::State => "state",
            Self::Context => "context",
            Self::Cost => "cost",
        }
    }
}
