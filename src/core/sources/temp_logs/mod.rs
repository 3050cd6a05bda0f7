//! The log source: follows every `task-NN-status` / `task-NN-deviations` file in `temp/`.
//!
//! One OS thread owns the kernel watch (inotify, read by this thread itself) and the
//! per-file read state. A kernel event names a file; the thread drains every event
//! already queued, reads only the bytes appended since the last read and sends one
//! [`CoreEvent::LogLines`] per file. Files may appear, be truncated, replaced or
//! renamed; the identity (device, inode) and size tell which. When the kernel cannot
//! watch, it says so once and polls instead.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::core::domain::{LogKind, TaskId};
use crate::core::event::{CoreEvent, FolderStatus};
use crate::core::safe_fs;
use crate::core::sources::kernel_watch::{self, KernelWatch};
use crate::core::sources::lines::LineAssembler;

mod live;
mod read;
use read::still_matches;
mod start;

const SOURCE: &str = "temp logs";
const READ_CHUNK: usize = 64 * 1024;
/// Lines per event: a large burst goes out in pieces, so the queue to the hub (which
/// waits when full) bounds the memory a burst can take.
const LINES_PER_EVENT: usize = 1024;

#[derive(Debug, Clone)]
pub struct TempLogSettings {
    pub dir: PathBuf,
    /// How lines are cut and how often the folder is looked at without the kernel.
    pub reading: crate::core::sources::Reading,
    /// What a file holds at start is skimmed ([`history`]), not read line by line.
    pub skim_history: bool,
    /// The Sentinel's thresholds: a skimmed line whose context jumps by more than its
    /// spike threshold is kept whole for it.
    pub sentinel: crate::core::sentinel::SentinelSettings,
}

/// Handle to the running log source; dropping it stops the thread.
pub struct TempLogsHandle {
    /// Written to (or closed) to stop the thread.
    stop: Option<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Ends what follows the first look, on the runtime.
    cancel: CancellationToken,
}

impl Drop for TempLogsHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = nix::unistd::write(&stop, b"x");
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.cancel.cancel();
    }
}

struct Tail {
    identity: (u64, u64),
    offset: u64,
    assembler: LineAssembler,
    /// The file kept open between two appends (while the kernel watches the folder, so a
    /// name given to another file is seen): no open, no path walk for a line appended.
    file: Option<File>,
    /// The last bytes read, ending at `offset`. A file truncated and rewritten past the
    /// old size between two reads keeps its inode and grows, so only its content shows
    /// the change: these bytes no longer match.
    last_bytes: Vec<u8>,
}

impl Tail {
    /// Starts the tail over when the file was replaced, truncated, or rewritten under
    /// the offset; says whether it did.
    fn start_over_if_changed(&mut self, file: &File, meta: &std::fs::Metadata) -> bool {
        let identity = (meta.dev(), meta.ino());
        if self.identity == identity
            && meta.len() >= self.offset
            && still_matches(file, self.offset, &self.last_bytes)
        {
            return false;
        }
        self.identity = identity;
        self.offset = 0;
        self.assembler.reset();
        self.last_bytes.clear();
        true
    }
}

/// One log being brought up to date: the file opened, its size then, and its mtime at
/// start (what the stall clock starts from).
struct OpenLog {
    task: TaskId,
    kind: LogKind,
    path: PathBuf,
    size: u64,
    initial_mtime: Option<std::time::SystemTime>,
}

/// What reading a log's new bytes came to: the lines not sent yet, whether some were.
#[derive(Default)]
struct ReadNew {
    lines: Vec<String>,
    /// Where each line starts in its file.
    starts: Vec<u64>,
    sent_lines: bool,
    error: Option<std::io::Error>,
    /// Stopped before the end to send what was read (on the runtime): read on later.
    more: bool,
}

/// Files read at start between two looks at what the kernel says changed.
const FILES_BETWEEN_LOOKS: usize = 16;

/// How the first look at the folder ended.
enum FirstScan {
    Done,
    /// Something changed that only a look at everything settles.
    Rescan,
    Stop,
}

/// Batches of lines a burst sends before its reading pauses, on the runtime.
const OUTBOX_BATCHES: usize = 4;

/// How often a missing `temp/` is looked for, besides the kernel's events.
const MISSING_RECHECK: Duration = Duration::from_millis(500);

