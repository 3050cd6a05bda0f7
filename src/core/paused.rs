//! Processes held stopped while something that may fail is tried in their place
//! ([`Paused`]), and never left stopped when maestro dies: before a process is held with
//! SIGSTOP (a relaunch proving its successor, a Conductor recovery), it is named to a guardian,
//! a small `maestro resume-guard` process of its own group (a Ctrl-C or a hang-up of the
//! terminal does not reach it) that reads the names on a pipe. maestro says `done` once
//! it has resumed or ended them itself; when the pipe closes without that (maestro
//! killed, even by SIGKILL), the guardian sends SIGCONT to each named process that is
//! still the one named (its start time), and exits. Once maestro said `committed` (the
//! successor was released), it ends them instead: running on beside their successor
//! they would make two.

use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use std::time::Duration;

use crate::core::procs::{KillOutcome, ProcessId, descendants, guarded_kill};

/// The hidden verb the guardian runs as.
pub const VERB: &str = "resume-guard";
const DONE: &str = "done";
/// Said once the successor was released: the named processes are to end, not run on.
const COMMITTED: &str = "committed";

/// maestro's side: the pipe to a running guardian.
#[derive(Debug)]
pub struct Guardian {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl Guardian {
    /// Starts the guardian (maestro's own program). An error: none could be started,
    /// and nothing may be stopped.
    pub fn start() -> std::io::Result<Self> {
        use std::os::unix::process::CommandExt;
        let maestro = std::env::current_exe()?;
        let mut child = Command::new(maestro)
            .arg(VERB)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let pipe = child.stdin.take();
        Ok(Self { child, pipe })
    }

    /// Names a process before it is stopped: said and flushed, or an error (then it
    /// must not be stopped).
    pub fn will_stop(&mut self, p: ProcessId) -> std::io::Result<()> {
        let pipe = self
            .pipe
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the guardian's pipe is closed"))?;
        writeln!(pipe, "{} {}", p.pid, p.start_time.unwrap_or(0))?;
        pipe.flush()
    }

    /// The successor was released (the relaunch is committed): should maestro die now,
    /// the guardian ends the named processes instead of letting them run on beside it.
    pub fn committed(&mut self) {
        if let Some(pipe) = self.pipe.as_mut() {
            let _ = writeln!(pipe, "{COMMITTED}");
            let _ = pipe.flush();
        }
    }

    /// maestro resumed or ended what it stopped: the guardian exits doing nothing.
    pub fn done(mut self) {
        if let Some(mut pipe) = self.pipe.take() {
            let _ = writeln!(pipe, "{DONE}");
            let _ = pipe.flush();
        }
        let _ = self.child.wait();
    }
}

/// The guardian itself: `maestro resume-guard`, its stdin the pipe. Returns its exit
/// status once maestro said `done` (0) or the pipe closed and it resumed what was named.
pub fn run() -> i32 {
    // Signals that would end it are caught and ignored (the handlers only note them):
    // the guardian ends when its pipe says so, or closes.
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return resume_on_close();
    };
    let _ignored = runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        [
            SignalKind::interrupt(),
            SignalKind::hangup(),
            SignalKind::terminate(),
            SignalKind::quit(),
        ]
        .into_iter()
        .filter_map(|k| signal(k).ok())
        .collect::<Vec<_>>()
    });
    resume_on_close()
}

fn resume_on_close() -> i32 {
    let mut named = Vec::new();
    let mut committed = false;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            DONE => return 0,
            COMMITTED => {
                committed = true;
                continue;
            }
            _ => {}
        }
        let mut words = line.split_whitespace().map(str::parse::<u64>);
        if let (Some(Ok(pid)), Some(Ok(start))) = (words.next(), words.next())
            && let Ok(pid) = i32::try_from(pid)
            && pid > 1
        {
            named.push(ProcessId {
                pid,
                start_time: (start > 0).then_some(start),
            });
        }
    }
    let named: Vec<ProcessId> = named
        .into_iter()
        .filter(|p| p.start_time.is_some() && p.is_same_alive())
        .collect();
    for p in &named {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGCONT);
    }
    if committed {
        // Their successor was released: running again beside it would make two. They
        // are ended as maestro would have ended them (SIGTERM, SIGKILL after a grace).
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return 1;
        };
        runtime.block_on(async {
            let mut ending = tokio::task::JoinSet::new();
            for p in named {
                ending.spawn(guarded_kill(p, COMMITTED_GRACE));
            }
            while ending.join_next().await.is_some() {}
        });
    }
    0
}

