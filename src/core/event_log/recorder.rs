//! The flight recorder: an append-only, size-bounded log of what the sources told the
//! hub, one JSON line per input, in maestro's data directory (one per project).
//!
//! The hub hands each input to the recorder as it applies it; a writer thread encodes
//! and writes it, so the hub pays for a copy of the input's text and a queue push,
//! never for encoding or the disk (a full queue drops the input and the log says so).
//! When the file passes its bound it becomes `events.1.jsonl` (replacing the one
//! before) and a new file starts with the run's settings and the whole task table, so
//! each file can be replayed on its own. One maestro records a project at a time (a
//! lock); the others run without recording.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::DirBuilderExt;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nix::fcntl::{Flock, FlockArg};
use time::OffsetDateTime;

use crate::core::error::OwnFileError;
use crate::core::event::CoreEvent;
use crate::core::event_log::input::{Input, Line, RecordedSettings, TaskTable, input_of};
use crate::core::paths::EventLogFiles;

/// Inputs waiting for the writer; past this the recorder drops (and counts) inputs.
/// The hub hands over at most a few thousand inputs a second (each up to 4096 lines),
/// and the writer encodes over a million a second: this is room for a stalled disk.
const QUEUE: usize = 65_536;

/// One queued input, boxed: the channel holds a slot per capacity, and a slot the size
/// of an `Input` would make the queue cost megabytes once a burst has gone through it.
type Queued = Box<(OffsetDateTime, Input)>;

/// Inputs held for the writer before they are handed over even mid-burst.
const HELD_MAX: usize = 64;

pub struct Recorder {
    /// Inputs recorded since the last flush, not yet handed to the writer.
    held: Vec<Queued>,
    tx: Option<SyncSender<Queued>>,
    /// The task table as last recorded, to record differences.
    table: TaskTable,
    dropped: u64,
    /// The writer's first failure, told to the operator once.
    failure: Arc<Mutex<Option<String>>>,
    failure_told: bool,
    writer: Option<JoinHandle<()>>,
}

/// The writer thread's side: the file, its bound, and what a new file starts with.
struct Writer {
    files: EventLogFiles,
    file: BufWriter<File>,
    /// Bytes in the current file.
    size: u64,
    max_bytes: u64,
    settings: RecordedSettings,
    project: String,
    /// The task table as recorded, rebuilt from the differences (for a new file).
    table: TaskTable,
    failure: Arc<Mutex<Option<String>>>,
    _lock: Flock<File>,
}

