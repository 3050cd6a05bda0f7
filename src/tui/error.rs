//! The dashboard's one error type: why it cannot start or go on.

use crate::tui::keymap::KeymapError;
use crate::tui::theme::ThemeError;

/// Why the dashboard cannot start or go on, with the fix where there is one.
#[derive(Debug, thiserror::Error)]
pub enum TuiError {
    #[error(transparent)]
    Theme(#[from] ThemeError),
    #[error(transparent)]
    Keys(#[from] KeymapError),
    #[error("cannot open the terminal: {0}")]
    Open(#[source] std::io::Error),
    #[error("cannot set up the terminal: {0}")]
    SetUp(#[source] std::io::Error),
    #[error("cannot draw: {0}")]
    Draw(#[source] std::io::Error),
}
