//! Older lines of the shown log, read back from its file.
//!
//! The status and deviations views of a local project reach past what the dashboard
//! holds (a history skimmed at start, lines scrolled out) through a line index of the
//! file (`core::log_file`), keeping only a window of lines around where the pane
//! stands. The merged view cannot: the files do not say how their lines interleaved.
//!
//! File line `L` stands at view position `L + offset`. The offset is found by lining
//! the file's last lines up with the lines held, and checked against the first line
//! held; a file that no longer holds those lines is not read back.

use std::path::PathBuf;
use std::sync::Arc;

use crate::core::domain::{LogKind, TaskId};
use crate::core::log_file::LineIndex;
use crate::core::log_file::job::{FIRST_STEP, IndexJob};
use crate::tui::panes::log::scrollback::{LogEntry, Scrollback};

/// Lines of the file held around the pane.
pub const WINDOW: u64 = 1024;
/// How far the dashboard may lag its file when the two are lined up.
const LAG_TRIED: u64 = 256;
/// Lines read at a time by a search through the file.
const SEARCH_BLOCK: usize = 4096;

/// Where a local project's logs are, and the file read back now.
#[derive(Debug, Default, Clone)]
pub struct OlderLines {
    /// The local project's `temp/`, and how its lines are cut (as the log source cuts
    /// them).
    source: Option<(PathBuf, crate::core::sources::Reading)>,
    file: Option<FileRows>,
    /// A file being indexed on a thread, while the frames go on.
    indexing: Option<Indexing>,
}

#[derive(Debug, Clone)]
struct Indexing {
    task: TaskId,
    kind: LogKind,
    path: PathBuf,
    job: IndexJob,
    /// The first row asked for meanwhile: where the cursor goes once the file is read.
    wanted: u64,
}

#[derive(Debug, Clone)]
struct FileRows {
    task: TaskId,
    kind: LogKind,
    index: LineIndex,
    /// View position of the file's line 0 (before position 0 when the view started
    /// counting part-way into the file).
    offset: i64,
    /// The first position held at the time of lining up.
    held_from: u64,
    window_start: u64,
    window: Vec<LogEntry>,
    /// The row asked for while the file was being indexed.
    wanted: Option<u64>,
}

/// A view's rows: the lines held, and before them the file's window.
pub struct LogRows<'a> {
    pub held: &'a Scrollback,
    older: Option<&'a FileRows>,
}

impl LogRows<'_> {
    /// The first position there is: the file's first line reachable, else the first held.
    pub fn start(&self) -> u64 {
        self.older.map_or(self.held.start(), |f| {
            first_position(f.offset).min(self.held.start())
        })
    }

    pub fn end(&self) -> u64 {
        self.held.end()
    }

    pub fn is_empty(&self) -> bool {
        self.start() == self.end()
    }

    /// The line at `abs`, when held or in the file's window.
    pub fn get(&self, abs: u64) -> Option<&LogEntry> {
        if abs >= self.held.start() {
            return self.held.get(abs);
        }
        let f = self.older?;
        let i = usize::try_from(abs.checked_sub(f.window_start)?).ok()?;
        f.window.get(i)
    }
}

fn first_position(offset: i64) -> u64 {
    u64::try_from(offset.max(0)).unwrap_or(0)
}

impl OlderLines {
    /// Reads back from `dir` (a local project's `temp/`), cutting lines as the log
    /// source does.
    pub fn read_from(dir: PathBuf, reading: crate::core::sources::Reading) -> Self {
        Self {
            source: Some((dir, reading)),
            file: None,
            indexing: None,
        }
    }

    /// How much of a file being indexed is done, in percent; `None` when none is.
    pub fn indexing(&self) -> Option<u8> {
        self.indexing.as_ref().map(|i| {
            let (done, size) = i.job.progress();
            u8::try_from(done.saturating_mul(100) / size.max(1)).unwrap_or(100)
        })
    }

    /// Stops indexing a file that is not `shown` (task and log) any more.
    pub fn keep_indexing(&mut self, shown: Option<(&TaskId, LogKind)>) {
        if !shown.is_some_and(|(t, k)| {
            self.indexing
                .as_ref()
                .is_some_and(|i| i.task == *t && i.kind == k)
        }) && let Some(i) = self.indexing.take()
        {
            i.job.stop();
        }
    }

    /// Once a file asked for has been read: the row asked for meanwhile (taken once).
    pub fn take_wanted(&mut self) -> Option<u64> {
        self.file.as_mut().and_then(|f| f.wanted.take())
    }

