//! A window whose session starts only when released: the window runs `maestro gate DIR
//! -- claude …`, which says it is ready (its PID in `DIR/ready`) and waits on the FIFO
//! `DIR/go` until maestro writes `go`; only then does it exec the session.
//!
//! So a relaunch proves the window first, writes its handoff while the new session
//! cannot yet read the database, and only then lets it start (docs/architecture.md,
//! "Prove, then commit"). A gate never released (maestro gave up, or died) exits after
//! [`GATE_PATIENCE`] without running anything.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::core::procs::ProcessId;

/// How long a gate waits to be released before it exits, running nothing.
pub const GATE_PATIENCE: Duration = Duration::from_secs(120);
/// The word that releases a gate.
const GO: &[u8] = b"go\n";

/// maestro's side of one gate: a private folder (owner-only) with the FIFO in it.
#[derive(Debug)]
pub struct Gate {
    dir: tempfile::TempDir,
}

/// What the gate in the window said so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateSays {
    Nothing,
    /// Ready: the gate's own process, waiting to be released.
    Ready(ProcessId),
    /// It will not run the session (its program is missing): why.
    Refused(String),
}

impl Gate {
    pub fn new() -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        // Owner-only, whatever the umask (tempfile's default is 0777 & ~umask): no one
        // else can plant `ready` or `refused`, or open `go`. Checked after, not trusted.
        let dir = tempfile::Builder::new()
            .prefix("maestro-gate-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        private_folder(dir.path())?;
        nix::unistd::mkfifo(&dir.path().join("go"), Mode::S_IRUSR | Mode::S_IWUSR)
            .map_err(std::io::Error::from)?;
        Ok(Self { dir })
    }

    /// The words that put the gate in front of a session's argv.
    pub fn argv(&self, maestro: &Path) -> Vec<String> {
        vec![
            maestro.display().to_string(),
            "gate".into(),
            self.dir.path().display().to_string(),
            "--".into(),
        ]
    }

    pub fn says(&self) -> GateSays {
        if private_folder(self.dir.path()).is_err() {
            return GateSays::Refused("its gate folder is no longer private".into());
        }
        let read = |name: &str| {
            crate::core::safe_fs::read_regular(&self.dir.path().join(name), 4096)
                .ok()
                .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        };
        if let Some(why) = read("refused") {
            return GateSays::Refused(why);
        }
        match read("ready").and_then(|p| p.parse::<i32>().ok()) {
            Some(pid) if crate::core::procs::is_alive(pid) => {
                GateSays::Ready(ProcessId::observe(pid))
            }
            _ => GateSays::Nothing,
        }
    }

    /// Lets the session start. An error: no gate listens any more (it exited).
    pub fn release(&self) -> std::io::Result<()> {
        let fifo = self.dir.path().join("go");
        // Non-blocking: with no reader the open fails (ENXIO) instead of hanging.
        let fd = nix::fcntl::open(
            &fifo,
            OFlag::O_WRONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        let mut file = std::fs::File::from(fd);
        file.write_all(GO)
    }
}

/// The window's side: `maestro gate DIR -- PROGRAM ARGS…`. Returns only on failure (the
/// exit code); on release the process becomes the session.
pub fn run_gate(dir: &Path, command: &[std::ffi::OsString]) -> i32 {
    if let Err(e) = private_folder(dir) {
        eprintln!(
            "maestro: the gate folder {} is refused ({e}); nothing was started",
            dir.display()
        );
        return 1;
    }
    let Some((program, args)) = command.split_first() else {
        let _ = say(dir, "refused", "no command after --");
        return 2;
    };
    // The session's program, not `env` in front of it: a missing claude is refused here.
    let words: Vec<String> = command
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let name = crate::core::windows::launched_word(&words)
        .unwrap_or_default()
        .to_owned();
    if find_program(&name).is_none() {
        let _ = say(
            dir,
            "refused",
            &format!("{name} was not found on PATH in the new window"),
        );
        return 127;
    }
    let fifo = dir.join("go");
    // Opened before `ready` is said, so a release can never find no reader.
    let Ok(fd) = nix::fcntl::open(
        &fifo,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) else {
        return 1;
    };
    if say(dir, "ready", &std::process::id().to_string()).is_err() {
        return 1;
    }
    let mut file = std::fs::File::from(fd);
    if !released(&mut file) {
        eprintln!("maestro did not release this window; nothing was started");
        return 1;
    }
    let err = std::process::Command::new(program).args(args).exec();
    eprintln!("cannot start {name}: {err}");
    127
}

/// Waits for the release word, up to [`GATE_PATIENCE`].
fn released(file: &mut std::fs::File) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let deadline = std::time::Instant::now() + GATE_PATIENCE;
    let mut got = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return false;
        }
        let ms = u16::try_from(left.as_millis().min(10_000)).unwrap_or(10_000);
        let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
            Ok(_) => {}
        }
        let mut buf = [0u8; 16];
        match file.read(&mut buf) {
            // A writer came and went without the word: not a release.
            Ok(0) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return false,
        }
        if got.len() >= GO.len() {
            return got.starts_with(GO);
        }
    }
}

/// Whether `dir` is a folder (not a link) of this user's that no one else may enter:
/// the gate's two sides trust what is in it only then.
fn private_folder(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = dir.symlink_metadata()?;
    let uid = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::other(format!(
            "it must be a folder of uid {uid} with mode 0700; it is {}, uid {}, mode {:o}",
            if meta.is_dir() {
                "a folder"
            } else {
                "not a folder"
            },
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Writes `name` in the gate's folder whole (a temporary file, then a rename).
fn say(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    let tmp: PathBuf = dir.join(format!(".{name}.{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, dir.join(name))
}

/// Finds a program the way `execvp` would (a name with a slash is a path).
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Path::new(name).is_file().then(|| PathBuf::from(name));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}
