//! Processes: is a PID alive, is it still the process we recorded (start time from
//! `/proc`), waiting for its death through a pidfd, finding a `claude --resume` in the
//! process table, and killing only what was verified: SIGTERM, then SIGKILL after a
//! grace period.

use std::os::fd::OwnedFd;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A process as maestro recorded it: its PID and the kernel's start time for it, so a
/// PID reused by another process is never mistaken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessId {
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks since boot); `None` if unreadable.
    pub start_time: Option<u64>,
}

impl ProcessId {
    /// Records a live process now.
    pub fn observe(pid: i32) -> Self {
        Self {
            pid,
            start_time: start_time(pid),
        }
    }

    /// Alive, and (when we know its start time) still the same process.
    pub fn is_same_alive(&self) -> bool {
        is_alive(self.pid)
            && match (self.start_time, start_time(self.pid)) {
                (Some(then), Some(now)) => then == now,
                _ => true,
            }
    }
}

/// `kill -0`: the process exists (a permission error still means it exists).
pub fn is_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match kill(Pid::from_raw(pid), None) {
        Ok(()) | Err(Errno::EPERM) => !is_zombie(pid),
        Err(_) => false,
    }
}

fn is_zombie(pid: i32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| *s == "Z"))
}

/// The fields of `/proc/<pid>/stat` after the command name.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.get(stat.rfind(')')? + 2..)?;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// The parent of a process (field 4 of `/proc/<pid>/stat`).
pub fn parent_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

pub fn start_time(pid: i32) -> Option<u64> {
    // Field 22 overall; index 19 after the pid and the command name.
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The command name of a process (`/proc/<pid>/comm`: a script's file name, not its
/// interpreter's).
pub fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// The processes above `pid`, nearest first, up to (not including) init.
pub fn ancestors(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut at = pid;
    while let Some(parent) = parent_of(at) {
        if parent <= 1 || out.contains(&parent) {
            break;
        }
        out.push(parent);
        at = parent;
    }
    out
}

/// The processes below `pid` (one scan of `/proc`).
pub fn descendants(pid: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|p| Some((p, parent_of(p)?)))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (child, _) in parents.iter().filter(|(_, parent)| *parent == p) {
            if !out.contains(child) {
                out.push(*child);
                frontier.push(*child);
            }
        }
    }
    out
}

/// Ends the shells `parent` runs `command` in, each with its process group (the
/// `sleep` of a loop with it); returns how many. Claude Code's `Monitor` (like its Bash
/// tool) runs a command as `bash -c "… eval '<command>' …"` in a group of its own,
/// learned by running it. Only a direct child of `parent` whose script holds exactly
/// that `eval` is touched.
pub fn end_shells_running(parent: i32, command: &str) -> usize {
    let quoted = format!("eval '{}'", command.replace('\'', "'\"'\"'"));
    let children = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| parent_of(*p) == Some(parent));
    let mut ended = 0;
    for child in children {
        let runs_it = cmdline(child).is_some_and(|args| {
            args.iter().any(|a| a == "-c") && args.last().is_some_and(|s| s.contains(&quoted))
        });
        if !runs_it {
            continue;
        }
        let pid = Pid::from_raw(child);
        let leads = nix::unistd::getpgid(Some(pid)).is_ok_and(|g| g == pid);
        let sent = if leads {
            nix::sys::signal::killpg(pid, Signal::SIGTERM)
        } else {
            kill(pid, Signal::SIGTERM)
        };
        ended += usize::from(sent.is_ok());
    }
    ended
}

/// The command line of a process, split into arguments.
pub fn cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// One scan of the process table for `claude … --resume <session>`.
pub fn find_resumed_claude(session: &str) -> Option<i32> {
    let entries = std::fs::read_dir("/proc").ok()?;
    let mut found: Vec<i32> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            cmdline(*pid).is_some_and(|args| {
                args.iter().any(|a| a.rsplit('/').next() == Some("claude"))
                    && args
                        .windows(2)
                        .any(|w| w[0] == "--resume" && w[1] == session)
            })
        })
        .collect();
    found.sort_unstable();
    found.pop()
}

