//! The one error every command returns, and the exit status it maps to (docs/cli.md):
//! 2 for a usage or configuration problem, 1 for a failure while running. A failure
//! that comes from the core keeps the core's typed error, whose causes the report
//! adds where its own words do not already say them.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

/// How a command failed. The text is one paragraph naming the problem and the fix.
#[derive(Debug, Clone)]
pub enum CliError {
    /// Bad arguments, configuration, or a refused confirmation: exit 2, nothing written.
    Usage(String),
    /// The database, a process or a running maestro said no: exit 1.
    Runtime(String),
    /// The core failed (exit 1): its error, with the chain of what caused it.
    Failed(Arc<dyn Error + Send + Sync>),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Runtime(_) | Self::Failed(_) => 1,
        }
    }

    /// The report for stderr: the error's words, then each cause they do not already
    /// hold (`because: …`), one per line.
    pub fn report(&self) -> String {
        let mut text = self.to_string();
        if let Self::Failed(e) = self {
            let mut cause = e.source();
            while let Some(c) = cause {
                let said = c.to_string();
                if !text.contains(&said) {
                    text.push_str("\n  because: ");
                    text.push_str(&said);
                }
                cause = c.source();
            }
        }
        text
    }
}

impl PartialEq for CliError {
    fn eq(&self, other: &Self) -> bool {
        self.exit_code() == other.exit_code() && self.to_string() == other.to_string()
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(m) | Self::Runtime(m) => f.write_str(m),
            Self::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl Error for CliError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            Self::Failed(e) => e.source(),
            _ => None,
        }
    }
}

/// A runtime failure from one of the core's errors, its causes kept for the report.
pub fn runtime(e: impl Error + Send + Sync + 'static) -> CliError {
    CliError::Failed(Arc::new(e))
}

/// Shorthand for a usage problem from any displayable error.
pub fn usage(e: impl fmt::Display) -> CliError {
    CliError::Usage(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot write to comms.db; nothing was changed")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("cannot open x ({0}).")]
    struct Says(#[source] std::io::Error);

    #[test]
    fn the_report_adds_each_cause_its_words_do_not_hold_and_exits_1() {
        let e = runtime(Outer(std::io::Error::other("disk full")));
        assert_eq!(e.exit_code(), 1);
        assert_eq!(
            e.report(),
            "cannot write to comms.db; nothing was changed\n  because: disk full"
        );
        let said = runtime(Says(std::io::Error::other("denied")));
        assert_eq!(said.report(), "cannot open x (denied).");
        assert_eq!(CliError::Usage("u".into()).exit_code(), 2);
    }
}
