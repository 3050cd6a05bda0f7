//! The Sentinel's vocabulary, once: each anomaly kind with its name, the log it is
//! read in, what marks a line of it, and the setting that sets its threshold (as
//! tokio-console's list of known warnings). The detector, the skim of a long log's
//! history, the line cutter and the Log pane's highlighter read this table; a new kind
//! is a variant of [`AnomalyKind`] and one entry here.

use super::{AnomalyKind, LogKind};

/// What marks a line the Sentinel reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// The word anywhere in the line (`self-correction`).
    Anywhere(&'static str),
    /// The line opens with it (`High:`).
    LineStart(&'static str),
    /// A context stamp, `[ctx: N%]`, whose value is compared with the one before.
    ContextStamp,
    /// No line: the log's silence.
    Silence,
}

/// One kind of anomaly as the Sentinel knows it.
#[derive(Debug, Clone, Copy)]
pub struct Word {
    pub kind: AnomalyKind,
    /// Its name in events, the database's reports and on screen.
    pub name: &'static str,
    /// The log it is read in.
    pub log: LogKind,
    pub mark: Mark,
    /// The setting that sets when it is raised, if one does.
    pub threshold: Option<&'static str>,
}

/// The opening of a context stamp.
pub const CONTEXT_STAMP: &str = "[ctx:";

/// Every kind, in the order of [`AnomalyKind`]'s variants (a test holds them so).
pub const WORDS: [Word; 4] = [
    Word {
        kind: AnomalyKind::SelfCorrection,
        name: "self-correction",
        log: LogKind::Status,
        mark: Mark::Anywhere("self-correction"),
        threshold: None,
    },
    Word {
        kind: AnomalyKind::HighDeviation,
        name: "high-deviation",
        log: LogKind::Deviations,
        mark: Mark::LineStart("High:"),
        threshold: None,
    },
    Word {
        kind: AnomalyKind::ContextSpike,
        name: "context-spike",
        log: LogKind::Status,
        mark: Mark::ContextStamp,
        threshold: Some("[sentinel] spike_threshold"),
    },
    Word {
        kind: AnomalyKind::Stalled,
        name: "stalled",
        log: LogKind::Status,
        mark: Mark::Silence,
        threshold: Some("[sentinel] stall_after"),
    },
];

impl Mark {
    /// The text a reader looks for, if a line can hold one.
    pub fn needle(self) -> Option<&'static str> {
        match self {
            Self::Anywhere(w) | Self::LineStart(w) => Some(w),
            Self::ContextStamp => Some(CONTEXT_STAMP),
            Self::Silence => None,
        }
    }

    /// Whether `line` bears this mark.
    pub fn is_in(self, line: &str) -> bool {
        match self {
            Self::Anywhere(w) => line.contains(w),
            Self::LineStart(w) => line.starts_with(w),
            Self::ContextStamp => line.contains(CONTEXT_STAMP),
            Self::Silence => false,
        }
    }
}

/// The entry of `kind`.
pub fn word(kind: AnomalyKind) -> &'static Word {
    &WORDS[kind as usize]
}

/// The marks read in a log of `log`'s kind.
pub fn marks_in(log: LogKind) -> impl Iterator<Item = Mark> {
    WORDS
        .iter()
        .filter(move |w| w.log == log && w.mark != Mark::Silence)
        .map(|w| w.mark)
}

/// Whether the Sentinel could find anything in this line of a `log` log.
pub fn matters(log: LogKind, line: &str) -> bool {
    marks_in(log).any(|m| m.is_in(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_its_own_entry_in_order() {
        for (i, w) in WORDS.iter().enumerate() {
            assert_eq!(w.kind as usize, i, "{}", w.name);
            assert_eq!(AnomalyKind::parse(w.name), Some(w.kind));
            assert_eq!(w.kind.as_str(), w.name);
        }
    }

    #[test]
    fn a_line_matters_by_its_logs_marks() {
        assert!(matters(LogKind::Status, "step 2 self-correction: x"));
        assert!(matters(LogKind::Status, "step 3 [ctx: 40%]"));
        assert!(!matters(LogKind::Status, "High: x"));
        assert!(matters(LogKind::Deviations, "High: x"));
        assert!(!matters(LogKind::Deviations, "a High: x"));
    }
}
