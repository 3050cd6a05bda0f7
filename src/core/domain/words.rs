//! The Sentinel's vocabulary, once: each anomaly kind with its name, the log it is
//! read in, what marks a line of it, and the setting that sets its threshold (as
//! tokio-console's list of known warnings). The detector, the skim of a long log's
//! history, the line cutter and the Log pane's highlighter read this table; a new kind
//! is one line of it (the enum [`AnomalyKind`] is declared from the same list).

use super::LogKind;

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

/// Declares [`AnomalyKind`] and [`WORDS`] from the one list below.
macro_rules! anomaly_kinds {
    ($( $kind:ident: $name:literal, $log:ident, $mark:expr, $threshold:expr; )+) => {
        /// The four anomalies of docs/orchestration.md §3, and nothing else; each is
        /// one line of the list in `words.rs`, in this order.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum AnomalyKind {
            $( $kind, )+
        }

        /// Every kind, in the order of [`AnomalyKind`]'s variants.
        pub const WORDS: [Word; [$( stringify!($kind) ),+].len()] = [
            $(
                Word {
                    kind: AnomalyKind::$kind,
                    name: $name,
                    log: LogKind::$log,
                    mark: $mark,
                    threshold: $threshold,
                },
            )+
        ];
    };
}

// Each kind: its name, the log it is read in, its mark, the setting of its threshold.
anomaly_kinds! {
    SelfCorrection: "self-correction", Status, Mark::Anywhere("self-correction"), None;
    HighDeviation: "high-deviation", Deviations, Mark::LineStart("High:"), None;
    ContextSpike: "context-spike", Status, Mark::ContextStamp, Some("[sentinel] spike_threshold");
    Stalled: "stalled", Status, Mark::Silence, Some("[sentinel] stall_after");
}

impl Mark {
    /// A word in the line marks it (the detector raises these kinds from the table).
    pub fn is_word(self) -> bool {
        matches!(self, Self::Anywhere(_) | Self::LineStart(_))
    }

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
