//! Headless presenter: every happening printed to stdout, as text or JSON lines
//! (docs/cli.md "Headless text output" and "Headless JSON output").

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::cli::args::GlobalArgs;
use crate::cli::error::CliError;
use crate::cli::output_queue::OutputQueue;
use crate::cli::project::Project;
use crate::core::clock::Clock;
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::event::{Happening, What};
use crate::core::event_json::output_line;
use crate::core::runtime;
use crate::core::told::Cursor;
use crate::core::told::read::{Follower, Gap};
use crate::settings::Settings;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Why the presenter stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// SIGINT/SIGTERM or the core stopped.
    Stopped,
    /// `--until-complete` saw task-00 reach `complete`.
    ConductorComplete,
    /// stdout is closed (the reader went away).
    OutputClosed,
    /// The Souffleur role in this process ended.
    RoleEnded,
}

/// Prints happenings until `stop` fires, the core ends, or (with `until_complete`)
/// task-00 completes. Lines go to a bounded queue drained by a writer thread; a reader
/// that stalls holds the sources back instead of losing lines (see [`OutputQueue`]).
pub async fn present(
    happenings: &mut mpsc::Receiver<Happening>,
    format: Format,
    clock: Clock,
    until_complete: bool,
    stop: CancellationToken,
    out: &OutputQueue,
) -> Ended {
    present_after(happenings, format, clock, until_complete, None, stop, out).await
}

/// Whether a happening is to be shown to a reader who has seen everything up to
/// `after` (several projects at once, where no one journal is followed): what has a
/// later place in the same journal, or none.
pub fn is_after(h: &Happening, after: Option<Cursor>) -> bool {
    match (after, &h.told) {
        (Some(after), Some(told)) => told
            .cursor
            .is_none_or(|c| c.journal != after.journal || c.seq > after.seq),
        _ => true,
    }
}

/// A reader resuming after a cursor (`--after`): the journal from there, then as it
/// grows. What is printed comes from the journal, so each entry is printed once, in
/// the journal's order, with its own cursor; only what was told while the journal could
/// not keep it comes marked replayed (a reader may have seen it with a null cursor).
pub struct Resume {
    pub follower: Follower,
    pub gap: Option<Gap>,
    /// The journal's own trouble this run said at once, with a null cursor: its entry,
    /// kept later, is not printed again.
    printed_unkept: std::collections::HashSet<(u64, u64)>,
}

impl Resume {
    /// Checks `cursor` against the project's journal at `path`: the error (for exit 2)
    /// says whose journal it belongs to, or how far this one goes.
    pub fn open(path: &std::path::Path, cursor: Cursor) -> Result<Self, CliError> {
        let (follower, gap) = crate::core::told::read::follow_after(path, cursor)
            .map_err(crate::cli::error::usage)?;
        Ok(Self {
            follower,
            gap,
            printed_unkept: std::collections::HashSet::new(),
        })
    }

    /// The gap (once) and every entry the journal holds past what was printed.
    async fn print_new(&mut self, clock: &Clock, out: &OutputQueue) -> bool {
        if let Some(gap) = self.gap.take() {
            let line = match gap.count {
                Some(count) => {
                    crate::core::event_json::gap_line(clock.now_utc(), count, gap.before)
                }
                None => {
                    crate::core::event_json::replaced_gap_line(clock.now_utc(), gap.before.journal)
                }
            };
            if !out.push(format!("{line}\n")).await {
                return false;
            }
        }
        let entries = self.follower.next_keyed();
        if let Some(id) = self.follower.take_replaced() {
            let line = crate::core::event_json::replaced_gap_line(clock.now_utc(), id);
            if !out.push(format!("{line}\n")).await {
                return false;
            }
        }
        for (_, key, json) in entries {
            if self.printed_unkept.remove(&key) {
                continue;
            }
            if !out.push(format!("{json}\n")).await {
                return false;
            }
        }
        true
    }
}

