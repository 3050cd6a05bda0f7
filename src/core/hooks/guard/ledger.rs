//! What the poller guard remembers of a session between hook runs (each hook is a
//! process of its own): each subagent's calls so far, the subagents it stopped, the
//! prompts it caught polling, and the commands it named (which run without a prompt).
//!
//! One folder a session, `<data dir>/guard/<project key>/<session id>/`, owner-only.
//! Appends are one `write` each (`O_APPEND`), so subagents calling at once never
//! interleave; a symlink planted at a name is refused. Every failure reads as "nothing
//! remembered": the guard then refuses less, never more.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::hooks::deeds::Deed;
use crate::core::hooks::replace::Replaced;
use crate::core::paths::{self, ProjectKey};
use crate::core::safe_fs;

/// The most of one ledger file read back (a subagent's calls, one byte each).
const MAX_READ: u64 = 256 * 1024;

/// A prompt caught polling, and the refusal it earned (given again at its next launch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caught {
    pub prompt_hash: u64,
    pub replaced: Replaced,
    pub reason: String,
}

/// One session's ledger.
pub struct Ledger {
    dir: PathBuf,
}

/// An id Claude Code gives (a session's, a subagent's), safe as a file name.
fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Ledger {
    /// The ledger of `session` in `project`; `None` when the id is not one Claude Code
    /// gives or maestro has no data folder.
    pub fn of(project: &ProjectKey, session: &str) -> Option<Self> {
        safe_id(session).then_some(())?;
        let dir = paths::data_dir()?
            .join("guard")
            .join(&project.key)
            .join(session);
        Some(Self { dir })
    }

    #[cfg(test)]
    pub fn at(dir: &Path) -> Self {
        Self {
            dir: dir.to_path_buf(),
        }
    }

    fn file(&self, name: &str, agent: &str) -> Option<PathBuf> {
        safe_id(agent).then(|| self.dir.join(format!("{name}-{agent}")))
    }

    fn read(path: &Path) -> Vec<u8> {
        safe_fs::read_regular(path, MAX_READ).unwrap_or_default()
    }

    /// The session's folder, made owner-only when it is new (a new session's first
    /// entry forgets the week-old ones).
    fn make_dir(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        if self.dir.is_dir() {
            return Ok(());
        }
        self.forget_old_sessions();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
    }

    fn append(&self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        self.make_dir()?;
        let written = (&safe_fs::open_append(path, 0o600)?).write(bytes)?;
        if written < bytes.len() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "cut short",
            ));
        }
        Ok(())
    }

    /// A new session's first entry: the ledgers of sessions untouched for a week go
    /// (a session's subagents live minutes to hours), so the folder stays small.
    fn forget_old_sessions(&self) {
        let Some(project) = self.dir.parent() else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(project) else {
            return;
        };
        let week = std::time::Duration::from_secs(7 * 24 * 3600);
        for entry in entries.flatten() {
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > week);
            // `file_type` does not follow links: a link planted here is left alone.
            if old && entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }

    /// The subagent's calls so far, oldest first.
    pub fn calls(&self, agent: &str) -> Vec<Deed> {
        self.file("calls", agent)
            .map(|p| Self::read(&p))
            .unwrap_or_default()
            .into_iter()
            .map(Deed::from_letter)
            .collect()
    }

    pub fn add_call(&self, agent: &str, deed: Deed) {
        if let Some(p) = self.file("calls", agent) {
            let _ = self.append(&p, &[deed.letter()]);
        }
    }

    /// The reason given when the subagent was stopped, if it was.
    pub fn stopped(&self, agent: &str) -> Option<String> {
        let text = String::from_utf8(Self::read(&self.file("stopped", agent)?)).ok()?;
        (!text.is_empty()).then_some(text)
    }

    /// Marks the subagent stopped: every later call of it gets `reason`.
    pub fn stop(&self, agent: &str, reason: &str) {
        if let Some(p) = self.file("stopped", agent)
            && self.make_dir().is_ok()
        {
            let _ = safe_fs::write_atomic(&p, reason.as_bytes(), 0o600);
        }
    }

    /// Whether `command` is one the guard named to this session: byte for byte, but for
    /// spaces, tabs and newlines around it (never `trim()`: bash keeps `\v`, `\f` and
    /// NBSP as part of a word, so `\vmaestro` is another program).
    pub fn is_allowed(&self, command: &str) -> bool {
        let all = Self::read(&self.dir.join("allowed"));
        let command = command.trim_matches([' ', '\t', '\n']);
        !command.is_empty()
            && all
                .split(|b| *b == b'\n')
                .any(|line| line == command.as_bytes())
    }

    /// Lets `command` (one line) run in this session without a permission prompt.
    pub fn allow(&self, command: &str) {
        if command.contains('\n') || self.is_allowed(command) {
            return;
        }
        let _ = self.append(&self.dir.join("allowed"), format!("{command}\n").as_bytes());
    }

    /// The refusal a prompt earned when it was caught polling in this session.
    pub fn caught(&self, prompt_hash: u64) -> Option<Caught> {
        Self::read(&self.dir.join("caught"))
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<Caught>(line).ok())
            .find(|c| c.prompt_hash == prompt_hash)
    }

    pub fn add_caught(&self, caught: &Caught) {
        if self.caught(caught.prompt_hash).is_some() {
            return;
        }
        if let Ok(mut line) = serde_json::to_vec(caught) {
            line.insert(0, b'\n');
            line.push(b'\n');
            let _ = self.append(&self.dir.join("caught"), &line);
        }
    }
}

