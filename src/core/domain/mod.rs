//! Domain vocabulary shared by every part of maestro: task ids, task states, log
//! kinds, anomalies. Pure data; nothing here does I/O.

pub mod permission;
pub mod souffleur;
pub mod words;

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

/// A task id that is safe to turn into a file name under `temp/`.
///
/// Only `task-NN` with an optional `-fix` or `-S<n>` suffix passes: database text that
/// does not match is reported and never becomes a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct TaskId(String);

/// Read back only through [`TaskId::parse`]: JSON from elsewhere is checked like a row.
impl<'de> serde::Deserialize<'de> for TaskId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        Self::parse(&raw)
            .ok_or_else(|| serde::de::Error::custom(format!("{raw:?} is not a task id")))
    }
}

static TASK_ID: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^task-\d{1,6}(?:-fix|-S\d{1,6})?$").expect("static regex"));

/// The Conductor's task id.
pub const CONDUCTOR_ID: &str = "task-00";
/// The Conductor's window PID file under `temp/`.
pub const CONDUCTOR_PID_FILE: &str = "souffleur-conductor.pid";
/// The Souffleur's row id.
pub const SOUFFLEUR_ID: &str = "souffleur";

impl TaskId {
    /// Accepts a task id that passes the strict check, or `souffleur`.
    pub fn parse(raw: &str) -> Option<Self> {
        (TASK_ID.is_match(raw) || raw == SOUFFLEUR_ID).then(|| Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_conductor(&self) -> bool {
        self.0 == CONDUCTOR_ID
    }

    pub fn is_souffleur(&self) -> bool {
        self.0 == SOUFFLEUR_ID
    }

    /// A Musician: anything but the Conductor and the Souffleur.
    pub fn is_musician(&self) -> bool {
        !self.is_conductor() && !self.is_souffleur()
    }

    /// The window PID file maestro writes under `temp/` when it opens this task's
    /// window: `musician-task-03.pid`, the Conductor's `souffleur-conductor.pid`. Built
    /// only from a checked id, so it can never name a file outside `temp/`.
    pub fn window_pid_file(&self) -> String {
        if self.is_conductor() {
            CONDUCTOR_PID_FILE.to_owned()
        } else {
            format!("musician-{}.pid", self.0)
        }
    }

    /// The file name of one of this task's logs (`task-03-status`). Only valid ids exist,
    /// so the name can never climb out of `temp/`.
    pub fn log_file_name(&self, kind: LogKind) -> Option<String> {
        self.is_musician()
            .then(|| format!("{}-{}", self.0, kind.suffix()))
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Which log of a task a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LogKind {
    Status,
    Deviations,
}

impl LogKind {
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Deviations => "deviations",
        }
    }

    /// Splits `task-03-status` into its task id and kind; `None` for any other name.
    pub fn parse_file_name(name: &str) -> Option<(TaskId, Self)> {
        for kind in [Self::Status, Self::Deviations] {
            if let Some(id) = name
                .strip_suffix(kind.suffix())
                .and_then(|s| s.strip_suffix('-'))
                && let Some(id) = TaskId::parse(id)
                && id.is_musician()
            {
                return Some((id, kind));
            }
        }
        None
    }
}

/// What a task state means to maestro: whose turn it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// A Musician works: it keeps its heartbeat and can stall.
    Works,
    /// A role (the Conductor reviewing, the Souffleur confirmed) is busy at its own job.
    Busy,
    /// Waiting on the Conductor, or on a recovery or an exit it asked for.
    Waits,
    /// Failed: the Conductor's to answer.
    Failed,
    /// The end of a life.
    Ended,
    /// Not started, or a state no table here knows.
    Unknown,
}

/// Declares the task states from one list: [`STATES`] (each name with its meaning) and
/// the [`state`] constants code names them by (a literal of its own could drift).
macro_rules! task_states {
    ($($konst:ident = $name:literal: $meaning:ident,)*) => {
        /// The task states' names, as code writes and matches them (`state::FIX_PROPOSED`).
        pub mod state {
            $(pub const $konst: &str = $name;)*
        }

        /// The task states docs/orchestration.md names, each once with its meaning:
        /// what the watchers, the Sentinel and the dashboard's colours all read.
        pub const STATES: [(&str, Meaning); [$($name),*].len()] =
            [$(($name, Meaning::$meaning)),*];
    };
}

task_states! {
    WORKING = "working": Works,
    REVIEW_APPROVED = "review_approved": Works,
    REVIEW_FAILED = "review_failed": Works,
    FIX_PROPOSED = "fix_proposed": Works,
    REVIEWING = "reviewing": Busy,
    CONFIRMED = "confirmed": Busy,
    NEEDS_REVIEW = "needs_review": Waits,
    CONTEXT_RECOVERY = "context_recovery": Waits,
    EXIT_REQUESTED = "exit_requested": Waits,
    ERROR = "error": Failed,
    COMPLETE = "complete": Ended,
    EXITED = "exited": Ended,
    WATCHING = "watching": Unknown,
}

/// The `state` column of `orchestration_tasks`, kept as text so a value added by a newer
/// orchestration still shows; the helpers know the states docs/orchestration.md names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct TaskState(pub String);

impl TaskState {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `complete` and `exited` end a Musician's life.
    pub fn is_terminal(&self) -> bool {
        Self::ends(self.as_str())
    }