/// [`present`], leaving out what was told at or before `after`: with a journal to
/// follow, what is printed is read from it (the happenings only say when to read, and
/// when to stop); the journal is also looked at every second, for what another maestro
/// of the project told.
pub async fn present_after(
    happenings: &mut mpsc::Receiver<Happening>,
    format: Format,
    clock: Clock,
    until_complete: bool,
    mut resume: Option<&mut Resume>,
    stop: CancellationToken,
    out: &OutputQueue,
) -> Ended {
    if let Some(r) = resume.as_deref_mut()
        && !r.print_new(&clock, out).await
    {
        return Ended::OutputClosed;
    }
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        let next = tokio::select! {
            // A signal is heard first, however fast happenings come.
            biased;
            () = stop.cancelled() => {
                return drain_arrived(happenings, format, &clock, until_complete, resume, out).await;
            }
            h = happenings.recv() => h,
            _ = tick.tick(), if resume.is_some() => {
                if let Some(r) = resume.as_deref_mut() && !r.print_new(&clock, out).await {
                    return Ended::OutputClosed;
                }
                continue;
            }
        };
        let Some(h) = next else {
            return Ended::Stopped;
        };
        let ended = match resume.as_deref_mut() {
            Some(r) => {
                if !r.print_new(&clock, out).await {
                    return Ended::OutputClosed;
                }
                // A resumable stream prints only what the journal holds: what it could
                // not keep yet comes when it is kept (marked replayed). The journal's own
                // trouble is said at once, and its entry, kept later, passed by.
                if let Some(key) = h.told.as_ref().and_then(|t| t.held)
                    && matches!(h.what, What::Error { .. })
                {
                    // Bounded as the journal's own hold is.
                    if r.printed_unkept.len() < 20_000 {
                        r.printed_unkept.insert(key);
                    }
                    write_one(out, format, &clock, &h, until_complete).await
                } else {
                    end_of(&h, until_complete)
                }
            }
            None => write_one(out, format, &clock, &h, until_complete).await,
        };
        if let Some(ended) = ended {
            return ended;
        }
    }
}

/// At a signal: what had already arrived (not what keeps coming) is printed first.
async fn drain_arrived(
    happenings: &mut mpsc::Receiver<Happening>,
    format: Format,
    clock: &Clock,
    until_complete: bool,
    resume: Option<&mut Resume>,
    out: &OutputQueue,
) -> Ended {
    if let Some(r) = resume {
        r.print_new(clock, out).await;
        return Ended::Stopped;
    }
    let arrived = happenings.len();
    for _ in 0..arrived {
        let Ok(h) = happenings.try_recv() else { break };
        if let Some(e) = write_one(out, format, clock, &h, until_complete).await {
            return e;
        }
    }
    Ended::Stopped
}

/// [`present`] on stdout, through the bounded queue; what is queued is written before
/// returning, waiting at most two seconds for a stalled reader.
pub async fn present_on_stdout(
    happenings: &mut mpsc::Receiver<Happening>,
    json: bool,
    clock: Clock,
    until_complete: bool,
    resume: Option<&mut Resume>,
    stop: CancellationToken,
) -> Ended {
    let format = if json { Format::Json } else { Format::Text };
    stop_when_stdout_closes(stop.clone());
    let out = OutputQueue::on_stdout();
    let ended = present_after(
        happenings,
        format,
        clock,
        until_complete,
        resume,
        stop,
        &out,
    )
    .await;
    out.finish(std::time::Duration::from_secs(2));
    ended
}

