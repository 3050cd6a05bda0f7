//! One line of the event log: what a source told the hub, and when.
//!
//! The log keeps the hub's *inputs*, not its verdicts, so a replay runs the same
//! Sentinel, staleness and forecast rules on the same facts at the same moments and
//! arrives at the same anomalies. Task tables are kept as differences (rows changed,
//! rows gone) and rebuilt into whole tables by [`TaskTable`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::core::domain::{LogKind, TaskId};
use crate::core::event::{CoreEvent, DbStatus, FolderStatus, MessageRow, TaskRow};

/// One event-log line: a moment and what arrived then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// RFC 3339, UTC, with the fraction of a second.
    pub t: String,
    #[serde(flatten)]
    pub input: Input,
}

impl Line {
    pub fn new(at: OffsetDateTime, input: Input) -> Self {
        Self {
            t: stamp(at),
            input,
        }
    }

    pub fn at(&self) -> Option<OffsetDateTime> {
        read_stamp(&self.t)
    }
}

/// Reads back what [`stamp`] wrote.
pub fn read_stamp(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &Rfc3339).ok()
}

/// A file's mtime as the log writes it.
fn mtime_stamp(mtime: std::time::SystemTime) -> String {
    stamp(OffsetDateTime::from(mtime))
}

/// A file's mtime read back from the log.
fn mtime_of(text: Option<&str>) -> Option<std::time::SystemTime> {
    text.and_then(read_stamp).map(std::time::SystemTime::from)
}

/// RFC 3339 with nanoseconds (the event log's and replay's time form).
pub fn stamp(at: OffsetDateTime) -> String {
    at.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_default()
}

/// What the hub was told, in a form that survives a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Input {
    /// A maestro started recording: the rules it judged by.
    Start {
        settings: RecordedSettings,
        project: String,
        /// The file was rotated: this is the same run going on, not a new one.
        #[serde(default)]
        continued: bool,
    },
    Lines {
        task: String,
        kind: String,
        lines: Vec<String>,
        /// For what a file already held when monitoring started: its mtime.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mtime: Option<String>,
    },
    Reset {
        task: String,
        kind: String,
    },
    /// A history skimmed at start: the lines judged, and counts of the others.
    History {
        task: String,
        kind: String,
        pieces: Vec<crate::core::event::HistoryPiece>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mtime: Option<String>,
    },
    /// Rows that changed or are new, and ids of rows that are gone.
    Tasks {
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        set: Vec<TaskRow>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        gone: Vec<String>,
    },
    Messages {
        rows: Vec<MessageRow>,
    },
    Failed {
        source: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        detail: String,
    },
    Healthy {
        source: String,
    },
    Database {
        status: String,
        #[serde(default)]
        tasks: usize,
        #[serde(default)]
        detail: String,
    },
    Folder {
        status: String,
        detail: String,
    },
    Watchers {
        list: Vec<(String, String, i32)>,
    },
    /// What the session source read from a transcript.
    Session {
        report: crate::core::sessions::figures::SessionReport,
    },
    /// Claude Code hook events (only on a remote project's link: the event log leaves
    /// them in their own spool).
    Hooks {
        inputs: Vec<crate::core::hooks::book::HookInput>,
    },
    /// The recorder could not keep up and left this many inputs out.
    Gap {
        dropped: u64,
    },
    /// The recording maestro stopped cleanly.
    Stop,
}

/// The hub settings a recording ran with (durations in milliseconds; `replay::rules`
/// converts to and from the hub's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedSettings {
    pub stall_after_ms: u64,
    pub spike_threshold: u8,
    pub task_stale_after_ms: u64,
    pub conductor_stale_after_ms: u64,
    pub souffleur_stale_after_ms: u64,
    pub forecast_lead_ms: u64,
    pub with_database: bool,
    pub observe_watchdog: bool,
    pub db_name: String,
}

