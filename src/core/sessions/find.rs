//! From a task to its Claude Code sessions (docs/sessions.md "From a task to its session"),
//! in order of trust:
//! 1. the running-session file of a `claude` process below the task's window PID;
//! 2. a transcript whose `cwd` is the project and whose first prompt names the task;
//! 3. the session id the database holds for the task (`session_id`; for the Conductor,
//!    the `SESSION_ID` the Souffleur was given).
//!
//! A relaunched Musician (S2, S3 …) is a new session of the same task: every session
//! found is kept, oldest first. Transcripts are found by session id under
//! `<claude dir>/projects/*/`, never by guessing the folder's slug.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::core::safe_fs;

/// How much of a transcript's beginning is read to learn its session, `cwd` and first
/// prompt.
const HEAD_BYTES: u64 = 256 * 1024;

/// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub fn claude_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".claude"))
}

/// What the beginning of one transcript says.
#[derive(Debug, Clone)]
pub struct Transcript {
    pub path: PathBuf,
    pub session_id: String,
    pub cwd: Option<String>,
    pub first_prompt: Option<String>,
    pub started: Option<String>,
}

/// The main transcripts under `<claude dir>/projects/*/` (subagents' `agent-*` files
/// belong to their parent session and are not sessions of their own), by session id.
pub fn transcripts(claude: &Path) -> BTreeMap<String, Transcript> {
    let mut out = BTreeMap::new();
    let Ok(folders) = std::fs::read_dir(claude.join("projects")) else {
        return out;
    };
    for folder in folders.flatten() {
        let Ok(files) = std::fs::read_dir(folder.path()) else {
            continue;
        };
        for f in files.flatten() {
            let path = f.path();
            let name = f.file_name().to_string_lossy().into_owned();
            if !is_jsonl(&path) || name.starts_with("agent-") {
                continue;
            }
            if let Some(t) = head(&path) {
                out.insert(t.session_id.clone(), t);
            }
        }
    }
    out
}

/// Reads a transcript's first lines (no link followed, nothing blocking, at most
/// [`HEAD_BYTES`], stopping as soon as the session, `cwd` and first prompt are known).
pub fn head(path: &Path) -> Option<Transcript> {
    use std::io::BufRead;
    let (file, _) = safe_fs::open_regular(path).ok()?;
    let mut reader = std::io::BufReader::new(std::io::Read::take(file, HEAD_BYTES));
    let stem = path.file_stem()?.to_string_lossy().into_owned();
    let mut t = Transcript {
        path: path.to_path_buf(),
        session_id: stem,
        cwd: None,
        first_prompt: None,
        started: None,
    };
    let mut named = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if !named && let Some(id) = v["sessionId"].as_str() {
            id.clone_into(&mut t.session_id);
            named = true;
        }
        if t.cwd.is_none() {
            t.cwd = v["cwd"].as_str().map(str::to_owned);
        }
        if t.started.is_none() {
            t.started = v["timestamp"].as_str().map(str::to_owned);
        }
        if t.first_prompt.is_none()
            && v["type"] == "user"
            && !v["isSidechain"].as_bool().unwrap_or(false)
            && let Some(text) = v["message"]["content"].as_str()
        {
            t.first_prompt = Some(text.chars().take(4000).collect());
        }
        if t.cwd.is_some() && t.first_prompt.is_some() && t.started.is_some() {
            break;
        }
    }
    Some(t)
}

/// Whether a transcript's `cwd` is the project or a folder inside it.
pub fn in_project(cwd: &str, project: &Path) -> bool {
    Path::new(cwd).starts_with(project)
}

/// The subagents' files that may belong to the session of `transcript`, in both layouts
/// (docs/sessions.md): Claude Code 2.1's `<slug>/<session id>/subagents/agent-*.jsonl`
/// and the older `agent-*.jsonl` beside the session's file (that folder holds every
/// session of the project: a reader keeps only the files whose lines name this session).
/// Sorted, so totals are added in one order.
pub fn subagent_files(transcript: &Path, session_id: &str) -> Vec<PathBuf> {
    let agents_in = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                is_jsonl(p)
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("agent-"))
            })
            .collect()
    };
    let Some(dir) = transcript.parent() else {
        return Vec::new();
    };
    let mut files = agents_in(dir);
    // A session id names a folder only when it is one plain name.
    if !session_id.is_empty() && !session_id.contains(['/', '\\']) && session_id != ".." {
        files.extend(agents_in(&dir.join(session_id).join("subagents")));
    }
    files.sort();
    files
}

/// A transcript's extension (Claude Code writes `.jsonl`).
pub fn is_jsonl(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
}