/// Cancels `stop` as soon as the reader of a piped stdout goes away (`| head -1`), not
/// at the next write, which on a quiet project may be minutes away. A thread sleeps in
/// `poll` on the pipe for its error or hang-up; a terminal or a file is left alone.
fn stop_when_stdout_closes(stop: CancellationToken) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return;
    };
    let piped = nix::sys::stat::fstat(&fd).is_ok_and(|st| {
        let kind =
            nix::sys::stat::SFlag::from_bits_truncate(st.st_mode) & nix::sys::stat::SFlag::S_IFMT;
        kind == nix::sys::stat::SFlag::S_IFIFO || kind == nix::sys::stat::SFlag::S_IFSOCK
    });
    if !piped {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("stdout-watch".into())
        .spawn(move || {
            loop {
                // No event asked for: only an error or a hang-up wakes it.
                let mut fds = [PollFd::new(fd.as_fd(), PollFlags::empty())];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(n) if n > 0 => break,
                    Err(nix::errno::Errno::EINTR) | Ok(_) => {}
                    Err(_) => return,
                }
            }
            stop.cancel();
        });
}

async fn write_one(
    out: &OutputQueue,
    format: Format,
    clock: &Clock,
    h: &Happening,
    until_complete: bool,
) -> Option<Ended> {
    let line = match format {
        Format::Text => text(clock, h),
        Format::Json => output_line(h, None),
    };
    if let Some(line) = line
        && !out.push(line).await
    {
        return Some(Ended::OutputClosed);
    }
    end_of(h, until_complete)
}

/// Whether a happening ends the presenter: the Conductor's completion (with
/// `until_complete`) or the end of the role in this process.
fn end_of(h: &Happening, until_complete: bool) -> Option<Ended> {
    match &h.what {
        // The watchdog event follows the task event, so both are printed.
        What::Watchdog {
            reason: WatchdogReason::ConductorComplete,
            ..
        } if until_complete => Some(Ended::ConductorComplete),
        What::RoleEnded => Some(Ended::RoleEnded),
        _ => None,
    }
}

/// The journal to resume from, for `--after`: the cursor checked against it.
pub fn resume_for(
    project: &Project,
    settings: &Settings,
    args: &GlobalArgs,
) -> Result<Option<Resume>, CliError> {
    let Some(cursor) = args.after else {
        return Ok(None);
    };
    if !args.json {
        return Err(CliError::Usage(
            "--after prints the journal's events as JSON, each with its cursor: add --json.".into(),
        ));
    }
    let path =
        runtime::journal_path(&project.core_config(settings)).map_err(crate::cli::error::usage)?;
    Resume::open(&path, cursor).map(Some)
}

/// `maestro --no-tui`: the core, and the pipeline host, printed until a signal (or,
/// with `--until-complete`, until `task-00` completes).
pub async fn run(
    project: &Project,
    settings: &Settings,
    args: &GlobalArgs,
    clock: Clock,
) -> Result<std::process::ExitCode, CliError> {
    if settings.db_writes.report_to_db && !runtime::database_exists(&project.db) {
        return Err(CliError::Usage(format!(
            "--report-to-db needs a database, and there is none at {}. Create it with `maestro init`, point --db at it, or drop the flag.",
            project.db.display()
        )));
    }
    // A cursor is checked before anything starts: another journal's is exit 2.
    let mut resume = resume_for(project, settings, args)?;
    let mut life =
        crate::cli::life::Life::start(project, settings, &project.core_config(settings), clock)
            .await?;
    // The metrics (started with the core) read snapshots; nothing else here does.
    life.core().without_snapshots();
    if !life.core().with_database {
        eprintln!(
            "maestro: no database at {}; watching {} only.",
            project.db.display(),
            project.temp.display()
        );
    }
    // Every way headless output ends (signal, completion, closed stdout) is a success.
    let stop = life.stop.clone();
    present_on_stdout(
        &mut life.core().happenings,
        args.json,
        clock,
        args.until_complete,
        resume.as_mut(),
        stop,
    )
    .await;
    life.shutdown().await;
    Ok(std::process::ExitCode::SUCCESS)
}

mod text;
pub use text::{REPLAYED, text};
