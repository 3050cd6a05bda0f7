//! What the poller guard remembers of a session between hook runs (each hook is a
//! process of its own): each subagent's looks so far (what each call did, written when
//! it ran), the subagents it stopped, the loops it saw but did not stop, the prompts it
//! caught polling, and the commands it named (which run without a prompt).
//!
//! One folder a session, `<data dir>/guard/<project key>/<session id>/`, owner-only.
//! Appends are one `write` each (`O_APPEND`), so subagents calling at once never
//! interleave; a symlink planted at a name is refused. Every failure reads as "nothing
//! remembered": the guard then refuses less, never more.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::hooks::replace::Replaced;
use crate::core::paths::{self, ProjectKey, is_safe_id as safe_id};
use crate::core::safe_fs;
use crate::core::sessions::deeds::State;
use crate::core::sessions::loops::Look;

/// The most of one ledger file read back.
const MAX_READ: u64 = 256 * 1024;
/// The most of a subagent's looks read back: the latest ones (about 1,500 calls).
const MAX_LOOKS_READ: u64 = 64 * 1024;

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

    /// The agent's latest looks, oldest first (`main`: the session's own calls).
    pub fn looks(&self, agent: &str) -> Vec<Look> {
        let Some(path) = self.file("looks", agent) else {
            return Vec::new();
        };
        let bytes = safe_fs::read_regular_tail(&path, MAX_LOOKS_READ).unwrap_or_default();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(parse_look)
            .collect()
    }

    pub fn add_look(&self, agent: &str, look: &Look) {
        if let Some(p) = self.file("looks", agent) {
            let _ = self.append(&p, format_look(look).as_bytes());
        }
    }

    /// Marks a loop seen but not stopped (no replacement, or the main session's own):
    /// once per agent, for `doctor` to report.
    pub fn saw_loop(&self, agent: &str, states: &[State]) {
        let seen = Self::read(&self.dir.join("seen"));
        let already = String::from_utf8_lossy(&seen)
            .lines()
            .any(|l| l.split(' ').next() == Some(agent));
        if !already && safe_id(agent) {
            let letters: String = states.iter().map(|s| s.letter()).collect();
            let _ = self.append(
                &self.dir.join("seen"),
                format!("{agent} {letters}\n").as_bytes(),
            );
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

    /// Remembers that the subagent started a monitor (only such a subagent's transcript
    /// is read at its session's notifications).
    pub fn add_monitor(&self, agent: &str) {
        if safe_id(agent) && !self.has_monitor(agent) {
            let _ = self.append(&self.dir.join("monitors"), format!("{agent}\n").as_bytes());
        }
    }

    /// Whether the subagent started a monitor.
    pub fn has_monitor(&self, agent: &str) -> bool {
        String::from_utf8_lossy(&Self::read(&self.dir.join("monitors")))
            .lines()
            .any(|l| l == agent)
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

/// One look as a line: call, result, start, then `L` (a look), `P` (progress) and the
/// state's letter.
fn format_look(l: &Look) -> String {
    let mut flags = String::new();
    if l.is_look {
        flags.push('L');
    }
    if l.progress {
        flags.push('P');
    }
    if let Some(s) = l.reads {
        flags.push(s.letter());
    }
    format!("{:016x} {:016x} {} {flags}-\n", l.call, l.result, l.at_ms)
}

/// A line a whole look was written as; a line cut short (the tail's first) is skipped.
fn parse_look(line: &str) -> Option<Look> {
    let mut parts = line.split(' ');
    let call = u64::from_str_radix(parts.next().filter(|p| p.len() == 16)?, 16).ok()?;
    let result = u64::from_str_radix(parts.next().filter(|p| p.len() == 16)?, 16).ok()?;
    let at_ms = parts.next()?.parse().ok()?;
    let flags = parts.next()?.strip_suffix('-')?;
    Some(Look {
        call,
        result,
        at_ms,
        reads: flags.chars().find_map(State::from_letter),
        is_look: flags.contains('L'),
        progress: flags.contains('P'),
    })
}

/// The loops seen but not stopped in every session of a project's guard folder (`dir`):
/// (session, agent, states read).
pub fn seen_loops(dir: &Path) -> Vec<(String, String, Vec<State>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let session = entry.file_name().to_string_lossy().into_owned();
        let bytes = Ledger::read(&entry.path().join("seen"));
        for line in String::from_utf8_lossy(&bytes).lines() {
            if let Some((agent, letters)) = line.split_once(' ') {
                let states = letters.chars().filter_map(State::from_letter).collect();
                out.push((session.clone(), agent.to_owned(), states));
            }
        }
    }
    out
}

/// A prompt's hash, its case and runs of whitespace aside.
pub fn prompt_hash(prompt: &str) -> u64 {
    paths::fnv1a(crate::core::sessions::loops::loose(prompt).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ledger_remembers_looks_stops_commands_and_catches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ledger = Ledger::at(&dir.path().join("s1"));
        assert!(ledger.looks("a1").is_empty());
        let a = Look {
            call: 1,
            result: u64::MAX,
            at_ms: 1_700_000_000_000,
            reads: Some(State::Comms),
            is_look: true,
            progress: false,
        };
        let b = Look {
            reads: None,
            is_look: false,
            progress: true,
            ..a
        };
        ledger.add_look("a1", &a);
        ledger.add_look("a1", &b);
        assert_eq!(ledger.looks("a1"), [a, b]);
        assert!(ledger.looks("a2").is_empty());
        // An id that is not one Claude Code gives names no file.
        ledger.add_look("../x", &a);
        assert!(ledger.looks("../x").is_empty());
        ledger.saw_loop("a1", &[State::Logs]);
        ledger.saw_loop("a1", &[State::Logs]);
        assert_eq!(
            seen_loops(dir.path()),
            [("s1".to_owned(), "a1".to_owned(), vec![State::Logs])]
        );
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