/// A task id as a prompt writes it.
static TASK_WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"task-\d+(?:-fix|-S\d+)?").expect("static regex"));

/// Whether a prompt names the task as a word (`task-03` is not named by `task-03-fix`).
pub fn names_task(prompt: &str, task: &str) -> bool {
    TASK_WORD.find_iter(prompt).any(|m| {
        let end = prompt[m.end()..].chars().next();
        m.as_str() == task && !end.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_')
    })
}

/// The one task a session's first prompt launches it for: the launch command it starts
/// with ([`task_by_command`]); a prompt with none (a relaunch's own words) is the first
/// Musician task it names. A prompt that speaks of a launch command mid-sentence
/// ("then run /musician task-01") launches nothing, and naming task-00 in words never
/// makes a Conductor.
pub fn launch_task(prompt: &str) -> Option<String> {
    if let Some(task) = task_by_command(prompt) {
        return Some(task);
    }
    if MENTIONED_COMMAND.is_match(prompt) {
        return None;
    }
    TASK_WORD
        .find_iter(prompt)
        .filter(|m| m.as_str() != crate::core::domain::CONDUCTOR_ID)
        .find(|m| names_task(prompt, m.as_str()))
        .map(|m| m.as_str().to_owned())
}

/// A launch command anywhere in a prompt, as a word.
static MENTIONED_COMMAND: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s>(`'\x22])/(musician|conductor|souffleur)(?:$|[^\w/-])")
        .expect("static regex")
});

/// The task a prompt's launch command names: `/musician task-NN`, `/conductor` (task-00)
/// or `/souffleur`, the prompt's first word (a period or comma may follow a role:
/// `/conductor.`), or Claude Code's expansion of a slash command (`<command-name>`), which
/// no one types. A command spoken of mid-sentence, or a path through a `conductor`
/// folder, names no role. The guard and `maestro usage` tie a session by this one rule.
pub fn task_by_command(prompt: &str) -> Option<String> {
    static AT_START: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*/(?:musician\s+(task-\d+(?:-fix|-S\d+)?)(?:$|[^\w-])|(conductor|souffleur)(?:$|[\s.,;:!?]))")
            .expect("static regex")
    });
    static EXPANDED: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"<command-name>/(musician|conductor|souffleur)</command-name>(?:\s*<command-args>\s*(task-\d+(?:-fix|-S\d+)?)\b)?")
            .expect("static regex")
    });
    let role = |name: &str| match name {
        "conductor" => Some(crate::core::domain::CONDUCTOR_ID.to_owned()),
        "souffleur" => Some(crate::core::domain::SOUFFLEUR_ID.to_owned()),
        _ => None,
    };
    if let Some(c) = AT_START.captures(prompt) {
        return match (c.get(1), c.get(2)) {
            (Some(task), _) => Some(task.as_str().to_owned()),
            (None, Some(name)) => role(name.as_str()),
            _ => None,
        };
    }
    let c = EXPANDED.captures(prompt)?;
    match &c[1] {
        "musician" => c.get(2).map(|t| t.as_str().to_owned()),
        name => role(name),
    }
}

/// A task as the database knows it.
#[derive(Debug, Clone)]
pub struct TaskFacts {
    pub task_id: String,
    pub session_id: Option<String>,
    pub started_at: Option<String>,
    /// Its state, when known (a task still `watching` has no session yet).
    pub state: Option<String>,
    /// The sessions Claude Code's hooks tied to it (trusted before every rule).
    pub hook_sessions: Vec<String>,
}

/// One session of a task and how it was found.
#[derive(Debug, Clone)]
pub struct Found {
    pub task_id: String,
    pub transcript: Transcript,
    /// `hook` (Claude Code's hooks said so), `process`, `transcript` or `database`
    /// (rules 1, 2, 3).
    pub rule: &'static str,
}

/// Every session found for each task, oldest first; and, for a task with none, why.
pub fn sessions_of(
    project: &Path,
    temp: &Path,
    tasks: &[TaskFacts],
    claude: &Path,
) -> (Vec<Found>, Vec<(String, String)>) {
    match_tasks(project, temp, tasks, claude, &transcripts(claude))
}

/// [`sessions_of`] with the transcripts already indexed by session id.
pub fn match_tasks(
    project: &Path,
    temp: &Path,
    tasks: &[TaskFacts],
    claude: &Path,
    index: &BTreeMap<String, Transcript>,
) -> (Vec<Found>, Vec<(String, String)>) {
    let mut found: Vec<Found> = Vec::new();
    let mut missing = Vec::new();
    for task in tasks {
        let mut mine: Vec<Found> = Vec::new();
        let mut add = |t: &Transcript, rule: &'static str| {
            if !mine.iter().any(|f| f.transcript.session_id == t.session_id) {
                mine.push(Found {
                    task_id: task.task_id.clone(),
                    transcript: t.clone(),
                    rule,
                });
            }
        };
        for sid in &task.hook_sessions {
            if let Some(t) = index.get(sid) {
                add(t, "hook");
            }
        }
        for sid in running_sessions(temp, &task.task_id, claude) {
            if let Some(t) = index.get(&sid) {
                add(t, "process");
            }
        }
        for t in index.values() {
            if t.cwd.as_deref().is_some_and(|c| in_project(c, project))
                && t.first_prompt
                    .as_deref()
                    .and_then(launch_task)
                    .is_some_and(|launched| launched == task.task_id)
            {
                add(t, "transcript");
            }
        }
        if let Some(sid) = task.session_id.as_deref().filter(|s| !s.is_empty())
            && let Some(t) = index.get(sid)
        {
            add(t, "database");
        }
        if mine.is_empty() {
            missing.push((
                task.task_id.clone(),
                format!(
                    "no transcript under {} names {} in its first prompt with cwd {}, no running claude process below its window, and no session id in the database",
                    claude.join("projects").display(),
                    task.task_id,
                    project.display()
                ),
            ));
        }
        mine.sort_by(|a, b| a.transcript.started.cmp(&b.transcript.started));
        found.extend(mine);
    }
    (one_task_each(found), missing)
}

/// Each session under one task only, the one its surest rule gave (hooks, then a
/// process, then the transcript, then the database), so every total counts it once.
fn one_task_each(found: Vec<Found>) -> Vec<Found> {
    let rank = |rule: &str| match rule {
        "hook" => 0,
        "process" => 1,
        "transcript" => 2,
        _ => 3,
    };
    let mut best: BTreeMap<String, (u8, String)> = BTreeMap::new();
    for f in &found {
        let r = rank(f.rule);
        let entry = best
            .entry(f.transcript.session_id.clone())
            .or_insert((r, f.task_id.clone()));
        if r < entry.0 {
            *entry = (r, f.task_id.clone());
        }
    }
    found
        .into_iter()
        .filter(|f| {
            best.get(&f.transcript.session_id)
                .is_some_and(|(_, t)| *t == f.task_id)
        })
        .collect()
}

/// Rule 1: the session ids of `claude` processes below the task's window.
fn running_sessions(temp: &Path, task: &str, claude: &Path) -> Vec<String> {
    // A path only from a checked id: the task id comes from the database.
    let Some(pid_file) = crate::core::domain::TaskId::parse(task).map(|t| t.window_pid_file())
    else {
        return Vec::new();
    };
    let Some(window) = crate::core::windows::pid_in(&temp.join(pid_file)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for pid in crate::core::procs::descendants(window) {
        let Ok(bytes) = safe_fs::read_regular(
            &claude.join("sessions").join(format!("{pid}.json")),
            64 * 1024,
        ) else {
            continue;
        };
        if let Some(sid) = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v["sessionId"].as_str().map(str::to_owned))
        {
            out.push(sid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_to_the_task_its_launch_names() {
        let cases = [
            (
                "/musician task-01 read the message from task-00 to task-01",
                Some("task-01"),
            ),
            // Spoken of mid-sentence: a launch of nothing.
            (
                "read the message from task-00, then /musician task-01",
                None,
            ),
            ("tell the /conductor when you are done", None),
            ("/conductor. Plan phase 2", Some("task-00")),
            ("  /conductor", Some("task-00")),
            ("ask task-00 which branch task-04 is on", Some("task-04")),
            ("/home/me/conductor/notes: read them", None),
            (
                "<command-name>/musician</command-name>\n<command-args>task-12</command-args>",
                Some("task-12"),
            ),
            ("/conductor plan the phase; task-03 waits", Some("task-00")),
            ("/souffleur PID:42 SESSION_ID:abc", Some("souffleur")),
            (
                "Relaunch task-03.\nRead temp/task-03-HANDOFF",
                Some("task-03"),
            ),
            ("/musician task-03-fix", Some("task-03-fix")),
            ("what does this repo do?", None),
        ];
        for (prompt, task) in cases {
            assert_eq!(launch_task(prompt).as_deref(), task, "{prompt}");
        }
    }

    #[test]
    fn a_task_is_named_as_a_word() {
        assert!(names_task("/musician task-03", "task-03"));
        assert!(names_task("Relaunch task-03.\nRead…", "task-03"));
        assert!(!names_task("/musician task-03-fix", "task-03"));
        assert!(names_task("/musician task-03-fix", "task-03-fix"));
        assert!(!names_task("/musician task-031", "task-03"));
    }
}
