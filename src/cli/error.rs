//! The one error every command returns, and the exit status it maps to (docs/cli.md):
//! 2 for a usage or configuration problem, 1 for a failure while running.

use std::fmt;

/// How a command failed. The text is one paragraph naming the problem and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// Bad arguments, configuration, or a refused confirmation: exit 2, nothing written.
    Usage(String),
    /// The database, a process or a running maestro said no: exit 1.
    Runtime(String),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Runtime(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(m) | Self::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CliError {}

/// Shorthand for a runtime failure from any displayable error.
pub fn runtime(e: impl fmt::Display) -> CliError {
    CliError::Runtime(e.to_string())
}

/// Shorthand for a usage problem from any displayable error.
pub fn usage(e: impl fmt::Display) -> CliError {
    CliError::Usage(e.to_string())
}
