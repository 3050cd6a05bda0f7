//! Every name maestro gives a file of its own: its data directory, the project key,
//! lock files, control sockets, the pipeline definitions folder, trimmed exports, the
//! hold flag. Nobody else joins these names.
//!
//! Sockets live where sockets belong: `$XDG_RUNTIME_DIR/maestro/`, else a per-user
//! `maestro-<uid>` folder in the temp dir that maestro creates with mode 0700 and
//! checks the owner of. A Unix socket path must fit in `sun_path` (108 bytes with its
//! NUL), so when a long folder would overflow it the name shrinks to a short hash, and
//! when even that does not fit, `/tmp/maestro-<uid>` is used.

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The longest socket path `bind` accepts on Linux (`sun_path` is 108 bytes with NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Which of maestro's per-project services a lock or socket belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// The exclusive Souffleur role (`maestro conductor …` talks to it).
    Souffleur,
    /// The pipeline host (`maestro sentinel …` talks to it).
    Pipelines,
    /// kitty windows maestro opens (their remote-control sockets, one per kitty).
    Kitty,
    /// maestros whose Sentinel reports to the project's database (each holds the lock
    /// shared; `maestro hook` asks whether anyone holds it).
    Reporter,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Self::Souffleur => "souffleur",
            Self::Pipelines => "pipelines",
            Self::Kitty => "kitty",
            Self::Reporter => "reporter",
        }
    }
}

/// A project folder, canonicalised, and the stable key its files are named by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectKey {
    pub root: PathBuf,
    pub key: String,
}

impl ProjectKey {
    /// The key is the first 128 bits of the canonical path's SHA-256, in hex: stable
    /// across processes (two maestros of one project meet at one lock), and no other
    /// folder can be made to share a project's trust, journal or guard (FNV-1a, the key
    /// before, could be collided on purpose).
    pub fn of(project: &Path) -> Self {
        use sha2::{Digest, Sha256};
        let root = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
        let mut key = format!("{:x}", Sha256::digest(root.as_os_str().as_encoded_bytes()));
        key.truncate(32);
        Self { root, key }
    }

    /// The key maestro gave this project before (a 64-bit FNV-1a hash of the same path),
    /// under which an older maestro kept its folders.
    fn legacy(&self) -> String {
        format!("{:016x}", fnv1a(self.root.as_os_str().as_encoded_bytes()))
    }
}

/// The project's files kept under its old key by an earlier maestro (journal, guard
/// records, watchers, windows, trust, holds, spool), renamed to its key when the new
/// name is free: a cursor, a trust and a hold survive the change of key. Nothing is
/// overwritten, and a file the move cannot reach stays where it is.
pub fn carry_over_legacy_key(project: &ProjectKey) {
    let Some(data) = data_dir() else { return };
    let old = project.legacy();
    let places = [
        ("events", ""),
        ("guard", ""),
        ("watchers", ""),
        ("windows", ""),
        ("trust", ".json"),
        ("holds", ".hold"),
        ("hooks", ".jsonl"),
    ];
    for (folder, suffix) in places {
        let from = data.join(folder).join(format!("{old}{suffix}"));
        let to = data.join(folder).join(format!("{}{suffix}", project.key));
        if std::fs::symlink_metadata(&from).is_ok() && std::fs::symlink_metadata(&to).is_err() {
            let _ = std::fs::rename(&from, &to);
        }
    }
}