impl Default for RecordedSettings {
    /// docs/orchestration.md's thresholds, with a database, observing the watchdog.
    fn default() -> Self {
        Self {
            stall_after_ms: 300_000,
            spike_threshold: 15,
            task_stale_after_ms: 540_000,
            conductor_stale_after_ms: 240_000,
            souffleur_stale_after_ms: 180_000,
            forecast_lead_ms: 600_000,
            with_database: true,
            observe_watchdog: true,
            db_name: "comms.db".into(),
        }
    }
}

fn kind_of(text: &str) -> Option<LogKind> {
    [LogKind::Status, LogKind::Deviations]
        .into_iter()
        .find(|k| k.suffix() == text)
}

/// Source names are a closed set in the core; anything else read back is "replay".
fn source_name(text: &str) -> &'static str {
    ["database", "temp", "pipelines", "souffleur", "sessions"]
        .into_iter()
        .find(|s| *s == text)
        .unwrap_or("replay")
}

fn watcher_mode(text: &str) -> &'static str {
    if text == "pause" {
        "pause"
    } else {
        "background"
    }
}

/// The whole task table, rebuilt from the differences the log keeps.
#[derive(Debug, Default, Clone)]
pub struct TaskTable {
    rows: BTreeMap<String, TaskRow>,
}

impl TaskTable {
    /// The difference that turns this table into `now` (and remembers `now`); `None`
    /// when nothing changed.
    pub fn diff(&mut self, now: &[TaskRow]) -> Option<Input> {
        let set: Vec<TaskRow> = now
            .iter()
            .filter(|r| self.rows.get(&r.task_id) != Some(*r))
            .cloned()
            .collect();
        let gone: Vec<String> = self
            .rows
            .keys()
            .filter(|k| !now.iter().any(|r| &r.task_id == *k))
            .cloned()
            .collect();
        self.rows = now.iter().map(|r| (r.task_id.clone(), r.clone())).collect();
        (!set.is_empty() || !gone.is_empty()).then_some(Input::Tasks { set, gone })
    }

    /// Every row as a difference from an empty table (after a rotation).
    pub fn whole(&self) -> Input {
        Input::Tasks {
            set: self.rows.values().cloned().collect(),
            gone: Vec::new(),
        }
    }

    /// Applies a recorded difference; returns the whole table after it.
    pub fn apply(&mut self, set: &[TaskRow], gone: &[String]) -> Vec<TaskRow> {
        for id in gone {
            self.rows.remove(id);
        }
        for row in set {
            self.rows.insert(row.task_id.clone(), row.clone());
        }
        self.rows.values().cloned().collect()
    }
}

/// What a remote project's link carries for an event: what the recorder keeps, and
/// the hook events ("needs you" is the operator's wherever the session runs).
pub fn wire_input_of(event: &CoreEvent, table: &mut TaskTable) -> Option<Input> {
    match event {
        CoreEvent::Hooks(inputs) => Some(Input::Hooks {
            inputs: inputs.clone(),
        }),
        _ => input_of(event, table),
    }
}