/// A log found holding more than this is read from its last this-many bytes only: the
/// history matters for its last `[ctx]` value and its recent anomalies, and a 1 GB log
/// read whole would hold up every new line behind it.
pub const HISTORY_KEPT: u64 = 8 * 1024 * 1024;

/// Log files followed at once (two per task for 10,000 tasks): a folder another process
/// fills with new names cannot grow this maestro without limit.
pub const MAX_FILES: usize = 20_000;

/// How many bytes before the offset are compared to notice a rewrite.
const FINGERPRINT: usize = 32;

struct TempLogs {
    settings: TempLogSettings,
    tails: HashMap<String, Tail>,
    /// Names of log files that are not regular files (a FIFO, a socket, a device, a
    /// folder): skipped, with one warning each, until they become regular files.
    skipped: HashSet<String>,
    /// More than [`MAX_FILES`] logs were offered, and that was said.
    said_too_many: bool,
    events: mpsc::Sender<CoreEvent>,
    /// On the runtime, what is to be sent waits here for the loop to send it (a send
    /// there cannot block); on the first look's thread, none: it is sent at once.
    outbox: Option<std::cell::RefCell<Vec<CoreEvent>>>,
    /// Logs with more to read: a burst is read a few batches at a time on the runtime.
    more: BTreeSet<String>,
    buf: Vec<u8>,
    /// The skim's buffer, kept from one file to the next.
    scratch: Vec<u8>,
    /// Logs kept open, oldest first (at most [`TempLogs::open_budget`]); none while
    /// polling.
    open: std::collections::VecDeque<String>,
    open_budget: usize,
}

/// Starts following `settings.dir`. What the files hold already is sent first, marked
/// with each file's mtime.
pub fn spawn(settings: TempLogSettings, events: mpsc::Sender<CoreEvent>) -> TempLogsHandle {
    let Ok((stop_read, stop_write)) = nix::unistd::pipe() else {
        let _ = events.blocking_send(CoreEvent::SourceFailed {
            source: SOURCE,
            task: None,
            detail: "cannot create the log source's stop pipe; task logs are not followed".into(),
        });
        return TempLogsHandle {
            stop: None,
            thread: None,
            cancel: CancellationToken::new(),
        };
    };
    let cancel = CancellationToken::new();
    let (handoff, taken) = tokio::sync::oneshot::channel();
    tokio::spawn(live::run(taken, cancel.clone()));
    let thread = std::thread::Builder::new()
        .name("maestro-temp-logs".into())
        .spawn(move || {
            let logs = TempLogs {
                settings,
                tails: HashMap::new(),
                skipped: HashSet::new(),
                said_too_many: false,
                events,
                outbox: None,
                more: BTreeSet::new(),
                buf: vec![0; READ_CHUNK],
                scratch: Vec::new(),
                open: std::collections::VecDeque::new(),
                open_budget: open_budget(),
            };
            if let Some(live) = logs.start(&stop_read) {
                let _ = handoff.send(live);
            }
        })
        .ok();
    TempLogsHandle {
        stop: Some(stop_write),
        thread,
        cancel,
    }
}

impl TempLogs {
    /// Watches the folder and reads what the logs hold (the first look); then what
    /// follows is handed to the runtime ([`live`]), or `None` when asked to stop.
    fn start(mut self, stop: &OwnedFd) -> Option<live::Live> {
        let dir = self.settings.dir.clone();
        let mut kernel = match KernelWatch::start(&dir) {
            Ok(k) => Some(k),
            Err(e) => {
                self.fail(format!(
                    "cannot watch {} ({e}); polling every {:?} instead",
                    dir.display(),
                    self.settings.reading.fallback_poll
                ));
                None
            }
        };
        let polling = kernel.is_none();
        if polling {
            self.open_budget = 0;
        }
        // The folder followed now, by (device, inode): a new one is watched afresh.
        let followed = folder_identity(&dir);
        if followed.is_none() {
            self.folder_missing(true);
        }
        match self.first_scan(kernel.as_mut(), stop) {
            FirstScan::Stop => return None,
            FirstScan::Rescan => self.scan(),
            FirstScan::Done => {}
        }
        Some(live::Live {
            logs: self,
            kernel,
            polling,
            followed,
        })
    }

