//! The command line of docs/cli.md. Field doc comments are the `--help` text.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "maestro",
    version,
    about = "Dashboard and supervisor for a Conductor/Musician orchestration of Claude Code sessions",
    long_about = None
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Project root (holds comms.db and temp/); the dashboard and --no-tui take it more
    /// than once to watch several projects
    #[arg(long = "project", global = true, value_name = "DIR")]
    pub projects: Vec<PathBuf>,
    /// The database [default: <project>/comms.db]
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// The log folder [default: <project>/temp]
    #[arg(long, global = true, value_name = "DIR")]
    pub temp: Option<PathBuf>,
    /// TOML configuration [default: <config dir>/maestro/config.toml if present]
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Headless: run the same actors and print events to stdout
    #[arg(long, global = true)]
    pub no_tui: bool,
    /// JSON: with --no-tui one object per event line; for a verb, its result as one object
    #[arg(long, global = true)]
    pub json: bool,
    /// Headless: exit 0 once task-00 reaches `complete`
    #[arg(long, global = true)]
    pub until_complete: bool,
    /// Headless: print only what happened after the event that carried this `cursor`
    /// (what happened while no maestro ran included)
    #[arg(long, global = true, value_name = "CURSOR", value_parser = crate::core::told::Cursor::parse)]
    pub after: Option<crate::core::told::Cursor>,
    /// Sentinel stall threshold (250ms, 2s, 5m, 1h) [default: 5m]
    #[arg(long, global = true, value_name = "DURATION", value_parser = duration)]
    pub stall_after: Option<Duration>,
    /// Sentinel context-spike threshold, in percentage points [default: 15]
    #[arg(long, global = true, value_name = "POINTS", value_parser = clap::value_parser!(u8).range(0..=100))]
    pub spike_threshold: Option<u8>,
    /// Musician heartbeat staleness [default: 540s]
    #[arg(long, global = true, value_name = "DURATION", value_parser = duration)]
    pub task_stale_after: Option<Duration>,
    /// Conductor heartbeat staleness [default: 240s]
    #[arg(long, global = true, value_name = "DURATION", value_parser = duration)]
    pub conductor_stale_after: Option<Duration>,
    /// Also insert each Sentinel report into `orchestration_messages`
    #[arg(long, global = true)]
    pub report_to_db: bool,
    /// Serve Prometheus metrics on this address (HOST:PORT, or a port alone for
    /// 127.0.0.1), with the dashboard or --no-tui
    #[arg(long, global = true, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Dashboard theme: dark, light, high-contrast, or a theme file's name
    #[arg(long, global = true, value_name = "NAME")]
    pub theme: Option<String>,
    /// Answer yes to confirmations (needed for destructive actions without a terminal)
    #[arg(long, global = true)]
    pub yes: bool,
    /// Take the Souffleur role (same as `maestro souffleur PID:<pid> SESSION_ID:<id>`)
    #[arg(long)]
    pub souffleur: bool,
    /// With --souffleur: the Conductor's PID
    #[arg(long, value_name = "PID")]
    pub conductor_pid: Option<i32>,
    /// With --souffleur: the Conductor's session id
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
}

