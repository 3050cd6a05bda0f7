//! After a reconnect, the new `maestro serve` tells everything again: its sources read
//! the project from the start, as any maestro does. The link remembers what it already
//! handed its hub (its cursor: per log file, how many lines and a hash of them; the last
//! message id; the last report of each session; the hook events seen) and passes on
//! only what is new, so nothing that happened while the link was down is lost and
//! nothing is told twice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use crate::core::domain::{LogKind, TaskId};
use crate::core::event::CoreEvent;
use crate::core::sessions::figures::SessionReport;

/// Hook events remembered, to know one told again at a reconnect.
const HOOKS_KEPT: usize = 4096;
/// Messages remembered by id and content, to tell a replaced database's from a retold.
const MESSAGES_KEPT: usize = 100_000;

/// What the hub was handed of one log file since its last reset.
#[derive(Debug, Default, Clone)]
struct FileCursor {
    lines: u64,
    hash: u64,
    /// After a reconnect, until the file's old lines have been told again: how many
    /// of them have come back, their hash, and the lines held meanwhile.
    retelling: Option<Retelling>,
}

#[derive(Debug, Default, Clone)]
struct Retelling {
    lines: u64,
    hash: u64,
    held: Vec<String>,
}

#[derive(Debug, Default)]
pub struct CatchUp {
    files: HashMap<(TaskId, LogKind), FileCursor>,
    last_message: Option<i64>,
    /// The messages handed on (by id and content), the newest [`MESSAGES_KEPT`].
    messages: Remembered,
    sessions: HashMap<String, u64>,
    hooks: Remembered,
}

/// Keys seen, the newest ones only (a set, and the order they came in).
#[derive(Debug, Default)]
struct Remembered {
    keys: HashSet<u64>,
    order: VecDeque<u64>,
}

impl Remembered {
    /// Remembers `key`, forgetting the oldest past `kept`; false when it was known.
    fn remember(&mut self, key: u64, kept: usize) -> bool {
        if !self.keys.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > kept
            && let Some(old) = self.order.pop_front()
        {
            self.keys.remove(&old);
        }
        true
    }
}

fn chained(hash: u64, line: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    hash.hash(&mut h);
    line.hash(&mut h);
    h.finish()
}

fn hash_of<T: serde::Serialize>(value: &T) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    serde_json::to_string(value)
        .unwrap_or_default()
        .hash(&mut h);
    h.finish()
}

impl CatchUp {
    /// A new connection: every file read so far will be told again from its start.
    pub fn reconnected(&mut self) {
        for cursor in self.files.values_mut() {
            cursor.retelling = (cursor.lines > 0).then(Retelling::default);
        }
    }

    /// What of `event` the hub has not been handed yet.
    pub fn filter(&mut self, event: CoreEvent) -> Vec<CoreEvent> {
        match event {
            // Lines retold after a reconnect are matched by content: where they start in
            // the far file is not carried.
            CoreEvent::LogLines {
                task,
                kind,
                lines,
                initial_mtime,
                ..
            } => self.lines(task, kind, lines, initial_mtime),
            CoreEvent::LogReset { task, kind } => {
                self.files.remove(&(task.clone(), kind));
                vec![CoreEvent::LogReset { task, kind }]
            }
            // `serve` reads every line (its sources do not skim); a history from
            // elsewhere is passed on as it came.
            history @ CoreEvent::LogHistory { .. } => vec![history],
            CoreEvent::Messages(rows) => {
                let last = self.last_message;
                // Past the last id, or at an old id with other content: a replaced
                // comms.db starts its ids again, and its messages are news.
                let new: Vec<_> = rows
                    .into_iter()
                    .filter(|r| {
                        let seen = self.message_seen(hash_of(r));
                        last.is_none_or(|l| r.id > l) || !seen
                    })
                    .collect();
                if let Some(max) = new.iter().map(|r| r.id).max() {
                    self.last_message = Some(self.last_message.map_or(max, |l| l.max(max)));
                }
                if new.is_empty() {
                    Vec::new()
                } else {
                    vec![CoreEvent::Messages(new)]
                }
            }
            CoreEvent::Session(report) => {
                let (key, hash) = session_identity(&report);
                if self.sessions.insert(key, hash) == Some(hash) {
                    Vec::new()
                } else {
                    vec![CoreEvent::Session(report)]
                }
            }
            CoreEvent::Hooks(inputs) => {
                let new: Vec<_> = inputs
                    .into_iter()
                    .filter(|i| self.hook_is_new(hash_of(i)))
                    .collect();
                if new.is_empty() {
                    Vec::new()
                } else {
                    vec![CoreEvent::Hooks(new)]
                }
            }
            other => vec![other],
        }
    }

    /// Whether a message (by its id and content) was handed on before; remembers it.
    fn message_seen(&mut self, key: u64) -> bool {
        !self.messages.remember(key, MESSAGES_KEPT)
    }

    fn hook_is_new(&mut self, key: u64) -> bool {
        self.hooks.remember(key, HOOKS_KEPT)
    }

