//! What one tool call shows of the orchestration's state, as far as a poll loop is
//! concerned: which part it reads (picking the maestro command to name), whether it is a
//! look at all (it returns something, or reads state), and whether it is progress (an
//! edit). The loop itself is judged by the loop rule (`sessions::loops`) from what the calls
//! did over time, never from how a wait is spelled.
//!
//! The orchestration's state is `comms.db` (any SQL naming its tables, a `sqlite3` on a
//! database, an MCP tool whose query or result holds its rows, a script that prints its
//! rows), the progress logs in `temp/`, and a process probed with `kill -0` or `ps -p`.
//! A write (a heartbeat `UPDATE`, a Musician's own log line) is not a read.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// Which part of the orchestration's state a call reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// `comms.db`: tasks, heartbeats, messages.
    Comms,
    /// The progress logs under `temp/`.
    Logs,
    /// Whether a process is alive (`kill -0 PID`, `ps -p PID`).
    Pid,
}

impl State {
    /// One letter, as the guard's ledger keeps it.
    pub fn letter(self) -> char {
        match self {
            Self::Comms => 'c',
            Self::Logs => 'l',
            Self::Pid => 'p',
        }
    }

    pub fn from_letter(letter: char) -> Option<Self> {
        match letter {
            'c' => Some(Self::Comms),
            'l' => Some(Self::Logs),
            'p' => Some(Self::Pid),
            _ => None,
        }
    }
}

/// The orchestration's database, by file or by table (matched on lower-cased text, so in
/// any case). Every pattern here is ASCII: each hook is a process of its own, and a
/// Unicode class costs milliseconds to compile.
static COMMS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"comms\.db(?-u:\b)|(?-u:\b)orchestration_(tasks|messages)(?-u:\b)|(?-u:\b)sqlite3?(?-u:\b)[^\n]*\.db(?-u:\b)")
        .expect("static regex")
});
/// SQL that only writes (a heartbeat refreshed): no `SELECT`, no dot-command that reads.
static SQL_WRITE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)(update|insert|delete|replace)(?-u:\b)").expect("static regex")
});
static SQL_READ: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)select(?-u:\b)|\.(dump|tables|schema)(?-u:\b)").expect("static regex")
});
/// The project's `temp/` folder as a word of a shell line: `temp/x`, `./temp`, `"temp/x"`,
/// `cd temp`, `ls temp` (never `contemp/`, never `src/temp.rs`).
static TEMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?:^|[ \t\n'"=;&|(]|\./)temp(?:/|$|[ \t\n'";&|)])"#).expect("static regex")
});
/// A redirection into `temp/`: a log line written, not read.
static INTO_TEMP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#">>?[ \t]*['"]?(?:[^ \t\n]*/)?temp/"#).expect("static regex"));
static PROBE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)kill[ \t]+-0[ \t]|(?-u:\b)ps[ \t]+(-[a-z]+[ \t]+)*-p[ \t]")
        .expect("static regex")
});
/// The orchestration's rows in a result: a task id beside a state of its schema, or its
/// tables' names.
static ROW_TASK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)task-[0-9]{2,4}(?-u:\b)").expect("static regex"));
static ROW_STATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)(watching|reviewing|exit_requested|working|needs_review|review_approved|review_failed|fix_proposed|context_recovery|confirmed|instruction|heartbeat|orchestration_(tasks|messages))(?-u:\b)")
        .expect("static regex")
});

/// The part of the state a call reads, judged from the call (`tool_name`, `tool_input`)
/// in the project at `root`.
pub fn reads(tool: &str, input: &Value, root: &Path) -> Option<State> {
    let text = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or_default();
    match tool {
        // A monitor runs its command as the shell does.
        "Bash" | "Monitor" => of_shell(text("command")).or_else(|| {
            runs_a_script_naming_the_database(text("command"), root).then_some(State::Comms)
        }),
        "Read" | "Grep" | "Glob" => ["file_path", "path", "pattern", "glob"]
            .into_iter()
            .find_map(|k| of_path(text(k), root)),
        _ if tool.starts_with("mcp__") => {
            let sql = input.to_string().to_ascii_lowercase();
            let names_it = ["comms.db", "orchestration_"]
                .iter()
                .any(|w| sql.contains(w));
            ((names_it && COMMS.is_match(&sql)) || tool.to_ascii_lowercase().contains("comms"))
                .then_some(State::Comms)
        }
        _ => None,
    }
}

/// Whether rows in a call's result show the orchestration's state: the result of a
/// tool other than the shell (an MCP server of any name), or of a shell line that only
/// prints files (`cat /tmp/poll.out`, where a background job keeps its rows). A program's
/// output is not: a test's assertion prints `('task-03','working')` too; there the
/// program is the evidence (its command, or the source of the script it runs).
pub fn shown_by(tool: &str, input: &Value) -> bool {
    if !matches!(tool, "Bash" | "Monitor") {
        return true;
    }
    let command = input
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    segments(command)
        .filter_map(|segment| segment.split_whitespace().next())
        .all(|program| {
            let program = program.rsplit('/').next().unwrap_or(program);
            FILE_PRINTERS.contains(&program)
        })
}