impl GlobalArgs {
    /// The one `--project` a command takes (none: the current folder).
    pub fn project(&self) -> Result<Option<&PathBuf>, crate::cli::error::CliError> {
        match self.projects.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            _ => Err(crate::cli::error::CliError::Usage(
                "this command acts on one project: pass --project once (several projects are watched with `maestro --no-tui --project A --project B`).".into(),
            )),
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a project: the folder, comms.db with the orchestration schema and temp/
    /// (an existing comms.db is never touched)
    Init(InitArgs),
    /// Play a built-in simulated orchestration in a scratch project, shown live
    Demo(DemoArgs),
    /// Replay a run: maestro's event log of the project (or what comms.db and temp/ still
    /// hold) through the same Sentinel and dashboard, on a replay clock
    Replay(ReplayArgs),
    /// Act on one Musician: answer a review, instruct, signal its window, read headroom
    Task(TaskCommand),
    /// Steer the running Souffleur: hold | release | recover | relaunch
    Conductor(ConductorArgs),
    /// Sentinel pipelines in .maestro/sentinels/: list, show, start, stop, pause, resume, step edits
    #[command(subcommand)]
    Sentinel(SentinelAction),
    /// Take the Souffleur role: watch the Conductor and recover it (docs/orchestration.md §4)
    Souffleur(SouffleurArgs),
    /// Check the project, database, logs and configuration; never writes
    Doctor,
    /// Tokens, list-price cost, context and activity of every task's Claude Code
    /// sessions, from Claude Code's own files (works on a finished orchestration)
    Usage(UsageArgs),
    /// Open maestro for the project in a new kitty window
    Launch,
    /// Claude Code hooks: install (into the project's .claude/settings.local.json, or
    /// ~/.claude/settings.json with --user) or uninstall maestro's entries
    Hooks(HooksArgs),
    /// The far end of a remote project (`--project ssh://host/path`): run over ssh by
    /// the watching maestro, it streams the project's inputs on stdout and answers
    /// requests on stdin
    Serve,
    /// Run by Claude Code for each hook event (installed by `maestro hooks install`):
    /// hands the event on stdin to the running maestro; exits 0 whatever happens, and
    /// prints nothing unless it refuses an LLM poller (or allows the command it named)
    Hook(HookArgs),
    /// Configuration helpers
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print a shell completion script: bash, zsh, fish, elvish or powershell
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), generated from the command line's definitions
    Man,
    /// What a Musician runs in place of its LLM watcher agents
    #[command(subcommand)]
    Musician(MusicianCommand),
    /// Runs a program with its address space held to a budget: how a pipeline's command
    /// step honours safety.maxMemoryMb (maestro starts it, not a person)
    #[command(hide = true)]
    RunWithin(RunWithinArgs),
}

#[derive(Debug, Clone, Args)]
pub struct RunWithinArgs {
    /// The most bytes of address space the program (and what it starts) may use
    #[arg(long, value_name = "BYTES")]
    pub memory_bytes: u64,
    /// The program and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub argv: Vec<std::ffi::OsString>,
}