/// Whether an id Claude Code gives (a session's, a subagent's, a background task's) is
/// safe as a file name: 1 to 128 ASCII letters, digits, `-` and `_`, nothing that could
/// climb out of a folder.
pub fn is_safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// 64-bit FNV-1a: a hash whose value never changes with the Rust version (file names
/// and the told ledger are read back by later maestros).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Why one of maestro's own file names cannot be given: each says the fix.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("cannot find maestro's data directory: set HOME (or XDG_DATA_HOME) and try again.")]
    NoDataDir,
    #[error("cannot create {} ({source}).", .dir.display())]
    Create { dir: PathBuf, source: io::Error },
    #[error("cannot read {} ({source}).", .dir.display())]
    Read { dir: PathBuf, source: io::Error },
    #[error("{} is not a folder; remove it so maestro can keep its sockets there.", .dir.display())]
    NotAFolder { dir: PathBuf },
    #[error(
        "{} belongs to uid {owner}, not to you (uid {uid}); another user could reach maestro's sockets there. Remove it or set XDG_RUNTIME_DIR.",
        .dir.display()
    )]
    NotYours { dir: PathBuf, owner: u32, uid: u32 },
    #[error("cannot make {} private ({source}).", .dir.display())]
    MakePrivate { dir: PathBuf, source: io::Error },
    #[error(
        "{} {why}, so another user could plant files there that maestro would obey (an allowed command, a journal, a trust record); maestro keeps nothing there. Fix: make it yours and not writable by others, or set XDG_DATA_HOME to a folder of your own.",
        .dir.display()
    )]
    Unsafe { dir: PathBuf, why: String },
    #[error(
        "no folder gives a socket path shorter than {} bytes; set XDG_RUNTIME_DIR to a short folder such as /run/user/{uid}.",
        MAX_SOCKET_PATH + 1
    )]
    NoShortSocketPath { uid: u32 },
    #[error(
        "{} leaves no room for kitty's pid in a socket path; set XDG_RUNTIME_DIR to a short folder",
        .base.display()
    )]
    NoRoomForPid { base: PathBuf },
    #[error("cannot listen on {}: {source}", .path.display())]
    Listen { path: PathBuf, source: io::Error },
    #[error("cannot make {} private: {source}", .path.display())]
    SocketPrivate { path: PathBuf, source: io::Error },
}

/// maestro's own data directory (locks, trimmed exports, hold flags), when it is private
/// to this user: `None` otherwise, so whatever reads it (the hook above all) reads
/// nothing there and obeys nothing planted.
pub fn data_dir() -> Option<PathBuf> {
    data_dir_or_err().ok()
}

/// [`data_dir`], or why it cannot be used, with the fix.
pub fn data_dir_or_err() -> Result<PathBuf, PathError> {
    let dir = directories::ProjectDirs::from("", "", "maestro")
        .map(|d| d.data_dir().to_path_buf())
        .ok_or(PathError::NoDataDir)?;
    private_chain(&dir)?;
    Ok(dir)
}

/// A folder only this user (and root) can change: every existing folder above it owned by
/// this user or root, and writable by others only where sticky (as `/tmp`); the folder
/// itself, when it exists, this user's and not a link (made private when it is not).
/// Anyone else able to write there could plant an `allowed` command, a journal or a
/// trust file that maestro would obey.
fn private_chain(dir: &Path) -> Result<(), PathError> {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let unsafe_dir = |at: &Path, why: String| PathError::Unsafe {
        dir: at.to_path_buf(),
        why,
    };
    for above in dir.ancestors().skip(1) {
        let Ok(meta) = std::fs::metadata(above) else {
            continue;
        };
        if meta.uid() != uid && meta.uid() != 0 {
            return Err(unsafe_dir(
                above,
                format!("belongs to uid {}, not to you (uid {uid})", meta.uid()),
            ));
        }
        let mode = meta.permissions().mode();
        // Group-writable is this user's alone where the group is the user's own (the
        // private-group convention of `umask 002` systems).
        let others_write = mode & 0o002 != 0 || (mode & 0o020 != 0 && meta.gid() != gid);
        if others_write && mode & 0o1000 == 0 {
            return Err(unsafe_dir(
                above,
                format!("is writable by other users (mode {:o})", mode & 0o7777),
            ));
        }
    }
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return Ok(());
    };
    if !meta.is_dir() {
        return Err(unsafe_dir(dir, "is not a folder (a link or a file)".into()));
    }
    if meta.uid() != uid {
        return Err(unsafe_dir(
            dir,
            format!("belongs to uid {}, not to you (uid {uid})", meta.uid()),
        ));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |source| PathError::MakePrivate {
                dir: dir.to_path_buf(),
                source,
            },
        )?;
    }
    Ok(())
}

/// Where a service's exclusive lock for a project lives.
pub fn lock_file(service: Service, project: &ProjectKey) -> Result<PathBuf, PathError> {
    Ok(data_dir_or_err()?
        .join("locks")
        .join(format!("{}-{}.lock", service.name(), project.key)))
}

/// Where trimmed transcript exports are written.
pub fn exports_dir() -> Result<PathBuf, PathError> {
    Ok(data_dir_or_err()?.join("exports"))
}

/// The file whose presence means "the operator holds recoveries" for a project.
pub fn hold_file(project: &ProjectKey) -> Result<PathBuf, PathError> {
    Ok(data_dir_or_err()?
        .join("holds")
        .join(format!("{}.hold", project.key)))
}

/// The folder of a project's Musician watchers: one file per task and mode, holding
/// the live watcher's PID (empty when none), locked by that watcher.
pub fn watchers_dir(project: &ProjectKey) -> Result<PathBuf, PathError> {
    Ok(data_dir_or_err()?.join("watchers").join(&project.key))
}

