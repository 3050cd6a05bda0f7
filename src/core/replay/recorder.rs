//! The flight recorder: an append-only, size-bounded log of what the sources told the
//! hub, one JSON line per input, in maestro's data directory (one per project).
//!
//! The hub hands each input to [`Recorder::note`], which turns it into a line and passes
//! it to a writer thread; the hub never waits on the disk (a full queue drops the input
//! and says so in the log). When the file passes its bound it becomes `events.1.jsonl`
//! (replacing the one before) and a new file starts with the run's settings and the
//! whole task table, so each file can be replayed on its own. One maestro records a
//! project at a time (a lock); the others run without recording.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nix::fcntl::{Flock, FlockArg};
use time::OffsetDateTime;

use crate::core::event::CoreEvent;
use crate::core::paths::EventLogFiles;
use crate::core::replay::input::{Input, Line, RecordedSettings, TaskTable, input_of};

/// Lines waiting for the writer; past this the recorder drops (and counts) inputs.
const QUEUE: usize = 8192;

enum Job {
    Line(String),
    /// Start a new file (the current one becomes the previous one).
    Rotate,
}

pub struct Recorder {
    tx: Option<SyncSender<Job>>,
    table: TaskTable,
    settings: RecordedSettings,
    project: String,
    /// Bytes in the current file, counting what is queued.
    size: u64,
    max_bytes: u64,
    dropped: u64,
    /// The writer's first failure, told to the operator once.
    failure: Arc<Mutex<Option<String>>>,
    failure_told: bool,
    writer: Option<JoinHandle<()>>,
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
    ) -> Result<Option<Self>, String> {
        let dir = files
            .current
            .parent()
            .ok_or_else(|| format!("{} has no folder", files.current.display()))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create the event log folder {}: {e}", dir.display()))?;
        let lock_file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&files.lock)
            .map_err(|e| format!("cannot open {}: {e}", files.lock.display()))?;
        let Ok(lock) = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) else {
            return Ok(None);
        };
        let size = std::fs::metadata(&files.current).map_or(0, |m| m.len());
        if size >= max_bytes {
            rotate(files)?;
        }
        let size = std::fs::metadata(&files.current).map_or(0, |m| m.len());
        let file = open_append(&files.current)?;
        let (tx, rx) = sync_channel(QUEUE);
        let failure = Arc::new(Mutex::new(None));
        let writer = {
            let files = files.clone();
            let failure = failure.clone();
            std::thread::Builder::new()
                .name("maestro-recorder".into())
                .spawn(move || write_loop(&rx, &files, file, &lock, &failure))
                .map_err(|e| format!("cannot start the event log writer: {e}"))?
        };
        let mut recorder = Self {
            tx: Some(tx),
            table: TaskTable::default(),
            settings,
            project,
            size,
            max_bytes,
            dropped: 0,
            failure,
            failure_told: false,
            writer: Some(writer),
        };
        recorder.send(at, &recorder.start_input(false));
        Ok(Some(recorder))
    }

    fn start_input(&self, continued: bool) -> Input {
        Input::Start {
            settings: self.settings.clone(),
            project: self.project.clone(),
            continued,
        }
    }

    /// Records what the hub is about to apply. Returns a problem to tell the operator
    /// (once): the event log cannot be written.
    pub fn note(&mut self, at: OffsetDateTime, event: &CoreEvent) -> Option<String> {
        if let Some(input) = input_of(event, &mut self.table) {
            if self.size >= self.max_bytes {
                self.queue(Job::Rotate);
                self.size = 0;
                self.send(at, &self.start_input(true));
                // The whole table already holds a difference in hand.
                self.send(at, &self.table.whole());
                if matches!(input, Input::Tasks { .. }) {
                    return self.failure_once();
                }
            }
            self.send(at, &input);
        }
        self.failure_once()
    }

    fn failure_once(&mut self) -> Option<String> {
        if self.failure_told {
            return None;
        }
        let failure = self.failure.lock().ok()?.clone()?;
        self.failure_told = true;
        Some(failure)
    }

    fn send(&mut self, at: OffsetDateTime, input: &Input) {
        if self.dropped > 0 {
            let gap = Input::Gap {
                dropped: self.dropped,
            };
            self.dropped = 0;
            self.send(at, &gap);
        }
        let Ok(mut text) = serde_json::to_string(&Line::new(at, input.clone())) else {
            return;
        };
        text.push('\n');
        self.size += text.len() as u64;
        if !self.queue(Job::Line(text)) {
            self.dropped += 1;
        }
    }

    fn queue(&self, write: Job) -> bool {
        match self.tx.as_ref().map(|tx| tx.try_send(write)) {
            Some(Ok(())) => true,
            Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => false,
        }
    }
}

impl Drop for Recorder {
    /// Marks a clean stop and waits for the writer to put everything on disk.
    fn drop(&mut self) {
        self.send(OffsetDateTime::now_utc(), &Input::Stop);
        self.tx = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

fn open_append(path: &std::path::Path) -> Result<BufWriter<File>, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map(BufWriter::new)
        .map_err(|e| format!("cannot open the event log {}: {e}", path.display()))
}

fn rotate(files: &EventLogFiles) -> Result<(), String> {
    std::fs::rename(&files.current, &files.previous).map_err(|e| {
        format!(
            "cannot move the full event log {} aside: {e}",
            files.current.display()
        )
    })
}

/// Writes what arrives, flushing whenever the queue runs dry.
fn write_loop(
    rx: &Receiver<Job>,
    files: &EventLogFiles,
    mut file: BufWriter<File>,
    _lock: &Flock<File>,
    failure: &Mutex<Option<String>>,
) {
    let fail = |detail: String| {
        if let Ok(mut f) = failure.lock() {
            f.get_or_insert(detail);
        }
    };
    while let Ok(first) = rx.recv() {
        for write in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
            match write {
                Job::Line(text) => {
                    if let Err(e) = file.write_all(text.as_bytes()) {
                        fail(format!(
                            "cannot write the event log {}: {e}; replay of this run will be incomplete",
                            files.current.display()
                        ));
                    }
                }
                Job::Rotate => {
                    let _ = file.flush();
                    match rotate(files).and_then(|()| open_append(&files.current)) {
                        Ok(next) => file = next,
                        Err(e) => fail(e),
                    }
                }
            }
        }
        if let Err(e) = file.flush() {
            fail(format!(
                "cannot write the event log {}: {e}; replay of this run will be incomplete",
                files.current.display()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::domain::{LogKind, TaskId};
    use crate::core::event::TaskRow;

    fn settings() -> RecordedSettings {
        RecordedSettings {
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

    fn files(dir: &std::path::Path) -> EventLogFiles {
        EventLogFiles {
            current: dir.join("ev").join("events.jsonl"),
            previous: dir.join("ev").join("events.1.jsonl"),
            lock: dir.join("ev").join("events.lock"),
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
