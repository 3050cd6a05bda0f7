//! Claude Code's permission modes, ordered: what a launched session may do without
//! asking, held to the user's ceiling wherever maestro starts one.

/// Claude Code permission modes maestro passes on, from least to most powerful.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    /// Read-only planning: the least a session may do.
    Plan,
    /// Asks before every edit and command.
    Default,
    AcceptEdits,
    BypassPermissions,
}

impl Permission {
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "plan" => Some(Self::Plan),
            "default" => Some(Self::Default),
            "acceptEdits" => Some(Self::AcceptEdits),
            "bypassPermissions" => Some(Self::BypassPermissions),
            _ => None,
        }
    }

    /// Exactly a mode's name: no quotes, no spaces (the config file's rule).
    pub fn parse_exact(s: &str) -> Option<Self> {
        [
            Self::Plan,
            Self::Default,
            Self::AcceptEdits,
            Self::BypassPermissions,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Plan => "plan",
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::BypassPermissions => "bypassPermissions",
        }
    }
}