    fn lines(
        &mut self,
        task: TaskId,
        kind: LogKind,
        lines: Vec<String>,
        initial_mtime: Option<std::time::SystemTime>,
    ) -> Vec<CoreEvent> {
        let cursor = self.files.entry((task.clone(), kind)).or_default();
        let mut out = Vec::new();
        let mut fresh = lines;
        if let Some(mut r) = cursor.retelling.take() {
            if initial_mtime.is_some() {
                // The file told again from its start: hold its old lines until all are
                // back, then compare.
                let mut rest = fresh.into_iter();
                for line in rest.by_ref() {
                    r.hash = chained(r.hash, &line);
                    r.lines += 1;
                    r.held.push(line);
                    if r.lines == cursor.lines {
                        break;
                    }
                }
                fresh = rest.collect();
                if r.lines < cursor.lines {
                    cursor.retelling = Some(r);
                    return out;
                }
                if r.hash != cursor.hash {
                    // Rewritten while the link was down: the file starts over.
                    out.push(CoreEvent::LogReset {
                        task: task.clone(),
                        kind,
                    });
                    *cursor = FileCursor::default();
                    fresh = r.held.into_iter().chain(fresh).collect();
                }
            } else {
                // New lines while the old ones had not all come back: the file is
                // shorter than it was, so it was rewritten.
                out.push(CoreEvent::LogReset {
                    task: task.clone(),
                    kind,
                });
                *cursor = FileCursor::default();
                fresh = r.held.into_iter().chain(fresh).collect();
            }
        }
        if fresh.is_empty() {
            return out;
        }
        for line in &fresh {
            cursor.hash = chained(cursor.hash, line);
        }
        cursor.lines += fresh.len() as u64;
        out.push(CoreEvent::LogLines {
            task,
            kind,
            lines: fresh,
            starts: Vec::new(),
            initial_mtime,
        });
        out
    }
}

/// Which session a report is about, and what it says: a session found again at a
/// reconnect with the figures last handed over says nothing new.
fn session_identity(report: &SessionReport) -> (String, u64) {
    match report {
        SessionReport::Found(f) | SessionReport::Update(f) => {
            (format!("{}/{}", f.task_id, f.session_id), hash_of(f))
        }
        SessionReport::Lost {
            task_id,
            session_id,
            ..
        } => (format!("{task_id}/{session_id}"), hash_of(report)),
        SessionReport::Missing { task_id, .. } => (format!("{task_id}/"), hash_of(report)),
        SessionReport::Folder { .. } => (String::new(), hash_of(report)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::MessageRow;

    fn lines(text: &[&str], initial: bool) -> CoreEvent {
        CoreEvent::LogLines {
            task: TaskId::parse("task-01").unwrap(),
            kind: LogKind::Status,
            lines: text.iter().map(|s| (*s).to_owned()).collect(),
            starts: Vec::new(),
            initial_mtime: initial.then(std::time::SystemTime::now),
        }
    }

    fn told(events: &[CoreEvent]) -> Vec<String> {
        events
            .iter()
            .flat_map(|e| match e {
                CoreEvent::LogLines { lines, .. } => lines.clone(),
                CoreEvent::LogReset { .. } => vec!["<reset>".into()],
                CoreEvent::Messages(rows) => rows.iter().map(|r| format!("#{}", r.id)).collect(),
                _ => vec!["<other>".into()],
            })
            .collect()
    }

    #[test]
    fn a_file_told_again_passes_on_only_its_new_lines_even_in_pieces() {
        let mut c = CatchUp::default();
        assert_eq!(told(&c.filter(lines(&["a", "b"], true))), ["a", "b"]);
        assert_eq!(told(&c.filter(lines(&["c"], false))), ["c"]);
        c.reconnected();
        // The new serve reads the file from its start, in two pieces.
        assert!(c.filter(lines(&["a", "b"], true)).is_empty());
        assert_eq!(told(&c.filter(lines(&["c", "d"], true))), ["d"]);
        assert_eq!(told(&c.filter(lines(&["e"], false))), ["e"]);
    }

    #[test]
    fn a_file_rewritten_while_down_starts_over() {
        let mut c = CatchUp::default();
        c.filter(lines(&["a", "b"], true));
        c.reconnected();
        assert_eq!(
            told(&c.filter(lines(&["x", "y", "z"], true))),
            ["<reset>", "x", "y", "z"]
        );
        // Shorter than before, then a live line: rewritten too.
        c.reconnected();
        assert!(c.filter(lines(&["x"], true)).is_empty());
        assert_eq!(told(&c.filter(lines(&["w"], false))), ["<reset>", "x", "w"]);
    }

    #[test]
    fn messages_are_passed_on_once() {
        let mut c = CatchUp::default();
        let rows = |ids: &[i64]| {
            CoreEvent::Messages(
                ids.iter()
                    .map(|id| MessageRow {
                        id: *id,
                        task_id: None,
                        from_session: None,
                        message_type: None,
                        message: None,
                        timestamp: None,
                    })
                    .collect(),
            )
        };
        assert_eq!(told(&c.filter(rows(&[1, 2]))), ["#1", "#2"]);
        c.reconnected();
        assert_eq!(told(&c.filter(rows(&[1, 2, 3]))), ["#3"]);
        assert!(c.filter(rows(&[2])).is_empty());
    }

    /// The host's comms.db replaced by a new orchestration's: its ids start again, and
    /// every message of it arrives (ids 1-3 below the old highest included), once.
    #[test]
    fn a_replaced_databases_messages_all_arrive() {
        let mut c = CatchUp::default();
        let rows = |db: &str, ids: &[i64]| {
            CoreEvent::Messages(
                ids.iter()
                    .map(|id| MessageRow {
                        id: *id,
                        task_id: Some("task-01".into()),
                        from_session: Some("task-00".into()),
                        message_type: Some("instruction".into()),
                        message: Some(format!("{db} {id}")),
                        timestamp: None,
                    })
                    .collect(),
            )
        };
        assert_eq!(
            told(&c.filter(rows("old", &[1, 2, 3, 4, 5]))),
            ["#1", "#2", "#3", "#4", "#5"]
        );
        c.reconnected();
        assert_eq!(
            told(&c.filter(rows("new", &[1, 2, 3, 4]))),
            ["#1", "#2", "#3", "#4"]
        );
        c.reconnected();
        assert!(
            c.filter(rows("new", &[1, 2, 3, 4])).is_empty(),
            "told again: nothing new"
        );
    }
}