/// Programs that print files (and `sleep`, which prints nothing).
const FILE_PRINTERS: [&str; 7] = ["cat", "tail", "head", "tac", "less", "more", "sleep"];

/// The part of the state a call's result shows: the orchestration's rows.
pub fn shows(result: &str) -> Option<State> {
    (result.contains("task-") && ROW_TASK.is_match(result) && ROW_STATE.is_match(result))
        .then_some(State::Comms)
}

/// A call that writes the orchestration's database (SQL that changes rows, through
/// `sqlite3` or an MCP tool): progress, like an edit. A heartbeat refresh alone is not:
/// it is what a watcher does while it waits.
pub fn writes(tool: &str, input: &Value) -> bool {
    let text = match tool {
        "Bash" => input
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase(),
        _ if tool.starts_with("mcp__") => input.to_string().to_ascii_lowercase(),
        _ => return false,
    };
    if !names_the_database(&text) {
        return false;
    }
    SQL_ADDS.is_match(&text) || (SQL_WRITE.is_match(&text) && !HEARTBEAT_ONLY.is_match(&text))
}

/// SQL that adds or removes rows (a message sent, a row made): progress whatever else.
static SQL_ADDS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)(insert|delete|replace)(?-u:\b)").expect("static regex"));

/// An `UPDATE` that sets only the heartbeat (`SET last_heartbeat = …` with nothing else
/// set): a watcher keeping itself alive, no progress.
static HEARTBEAT_ONLY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)set[ \t]+last_heartbeat[ \t]*=[ \t]*[^,]*?(where|;|$)")
        .expect("static regex")
});

/// A call that changes the project's files: progress, whatever came before.
pub fn is_edit(tool: &str) -> bool {
    matches!(tool, "Edit" | "Write" | "MultiEdit" | "NotebookEdit")
}

/// Whether lower-cased text names the orchestration's database (a word first, the
/// pattern only then: most calls name none, and a hook that compiles no pattern stays
/// quick).
fn names_the_database(text: &str) -> bool {
    ["comms.db", "orchestration_", "sqlite"]
        .iter()
        .any(|w| text.contains(w))
        && COMMS.is_match(text)
}

fn of_shell(command: &str) -> Option<State> {
    let command = &command.to_ascii_lowercase();
    // A word first, the pattern only then: most calls name none of these, and a hook
    // that compiles no pattern stays quick.
    let names = |words: &[&str]| words.iter().any(|w| command.contains(w));
    if names_the_database(command) && (SQL_READ.is_match(command) || !SQL_WRITE.is_match(command)) {
        Some(State::Comms)
    } else if names(&["temp"]) && TEMP.is_match(command) && !INTO_TEMP.is_match(command) {
        Some(State::Logs)
    } else if names(&["kill", "ps "]) && PROBE.is_match(command) {
        Some(State::Pid)
    } else {
        None
    }
}

/// The simple commands of a shell line, roughly: split at newlines, `;`, `&`, `|` and
/// parentheses (quotes are not followed; a word inside them starts nothing that runs).
fn segments(command: &str) -> impl Iterator<Item = &str> {
    command.split(['\n', ';', '&', '|', '(', ')'])
}

/// What runs a script named after it (`python3 x.py`, `bash x.sh`, `node x.js`).
const INTERPRETERS: [&str; 10] = [
    "python", "bash", "sh", "zsh", "dash", "node", "ruby", "perl", "bun", "deno",
];
/// How much of a script is read for the database's name.
const SCRIPT_HEAD: u64 = 64 * 1024;

/// The scripts a shell line runs: the file after an interpreter, or a program given by
/// its path (`./poll.sh`, `tools/check`).
fn scripts_run(command: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for segment in segments(command) {
        // `VAR=value` words before the program are its environment.
        let mut words = segment
            .split_whitespace()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'));
        let Some(first) = words.next() else { continue };
        let program = first.rsplit('/').next().unwrap_or(first);
        let interpreter = INTERPRETERS.iter().any(|i| {
            program
                .strip_prefix(i)
                .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
        });
        if interpreter {
            out.extend(words.find(|w| !w.starts_with('-')));
        } else if first.contains('/') {
            out.push(first);
        }
    }
    out
}

/// Whether a script the line runs names the orchestration's database (in its first
/// [`SCRIPT_HEAD`] bytes): a helper that prints `new messages: 0` reads comms.db all the
/// same. Only regular files are read (never a FIFO, never through a final symlink).
fn runs_a_script_naming_the_database(command: &str, root: &Path) -> bool {
    use std::io::Read;
    scripts_run(command).into_iter().any(|script| {
        let script = Path::new(script.trim_matches(['\'', '"']));
        let Ok((file, _)) = crate::core::safe_fs::open_regular(&root.join(script)) else {
            return false;
        };
        let mut head = Vec::new();
        let _ = file.take(SCRIPT_HEAD).read_to_end(&mut head);
        names_the_database(&String::from_utf8_lossy(&head).to_ascii_lowercase())
    })
}