/// `<watchers dir>/<task>.<mode>` (`background` or `pause`).
pub fn watcher_file(project: &ProjectKey, task: &str, mode: &str) -> Result<PathBuf, PathError> {
    Ok(watchers_dir(project)?.join(format!("{task}.{mode}")))
}

/// The files of a project's event log (see `core::replay`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLogFiles {
    /// Being written: `events.jsonl`.
    pub current: PathBuf,
    /// The previous file, kept after a rotation: `events.1.jsonl`.
    pub previous: PathBuf,
    /// Held by the one maestro that records the project.
    pub lock: PathBuf,
    /// What every maestro of the project has told: the journal (see `core::told`).
    pub journal: PathBuf,
}

/// `<data dir>/events/<project key>/`: where maestro records what a project told it.
pub fn event_log(project: &ProjectKey) -> Result<EventLogFiles, PathError> {
    let dir = data_dir_or_err()?.join("events").join(&project.key);
    Ok(EventLogFiles {
        current: dir.join("events.jsonl"),
        previous: dir.join("events.1.jsonl"),
        lock: dir.join("events.lock"),
        journal: dir.join("journal.tsv"),
    })
}

/// `<data dir>/trust/<project key>.json`: the pipeline definitions the operator trusts
/// in a project, by content hash.
pub fn trust_file(project: &ProjectKey) -> Result<PathBuf, PathError> {
    Ok(data_dir_or_err()?
        .join("trust")
        .join(format!("{}.json", project.key)))
}

/// `<project>/.maestro/sentinels`: the pipeline definitions.
pub fn definitions_dir(project: &Path) -> PathBuf {
    project.join(".maestro").join("sentinels")
}

/// Where a service of a project listens. Creates (and checks) the socket folder.
pub fn socket_path(service: Service, project: &ProjectKey) -> Result<PathBuf, PathError> {
    socket_path_in(
        std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
        &std::env::temp_dir(),
        service,
        project,
    )
}

/// [`socket_path`] with the environment passed in, for tests.
pub fn socket_path_in(
    runtime_dir: Option<PathBuf>,
    temp_dir: &Path,
    service: Service,
    project: &ProjectKey,
) -> Result<PathBuf, PathError> {
    let uid = rustix::process::getuid().as_raw();
    let mut candidates = Vec::new();
    if let Some(run) = runtime_dir.filter(|d| d.is_absolute() && d.is_dir()) {
        candidates.push(run.join("maestro"));
    }
    candidates.push(temp_dir.join(format!("maestro-{uid}")));
    candidates.push(PathBuf::from(format!("/tmp/maestro-{uid}")));
    let long = format!("{}-{}.sock", service.name(), project.key);
    let short = format!("{}{}.sock", &service.name()[..1], &project.key[..12]);
    let mut last_problem = None;
    for dir in candidates {
        for name in [&long, &short] {
            let path = dir.join(name);
            if path.as_os_str().len() > MAX_SOCKET_PATH {
                continue;
            }
            match private_dir(&dir, uid) {
                Ok(()) => return Ok(path),
                Err(e) => {
                    last_problem = Some(e);
                    break;
                }
            }
        }
    }
    Err(last_problem.unwrap_or(PathError::NoShortSocketPath { uid }))
}

/// What is wrong with the socket folders maestro would use, looked at without creating
/// or changing anything (for `doctor`): one another user owns, one others may enter, a
/// file in a folder's place.
pub fn socket_dir_problems() -> Vec<String> {
    let uid = rustix::process::getuid().as_raw();
    let mut dirs = Vec::new();
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && run.is_absolute()
    {
        dirs.push(run.join("maestro"));
    }
    dirs.push(std::env::temp_dir().join(format!("maestro-{uid}")));
    dirs.push(PathBuf::from(format!("/tmp/maestro-{uid}")));
    dirs.dedup();
    dirs.iter()
        .filter_map(|dir| {
            let meta = std::fs::symlink_metadata(dir).ok()?;
            if !meta.is_dir() {
                Some(format!("{} is not a folder; remove it so maestro can keep its sockets there", dir.display()))
            } else if meta.uid() != uid {
                Some(format!(
                    "{} belongs to uid {}, not to you (uid {uid}): maestro will not keep sockets there, so kitty windows it opens cannot be focused; remove it or set XDG_RUNTIME_DIR",
                    dir.display(),
                    meta.uid()
                ))
            } else if meta.mode() & 0o077 != 0 {
                Some(format!(
                    "{} is mode {:o}; maestro makes it 0700 when it next opens a socket there",
                    dir.display(),
                    meta.mode() & 0o777
                ))
            } else {
                None
            }
        })
        .collect()
}