    /// Whether older lines can be read back at all (a local project).
    pub fn reads_back(&self) -> bool {
        self.source.is_some()
    }

    /// The rows of `task`'s `kind` view: what is held, and the file's window when it is
    /// the file read back now.
    pub fn rows<'a>(
        &'a self,
        task: &TaskId,
        kind: Option<LogKind>,
        held: &'a Scrollback,
    ) -> LogRows<'a> {
        let older = self
            .file
            .as_ref()
            .filter(|f| Some(f.kind) == kind && f.task == *task && f.held_from == held.start());
        LogRows { held, older }
    }

    /// Makes the rows `[from, to)` of `task`'s `kind` view readable: lines the file
    /// holds before what is held are read into the window. Returns a word for the
    /// operator when the file cannot be read back.
    pub fn load(
        &mut self,
        task: &TaskId,
        kind: LogKind,
        held: &Scrollback,
        from: u64,
        to: u64,
    ) -> Result<(), ReadBackError> {
        let Some((dir, reading)) = &self.source else {
            return Ok(());
        };
        let indexing = self
            .indexing
            .as_ref()
            .is_some_and(|i| i.task == *task && i.kind == kind);
        if from >= held.start() && !indexing {
            return Ok(());
        }
        // The same file keeps its index (grown, not rebuilt); it is lined up again when
        // the lines held have moved on.
        let same = self
            .file
            .take()
            .filter(|f| f.task == *task && f.kind == kind);
        if same.as_ref().is_some_and(|f| f.held_from == held.start()) {
            self.file = same;
        } else {
            let pending = self
                .indexing
                .take()
                .filter(|i| i.task == *task && i.kind == kind);
            let wanted = pending.as_ref().map_or(from, |p| p.wanted.min(from));
            let started = match (same, pending) {
                (None, Some(p)) => match p.job.take() {
                    None => {
                        self.indexing = Some(Indexing { wanted, ..p });
                        return Ok(());
                    }
                    Some(done) => Next::Indexed(done.map_err(|source| ReadBackError::Index {
                        task: task.clone(),
                        path: p.path.clone(),
                        source,
                    })?),
                },
                (Some(f), pending) => {
                    if let Some(p) = pending {
                        p.job.stop();
                    }
                    Next::ToIndex(f.index)
                }
                (None, None) => Next::ToIndex(LineIndex::new(
                    &dir.join(format!("{task}-{}", kind.suffix())),
                    reading.max_line,
                )),
            };
            let index = match started {
                Next::Indexed(index) => index,
                Next::ToIndex(index) => match self.index_here(task, kind, index, wanted)? {
                    Some(index) => index,
                    None => return Ok(()),
                },
            };
            let mut lined = line_up(task, kind, index, held)?;
            lined.wanted = pending_wanted(wanted, from);
            self.file = Some(lined);
        }
        self.read_window(kind, held, from, to)
    }

    /// A file not indexed yet: its first bytes here, and when there is more, the rest
    /// on a thread of its own (`None`: the frames go on meanwhile).
    fn index_here(
        &mut self,
        task: &TaskId,
        kind: LogKind,
        mut index: LineIndex,
        wanted: u64,
    ) -> Result<Option<LineIndex>, ReadBackError> {
        let step = index
            .refresh_some(FIRST_STEP)
            .map_err(|source| ReadBackError::Index {
                task: task.clone(),
                path: index.path().to_path_buf(),
                source,
            })?;
        if step.done {
            return Ok(Some(index));
        }
        self.indexing = Some(Indexing {
            task: task.clone(),
            kind,
            path: index.path().to_path_buf(),
            job: IndexJob::start(index, step.scanned, step.size),
            wanted,
        });
        Ok(None)
    }

    /// The rows `[from, to)` before what is held read into the window of the file read
    /// back, unless it holds them already.
    fn read_window(
        &mut self,
        kind: LogKind,
        held: &Scrollback,
        from: u64,
        to: u64,
    ) -> Result<(), ReadBackError> {
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let first = first_position(f.offset);
        let (from, to) = (from.max(first), to.min(held.start()));
        let window_end = f.window_start + f.window.len() as u64;
        if from >= to || (from >= f.window_start && to <= window_end) {
            return Ok(());
        }
        // A new window, a quarter of it before the rows asked for.
        let start = from.saturating_sub(WINDOW / 4).max(first);
        let end = (start + WINDOW).max(to).min(held.start());
        let line = line_of(f.offset, start);
        let lines = f
            .index
            .read(line, usize::try_from(end - start).unwrap_or(0))
            .map_err(ReadBackError::read(f.index.path()))?;
        f.window_start = start;
        f.window = lines.into_iter().map(|l| entry(kind, &l)).collect();
        Ok(())
    }

    /// The position in `range` (before what is held) nearest its start going forward,
    /// or its end going back, whose file line `hit` accepts, read through the file a
    /// block at a time. `None` when there is no file read back or no such line.
    pub fn find(
        &self,
        task: &TaskId,
        kind: LogKind,
        held: &Scrollback,
        range: (u64, u64),
        forward: bool,
        hit: &dyn Fn(&str) -> bool,
    ) -> Option<u64> {
        let f = self
            .file
            .as_ref()
            .filter(|f| f.task == *task && f.kind == kind && f.held_from == held.start())?;
        let (from, to) = (
            range.0.max(first_position(f.offset)),
            range.1.min(held.start()),
        );
        let block = SEARCH_BLOCK as u64;
        let mut at = if forward { from } else { to };
        while if forward { at < to } else { at > from } {
            let (lo, hi) = if forward {
                (at, (at + block).min(to))
            } else {
                (at.saturating_sub(block).max(from), at)
            };
            let lines = f
                .index
                .read(line_of(f.offset, lo), usize::try_from(hi - lo).unwrap_or(0))
                .ok()?;
            let found = if forward {
                lines.iter().position(|l| hit(l))
            } else {
                lines.iter().rposition(|l| hit(l))
            };
            if let Some(i) = found {
                return Some(lo + i as u64);
            }
            at = if forward { hi } else { lo };
        }
        None
    }
}