fn of_path(path: &str, root: &Path) -> Option<State> {
    if path.is_empty() {
        return None;
    }
    let path = Path::new(path);
    let inside = if path.is_absolute() {
        path.strip_prefix(root).ok()?
    } else {
        path.strip_prefix("./").unwrap_or(path)
    };
    if inside.starts_with("temp") {
        Some(State::Logs)
    } else if inside == Path::new("comms.db") {
        Some(State::Comms)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bash(command: &str) -> Option<State> {
        reads("Bash", &json!({ "command": command }), Path::new("/p"))
    }

    #[test]
    fn what_a_call_reads_whatever_its_spelling() {
        use State::{Comms, Logs, Pid};
        for comms in [
            "sqlite3 comms.db \"SELECT state FROM orchestration_tasks\"",
            "sleep 10; sqlite3 ../comms.db 'select 1'",
            "SELECT STATE FROM ORCHESTRATION_TASKS",
            "sqlite3 /tmp/copy.db 'select * from t'",
            "sqlite3 comms.db \"update orchestration_tasks SET last_heartbeat = 1; SELECT message FROM orchestration_messages\"",
        ] {
            assert_eq!(bash(comms), Some(Comms), "{comms}");
        }
        for logs in [
            "tail -n 20 temp/task-03-status",
            "cd temp && tail -n 5 task-03-status",
            "ls temp",
            "tail \"temp/task-03-status\"",
            "cat ./temp/x",
        ] {
            assert_eq!(bash(logs), Some(Logs), "{logs}");
        }
        assert_eq!(bash("kill -0 4242"), Some(Pid));
        assert_eq!(bash("ps -p 4242"), Some(Pid));
        // Writes are not reads: a heartbeat refreshed, a Musician's own log line.
        assert_eq!(
            bash(
                "sqlite3 comms.db \"update orchestration_tasks SET last_heartbeat = datetime('now')\""
            ),
            None
        );
        assert_eq!(bash("echo 'step 2 done' >> temp/task-03-status"), None);
        for other in [
            "cargo test",
            "grep -rn sleep src/",
            "cat contemp/x",
            "cat src/temp.rs",
        ] {
            assert_eq!(bash(other), None, "{other}");
        }
        let tool = |name: &str, input: Value| reads(name, &input, Path::new("/p"));
        assert_eq!(tool("Read", json!({"file_path": "/p/temp/t"})), Some(Logs));
        assert_eq!(tool("Read", json!({"file_path": "./temp/t"})), Some(Logs));
        assert_eq!(tool("Glob", json!({"pattern": "temp/*"})), Some(Logs));
        assert_eq!(
            tool("Grep", json!({"pattern": "x", "path": "temp"})),
            Some(Logs)
        );
        assert_eq!(tool("Read", json!({"file_path": "/p/src/temp.rs"})), None);
        assert_eq!(
            tool("Read", json!({"file_path": "/elsewhere/temp/x"})),
            None
        );
        assert_eq!(
            tool("mcp__comms-link__query", json!({"sql": "x"})),
            Some(Comms)
        );
        assert_eq!(
            tool(
                "mcp__sqlite__read_query",
                json!({"query": "select * from orchestration_messages"})
            ),
            Some(Comms)
        );
        assert_eq!(tool("mcp__github__search", json!({"q": "x"})), None);
    }

    #[test]
    fn a_result_holding_the_orchestrations_rows_shows_its_state() {
        assert_eq!(
            shows("task-03|working|2026-11-27 10:00:00"),
            Some(State::Comms)
        );
        assert_eq!(
            shows("7|task-00|instruction|rebase on main"),
            Some(State::Comms)
        );
        assert_eq!(shows("test result: ok. 3 passed"), None);
        assert_eq!(shows("see task-03 for details"), None);
    }

    #[test]
    fn a_write_to_comms_db_is_progress_and_a_heartbeat_alone_is_not() {
        let bash = |c: &str| writes("Bash", &json!({"command": c}));
        assert!(bash(
            "sqlite3 comms.db \"update orchestration_tasks SET state = 'review_approved', last_heartbeat = datetime('now') WHERE task_id = 'task-03'; SELECT changes();\""
        ));
        assert!(bash(
            "sqlite3 comms.db \"insert into orchestration_messages (task_id, message, message_type) VALUES ('task-03', 'ok', 'approval')\""
        ));
        assert!(!bash(
            "sqlite3 comms.db \"update orchestration_tasks SET last_heartbeat = datetime('now') WHERE task_id = 'task-03'\""
        ));
        assert!(!bash(
            "sqlite3 comms.db \"SELECT state FROM orchestration_tasks\""
        ));
        assert!(!bash("cargo test"));
    }
}