/// Creates `dir` with mode 0700 if missing; refuses one another user owns or can enter.
fn private_dir(dir: &Path, uid: u32) -> Result<(), PathError> {
    let at = || dir.to_path_buf();
    if let Err(source) = std::fs::create_dir(dir)
        && source.kind() != io::ErrorKind::AlreadyExists
    {
        return Err(PathError::Create { dir: at(), source });
    }
    let meta =
        std::fs::symlink_metadata(dir).map_err(|source| PathError::Read { dir: at(), source })?;
    if !meta.is_dir() {
        return Err(PathError::NotAFolder { dir: at() });
    }
    if meta.uid() != uid {
        return Err(PathError::NotYours {
            dir: at(),
            owner: meta.uid(),
            uid,
        });
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|source| PathError::MakePrivate { dir: at(), source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_folder_under_a_folder_others_can_write_is_refused_unless_sticky() {
        use std::os::unix::fs::PermissionsExt;
        let top = tempfile::tempdir().expect("tempdir");
        let shared = top.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        let data = shared.join("maestro");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        assert!(matches!(
            private_chain(&data),
            Err(PathError::Unsafe { .. })
        ));
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        assert!(private_chain(&data).is_ok(), "sticky, as /tmp");
        std::fs::create_dir(&data).expect("mkdir");
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        assert!(private_chain(&data).is_ok());
        let mode = std::fs::metadata(&data).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "our own folder made private");
    }

    fn project() -> ProjectKey {
        ProjectKey {
            root: PathBuf::from("/p"),
            key: "0123456789abcdef".into(),
        }
    }

    #[test]
    fn the_key_is_stable_and_names_the_canonical_folder() {
        let a = ProjectKey::of(Path::new("/nonexistent/project"));
        assert_eq!(a, ProjectKey::of(Path::new("/nonexistent/project")));
        assert_eq!(a.key.len(), 32);
        assert_ne!(a.key, ProjectKey::of(Path::new("/nonexistent/other")).key);
    }

    #[test]
    fn sockets_go_to_the_runtime_dir_when_there_is_one() {
        let run = tempfile::tempdir().expect("tempdir");
        let tmp = tempfile::tempdir().expect("tempdir");
        let p = socket_path_in(
            Some(run.path().to_path_buf()),
            tmp.path(),
            Service::Souffleur,
            &project(),
        )
        .expect("path");
        assert_eq!(
            p,
            run.path().join("maestro/souffleur-0123456789abcdef.sock")
        );
        let mode = std::fs::metadata(run.path().join("maestro"))
            .expect("dir")
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn a_deep_folder_gives_a_short_path_that_fits() {
        let base = tempfile::tempdir().expect("tempdir");
        let deep = base.path().join("x".repeat(60)).join("y".repeat(60));
        std::fs::create_dir_all(&deep).expect("mkdir");
        let p = socket_path_in(Some(deep.clone()), &deep, Service::Pipelines, &project())
            .expect("path");
        assert!(p.as_os_str().len() <= MAX_SOCKET_PATH, "{}", p.display());
        let uid = rustix::process::getuid().as_raw();
        assert!(
            p.starts_with(format!("/tmp/maestro-{uid}")),
            "{}",
            p.display()
        );
    }

    #[test]
    fn a_folder_open_to_others_is_made_private() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let uid = rustix::process::getuid().as_raw();
        let dir = tmp.path().join(format!("maestro-{uid}"));
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        socket_path_in(None, tmp.path(), Service::Souffleur, &project()).expect("path");
        assert_eq!(std::fs::metadata(&dir).expect("dir").mode() & 0o777, 0o700);
    }

    #[test]
    fn a_folder_another_user_owns_is_refused() {
        if rustix::process::getuid().as_raw() != 0 {
            eprintln!("skipped: needs root to give a folder to another user");
            return;
        }
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("maestro-0");
        std::fs::create_dir(&dir).expect("mkdir");
        std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown");
        let err = private_dir(&dir, 0).expect_err("refused").to_string();
        assert!(err.contains("belongs to uid 65534"), "{err}");
        // The squatted folder is passed over, never used.
        if let Ok(p) = socket_path_in(None, tmp.path(), Service::Souffleur, &project()) {
            assert!(!p.starts_with(&dir), "{}", p.display());
        }
    }
}