    /// Says what the source waits for while `temp/` is missing or not a folder.
    fn folder_missing(&self, at_start: bool) {
        let dir = &self.settings.dir;
        let detail = if dir.exists() {
            let problem = format!(
                "{} is not a folder; pass --temp with the folder that holds the task logs",
                dir.display()
            );
            self.fail(problem.clone());
            problem
        } else if at_start {
            format!("no {} yet; waiting for it", dir.display())
        } else {
            format!("{} was removed; waiting for it to come back", dir.display())
        };
        self.send(CoreEvent::LogFolder(FolderStatus::Waiting(detail)));
    }

    /// The folder went away: every followed log starts over when it comes back.
    fn forget_all(&mut self) {
        let names: Vec<String> = self.tails.keys().cloned().collect();
        for name in names {
            self.tails.remove(&name);
            if let Some((task, kind)) = LogKind::parse_file_name(&name) {
                self.send(CoreEvent::LogReset { task, kind });
            }
        }
        self.skipped.clear();
        self.open.clear();
    }

    /// The first look at the folder: every log read (a large history skimmed), and
    /// every few files what the kernel says changed in the logs read so far is read at
    /// once, so a line appended to one of them is not held up behind the others'
    /// histories. A log later in the order is read with its appends when its turn comes.
    fn first_scan(&mut self, mut kernel: Option<&mut KernelWatch>, stop: &OwnedFd) -> FirstScan {
        let names = self.names();
        let mut rescan = false;
        for (i, name) in names.iter().enumerate() {
            self.sync(name, true);
            if (i + 1) % FILES_BETWEEN_LOOKS != 0 {
                continue;
            }
            let woken = kernel_watch::wait(kernel.as_deref_mut(), stop, Some(Duration::ZERO));
            if woken.stop {
                return FirstScan::Stop;
            }
            rescan |= woken.rescan;
            for changed in woken.names {
                if self.tails.contains_key(&changed) {
                    self.sync(&changed, false);
                } else if !names.contains(&changed) {
                    // A log that was not there: the look after this one finds it.
                    rescan = true;
                }
            }
        }
        if rescan {
            FirstScan::Rescan
        } else {
            FirstScan::Done
        }
    }

