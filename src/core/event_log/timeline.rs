//! A run's timeline: the inputs the hub received, in order, with their moments, cut
//! into sessions (one per recording maestro), and what could not be recovered.

use time::OffsetDateTime;

use crate::core::error::OwnFileError;
use crate::core::event_log::input::{Input, Line, RecordedSettings, read_stamp};
use crate::core::paths::EventLogFiles;

/// One input at its moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub at: OffsetDateTime,
    pub input: Input,
}

/// What one maestro saw from its start to its stop: replayed by a hub of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The rules it judged by (`None`: unknown, the replay's own settings apply).
    pub settings: Option<RecordedSettings>,
    pub entries: Vec<Entry>,
    pub start: OffsetDateTime,
    pub end: OffsetDateTime,
}

/// Where a timeline came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// maestro's own event log: exact moments.
    EventLog,
    /// Rebuilt from comms.db and temp/: line moments estimated.
    Files,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EventLog => "event log",
            Self::Files => "comms.db and temp/",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub origin: Origin,
    pub sessions: Vec<Session>,
    /// What could not be recovered, one sentence each.
    pub notes: Vec<String>,
}

impl Timeline {
    /// How many inputs it holds.
    pub fn len(&self) -> usize {
        self.sessions.iter().map(|s| s.entries.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn start(&self) -> Option<OffsetDateTime> {
        self.sessions.first().map(|s| s.start)
    }

    pub fn end(&self) -> Option<OffsetDateTime> {
        self.sessions.last().map(|s| s.end)
    }

    /// The project's event log (the rotated file first), or `None` when maestro never
    /// recorded this project.
    pub fn from_event_log(files: &EventLogFiles) -> Result<Option<Self>, OwnFileError> {
        let mut parts = Vec::new();
        for path in [&files.previous, &files.current] {
            match std::fs::read(path) {
                Ok(bytes) => parts.push((path.display().to_string(), bytes)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(OwnFileError::doing("read the event log", path)(e)),
            }
        }
        if parts.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self::parse_event_log(&parts)))
    }

    /// Reads event-log files (name, bytes), in order. Damage is skipped and described.
    pub fn parse_event_log(parts: &[(String, Vec<u8>)]) -> Self {
        let mut reader = LogReader::default();
        for (name, bytes) in parts {
            reader.file(name, bytes);
        }
        reader.finish()
    }

    /// A task's `[ctx: XX%]` values with the moments they arrived, from the last
    /// recorded session since its status log last started over (values a file already
    /// held when recording began share the file's mtime, as in the hub).
    pub fn context_points(&self, task: &str) -> Vec<(OffsetDateTime, u8)> {
        let Some(session) = self.sessions.last() else {
            return Vec::new();
        };
        let mut points = Vec::new();
        for entry in &session.entries {
            match &entry.input {
                Input::Reset { task: t, kind } if t == task && kind == "status" => points.clear(),
                Input::Lines {
                    task: t,
                    kind,
                    lines,
                    mtime,
                } if t == task && kind == "status" => {
                    let at = mtime.as_deref().and_then(read_stamp).unwrap_or(entry.at);
                    points.extend(
                        lines
                            .iter()
                            .filter_map(|l| crate::core::domain::context_percent(l))
                            .map(|v| (at, v)),
                    );
                }
                _ => {}
            }
        }
        points
    }
}

#[derive(Default)]
struct LogReader {
    sessions: Vec<Session>,
    open: Option<Session>,
    notes: Vec<String>,
    last: Option<OffsetDateTime>,
    clock_steps_back: usize,
}

impl LogReader {
    fn file(&mut self, name: &str, bytes: &[u8]) {
        let mut damaged = 0usize;
        let mut first_damage = 0usize;
        let mut pieces: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        // The text after the last newline: empty, or a line cut short by a crash.
        let tail = pieces.pop().unwrap_or_default();
        if !tail.is_empty() {
            self.notes.push(format!(
                "{name} ends in a line cut short (maestro stopped while writing it): left out"
            ));
        }
        for (n, piece) in pieces.iter().enumerate() {
            if piece.is_empty() {
                continue;
            }
            let parsed = std::str::from_utf8(piece)
                .ok()
                .and_then(|text| serde_json::from_str::<Line>(text).ok())
                .and_then(|line| Some((line.at()?, line.input)));
            if let Some((at, input)) = parsed {
                self.line(at, input);
            } else {
                damaged += 1;
                if first_damage == 0 {
                    first_damage = n + 1;
                }
            }
        }
        if damaged > 0 {
            self.notes.push(format!(
                "{name}: {damaged} line{} damaged (first at line {first_damage}): left out, so what they held is missing from the replay",
                if damaged == 1 { " is" } else { "s are" }
            ));
        }
    }

    fn line(&mut self, at: OffsetDateTime, input: Input) {
        // Moments never go backwards in a replay (the system clock may have).
        let at = match self.last {
            Some(last) if at < last => {
                self.clock_steps_back += 1;
                last
            }
            _ => at,
        };
        self.last = Some(at);
        match input {
            Input::Start {
                continued: true, ..
            } if self.open.is_some() => {}
            Input::Start {
                settings,
                continued,
                ..
            } => {
                if continued {
                    self.notes.push(format!(
                        "the beginning of the run recorded until {} was rotated out of the event log: its replay starts there",
                        crate::core::clock::rfc3339(at)
                    ));
                }
                self.close(None);
                self.open = Some(Session {
                    settings: Some(settings),
                    entries: Vec::new(),
                    start: at,
                    end: at,
                });
            }
            Input::Stop => self.close(Some(at)),
            Input::Gap { dropped } => self.notes.push(format!(
                "the recorder fell behind at {} and left {dropped} inputs out",
                crate::core::clock::rfc3339(at)
            )),
            input => {
                let session = self.open.get_or_insert_with(|| Session {
                    settings: None,
                    entries: Vec::new(),
                    start: at,
                    end: at,
                });
                session.end = at;
                session.entries.push(Entry { at, input });
            }
        }
    }