/// What the recorder writes for an event (`None`: not kept, or nothing changed).
pub fn input_of(event: &CoreEvent, table: &mut TaskTable) -> Option<Input> {
    Some(match event {
        // Where the lines start in their file is not recorded: a replay's anomalies are
        // told by their line number.
        CoreEvent::LogLines {
            task,
            kind,
            lines,
            initial_mtime,
            ..
        } => Input::Lines {
            task: task.to_string(),
            kind: kind.suffix().to_owned(),
            lines: lines.clone(),
            mtime: initial_mtime.map(mtime_stamp),
        },
        CoreEvent::LogReset { task, kind } => Input::Reset {
            task: task.to_string(),
            kind: kind.suffix().to_owned(),
        },
        CoreEvent::LogHistory {
            task,
            kind,
            pieces,
            initial_mtime,
        } => Input::History {
            task: task.to_string(),
            kind: kind.suffix().to_owned(),
            pieces: pieces.clone(),
            mtime: initial_mtime.map(mtime_stamp),
        },
        CoreEvent::Tasks(rows) => return table.diff(rows),
        CoreEvent::Messages(rows) => Input::Messages { rows: rows.clone() },
        CoreEvent::SourceFailed {
            source,
            task,
            detail,
        } => Input::Failed {
            source: (*source).to_owned(),
            task: task.as_ref().map(ToString::to_string),
            detail: detail.clone(),
        },
        CoreEvent::SourceHealthy { source } => Input::Healthy {
            source: (*source).to_owned(),
        },
        CoreEvent::Database(status) => {
            let (status, tasks, detail) = match status {
                DbStatus::Waiting(d) => ("waiting", 0, d.clone()),
                DbStatus::Appeared { tasks } => ("appeared", *tasks, String::new()),
                DbStatus::Replaced { tasks } => ("replaced", *tasks, String::new()),
                DbStatus::Removed => ("removed", 0, String::new()),
            };
            Input::Database {
                status: status.to_owned(),
                tasks,
                detail,
            }
        }
        CoreEvent::LogFolder(status) => {
            let (status, detail) = match status {
                FolderStatus::Waiting(d) => ("waiting", d),
                FolderStatus::Watching(d) => ("watching", d),
            };
            Input::Folder {
                status: status.to_owned(),
                detail: detail.clone(),
            }
        }
        CoreEvent::Watchers(list) => Input::Watchers {
            list: list
                .iter()
                .map(|(t, m, p)| (t.to_string(), (*m).to_owned(), *p))
                .collect(),
        },
        CoreEvent::Session(report) => Input::Session {
            report: report.clone(),
        },
        // Verdicts of this process's own actors (the role, pipelines) and reports
        // already in the database are not facts from the orchestration: not kept.
        // Hook events stay in their own spool (a replay shows no "needs you").
        CoreEvent::Hooks(_)
        | CoreEvent::Link(_)
        | CoreEvent::Heard
        | CoreEvent::RecordedReports(_)
        | CoreEvent::Role(_)
        | CoreEvent::Pipeline(_)
        | CoreEvent::PipelineCatalog(_) => return None,
    })
}

