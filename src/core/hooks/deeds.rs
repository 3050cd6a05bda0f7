//! What one tool call of a subagent does, as far as a poll loop is concerned: it waits,
//! it reads the orchestration's state, or it does something else. Judged from the call
//! itself (the tool and its arguments), never from the words of a prompt, so a poller in
//! any language and any phrasing is seen the same way.
//!
//! The orchestration's state is `comms.db` (through `sqlite3`, any SQL naming its
//! tables, or the comms-link MCP server), the progress logs in `temp/`, and a PID
//! probed with `kill -0`. A write into `temp/` (a Musician's own log line) is not a read.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// The kind of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deed {
    /// `sleep`, `inotifywait`: waiting for time to pass or a file to change.
    Wait,
    /// A read of the orchestration's state.
    Read(State),
    /// A wait and a read in one call (`sleep 15; sqlite3 comms.db …`): a whole cycle.
    WaitRead(State),
    Other,
}

/// Which part of the orchestration's state a call reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// `comms.db`: tasks, heartbeats, messages.
    Comms,
    /// The progress logs under `temp/`.
    Logs,
    /// Whether a process is alive (`kill -0 PID`).
    Pid,
}

impl Deed {
    /// One letter, as the ledger keeps a subagent's calls.
    pub fn letter(self) -> u8 {
        match self {
            Self::Wait => b'w',
            Self::Read(State::Comms) => b'c',
            Self::Read(State::Logs) => b'l',
            Self::Read(State::Pid) => b'p',
            Self::WaitRead(State::Comms) => b'C',
            Self::WaitRead(State::Logs) => b'L',
            Self::WaitRead(State::Pid) => b'P',
            Self::Other => b'o',
        }
    }

    pub fn from_letter(letter: u8) -> Self {
        match letter {
            b'w' => Self::Wait,
            b'c' => Self::Read(State::Comms),
            b'l' => Self::Read(State::Logs),
            b'p' => Self::Read(State::Pid),
            b'C' => Self::WaitRead(State::Comms),
            b'L' => Self::WaitRead(State::Logs),
            b'P' => Self::WaitRead(State::Pid),
            _ => Self::Other,
        }
    }

    /// The loop steps of the call, in order: `true` a wait, `false` a read.
    fn steps(self) -> &'static [bool] {
        match self {
            Self::Wait => &[true],
            Self::Read(_) => &[false],
            Self::WaitRead(_) => &[true, false],
            Self::Other => &[],
        }
    }

    /// The state the call reads, if any.
    pub fn state(self) -> Option<State> {
        match self {
            Self::Read(s) | Self::WaitRead(s) => Some(s),
            _ => None,
        }
    }
}

/// A `sleep N` (or `inotifywait`) as a command of its own in a shell line.
static WAIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[;&|(\s])(?:sleep\s+[0-9.]+[smh]?\b|inotifywait\b)").expect("static regex")
});
/// The orchestration's database, by file or by table.
static COMMS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"comms\.db\b|\borchestration_(tasks|messages)\b").expect("static regex")
});
/// A path into the project's `temp/` folder.
static TEMP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[\s'/=])temp/").expect("static regex"));
/// A redirection into `temp/`: a log line written, not read.
static INTO_TEMP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r">>?\s*['\x22]?(?:\S*/)?temp/").expect("static regex"));
static KILL_0: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bkill\s+-0\s").expect("static regex"));

/// The deed of one `PreToolUse` call (`tool_name`, `tool_input`) in the project at `root`.
pub fn of_call(tool: &str, input: &Value, root: &Path) -> Deed {
    let text = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or_default();
    match tool {
        "Bash" => of_shell(text("command")),
        "Read" | "Grep" | "Glob" => {
            let path = [text("file_path"), text("path")]
                .into_iter()
                .find(|p| !p.is_empty())
                .unwrap_or_default();
            of_path(path, root)
        }
        _ if is_comms_tool(tool) => Deed::Read(State::Comms),
        _ => Deed::Other,
    }
}

/// The comms-link MCP server's tools (`mcp__comms-link__query`, `…__execute`), or any MCP
/// server whose name says it is the orchestration's (`comms`).
fn is_comms_tool(tool: &str) -> bool {
    tool.strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .is_some_and(|(server, _)| server.to_ascii_lowercase().contains("comms"))
}

fn of_shell(command: &str) -> Deed {
    let read = if COMMS.is_match(command) {
        Some(State::Comms)
    } else if TEMP.is_match(command) && !INTO_TEMP.is_match(command) {
        Some(State::Logs)
    } else if KILL_0.is_match(command) {
        Some(State::Pid)
    } else {
        None
    };
    match (WAIT.is_match(command), read) {
        (true, Some(s)) => Deed::WaitRead(s),
        (false, Some(s)) => Deed::Read(s),
        (true, None) => Deed::Wait,
        (false, None) => Deed::Other,
    }
}