/// A file's index as `load` finds it: done on its thread, or still to be read.
enum Next {
    Indexed(LineIndex),
    ToIndex(LineIndex),
}

/// The row to move to once indexed: one asked for before this call.
fn pending_wanted(wanted: u64, from: u64) -> Option<u64> {
    (wanted < from).then_some(wanted)
}

/// The file line at view position `pos`.
fn line_of(offset: i64, pos: u64) -> u64 {
    u64::try_from(i64::try_from(pos).unwrap_or(i64::MAX) - offset).unwrap_or(0)
}

fn entry(kind: LogKind, line: &str) -> LogEntry {
    LogEntry {
        kind,
        text: Arc::from(line),
        merged_at: 0,
        anomaly: false,
    }
}

/// Why a log's older lines cannot be read back (a word for the operator).
#[derive(Debug, thiserror::Error)]
pub enum ReadBackError {
    #[error("older lines of {task} cannot be read back from {} ({source})", .path.display())]
    Index {
        task: TaskId,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {} ({source})", .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} no longer holds the lines shown: older lines are not read back", .path.display())]
    Gone { path: PathBuf },
}

impl ReadBackError {
    fn read(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| Self::Read { path, source }
    }
}

/// Finds where the held lines stand in the file (indexed to its end by the caller,
/// just before): the held view's last
/// line is the file's last (or up to `LAG_TRIED` lines before it, when lines are still
/// on their way), and the first line held must be the file's line there.
fn line_up(
    task: &TaskId,
    kind: LogKind,
    index: LineIndex,
    held: &Scrollback,
) -> Result<FileRows, ReadBackError> {
    let name = index.path().to_path_buf();
    let lines = i64::try_from(index.lines()).unwrap_or(i64::MAX);
    let end = i64::try_from(held.end()).unwrap_or(i64::MAX);
    let start = i64::try_from(held.start()).unwrap_or(i64::MAX);
    let gone = || ReadBackError::Gone { path: name.clone() };
    let offset = match held.get(held.start()) {
        None => end - lines,
        Some(first) => {
            // Candidates: lag 0, 1, … LAG_TRIED; the file lines they put first.
            let lag = i64::try_from(LAG_TRIED).unwrap_or(0);
            let newest = start - (end - lines);
            let oldest = (newest - lag).max(0);
            if newest < 0 {
                return Err(gone());
            }
            let block = index
                .read(
                    u64::try_from(oldest).unwrap_or(0),
                    usize::try_from(newest - oldest + 1).unwrap_or(0),
                )
                .map_err(ReadBackError::read(&name))?;
            let found = block
                .iter()
                .rposition(|l| *l == *first.text)
                .ok_or_else(gone)?;
            start - (oldest + i64::try_from(found).unwrap_or(0))
        }
    };
    Ok(FileRows {
        task: task.clone(),
        kind,
        index,
        offset,
        held_from: held.start(),
        window_start: 0,
        window: Vec::new(),
        wanted: None,
    })
}