/// A pidfd for `pid` (Linux ≥ 5.3); `None` where the kernel has none.
pub fn pidfd(pid: i32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(pid)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

/// Resolves when the process exits: at once through a pidfd, else by `kill -0` every
/// `fallback_poll`. Dropping the future releases the thread that waits on the pidfd.
pub async fn wait_for_exit(process: ProcessId, fallback_poll: Duration) {
    if let Some(fd) = pidfd(process.pid)
        && process.is_same_alive()
        && let Ok((cancel_read, cancel_write)) = nix::unistd::pipe()
    {
        // The pidfd turns readable when the process ends; the pipe's read end hangs up
        // when `cancel_write` is dropped with this future.
        let waiter = tokio::task::spawn_blocking(move || {
            use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
            use std::os::fd::AsFd;
            let mut fds = [
                PollFd::new(fd.as_fd(), PollFlags::POLLIN),
                PollFd::new(cancel_read.as_fd(), PollFlags::POLLIN),
            ];
            loop {
                match poll(&mut fds, PollTimeout::NONE) {
                    Err(Errno::EINTR) => {}
                    Err(_) => return false,
                    Ok(_) => {
                        return fds[0]
                            .revents()
                            .is_some_and(|r| r.contains(PollFlags::POLLIN));
                    }
                }
            }
        });
        let exited = waiter.await.unwrap_or(false);
        drop(cancel_write);
        if exited {
            return;
        }
    }
    while process.is_same_alive() {
        tokio::time::sleep(fallback_poll).await;
    }
}

/// What a guarded kill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillOutcome {
    /// It was not running (any more).
    NotRunning,
    /// The PID now belongs to another process: left alone.
    Reused,
    Terminated,
    Killed,
    /// Signals were refused (another user's process).
    Refused,
}

/// Kills a recorded process: only if alive and still the same, SIGTERM first, SIGKILL
/// after `grace` if it is still there. The whole process group when it leads one.
pub async fn guarded_kill(process: ProcessId, grace: Duration) -> KillOutcome {
    if !is_alive(process.pid) {
        return KillOutcome::NotRunning;
    }
    if !process.is_same_alive() {
        return KillOutcome::Reused;
    }
    let pid = Pid::from_raw(process.pid);
    if let Err(e) = kill(pid, Signal::SIGTERM) {
        return if e == Errno::EPERM {
            KillOutcome::Refused
        } else {
            KillOutcome::NotRunning
        };
    }
    if tokio::time::timeout(grace, wait_for_exit(process, Duration::from_millis(50)))
        .await
        .is_ok()
    {
        return KillOutcome::Terminated;
    }
    if process.is_same_alive() {
        let _ = kill(pid, Signal::SIGKILL);
        KillOutcome::Killed
    } else {
        KillOutcome::Terminated
    }
}

/// The user a process runs as (the owner of `/proc/<pid>`).
pub fn owner(pid: i32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}"))
        .ok()
        .map(|m| m.uid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeping_child_is_seen_and_killed_and_pidfd_reports_its_death() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let recorded = ProcessId::observe(pid);
        assert!(recorded.start_time.is_some());
        assert!(recorded.is_same_alive());
        let waiter = tokio::spawn(wait_for_exit(recorded, Duration::from_secs(60)));
        let outcome = guarded_kill(recorded, Duration::from_secs(5)).await;
        assert_eq!(outcome, KillOutcome::Terminated);
        let _ = child.wait();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(!is_alive(pid));
        assert_eq!(
            guarded_kill(recorded, Duration::from_secs(1)).await,
            KillOutcome::NotRunning
        );
    }

    #[tokio::test]
    async fn a_reused_pid_is_not_killed() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // As if we had recorded another process under this PID earlier.
        let stale = ProcessId {
            pid,
            start_time: start_time(pid).map(|t| t.wrapping_sub(1)),
        };
        assert_eq!(
            guarded_kill(stale, Duration::from_secs(1)).await,
            KillOutcome::Reused
        );
        assert!(is_alive(pid));
        child.kill().unwrap();
        let _ = child.wait();
    }
}