    /// Ends the open session; `stopped` is the moment of a clean stop.
    fn close(&mut self, stopped: Option<OffsetDateTime>) {
        let Some(mut session) = self.open.take() else {
            return;
        };
        match stopped {
            Some(at) => session.end = at,
            None => self.notes.push(format!(
                "the maestro recording from {} did not stop cleanly: its log ends at {}",
                crate::core::clock::rfc3339(session.start),
                crate::core::clock::rfc3339(session.end)
            )),
        }
        self.sessions.push(session);
    }

    fn finish(mut self) -> Timeline {
        if let Some(session) = self.open.take() {
            // Still being recorded (a live maestro), or killed: it ends where it ends.
            self.notes.push(format!(
                "the last recording has no stop mark (still running, or killed): replayed up to {}",
                crate::core::clock::rfc3339(session.end)
            ));
            self.sessions.push(session);
        }
        if self.clock_steps_back > 0 {
            self.notes.push(format!(
                "{} inputs were stamped earlier than the one before (the system clock moved back): kept in file order",
                self.clock_steps_back
            ));
        }
        Timeline {
            origin: Origin::EventLog,
            sessions: self.sessions,
            notes: self.notes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event_log::input::{Line, stamp};

    fn settings() -> RecordedSettings {
        RecordedSettings {
            with_database: false,
            ..RecordedSettings::default()
        }
    }

    fn line(s: i64, input: Input) -> String {
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(s);
        let mut text = serde_json::to_string(&Line::new(at, input)).expect("json");
        text.push('\n');
        text
    }

    fn lines_input(n: usize) -> Input {
        Input::Lines {
            task: "task-01".into(),
            kind: "status".into(),
            lines: vec![format!("step {n}")],
            mtime: None,
        }
    }

    #[test]
    fn sessions_split_at_each_start_and_end_at_their_stop() {
        let start = Input::Start {
            settings: settings(),
            project: "p".into(),
            continued: false,
        };
        let text = [
            line(0, start.clone()),
            line(1, lines_input(1)),
            line(5, Input::Stop),
            line(10, start),
            line(12, lines_input(2)),
            line(13, Input::Stop),
        ]
        .concat();
        let t = Timeline::parse_event_log(&[("events.jsonl".into(), text.into_bytes())]);
        assert_eq!(t.sessions.len(), 2);
        assert_eq!(t.len(), 2);
        assert_eq!(
            t.sessions[0].end,
            OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(5)
        );
        assert!(t.notes.is_empty(), "{:?}", t.notes);
        assert_eq!(stamp(t.start().expect("start")), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn damage_is_left_out_and_described() {
        let start = Input::Start {
            settings: settings(),
            project: "p".into(),
            continued: false,
        };
        let mut bytes = [line(0, start), line(1, lines_input(1))]
            .concat()
            .into_bytes();
        bytes.extend_from_slice(b"{\"t\":\"not a time\",\"ev\":\"stop\"}\n\xff\xfe garbage\n");
        bytes.extend_from_slice(line(2, lines_input(2)).as_bytes());
        bytes.extend_from_slice(b"{\"t\":\"1970-01-01T00:00:03Z\",\"ev\":\"li");
        let t = Timeline::parse_event_log(&[("events.jsonl".into(), bytes)]);
        assert_eq!(t.len(), 2, "both good lines survive");
        let notes = t.notes.join("\n");
        assert!(
            notes.contains("2 lines are damaged (first at line 3)"),
            "{notes}"
        );
        assert!(notes.contains("cut short"), "{notes}");
        assert!(notes.contains("no stop mark"), "{notes}");
    }

    #[test]
    fn a_rotated_log_reads_as_one_run_and_a_lost_beginning_is_said() {
        let start = |continued| Input::Start {
            settings: settings(),
            project: "p".into(),
            continued,
        };
        let previous = [line(0, start(false)), line(1, lines_input(1))].concat();
        let current = [
            line(2, start(true)),
            line(2, lines_input(2)),
            line(3, Input::Gap { dropped: 7 }),
            line(4, Input::Stop),
        ]
        .concat();
        let both = Timeline::parse_event_log(&[
            ("events.1.jsonl".into(), previous.into_bytes()),
            ("events.jsonl".into(), current.clone().into_bytes()),
        ]);
        assert_eq!((both.sessions.len(), both.len()), (1, 2));
        assert_eq!(both.notes.len(), 1, "{:?}", both.notes);
        assert!(
            both.notes[0].contains("left 7 inputs out"),
            "{:?}",
            both.notes
        );

        let alone = Timeline::parse_event_log(&[("events.jsonl".into(), current.into_bytes())]);
        assert_eq!(alone.len(), 1);
        assert!(
            alone.notes.iter().any(|n| n.contains("rotated out")),
            "{:?}",
            alone.notes
        );
    }
}