/// How long an old session the guardian ends after a committed relaunch has to exit.
const COMMITTED_GRACE: Duration = Duration::from_secs(5);

/// Processes held with SIGSTOP while something that may fail is tried in their place:
/// each root and everything below it (a terminal's claude runs in a session of its
/// own, so stopping the terminal alone would not stop it). Resumed when the attempt
/// failed, ended when it succeeded; never left stopped: each is named to the guardian
/// before it is stopped, which resumes it if maestro dies first (or ends it, once the
/// successor was released), and one dropped unfinished is resumed.
#[derive(Debug, Default)]
pub struct Paused {
    roots: Vec<ProcessId>,
    stopped: Vec<ProcessId>,
    guardian: Option<Guardian>,
}

impl Paused {
    /// Stops each live root and its descendants. Where no guardian can be started
    /// (maestro's program is gone), nothing is stopped: better two sessions for a
    /// moment than one stopped for good.
    pub fn pause(roots: &[ProcessId]) -> Self {
        let mut paused = Self::default();
        let live: Vec<ProcessId> = roots
            .iter()
            .copied()
            .filter(ProcessId::is_same_alive)
            .collect();
        if live.is_empty() {
            return paused;
        }
        let Ok(mut guardian) = Guardian::start() else {
            return paused;
        };
        for root in live {
            paused.roots.push(root);
            let below = descendants(root.pid).into_iter().map(ProcessId::observe);
            for p in std::iter::once(root).chain(below) {
                if guardian.will_stop(p).is_ok()
                    && kill(Pid::from_raw(p.pid), Signal::SIGSTOP).is_ok()
                {
                    paused.stopped.push(p);
                }
            }
        }
        paused.guardian = Some(guardian);
        paused
    }

    /// The successor was released: from now on, a maestro that dies leaves these to be
    /// ended by the guardian, not resumed (they would run beside their successor).
    pub fn committed(&mut self) {
        if let Some(guardian) = self.guardian.as_mut() {
            guardian.committed();
        }
    }

    /// The processes stopped, roots first.
    pub fn stopped(&self) -> &[ProcessId] {
        &self.stopped
    }

    /// Lets every stopped process run again, as it was.
    pub fn resume(mut self) {
        self.cont();
    }

    /// Every stopped process running again, and the guardian told so.
    fn cont(&mut self) {
        self.run_again();
        if let Some(guardian) = self.guardian.take() {
            guardian.done();
        }
    }

    fn run_again(&self) {
        for p in self.stopped.iter().filter(|p| p.is_same_alive()) {
            let _ = kill(Pid::from_raw(p.pid), Signal::SIGCONT);
        }
    }

    /// Ends each root (running again first, so it can act on SIGTERM) and whatever ran
    /// below it and outlives it (a window's claude), all at once (one grace period, not
    /// one each): what each root got. The guardian is told only once they ended: a
    /// maestro killed during the grace leaves them to it, not running beside their
    /// successor.
    pub async fn end(mut self, grace: Duration) -> Vec<(i32, KillOutcome)> {
        self.run_again();
        let mut ending = tokio::task::JoinSet::new();
        for p in &self.stopped {
            let (p, root) = (*p, self.roots.contains(p));
            ending.spawn(async move { (p.pid, root, guarded_kill(p, grace).await) });
        }
        let mut out = Vec::new();
        while let Some(done) = ending.join_next().await {
            if let Ok((pid, true, outcome)) = done {
                out.push((pid, outcome));
            }
        }
        out.sort_by_key(|(pid, _)| self.roots.iter().position(|r| r.pid == *pid));
        if let Some(guardian) = self.guardian.take() {
            guardian.done();
        }
        out
    }
}

impl Drop for Paused {
    /// One dropped unfinished (an early return) runs again.
    fn drop(&mut self) {
        if self.guardian.is_some() {
            self.cont();
        }
    }
}
