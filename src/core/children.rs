//! A process maestro starts is maestro's to end: [`GroupChild`] runs a child in its own
//! process group, and ends the whole group (the child and anything it started) with
//! SIGTERM, then SIGKILL after a grace period, reaps the child, and checks that nothing
//! of the group is left running. Dropped without that, it still SIGKILLs the group.
//!
//! What the child started and left behind is re-parented to PID 1 when it dies, which
//! reaps it on an ordinary system; "left running" therefore ignores zombies (a process
//! that has exited and only waits for its parent to read its status).

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// How long a group gets to go after SIGKILL before maestro says it did not.
const KILL_SETTLE: Duration = Duration::from_secs(1);

/// A child in its own process group.
pub struct GroupChild {
    child: Child,
    pgid: Pid,
    ended: bool,
}

impl GroupChild {
    /// Starts `cmd` as the leader of a new process group.
    pub fn spawn(cmd: &mut Command) -> io::Result<Self> {
        let child = cmd.process_group(0).kill_on_drop(true).spawn()?;
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("the child exited before its id was read"))?;
        Ok(Self {
            child,
            pgid: Pid::from_raw(pid as i32),
            ended: false,
        })
    }

    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    pub fn pgid(&self) -> i32 {
        self.pgid.as_raw()
    }

    /// Waits for the child to exit (the group may live on: see [`Self::terminate`]).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Ends the whole group: SIGTERM, up to `grace` for the child to exit, SIGKILL to
    /// whatever is left, the child reaped. Returns whether the group is gone.
    pub async fn terminate(&mut self, grace: Duration) -> bool {
        self.ended = true;
        let _ = killpg(self.pgid, Signal::SIGTERM);
        // A stopped process cannot act on SIGTERM.
        let _ = killpg(self.pgid, Signal::SIGCONT);
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
        let deadline = tokio::time::Instant::now() + grace;
        while running_in_group(self.pgid) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if running_in_group(self.pgid) > 0 {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
        let _ = self.child.wait().await;
        let deadline = tokio::time::Instant::now() + KILL_SETTLE;
        while running_in_group(self.pgid) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        running_in_group(self.pgid) == 0
    }

    /// After a normal exit: ends what the child left running in its group.
    pub async fn end_leftovers(&mut self, grace: Duration) {
        if running_in_group(self.pgid) > 0 {
            self.terminate(grace).await;
        }
        self.ended = true;
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        if !self.ended {
            // No time for grace here: the run is being torn down.
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}

/// Whether any process is left in the group, zombies included (signal 0 tests
/// without sending).
pub fn group_alive(pgid: Pid) -> bool {
    !matches!(killpg(pgid, None), Err(Errno::ESRCH))
}

/// How many processes of the group are still running (not zombies), from `/proc`.
pub fn running_in_group(pgid: Pid) -> usize {
    if !group_alive(pgid) {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 1;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| {
            // After the command name in parentheses: state, ppid, pgrp, …
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                return false;
            };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            let pgrp = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
            pgrp == Some(pgid.as_raw()) && state != Some("Z") && state != Some("X")
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn terminate_ends_the_child_and_what_it_started() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30; true"]);
        let mut child = GroupChild::spawn(&mut cmd).expect("spawn");
        let pgid = Pid::from_raw(child.pgid());
        assert!(group_alive(pgid));
        assert!(child.terminate(Duration::from_millis(500)).await);
        assert_eq!(running_in_group(pgid), 0);
    }

    #[tokio::test]
    async fn a_child_that_ignores_sigterm_is_killed_after_the_grace() {
        use tokio::io::AsyncBufReadExt;
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; sleep 30 & echo ready; wait"])
            .stdout(std::process::Stdio::piped());
        let mut child = GroupChild::spawn(&mut cmd).expect("spawn");
        // The signal comes only once the shell has set its trap.
        let out = child.child_mut().stdout.take().expect("stdout");
        let mut line = String::new();
        tokio::io::BufReader::new(out)
            .read_line(&mut line)
            .await
            .expect("ready");
        assert_eq!(line.trim(), "ready");
        let pgid = Pid::from_raw(child.pgid());
        assert!(child.terminate(Duration::from_millis(200)).await);
        assert_eq!(running_in_group(pgid), 0);
    }
}