/// The hub event an input stands for (`None` for markers, or a task id or log kind
/// that is not one; the log is data, checked like any other).
pub fn event_of(input: &Input, table: &mut TaskTable) -> Option<CoreEvent> {
    Some(match input {
        Input::Lines {
            task,
            kind,
            lines,
            mtime,
        } => CoreEvent::LogLines {
            task: TaskId::parse(task)?,
            kind: kind_of(kind)?,
            lines: lines.clone(),
            starts: Vec::new(),
            initial_mtime: mtime_of(mtime.as_deref()),
        },
        Input::Reset { task, kind } => CoreEvent::LogReset {
            task: TaskId::parse(task)?,
            kind: kind_of(kind)?,
        },
        Input::History {
            task,
            kind,
            pieces,
            mtime,
        } => CoreEvent::LogHistory {
            task: TaskId::parse(task)?,
            kind: kind_of(kind)?,
            pieces: pieces.clone(),
            initial_mtime: mtime_of(mtime.as_deref()),
        },
        Input::Tasks { set, gone } => CoreEvent::Tasks(table.apply(set, gone)),
        Input::Messages { rows } => CoreEvent::Messages(rows.clone()),
        Input::Failed {
            source,
            task,
            detail,
        } => CoreEvent::SourceFailed {
            source: source_name(source),
            task: task.as_deref().and_then(TaskId::parse),
            detail: detail.clone(),
        },
        Input::Healthy { source } => CoreEvent::SourceHealthy {
            source: source_name(source),
        },
        Input::Database {
            status,
            tasks,
            detail,
        } => CoreEvent::Database(match status.as_str() {
            "waiting" => DbStatus::Waiting(detail.clone()),
            "appeared" => DbStatus::Appeared { tasks: *tasks },
            "replaced" => DbStatus::Replaced { tasks: *tasks },
            "removed" => DbStatus::Removed,
            _ => return None,
        }),
        Input::Folder { status, detail } => CoreEvent::LogFolder(match status.as_str() {
            "waiting" => FolderStatus::Waiting(detail.clone()),
            "watching" => FolderStatus::Watching(detail.clone()),
            _ => return None,
        }),
        Input::Watchers { list } => CoreEvent::Watchers(
            list.iter()
                .filter_map(|(t, m, p)| Some((TaskId::parse(t)?, watcher_mode(m), *p)))
                .collect(),
        ),
        Input::Session { report } => CoreEvent::Session(report.clone()),
        Input::Hooks { inputs } => CoreEvent::Hooks(inputs.clone()),
        Input::Start { .. } | Input::Gap { .. } | Input::Stop => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kept_event_reads_back_as_itself() {
        let mut out = TaskTable::default();
        let mut back = TaskTable::default();
        let mut row = TaskRow::new("task-03", "working");
        row.last_heartbeat = Some("2026-11-22 14:00:00".into());
        let mtime =
            std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let events = vec![
            CoreEvent::Tasks(vec![TaskRow::new("task-00", "watching"), row.clone()]),
            CoreEvent::LogLines {
                task: TaskId::parse("task-03").expect("id"),
                kind: LogKind::Status,
                lines: vec!["step 1 started [ctx: 12%]".into(), "\u{1b}[2J".into()],
                starts: Vec::new(),
                initial_mtime: Some(mtime),
            },
            CoreEvent::Database(DbStatus::Replaced { tasks: 2 }),
            CoreEvent::Tasks(vec![row]),
            CoreEvent::Session(crate::core::sessions::figures::SessionReport::Lost {
                task_id: "task-03".into(),
                session_id: "s1".into(),
                detail: "gone".into(),
            }),
            CoreEvent::Session(crate::core::sessions::figures::SessionReport::Found(
                Box::new(crate::core::sessions::figures::SessionFigures::of(
                    crate::core::sessions::figures::Whose {
                        task_id: "task-03",
                        session_id: "s1",
                        file: std::path::Path::new("/h/s1.jsonl"),
                        found_by: "process",
                    },
                    &crate::core::sessions::tally::Tally::new(),
                    &[],
                    0,
                    &crate::core::sessions::ContextWindows::default(),
                )),
            )),
        ];
        for event in events {
            let input = input_of(&event, &mut out).expect("kept");
            let text = serde_json::to_string(&Line::new(OffsetDateTime::UNIX_EPOCH, input))
                .expect("serializes");
            let line: Line = serde_json::from_str(&text).expect("reads back");
            let again = event_of(&line.input, &mut back).expect("an event");
            assert_eq!(format!("{again:?}"), format!("{event:?}"), "{text}");
        }
    }

    #[test]
    fn an_unchanged_table_writes_nothing_and_a_removed_row_is_gone() {
        let mut table = TaskTable::default();
        let rows = vec![TaskRow::new("task-01", "working")];
        assert!(table.diff(&rows).is_some());
        assert!(table.diff(&rows).is_none());
        let Some(Input::Tasks { set, gone }) = table.diff(&[]) else {
            panic!("a removal is a change");
        };
        assert!(set.is_empty());
        assert_eq!(gone, vec!["task-01".to_owned()]);
    }

    #[test]
    fn a_task_id_that_is_not_one_is_not_replayed_as_a_file() {
        let input = Input::Lines {
            task: "../../etc/passwd".into(),
            kind: "status".into(),
            lines: vec![],
            mtime: None,
        };
        assert!(event_of(&input, &mut TaskTable::default()).is_none());
    }
}