#[derive(Debug, Clone, Args)]
pub struct HookArgs {
    /// The poller guard: stop a subagent polling the orchestration's state in a loop,
    /// refuse a skill's poller launched by its role, and name the maestro command that
    /// does its duty (docs/orchestration.md, "Switching the LLM pollers off")
    #[arg(long)]
    pub replace_pollers: bool,
    /// The project as bytes in hex (a folder whose name is not UTF-8)
    #[arg(long, hide = true, value_name = "HEX")]
    pub project_hex: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct HooksArgs {
    /// install or uninstall
    #[arg(value_parser = ["install", "uninstall"])]
    pub action: String,
    /// The user's Claude Code settings (every project) instead of the project's
    #[arg(long)]
    pub user: bool,
    /// Also refuse an LLM poller's launch (Agent/Task), naming in its reason the maestro
    /// command to run instead (docs/orchestration.md, "Switching the LLM pollers off")
    #[arg(long)]
    pub replace_pollers: bool,
}

#[derive(Debug, Clone, Args)]
pub struct UsageArgs {
    /// Every column on one line per session, whatever the terminal's width
    #[arg(long)]
    pub wide: bool,
}

#[derive(Debug, Clone, Args)]
pub struct InitArgs {
    /// A damaged comms.db (not a database, the wrong schema, failing its integrity
    /// check) is renamed to comms.db.damaged-<time>, kept, and a fresh one created
    #[arg(long)]
    pub replace_damaged: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Play the scenario this many times faster (durations in it are divided by this)
    #[arg(long, default_value_t = 1.0, value_parser = speed)]
    pub speed: f64,
    /// Keep the scratch project after exit and print its path (a --project folder is always kept)
    #[arg(long)]
    pub keep: bool,
    /// A scenario file instead of the built-in one
    #[arg(long, value_name = "PATH")]
    pub scenario: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct TaskCommand {
    #[command(subcommand)]
    pub action: TaskAction,
}

// These doc comments are `--help` text, where backticks would show.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Clone, Subcommand)]
pub enum TaskAction {
    /// needs_review -> review_approved, with an approval message
    Approve(TaskWithMessage),
    /// needs_review -> review_failed, with a rejection message (required)
    Reject(TaskWithMessage),
    /// error -> fix_proposed, with a fix proposal (required)
    Fix(TaskWithMessage),
    /// Send an instruction message (required); the state is unchanged
    Instruct(TaskWithMessage),
    /// Kill the task's window (temp/musician-<task>.pid); asks first
    Kill(TaskTarget),
    /// Kill the task's window and open a new one (resuming its session when known); asks first
    Relaunch(TaskTarget),
    /// Open the task's first Musician window (`/musician <task>`), proven like a relaunch;
    /// refused while a session of the task runs
    Launch(TaskTarget),
    /// Pause the task's window (SIGSTOP); asks first
    Freeze(TaskTarget),
    /// Resume a frozen window (SIGCONT)
    Thaw(TaskTarget),
    /// Context left: exit 0 healthy (<60% used), 1 caution (>=60% or a self-correction) or no data, 2 critical (>=75%)
    Headroom(TaskTarget),
    /// Bring the task's kitty window to the front (kitty remote control)
    Focus(TaskTarget),
}

#[derive(Debug, Clone, Args)]
pub struct TaskTarget {
    /// The task, e.g. task-03
    #[arg(value_name = "TASK-ID")]
    pub task_id: String,
}

#[derive(Debug, Clone, Args)]
pub struct TaskWithMessage {
    /// The task, e.g. task-03
    #[arg(value_name = "TASK-ID")]
    pub task_id: String,
    #[command(flatten)]
    pub message: MessageArgs,
}

#[derive(Debug, Clone, Args)]
pub struct MessageArgs {
    /// The message text
    #[arg(long, conflicts_with = "message_file")]
    pub message: Option<String>,
    /// Read the message from a file (`-`: standard input)
    #[arg(long, value_name = "F")]
    pub message_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum SentinelAction {
    /// Every definition, with its status
    List,
    /// One definition and its status; with --runs, its run history
    Show {
        name: String,
        /// The last runs and their steps (start, duration, outcome, output excerpt)
        #[arg(long)]
        runs: bool,
    },
    /// Start a pipeline in the maestro that hosts the project's pipelines
    Start { name: String },
    /// Stop a running pipeline
    Stop { name: String },
    /// Pause a running pipeline between steps
    Pause { name: String },
    /// Resume a paused pipeline
    Resume { name: String },
    /// Trust a definition's current content, so its triggers and `start` may run it
    /// (read it first with `sentinel show NAME`); a changed file needs trust again
    Trust {
        /// The definition (its file in .maestro/sentinels/, without .json)
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        name: Option<String>,
        /// Every definition in .maestro/sentinels/ as it is now
        #[arg(long)]
        all: bool,
    },
    /// Take trust back: the definition stops and runs nothing until trusted again
    Untrust { name: String },
    /// List or edit steps (the next iteration uses the new steps)
    #[command(subcommand)]
    Step(StepAction),
    /// Write a new definition into .maestro/sentinels/NAME.json, checked as load checks
    /// it: from a file (--file, kept byte for byte) or inline (--steps, with --loop,
    /// --trigger, --safety). It runs nothing until trusted
    Create(CreateArgs),
    /// Print a definition as its file holds it, or write it to --output
    Export {
        name: String,
        /// Write it to this file instead of printing it
        #[arg(long, value_name = "PATH")]
        output: Option<PathBuf>,
        /// Replace an existing --output file
        #[arg(long)]
        force: bool,
    },
    /// Copy a definition file from another project (as `create --file`); it runs
    /// nothing here until trusted here
    Import {
        /// The definition file to copy
        path: PathBuf,
        /// Replace a definition of the same name
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// The pipeline's name (letters, digits, - and _); with --file, the file's own
    /// `name` (or its file name) when left out
    pub name: Option<String>,
    /// A definition file to copy in, as it is
    #[arg(long, value_name = "PATH", conflicts_with_all = ["steps", "looping", "trigger", "safety"])]
    pub file: Option<PathBuf>,
    /// The steps, a JSON array
    #[arg(long, value_name = "JSON", required_unless_present = "file")]
    pub steps: Option<String>,
    /// The loop, a JSON object (`{"type": "count", "max": 3}`)
    #[arg(long = "loop", id = "looping", value_name = "JSON")]
    pub looping: Option<String>,
    /// The trigger, a JSON object (`{"type": "schedule", "cronExpression": "*/5 * * * *"}`)
    #[arg(long, value_name = "JSON")]
    pub trigger: Option<String>,
    /// The safety block, a JSON object (`{"maxIterations": 10}`)
    #[arg(long, value_name = "JSON")]
    pub safety: Option<String>,
    /// Replace a definition of the same name
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Subcommand)]
pub enum StepAction {
    /// The steps, as `{"name": N, "steps": [...]}` with --json
    List { name: String },
    /// Insert a step (JSON object) at INDEX
    Add {
        name: String,
        index: usize,
        #[arg(value_name = "JSON")]
        step: String,
    },
    /// Replace the step at INDEX
    Update {
        name: String,
        index: usize,
        #[arg(value_name = "JSON")]
        step: String,
    },
    /// Remove the step at INDEX
    Remove { name: String, index: usize },
}

#[allow(clippy::doc_markdown)] // `--help` text
#[derive(Debug, Clone, Args)]
pub struct ConductorArgs {
    /// hold or release automatic recovery; recover (Lethe first) or relaunch
    /// (claude_export) the Conductor now; watch: the Conductor's message-watcher (waits
    /// for a Musician entering needs_review, error, complete or exited, or a message to
    /// task-00, keeping task-00's heartbeat fresh; exits 0 printing each once)
    #[arg(value_parser = ["hold", "release", "recover", "relaunch", "watch"])]
    pub action: String,
}

#[derive(Debug, Clone, Args)]
pub struct SouffleurArgs {
    /// The Conductor's arguments, as it passes them: PID:<pid> `SESSION_ID`:<id>
    #[arg(required = true, num_args = 1.., value_name = "PID:<pid> SESSION_ID:<id>")]
    pub invocation: Vec<String>,
    /// Only the watcher layer, for a Souffleur session (its skill unchanged): keeps the
    /// souffleur heartbeat fresh, exits printing the watcher's report
    /// (`CONDUCTOR_DEAD:pid` …) and the task count; the session recovers
    #[arg(long)]
    pub watcher: bool,
    /// With --watcher: no PID to watch (heartbeat and state only), as the skill's
    /// heartbeat-only watcher; give `SESSION_ID:<id>` alone
    #[arg(long, requires = "watcher")]
    pub heartbeat_only: bool,
    /// With --watcher: also exit with `SESSION_ID_FOUND:<id>` when task-00's session id
    /// changes
    #[arg(long, requires = "watcher")]
    pub awaiting_session_id: bool,
}

#[derive(Debug, Subcommand)]
pub enum MusicianCommand {
    /// Wait for the Conductor: a new message for the task (background mode) or the end
    /// of a pause (--pause). Exit 0 with what came, 3 on a stale Conductor (pause),
    /// 4 when the task is complete/exited (background), 5 when a newer watcher replaced
    /// this one, 2 on bad arguments, 1 when the database cannot be used.
    Watch(WatchArgs),
}

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// The Musician's task (task-03, task-03-fix)
    pub task_id: String,
    /// Pause mode: wait for the task to leave `needs_review` / `error`
    #[arg(long)]
    pub pause: bool,
    /// Background mode: report messages with an id above this [default: the highest at start]
    #[arg(long, value_name = "N")]
    pub since_id: Option<i64>,
    /// When a watcher of this kind already runs for the task, leave it running and say so
    /// (exit 6) instead of taking over
    #[arg(long)]
    pub join: bool,
    /// Refresh the task's heartbeat when it is older than this
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    pub heartbeat_after: Duration,
    /// Pause mode: after this long, check the Conductor's heartbeat
    #[arg(long, value_name = "DURATION", default_value = "15m", value_parser = duration)]
    pub conductor_check_after: Duration,
    /// Pause mode: the Conductor counts as alive while its heartbeat is younger than this
    #[arg(long, value_name = "DURATION", default_value = "9m", value_parser = duration)]
    pub conductor_fresh_within: Duration,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the embedded default configuration
    Default,
}

#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    /// Start here: RFC 3339 or `YYYY-MM-DD HH:MM:SS` (UTC), `HH:MM:SS` (UTC, on the
    /// run's first day), or an offset into the run (+90s, +5m)
    #[arg(long, value_name = "TIME")]
    pub from: Option<String>,
    /// Play this many times faster than the run went [default: 1 in the dashboard; as
    /// fast as possible with --no-tui]
    #[arg(long, value_parser = speed)]
    pub speed: Option<f64>,
    /// Where the run comes from: the event log when there is one (auto), only the
    /// event log (log), or rebuilt from comms.db and temp/ (files)
    #[arg(long, value_enum, default_value_t = ReplaySource::Auto)]
    pub source: ReplaySource,
    /// Dashboard: start paused
    #[arg(long)]
    pub paused: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReplaySource {
    Auto,
    Log,
    Files,
}

/// The options every verb takes; the others are shown only where they act.
const EVERYWHERE: [&str; 5] = ["projects", "db", "temp", "config", "json"];
/// What the watching verbs (the dashboard, headless, the Souffleur role) take.
const WATCHING: [&str; 10] = [
    "no_tui",
    "until_complete",
    "after",
    "stall_after",
    "spike_threshold",
    "task_stale_after",
    "conductor_stale_after",
    "report_to_db",
    "metrics",
    "theme",
];

/// The global options each verb's `--help` shows (the rest act elsewhere and are hidden
/// there; they are still accepted, as before).
fn options_of(verb: &str) -> Vec<&'static str> {
    let mut shown: Vec<&'static str> = match verb {
        "completions" | "man" | "config" => vec![],
        // The project the session's events go to (else the session's own folder's).
        "hook" => vec!["projects"],
        // init reads no configuration: it makes the folder, the database and temp/.
        "init" => vec!["projects", "db", "temp", "json"],
        "launch" | "hooks" | "sentinel" => vec!["projects", "config", "json"],
        "conductor" => vec!["projects", "config", "json", "yes"],
        _ => EVERYWHERE.to_vec(),
    };
    match verb {
        "souffleur" => shown.extend(WATCHING),
        "demo" => shown.extend(["no_tui", "theme", "metrics"]),
        "replay" => shown.extend([
            "no_tui",
            "theme",
            "stall_after",
            "spike_threshold",
            "task_stale_after",
            "conductor_stale_after",
        ]),
        "task" => shown.push("yes"),
        _ => {}
    }
    shown
}

