//! The log source's ear on the kernel: an inotify instance read by the log source's
//! own thread. The kernel's event goes straight to the thread that reads the file (no
//! watcher thread and hand-over in between), and what is already queued is read in
//! one go, so a burst of appends is one read per file.
//!
//! Watched: the log folder (files appended, created, moved, removed; the folder itself
//! removed or moved) and its parent (the folder appearing again). A stop request wakes
//! the thread through a pipe.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// What a wait brought.
#[derive(Debug, Default)]
pub struct Woken {
    /// Log file names that changed.
    pub names: BTreeSet<String>,
    /// Of those, the names that were created, moved or removed: the file the name holds
    /// may be another one now.
    pub renamed: BTreeSet<String>,
    /// The folder itself changed, or events were lost: look at everything.
    pub rescan: bool,
    /// The wait ran out (a periodic look is due).
    pub timed_out: bool,
    /// The owner asked the thread to stop.
    pub stop: bool,
}

impl std::os::fd::AsRawFd for KernelWatch {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.inotify.as_fd().as_raw_fd()
    }
}

pub struct KernelWatch {
    inotify: Inotify,
    dir_wd: Option<WatchDescriptor>,
    parent_wd: Option<WatchDescriptor>,
    dir_name: Option<OsString>,
    buf: Vec<u8>,
}

const DIR_MASK: WatchMask = WatchMask::MODIFY
    .union(WatchMask::CREATE)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::DELETE)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF);
const PARENT_MASK: WatchMask = WatchMask::CREATE
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::DELETE)
    .union(WatchMask::ONLYDIR);

impl KernelWatch {
    /// Watches `dir` (when it is there) and its parent.
    pub fn start(dir: &Path) -> std::io::Result<Self> {
        let inotify = Inotify::init()?;
        let mut me = Self {
            inotify,
            dir_wd: None,
            parent_wd: None,
            dir_name: dir.file_name().map(std::ffi::OsStr::to_os_string),
            buf: vec![0; 64 * 1024],
        };
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        me.parent_wd = Some(me.inotify.watches().add(parent, PARENT_MASK)?);
        if dir.is_dir() {
            me.dir_wd = Some(me.inotify.watches().add(dir, DIR_MASK)?);
        }
        Ok(me)
    }

    /// Watches `dir` afresh (it was replaced by another folder). False if it cannot be.
    pub fn rewatch(&mut self, dir: &Path) -> bool {
        if let Some(wd) = self.dir_wd.take() {
            let _ = self.inotify.watches().remove(wd);
        }
        match self.inotify.watches().add(dir, DIR_MASK) {
            Ok(wd) => {
                self.dir_wd = Some(wd);
                true
            }
            Err(_) => false,
        }
    }

    /// Reads the events queued now (as many as the buffer holds, some thousands) into
    /// `woken`. One read: what did not fit makes the next wait return at once, and an
    /// isolated append costs no second read to learn the queue is empty. True when the
    /// queue is known empty: the read found nothing, or left room in the buffer for
    /// one more event of the longest name (the kernel hands over all it holds that
    /// fits, so nothing was left behind).
    pub fn drain(&mut self, woken: &mut Woken) -> bool {
        let events = match self.inotify.read_events(&mut self.buf) {
            Ok(events) => events,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return false,
            Err(_) => {
                woken.rescan = true;
                return false;
            }
        };
        let mut count = 0;
        for event in events {
            count += 1;
            if event.mask.contains(EventMask::Q_OVERFLOW) {
                woken.rescan = true;
                continue;
            }
            if Some(&event.wd) == self.dir_wd.as_ref() {
                if event
                    .mask
                    .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED)
                {
                    woken.rescan = true;
                } else if let Some(name) = event.name.and_then(|n| n.to_str()) {
                    if !event.mask.contains(EventMask::MODIFY) {
                        woken.renamed.insert(name.to_owned());
                    }
                    woken.names.insert(name.to_owned());
                }
            } else if Some(&event.wd) == self.parent_wd.as_ref()
                && event
                    .name
                    .is_some_and(|n| Some(n) == self.dir_name.as_deref())
            {
                // The log folder itself, seen from its parent.
                woken.rescan = true;
            }
        }
        (count + 1) * MAX_EVENT <= self.buf.len()
    }
}

/// The most one event takes in a read: its header and the longest name with its end.
const MAX_EVENT: usize = 16 + 255 + 1;

/// Waits for the kernel's events (when there is a watch), the stop pipe, or `period`.
pub fn wait(kernel: Option<&mut KernelWatch>, stop: &OwnedFd, period: Option<Duration>) -> Woken {
    let mut woken = Woken::default();
    let timeout = period.map_or(PollTimeout::NONE, |p| {
        PollTimeout::try_from(p.as_millis().min(i32::MAX as u128) as i32)
            .unwrap_or(PollTimeout::MAX)
    });
    let ready = {
        let mut fds = vec![PollFd::new(stop.as_fd(), PollFlags::POLLIN)];
        if let Some(k) = kernel.as_ref() {
            fds.push(PollFd::new(k.inotify.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, timeout) {
            Ok(0) => {
                woken.timed_out = true;
                None
            }
            Ok(_) => Some(
                fds.iter()
                    .map(|f| f.any().unwrap_or(false))
                    .collect::<Vec<_>>(),
            ),
            // EINTR: look again at once.
            Err(_) => Some(vec![false, true]),
        }
    };
    if let Some(ready) = ready {
        if ready.first().copied().unwrap_or(false) {
            woken.stop = true;
        }
        if let Some(k) = kernel
            && ready.get(1).copied().unwrap_or(false)
        {
            k.drain(&mut woken);
        }
    }
    woken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_creations_and_the_folder_itself_are_heard() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("temp");
        std::fs::create_dir(&dir).expect("mkdir");
        let (stop_read, _stop_write) = nix::unistd::pipe().expect("pipe");
        let mut k = KernelWatch::start(&dir).expect("watch");
        std::fs::write(dir.join("task-01-status"), "a\n").expect("write");
        let w = wait(Some(&mut k), &stop_read, Some(Duration::from_secs(10)));
        assert!(w.names.contains("task-01-status"), "{w:?}");
        std::fs::remove_dir_all(&dir).expect("rm");
        let w = wait(Some(&mut k), &stop_read, Some(Duration::from_secs(10)));
        assert!(w.rescan, "{w:?}");
        let w = wait(Some(&mut k), &stop_read, Some(Duration::from_millis(1)));
        assert!(w.timed_out || w.rescan, "{w:?}");
    }

    #[test]
    fn the_stop_pipe_wakes_the_wait() {
        let (stop_read, stop_write) = nix::unistd::pipe().expect("pipe");
        nix::unistd::write(&stop_write, b"x").expect("write");
        assert!(wait(None, &stop_read, None).stop);
    }
}