    /// [`Self::is_terminal`] of a state as the database gives it.
    pub fn ends(state: &str) -> bool {
        Self::meaning(state) == Meaning::Ended
    }

    /// States in which a Musician works (and so can stall): not claimed yet, waiting on
    /// the Conductor (`needs_review`, `error`) and the ends are not. `fix_proposed` is
    /// the Musician's turn (the skill: "Musician applies proposed fix").
    pub fn is_working(&self) -> bool {
        Self::works(self.as_str())
    }

    /// [`Self::is_working`] of a state as the database gives it.
    pub fn works(state: &str) -> bool {
        Self::meaning(state) == Meaning::Works
    }

    /// What a state means, from [`STATES`]; a state the table does not know (a newer
    /// orchestration's) means nothing yet.
    pub fn meaning(state: &str) -> Meaning {
        STATES
            .iter()
            .find(|(name, _)| *name == state)
            .map_or(Meaning::Unknown, |(_, m)| *m)
    }

    /// States in which a Musician waits on the Conductor (its answer to a review, its
    /// fix for an error): the Conductor's queue, not a stall.
    pub fn waits_on_conductor(&self) -> bool {
        matches!(self.as_str(), state::NEEDS_REVIEW | state::ERROR)
    }

    /// States in which a Musician must keep its heartbeat fresh.
    pub fn is_heartbeat_active(&self) -> bool {
        Self::works(self.as_str())
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The anomalies the Sentinel reports: declared from the Sentinel's words, one line
/// each ([`words::WORDS`]).
pub use words::AnomalyKind;

impl AnomalyKind {
    pub fn as_str(self) -> &'static str {
        words::word(self).name
    }

    pub fn parse(s: &str) -> Option<Self> {
        words::WORDS.iter().find(|w| w.name == s).map(|w| w.kind)
    }
}

/// By its name in the table, as everywhere.
impl Serialize for AnomalyKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for AnomalyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One Sentinel finding, before it is stamped with a wall-clock time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    pub task_id: TaskId,
    pub kind: AnomalyKind,
    pub detail: String,
    /// For `context-spike`: the percentages before and after.
    pub spike: Option<(u8, u8)>,
    /// The line that raised it (for `stalled`, the last entry), when there is one.
    pub line: Option<SourceLine>,
}

/// Which line of a task's log an anomaly is about: its kind, its position among the
/// lines of that kind read since monitoring started (0-based, counting on across
/// truncations), and its text. Presenters that keep the same lines find it at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    pub kind: LogKind,
    /// The line's number among the lines read of its file (the dashboard's link).
    pub index: u64,
    /// Where the line starts in its file, when the reader knew: its identity whatever a
    /// later read starts from (a restart reads only a long log's end).
    pub offset: Option<u64>,
    pub text: std::sync::Arc<str>,
}