/// A prompt's hash, its case and runs of whitespace aside.
pub fn prompt_hash(prompt: &str) -> u64 {
    let loose = prompt
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    paths::fnv1a(loose.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hooks::deeds::State;

    #[test]
    fn a_ledger_remembers_calls_stops_commands_and_catches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = Ledger::at(&dir.path().join("s1"));
        assert!(ledger.calls("a1").is_empty());
        ledger.add_call("a1", Deed::Wait);
        ledger.add_call("a1", Deed::Read(State::Comms));
        assert_eq!(ledger.calls("a1"), [Deed::Wait, Deed::Read(State::Comms)]);
        assert!(ledger.calls("a2").is_empty());
        // An id that is not one Claude Code gives names no file.
        ledger.add_call("../x", Deed::Wait);
        assert!(ledger.calls("../x").is_empty());
        assert_eq!(ledger.stopped("a1"), None);
        ledger.stop("a1", "stop now");
        assert_eq!(ledger.stopped("a1").as_deref(), Some("stop now"));
        assert!(!ledger.is_allowed("maestro musician watch task-03"));
        ledger.allow("maestro musician watch task-03");
        assert!(ledger.is_allowed(" maestro musician watch task-03 "));
        assert!(!ledger.is_allowed("maestro musician watch task-03; rm -rf ~"));
        assert!(ledger.is_allowed("\tmaestro musician watch task-03\n"));
        // What bash keeps as part of a word is another program.
        for odd in ["\u{b}", "\u{c}", "\u{a0}", "\r", "\u{2028}"] {
            let planted = format!("{odd}maestro musician watch task-03");
            assert!(!ledger.is_allowed(&planted), "{planted:?}");
        }
        ledger.allow("a\nb");
        assert!(!ledger.is_allowed("a"));
        let caught = Caught {
            prompt_hash: prompt_hash("Watch  the DB"),
            replaced: Replaced {
                role: "musician-watcher".into(),
                task_id: Some("task-03".into()),
                command: None,
                at: None,
            },
            reason: "r".into(),
        };
        ledger.add_caught(&caught);
        assert_eq!(ledger.caught(prompt_hash("watch the db")), Some(caught));
        assert_eq!(ledger.caught(prompt_hash("something else")), None);
    }
}