impl Recorder {
    /// Starts recording into `files`, or `Ok(None)` when another maestro records this
    /// project already. `max_bytes` bounds each of the two files.
    pub fn start(
        files: &EventLogFiles,
        max_bytes: u64,
        settings: RecordedSettings,
        project: String,
        at: OffsetDateTime,
    ) -> Result<Option<Self>, RecorderError> {
        let dir = files
            .current
            .parent()
            .ok_or_else(|| RecorderError::NoFolder(files.current.clone()))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(OwnFileError::doing("create the event log folder", dir))?;
        let lock_file = crate::core::safe_fs::open_own(&files.lock, 0o600)
            .map_err(OwnFileError::doing("open", &files.lock))?;
        let Ok(lock) = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) else {
            return Ok(None);
        };
        if std::fs::metadata(&files.current).is_ok_and(|m| m.len() >= max_bytes) {
            rotate(files)?;
        }
        let failure = Arc::new(Mutex::new(None));
        let mut writer = Writer {
            files: files.clone(),
            file: open_append(&files.current)?,
            size: std::fs::metadata(&files.current).map_or(0, |m| m.len()),
            max_bytes,
            settings,
            project,
            table: TaskTable::default(),
            failure: failure.clone(),
            _lock: lock,
        };
        let start = writer.start_input(false);
        writer.put(at, start);
        let (tx, rx) = sync_channel(QUEUE);
        let thread = std::thread::Builder::new()
            .name("maestro-recorder".into())
            .spawn(move || writer.run(&rx))
            .map_err(RecorderError::Writer)?;
        Ok(Some(Self {
            held: Vec::new(),
            tx: Some(tx),
            table: TaskTable::default(),
            dropped: 0,
            failure,
            failure_told: false,
            writer: Some(thread),
        }))
    }

    /// Records what the hub is about to apply. Returns a problem to tell the operator
    /// (once): the event log cannot be written.
    pub fn note(&mut self, at: OffsetDateTime, event: &CoreEvent) -> Option<String> {
        let input = self.take(event);
        self.write(at, input)
    }

    /// What an event will be recorded as (a copy of its text), so the hub can apply
    /// the event before it hands the copy over.
    pub fn take(&mut self, event: &CoreEvent) -> Option<Input> {
        input_of(event, &mut self.table)
    }

    /// Holds what [`Recorder::take`] made, stamped `at`, for the next
    /// [`Recorder::flush`]; as for [`Recorder::note`].
    pub fn write(&mut self, at: OffsetDateTime, input: Option<Input>) -> Option<String> {
        if let Some(input) = input {
            self.held.push(Box::new((at, input)));
            // A long burst is handed over as it goes: what waits here stays small.
            if self.held.len() >= HELD_MAX {
                self.flush();
            }
        }
        if self.failure_told {
            return None;
        }
        let failure = self.failure.lock().ok()?.clone()?;
        self.failure_told = true;
        Some(failure)
    }

    /// Whether inputs wait for [`Recorder::flush`].
    pub fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// Hands the held inputs to the writer thread. The hub calls this once its
    /// presenters have had their turn, so the writer's wake-up never delays an event
    /// on its way to the operator.
    pub fn flush(&mut self) {
        for queued in std::mem::take(&mut self.held) {
            let (at, input) = *queued;
            self.send(at, input);
        }
    }

    fn send(&mut self, at: OffsetDateTime, input: Input) {
        let Some(tx) = &self.tx else { return };
        if self.dropped > 0 {
            let gap = Input::Gap {
                dropped: self.dropped,
            };
            if tx.try_send(Box::new((at, gap))).is_err() {
                self.dropped += 1;
                return;
            }
            self.dropped = 0;
        }
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            tx.try_send(Box::new((at, input)))
        {
            self.dropped += 1;
        }
    }
}

