//! Nothing stays stopped when maestro dies: before a process is held with SIGSTOP
//! (a relaunch proving its successor, a Conductor recovery), it is named to a guardian,
//! a small `maestro resume-guard` process of its own group (a Ctrl-C or a hang-up of the
//! terminal does not reach it) that reads the names on a pipe. maestro says `done` once
//! it has resumed or ended them itself; when the pipe closes without that (maestro
//! killed, even by SIGKILL), the guardian sends SIGCONT to each named process that is
//! still the one named (its start time), and exits.

use std::io::{BufRead, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::core::procs::ProcessId;

/// The hidden verb the guardian runs as.
pub const VERB: &str = "resume-guard";
const DONE: &str = "done";

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
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == DONE {
            return 0;
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
    for p in named
        .iter()
        .filter(|p| p.start_time.is_some() && p.is_same_alive())
    {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGCONT);
    }
    0
}