fn of_path(path: &str, root: &Path) -> Deed {
    let path = Path::new(path);
    let inside = if path.is_absolute() {
        path.strip_prefix(root).ok()
    } else {
        Some(path)
    };
    match inside {
        Some(p) if p.starts_with("temp") => Deed::Read(State::Logs),
        Some(p) if p == Path::new("comms.db") => Deed::Read(State::Comms),
        _ => Deed::Other,
    }
}

/// How many of a subagent's latest calls the loop rule looks at: a poll cycle is a few
/// calls; reads and waits far apart, with other work between, are not a loop.
pub const WINDOW: usize = 8;

/// Whether `next`, after `history` (oldest first), makes the subagent a poller: among
/// its last [`WINDOW`] calls, waits and reads of the orchestration's state alternate
/// three times, i.e. it waited, read, and is waiting again (or read, waited, and is
/// reading again). A wait needs a read to be a poll and a read needs a wait, so work
/// that only reads state, or only sleeps, never counts.
pub fn polls(history: &[Deed], next: Deed) -> bool {
    if next.steps().is_empty() {
        return false;
    }
    let start = history.len().saturating_sub(WINDOW - 1);
    let mut turns = 0;
    let mut last: Option<bool> = None;
    let steps = history[start..]
        .iter()
        .chain(std::iter::once(&next))
        .flat_map(|d| d.steps());
    for &waits in steps {
        if last != Some(waits) {
            turns += 1;
            last = Some(waits);
        }
    }
    turns >= 3
}

/// The parts of the state a subagent's calls read, each once.
pub fn states_read(history: &[Deed]) -> Vec<State> {
    let mut out = Vec::new();
    for s in history.iter().filter_map(|d| d.state()) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bash(command: &str) -> Deed {
        of_call("Bash", &json!({ "command": command }), Path::new("/p"))
    }

    #[test]
    fn calls_are_told_by_what_they_touch() {
        assert_eq!(bash("sleep 15"), Deed::Wait);
        assert_eq!(bash("sleep 0.5 && date"), Deed::Wait);
        assert_eq!(
            bash("sqlite3 comms.db \"SELECT state FROM orchestration_tasks\""),
            Deed::Read(State::Comms)
        );
        assert_eq!(
            bash("sleep 10; sqlite3 ../comms.db 'select 1'"),
            Deed::WaitRead(State::Comms)
        );
        assert_eq!(
            bash("tail -n 20 temp/task-03-status"),
            Deed::Read(State::Logs)
        );
        assert_eq!(bash("kill -0 4242"), Deed::Read(State::Pid));
        // A Musician's own log line is written, not read.
        assert_eq!(
            bash("echo 'step 2 done [ctx: 20%]' >> temp/task-03-status"),
            Deed::Other
        );
        assert_eq!(bash("cargo test --workspace"), Deed::Other);
        assert_eq!(bash("grep -rn sleep src/"), Deed::Other);
        assert_eq!(bash("cat contemp/x"), Deed::Other);
        let read = |path: &str| of_call("Read", &json!({ "file_path": path }), Path::new("/p"));
        assert_eq!(read("/p/temp/task-01-status"), Deed::Read(State::Logs));
        assert_eq!(read("/p/comms.db"), Deed::Read(State::Comms));
        assert_eq!(read("/p/src/temp.rs"), Deed::Other);
        assert_eq!(read("/elsewhere/temp/x"), Deed::Other);
        assert_eq!(
            of_call(
                "mcp__comms-link__query",
                &json!({"sql": "x"}),
                Path::new("/p")
            ),
            Deed::Read(State::Comms)
        );
        assert_eq!(
            of_call("mcp__github__query", &json!({}), Path::new("/p")),
            Deed::Other
        );
    }

    #[test]
    fn a_loop_is_caught_at_its_second_cycle() {
        use Deed::{Other, Read, Wait};
        let c = Read(State::Comms);
        // wait, read, wait again: the third call is refused.
        assert!(!polls(&[], Wait));
        assert!(!polls(&[Wait], c));
        assert!(polls(&[Wait, c], Wait));
        // read, wait, read again; two reads a cycle.
        assert!(!polls(&[c, c], Wait));
        assert!(polls(&[c, c, Wait], c));
        // Other calls between do not hide it.
        assert!(polls(&[Wait, Other, c, Other], Wait));
        // Reads alone, or waits alone, are not a loop.
        assert!(!polls(&[c, c, c, c], c));
        assert!(!polls(&[Wait, Wait, Wait], Wait));
        // An ordinary call is never refused.
        assert!(!polls(&[Wait, c, Wait], Other));
        // A wait and a read in each call: caught at the second call.
        let cycle = Deed::WaitRead(State::Logs);
        assert!(!polls(&[], cycle));
        assert!(polls(&[cycle], cycle));
        for d in [Wait, c, cycle, Other] {
            assert_eq!(Deed::from_letter(d.letter()), d);
        }
        // Far apart, with work between: not a loop.
        let mut spread = vec![c];
        spread.extend([Other; 10]);
        spread.push(Wait);
        spread.extend([Other; 10]);
        assert!(!polls(&spread, c));
    }
}