    /// The log files in the folder, and those followed that may have gone.
    fn names(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = std::fs::read_dir(&self.settings.dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| LogKind::parse_file_name(n).is_some())
                    .collect()
            })
            .unwrap_or_default();
        names.extend(self.tails.keys().cloned());
        names
    }

    /// Reads every log file in the folder, and notices the ones that went away. Every
    /// log is opened again by its name.
    fn scan(&mut self) {
        for name in std::mem::take(&mut self.open) {
            if let Some(tail) = self.tails.get_mut(&name) {
                tail.file = None;
            }
        }
        for name in self.names() {
            self.sync(&name, false);
        }
    }

    /// Brings one file up to date: new bytes become lines; a replaced or truncated file
    /// starts over from its beginning.
    fn sync(&mut self, name: &str, initial: bool) {
        let Some((task, kind)) = LogKind::parse_file_name(name) else {
            return;
        };
        let path = self.settings.dir.join(name);
        let kept = self.tails.get_mut(name).and_then(|t| t.file.take());
        // A file kept open still has its name unless it has no link left (replaced by
        // a rename, or removed); a rename away was said by the kernel and closed it.
        let kept = kept.and_then(|f| {
            let meta = f.metadata().ok().filter(|m| m.nlink() > 0)?;
            Some((f, meta))
        });
        let reopened = kept.is_none();
        let Some((file, meta)) = kept.or_else(|| self.open_log(name, &task, kind, &path)) else {
            self.forget_open(name);
            return;
        };
        let Some((key, mut tail)) = self.take_tail(name, &meta) else {
            return;
        };
        if tail.start_over_if_changed(&file, &meta) {
            self.send(CoreEvent::LogReset {
                task: task.clone(),
                kind,
            });
        }
        let log = OpenLog {
            task,
            kind,
            path,
            size: meta.len(),
            initial_mtime: initial.then(|| meta.modified().ok()).flatten(),
        };
        let cut_before = tail.assembler.cut_lines();
        let read = self.read_new(&mut tail, &log, &file, initial);
        let first_cut = cut_before == 0 && tail.assembler.cut_lines() > 0;
        if read.more {
            self.more.insert(key.clone());
        }
        if self.open_budget > 0 {
            tail.file = Some(file);
            if reopened {
                self.keep_open(&key);
            }
        }
        self.tails.insert(key, tail);
        self.report_read(log, read, first_cut, initial);
    }

    /// Counts `name` among the logs kept open; past the budget, the oldest is closed.
    fn keep_open(&mut self, name: &str) {
        if !self.open.iter().any(|n| n == name) {
            self.open.push_back(name.to_owned());
        }
        while self.open.len() > self.open_budget {
            if let Some(oldest) = self.open.pop_front() {
                self.close(&oldest);
            }
        }
    }

    /// Closes the log kept open under `name` (the next append opens it by its name).
    fn close(&mut self, name: &str) {
        if let Some(tail) = self.tails.get_mut(name) {
            tail.file = None;
        }
    }

    fn forget_open(&mut self, name: &str) {
        self.open.retain(|n| n != name);
    }

    /// The log at `path`, if it is a regular file this source may read; else the
    /// refusal is said (once for a file skipped) and a followed log is forgotten.
    fn open_log(
        &mut self,
        name: &str,
        task: &TaskId,
        kind: LogKind,
        path: &Path,
    ) -> Option<(File, std::fs::Metadata)> {
        // Only regular files are read, never through a final symlink (temp/ itself may
        // be one; a log linked to another file of the operator's is not read) and never
        // with a blocking open: a FIFO named like a log would otherwise stop this thread
        // (and every log with it) until a writer came.
        let refused = match safe_fs::open_regular(path) {
            Ok(ok) => {
                self.skipped.remove(name);
                return Some(ok);
            }
            Err(refused) => refused,
        };
        if self.tails.remove(name).is_some() {
            self.send(CoreEvent::LogReset {
                task: task.clone(),
                kind,
            });
        }
        let skipped = matches!(
            refused,
            safe_fs::Refused::Symlink(_) | safe_fs::Refused::NotRegular(_)
        );
        if skipped && self.skipped.insert(name.to_owned()) {
            self.fail_about(
                Some(task),
                format!("{refused}; it is skipped and the other logs are followed"),
            );
        } else if !skipped && !refused.is_missing() {
            self.fail_about(Some(task), refused.to_string());
        }
        None
    }

    /// The log's read state, taken out of the map while it is read (a new one for a log
    /// not followed yet), or `None` past [`MAX_FILES`].
    fn take_tail(&mut self, name: &str, meta: &std::fs::Metadata) -> Option<(String, Tail)> {
        if let Some(entry) = self.tails.remove_entry(name) {
            return Some(entry);
        }
        if self.tails.len() >= MAX_FILES {
            if !std::mem::replace(&mut self.said_too_many, true) {
                self.fail(format!(
                    "{} holds more than {MAX_FILES} task logs; {name} and any newer ones are not followed",
                    self.settings.dir.display()
                ));
            }
            return None;
        }
        let tail = Tail {
            identity: (meta.dev(), meta.ino()),
            offset: 0,
            assembler: LineAssembler::new(self.settings.reading.max_line),
            file: None,
            last_bytes: Vec::new(),
        };
        Some((name.to_owned(), tail))
    }

    fn send(&self, event: CoreEvent) {
        match &self.outbox {
            Some(outbox) => outbox.borrow_mut().push(event),
            None => send_to(&self.events, event),
        }
    }

    /// Batches waiting on the runtime past which a burst's reading pauses to send them.
    fn outbox_full(&self) -> bool {
        self.outbox
            .as_ref()
            .is_some_and(|o| o.borrow().len() >= OUTBOX_BATCHES)
    }

    fn fail(&self, detail: String) {
        self.fail_about(None, detail);
    }

    /// A problem with one task's log: the event names the task.
    fn fail_about(&self, task: Option<&TaskId>, detail: String) {
        self.send(CoreEvent::SourceFailed {
            source: SOURCE,
            task: task.cloned(),
            detail,
        });
    }
}

/// How many logs may be kept open: a quarter of the descriptors this process may
/// have, the rest left to the database, the sockets and the windows maestro starts.
fn open_budget() -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 4).unwrap_or(256).min(MAX_FILES)
}

/// Waits for room in the hub's queue: a burst is slowed down, not held in memory.
fn send_to(events: &mpsc::Sender<CoreEvent>, event: CoreEvent) {
    // The hub is gone only at shutdown; nothing left to tell.
    let _ = events.blocking_send(event);
}

/// (device, inode) of the folder at `dir` (through a symlink), if it is a folder.
fn folder_identity(dir: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(dir)
        .ok()
        .filter(std::fs::Metadata::is_dir)
        .map(|m| (m.dev(), m.ino()))
}