impl Anomaly {
    /// The report text of docs/orchestration.md §3, the form the Conductor parses; `hms` is the
    /// moment in the operator's time zone.
    /// A line it quotes (self-correction, high deviation) is in quotes there, as the
    /// Sentinel protocol's examples write it; `detail` itself is the line as written.
    pub fn report(&self, hms: &str) -> String {
        let detail = match self.kind {
            AnomalyKind::SelfCorrection | AnomalyKind::HighDeviation => {
                format!("\"{}\"", self.detail)
            }
            _ => self.detail.clone(),
        };
        format!(
            "SENTINEL: [{hms}] {}\nAnomaly: {}\nDetail: {detail}",
            self.task_id, self.kind
        )
    }

    /// What makes two reports "the same report" across restarts: the stall detail
    /// carries a growing duration, so only its last entry counts.
    pub fn dedupe_key(&self) -> (TaskId, AnomalyKind, String) {
        (
            self.task_id.clone(),
            self.kind,
            dedupe_detail(self.kind, &self.detail),
        )
    }
}

/// The part of a report's detail that identifies it (see [`Anomaly::dedupe_key`]).
/// Reports recorded by earlier maestros quoted the line (`"High: …"`); the same line
/// unquoted is the same report.
pub fn dedupe_detail(kind: AnomalyKind, detail: &str) -> String {
    match (kind, detail.find("Last entry:")) {
        (AnomalyKind::Stalled, Some(at)) => detail[at..].to_owned(),
        (AnomalyKind::SelfCorrection | AnomalyKind::HighDeviation, _) => detail
            .strip_prefix('"')
            .and_then(|d| d.strip_suffix('"'))
            .unwrap_or(detail)
            .to_owned(),
        _ => detail.to_owned(),
    }
}

static CTX: LazyLock<Regex> = LazyLock::new(|| {
    let stamp = regex::escape(words::CONTEXT_STAMP);
    Regex::new(&format!(r"{stamp}\s*(\d{{1,3}})\s*%\]")).expect("static regex")
});
static STEP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\bstep (\d+)").expect("static regex"));

/// The `[ctx: XX%]` value of a status line (the last one if several), 0–100.
pub fn context_percent(line: &str) -> Option<u8> {
    context_percent_of_bytes(line.as_bytes())
}

/// [`context_percent`] read from the line's bytes where it stands: a Musician writes the
/// marker on nearly every line, so this runs on nearly every line read. Only a marker
/// with non-ASCII bytes inside (Unicode spaces or digits) is left to the regex.
pub fn context_percent_of_bytes(line: &[u8]) -> Option<u8> {
    static MARKER: LazyLock<memchr::memmem::FinderRev<'static>> =
        LazyLock::new(|| memchr::memmem::FinderRev::new(words::CONTEXT_STAMP.as_bytes()));
    for at in MARKER.rfind_iter(line) {
        match marker_value(&line[at + words::CONTEXT_STAMP.len()..]) {
            Marker::Value(v) => return u8::try_from(v).ok().filter(|v| *v <= 100),
            Marker::NotOne => {}
            Marker::NotAscii => {
                let text = String::from_utf8_lossy(line);
                return CTX
                    .captures_iter(&text)
                    .last()
                    .and_then(|c| c[1].parse::<u8>().ok())
                    .filter(|v| *v <= 100);
            }
        }
    }
    None
}

/// [`context_percent_of_bytes`] when the last `[ctx:` of the line is known to start at
/// `at` (a skim found it): read there, else the whole line is read.
pub fn context_percent_at(line: &[u8], at: usize) -> Option<u8> {
    match line
        .get(at + words::CONTEXT_STAMP.len()..)
        .map(marker_value)
    {
        Some(Marker::Value(v)) => u8::try_from(v).ok().filter(|v| *v <= 100),
        _ => context_percent_of_bytes(line),
    }
}

/// What follows a `[ctx:`.
enum Marker {
    /// `\s*(\d{1,3})\s*%]`: its digits.
    Value(u16),
    NotOne,
    /// A byte the ASCII reading cannot judge: the regex does.
    NotAscii,
}