impl Drop for Recorder {
    /// Marks a clean stop and waits for the writer to put everything on disk.
    fn drop(&mut self) {
        self.flush();
        if let Some(tx) = self.tx.take() {
            // Blocking here: the stop mark must not be dropped.
            let _ = tx.send(Box::new((OffsetDateTime::now_utc(), Input::Stop)));
        }
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Writer {
    fn start_input(&self, continued: bool) -> Input {
        Input::Start {
            settings: self.settings.clone(),
            project: self.project.clone(),
            continued,
        }
    }

    /// Writes what arrives, flushing whenever the queue runs dry.
    fn run(&mut self, rx: &Receiver<Queued>) {
        while let Ok(first) = rx.recv() {
            for queued in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
                let (at, input) = *queued;
                self.record(at, input);
            }
            if let Err(e) = self.file.flush() {
                self.fail(format!(
                    "cannot write the event log {}: {e}; replay of this run will be incomplete",
                    self.files.current.display()
                ));
            }
        }
    }

    /// One input: a new file first when this one is full.
    fn record(&mut self, at: OffsetDateTime, input: Input) {
        if let Input::Tasks { set, gone } = &input {
            self.table.apply(set, gone);
        }
        if self.size >= self.max_bytes {
            let _ = self.file.flush();
            match rotate(&self.files).and_then(|()| open_append(&self.files.current)) {
                Ok(next) => {
                    self.file = next;
                    self.size = 0;
                }
                Err(e) => self.fail(e.to_string()),
            }
            self.put(at, self.start_input(true));
            self.put(at, self.table.whole());
            // The whole table holds this difference already.
            if matches!(input, Input::Tasks { .. }) {
                return;
            }
        }
        self.put(at, input);
    }

    /// Encodes straight into the file's buffer: a burst of lines is never held twice.
    fn put(&mut self, at: OffsetDateTime, input: Input) {
        let mut out = Counting {
            inner: &mut self.file,
            bytes: 0,
        };
        let written = serde_json::to_writer(&mut out, &Line::new(at, input))
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"));
        self.size += out.bytes;
        if let Err(e) = written {
            self.fail(format!(
                "cannot write the event log {}: {e}; replay of this run will be incomplete",
                self.files.current.display()
            ));
        }
    }

    fn fail(&self, detail: String) {
        if let Ok(mut f) = self.failure.lock() {
            f.get_or_insert(detail);
        }
    }
}

/// A writer that counts what passes through (the file's size, for its bound).
struct Counting<'a, W: Write> {
    inner: &'a mut W,
    bytes: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn open_append(path: &std::path::Path) -> Result<BufWriter<File>, OwnFileError> {
    crate::core::safe_fs::open_append(path, 0o600)
        .map(BufWriter::new)
        .map_err(OwnFileError::doing("open the event log", path))
}

fn rotate(files: &EventLogFiles) -> Result<(), OwnFileError> {
    std::fs::rename(&files.current, &files.previous).map_err(OwnFileError::doing(
        "move aside the full event log",
        &files.current,
    ))
}

/// Why this maestro cannot record the project.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    #[error(transparent)]
    Place(#[from] crate::core::paths::PathError),
    #[error("{} has no folder", .0.display())]
    NoFolder(std::path::PathBuf),
    #[error(transparent)]
    File(#[from] OwnFileError),
    #[error("cannot start the event log writer: {0}")]
    Writer(#[source] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::domain::{LogKind, TaskId};
    use crate::core::event::TaskRow;

    fn settings() -> RecordedSettings {
        RecordedSettings::default()
    }

    fn files(dir: &std::path::Path) -> EventLogFiles {
        EventLogFiles {
            current: dir.join("ev").join("events.jsonl"),
            previous: dir.join("ev").join("events.1.jsonl"),
            lock: dir.join("ev").join("events.lock"),
            journal: dir.join("ev").join("journal.tsv"),
        }
    }

    fn lines(path: &std::path::Path) -> Vec<Line> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a line of the log"))
            .collect()
    }

    fn status(n: usize) -> CoreEvent {
        CoreEvent::LogLines {
            task: TaskId::parse("task-01").expect("id"),
            kind: LogKind::Status,
            lines: vec![format!("step {n} started [ctx: 10%]")],
            starts: Vec::new(),
            initial_mtime: None,
        }
    }

    #[test]
    fn one_recorder_per_project_and_a_clean_stop_is_marked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = files(dir.path());
        let at = OffsetDateTime::UNIX_EPOCH;
        let mut first = Recorder::start(&files, 1 << 20, settings(), "p".into(), at)
            .expect("starts")
            .expect("records");
        let second = Recorder::start(&files, 1 << 20, settings(), "p".into(), at).expect("starts");
        assert!(second.is_none(), "a second maestro must not record too");
        first.note(
            at,
            &CoreEvent::Tasks(vec![TaskRow::new("task-01", "working")]),
        );
        first.note(at, &status(1));
        drop(first);
        let kinds: Vec<&str> = lines(&files.current)
            .iter()
            .map(|l| match l.input {
                Input::Start { .. } => "start",
                Input::Tasks { .. } => "tasks",
                Input::Lines { .. } => "lines",
                Input::Stop => "stop",
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["start", "tasks", "lines", "stop"]);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&files.current)
                .expect("exists")
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "messages are private");
    }

    #[test]
    fn a_full_file_rotates_and_the_new_one_stands_on_its_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = files(dir.path());
        let at = OffsetDateTime::UNIX_EPOCH;
        let mut rec = Recorder::start(&files, 2_000, settings(), "p".into(), at)
            .expect("starts")
            .expect("records");
        rec.note(
            at,
            &CoreEvent::Tasks(vec![TaskRow::new("task-01", "working")]),
        );
        for n in 0..100 {
            rec.note(at, &status(n));
        }
        drop(rec);
        let old = std::fs::metadata(&files.previous).expect("rotated").len();
        let new = std::fs::metadata(&files.current).expect("current").len();
        assert!(old < 2_200 && new < 2_200, "bounded: {old} and {new} bytes");
        let current = lines(&files.current);
        assert!(matches!(
            current[0].input,
            Input::Start {
                continued: true,
                ..
            }
        ));
        assert!(
            matches!(&current[1].input, Input::Tasks { set, .. } if set.len() == 1),
            "the whole table follows a rotation"
        );
    }
}