/// The `--help` of the verb named in `argv` showing only the options that act on it
/// (the others are still accepted there, as before); `None` for the top level, whose
/// help shows everything.
pub fn focused_help(argv: &[std::ffi::OsString]) -> Option<String> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    cmd.build();
    let globals: Vec<String> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.get_id().to_string())
        .collect();
    // The verb path: the words that name subcommands, in order (`task approve`; `help
    // task approve` asks for the same).
    let words: Vec<String> = argv
        .iter()
        .skip(1)
        .filter_map(|a| a.to_str())
        .filter(|a| !a.starts_with('-'))
        .map(str::to_owned)
        .collect();
    let words: Vec<&str> = match words.first().map(String::as_str) {
        Some("help") => words[1..].iter().map(String::as_str).collect(),
        _ => words.iter().map(String::as_str).collect(),
    };
    let verb = (*words.first()?).to_owned();
    let shown = options_of(&verb);
    // How many of the words name nested verbs.
    let mut depth = 0;
    let mut probe = &cmd;
    for w in &words {
        match probe.find_subcommand(w) {
            Some(next) => {
                probe = next;
                depth += 1;
            }
            None => break,
        }
    }
    if depth == 0 {
        return None;
    }
    let mut sub = &mut cmd;
    for w in &words[..depth] {
        sub = sub.find_subcommand_mut(w)?;
    }
    let mut owned = std::mem::replace(sub, clap::Command::new("maestro"));
    for id in globals.iter().filter(|g| !shown.contains(&g.as_str())) {
        if owned.get_arguments().any(|a| a.get_id() == id.as_str()) {
            owned = owned.mut_arg(id, |a| a.hide(true));
        }
    }
    // The shared options' words as they are true for one verb (the top level's speak of
    // the dashboard watching several projects, and of headless output).
    let watches = matches!(verb.as_str(), "souffleur" | "demo" | "replay");
    if !watches && owned.get_arguments().any(|a| a.get_id() == "projects") {
        owned = owned.mut_arg("projects", |a| {
            a.help("Project root (holds comms.db and temp/)")
                .long_help("Project root (holds comms.db and temp/): the folder this verb acts on")
        });
    }
    if !watches && owned.get_arguments().any(|a| a.get_id() == "json") {
        owned = owned.mut_arg("json", |a| {
            a.help("Print the result as one JSON object")
                .long_help("Print the result as one JSON object")
        });
    }
    if verb == "init" {
        owned = owned.mut_arg("temp", |a| {
            a.help("The log folder to make [default: <project>/temp]")
                .long_help("The log folder to make [default: <project>/temp]")
        });
    }
    let short = argv.iter().any(|a| a == "-h");
    Some(
        if short {
            owned.render_help()
        } else {
            owned.render_long_help()
        }
        .to_string(),
    )
}

/// A flag's value that is not what the flag takes.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error("{0}; write durations like 250ms, 2s, 5m or 1h")]
    Duration(#[from] humantime::DurationError),
    #[error("a number between 0.01 and 1000, e.g. 1 or 10")]
    Speed,
}

fn duration(text: &str) -> Result<Duration, ValueError> {
    Ok(crate::settings::parse_duration(text)?)
}

fn speed(text: &str) -> Result<f64, ValueError> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.01..=1000.0).contains(&v) => Ok(v),
        _ => Err(ValueError::Speed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own consistency checks (argument names that clash, and so on).
    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