fn marker_value(rest: &[u8]) -> Marker {
    let mut i = 0;
    let skip_spaces = |i: &mut usize| {
        while rest.get(*i).is_some_and(u8::is_ascii_whitespace) {
            *i += 1;
        }
    };
    skip_spaces(&mut i);
    let digits_start = i;
    let mut value: u16 = 0;
    while let Some(d) = rest.get(i).filter(|b| b.is_ascii_digit()) {
        if i - digits_start == 3 {
            return Marker::NotOne;
        }
        value = value * 10 + u16::from(d - b'0');
        i += 1;
    }
    if rest.get(i).is_some_and(|b| !b.is_ascii()) {
        return Marker::NotAscii;
    }
    if i == digits_start {
        return Marker::NotOne;
    }
    skip_spaces(&mut i);
    match (rest.get(i), rest.get(i + 1)) {
        (Some(b'%'), Some(b']')) => Marker::Value(value),
        (Some(b), _) if !b.is_ascii() => Marker::NotAscii,
        _ => Marker::NotOne,
    }
}

/// `step 3` of a status line, used to name where a context spike happened.
pub fn step_label(line: &str) -> Option<String> {
    STEP.captures(line).map(|c| format!("step {}", &c[1]))
}

/// A status line without its `[ctx: …]` marker, for report details.
pub fn without_context_marker(line: &str) -> String {
    CTX.replace_all(line, "").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fix_proposed_is_the_musicians_turn_not_the_conductors() {
        let s = TaskState("fix_proposed".into());
        assert!(s.is_working());
        assert!(!s.waits_on_conductor());
        assert!(TaskState("needs_review".into()).waits_on_conductor());
        assert!(TaskState("error".into()).waits_on_conductor());
    }

    #[test]
    fn task_ids_are_strict() {
        for ok in [
            "task-00",
            "task-01",
            "task-12-fix",
            "task-3-S2",
            "souffleur",
        ] {
            assert!(TaskId::parse(ok).is_some(), "{ok}");
        }
        for bad in [
            "",
            "task-",
            "task-01/../x",
            "../task-01",
            "task-01 ",
            "TASK-01",
            "task-01-fixx",
            "task-1-S",
            "task-01\n",
            "x-task-01",
        ] {
            assert!(TaskId::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn file_names_map_to_tasks() {
        let (id, kind) = LogKind::parse_file_name("task-03-status").unwrap();
        assert_eq!((id.as_str(), kind), ("task-03", LogKind::Status));
        let (id, kind) = LogKind::parse_file_name("task-03-fix-deviations").unwrap();
        assert_eq!((id.as_str(), kind), ("task-03-fix", LogKind::Deviations));
        assert!(LogKind::parse_file_name("task-03-HANDOFF").is_none());
        assert!(LogKind::parse_file_name("task-00-status").is_none());
        assert!(LogKind::parse_file_name("musician-task-03.pid").is_none());
        assert!(LogKind::parse_file_name("souffleur-status").is_none());
    }

    #[test]
    fn context_marker_parses() {
        assert_eq!(context_percent("step 2 started [ctx: 29%]"), Some(29));
        assert_eq!(context_percent("a [ctx: 5%] b [ctx:51%]"), Some(51));
        assert_eq!(context_percent("no marker"), None);
        assert_eq!(context_percent("[ctx: 250%]"), None);
        assert_eq!(context_percent("a [ctx: 5%] b [ctx: 250%]"), None);
        assert_eq!(context_percent("a [ctx: 5%] b [ctx: 1234%]"), Some(5));
        assert_eq!(context_percent("a [ctx:\u{a0}7 %]"), Some(7));
        assert_eq!(context_percent("a [ctx: 7 %] [ctx: ]"), Some(7));
        assert_eq!(
            without_context_marker("step 2 started [ctx: 29%]"),
            "step 2 started"
        );
        assert_eq!(
            step_label("step 12 agent 1 launched"),
            Some("step 12".into())
        );
    }

    proptest::proptest! {
        /// The byte reading gives the regex's answer on any line built of the marker's
        /// own pieces.
        #[test]
        fn the_byte_reading_agrees_with_the_regex(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "[ctx:", " ", "\t", "%", "]", "%]", "1", "23", "100", "255", "256",
                    "9999", "x", "\u{a0}", "\u{663}", "[ctx: 5%]", "[",
                ]),
                0..12,
            )
        ) {
            let line: String = parts.concat();
            let by_regex = CTX
                .captures_iter(&line)
                .last()
                .and_then(|c| c[1].parse::<u8>().ok())
                .filter(|v| *v <= 100);
            proptest::prop_assert_eq!(context_percent(&line), by_regex, "{:?}", line);
        }
    }
}
