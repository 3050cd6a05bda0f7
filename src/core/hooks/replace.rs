//! `maestro hook --replace-pollers`: what an LLM poller is refused, and the maestro
//! command named instead (the refusal's reason, which Claude Code hands the model).
//!
//! A poller is known by its deeds (the guard, `hooks/guard`: a subagent whose calls
//! loop over the orchestration's state is stopped) and, at its launch, only where words
//! are certain: a skill's verbatim poller prompt from the session whose role launches it
//! (the Souffleur's watcher and self-monitor from the Souffleur's session, the Sentinel
//! from the Conductor's), or a prompt this session already saw caught polling.
//!
//! Nothing is refused unless its duty can be done now: the database opens, the task is
//! in it, maestro's data folder is writable; the LLM Sentinel only while a maestro
//! reports to the database. No command that keeps a heartbeat is named for a session
//! that does not hold that role.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::domain::TaskId;
use crate::core::domain::souffleur::WatcherMode;
use crate::core::paths::ProjectKey;
use crate::core::sessions::pollers::{self, Launch, Poller};

/// Where a poller was refused: its launch, or its loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Launch,
    Loop,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Self::Launch => "launch",
            Self::Loop => "loop",
        }
    }
}

/// A poller refused, as the hook spools it for the running maestros.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The command named instead (`None`: nothing to run, the self-monitor; the Sentinel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Refused at its launch or stopped in its loop (`None` in an older spool: launch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Stage>,
}

/// The refusal: what is spooled, and the reason the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub replaced: Replaced,
    pub reason: String,
}

/// What the hook knows besides the event: the project, how to name maestro in a shell,
/// the session's task, and whether a maestro reports to the database.
pub struct Context<'a> {
    pub project: &'a ProjectKey,
    /// The folder the session runs in (the command must work from there).
    pub cwd: Option<&'a Path>,
    /// `maestro`, or maestro's own path quoted when `maestro` on PATH is another program.
    pub program: &'a str,
    pub session_task: Option<&'a TaskId>,
    pub reporting: &'a dyn Fn() -> bool,
}

/// How to switch the guard off, said in every refusal.
/// Addressed to the person, never a command the model could take as its instruction: no
/// backticks, and the model is told not to run them (a literal model runs the first
/// backticked maestro command it reads).
pub const SWITCH_OFF: &str = "(For the person who installed maestro, not for you: do not run anything to change this. The refusal comes from maestro's poller guard; running maestro hooks install without --replace-pollers switches it off, and maestro hooks uninstall removes maestro's hooks.)";

/// The refusal of a subagent's launch, when its prompt is a skill's verbatim poller
/// prompt from the session whose role launches it and its duty can be done now.
pub fn refusal(event: &Value, ctx: &Context<'_>) -> Option<Refusal> {
    if !launches_subagent(event) {
        return None;
    }
    let prompt = launch_prompt(event)?;
    let poller = pollers::recognise(&Launch {
        prompt: &prompt,
        background: None,
        session_task: ctx.session_task,
    })?;
    let role = ctx.session_task?;
    let launcher_holds_role = match poller {
        Poller::Sentinel => role.is_conductor(),
        Poller::SouffleurWatcher { .. } | Poller::SouffleurTeammate => role.is_souffleur(),
        // A Musician writes its watchers' prompts itself, and so does the Conductor:
        // known by their deeds only.
        Poller::MusicianWatcher { .. } | Poller::ConductorWatcher => false,
    };
    launcher_holds_role.then_some(())?;
    let (task, command, does) = instead(&poller, ctx)?;
    Some(Refusal {
        reason: launch_reason(&poller, command.as_deref(), &does),
        replaced: Replaced {
            role: poller.role().to_owned(),
            task_id: task,
            command,
            at: Some(Stage::Launch),
        },
    })
}

/// The prompt of an `Agent`/`Task` call.
pub fn launch_prompt(event: &Value) -> Option<String> {
    let input = event.get("tool_input")?;
    crate::core::text::prompt_text(input.get("prompt")?)
}

/// The refusal of a subagent caught polling (its calls so far read `states`), when its
/// session holds the role whose duty the loop does and maestro can do it now. `prompt`
/// is the subagent's own, when its transcript had it (the Souffleur's ids are in it).
pub fn stop_in_loop(
    states: &[crate::core::sessions::deeds::State],
    prompt: Option<&str>,
    ctx: &Context<'_>,
) -> Option<Refusal> {
    use crate::core::sessions::deeds::State;
    let role = ctx.session_task?;
    let known = prompt.and_then(|p| {
        pollers::recognise(&Launch {
            prompt: p,
            background: None,
            session_task: Some(role),
        })
    });
    let poller = if role.is_musician() && states.contains(&State::Comms) {
        let pause = matches!(known, Some(Poller::MusicianWatcher { pause: true, .. }));
        Poller::MusicianWatcher {
            task: Some(role.clone()),
            pause,
        }
    } else if role.is_conductor() && states.contains(&State::Comms) {
        // Its inbox, with or without the logs: `conductor watch` tells both (the
        // Sentinel's reports reach it as messages).
        Poller::ConductorWatcher
    } else if role.is_conductor() && states.contains(&State::Logs) {
        Poller::Sentinel
    } else if role.is_souffleur() {
        match known? {
            p @ (Poller::SouffleurWatcher { .. } | Poller::SouffleurTeammate) => p,
            _ => return None,
        }
    } else {
        return None;
    };
    let (task, command, does) = instead(&poller, ctx)?;
    let tell = match &command {
        Some(c) => format!(
            "telling your caller to run `{c}` with Bash (run_in_background: true) in your place; it {does}"
        ),
        None => format!("telling your caller that {does}"),
    };
    Some(Refusal {
        reason: format!(
            "maestro stopped this subagent: its calls wait and read the orchestration's state in a loop, and maestro does that job without an LLM. Make no more tool calls; end now with a final message {tell} {SWITCH_OFF}"
        ),
        replaced: Replaced {
            role: poller.role().to_owned(),
            task_id: task,
            command,
            at: Some(Stage::Loop),
        },
    })
}

/// What the session is told when the guard stopped its subagent `agent`, whose monitor
/// printed the same thing again and again.
pub fn monitor_stopped(agent: &str, command: Option<&str>) -> String {
    let instead = match command {
        Some(c) => format!("Run `{c}` with Bash (run_in_background: true) in its place."),
        None => "Nothing needs to run in its place.".into(),
    };
    format!(
        "maestro stopped your subagent {agent}: its Monitor printed the same thing again and again, polling the orchestration's state, and maestro does that job without an LLM. Its monitor was ended; do not start it again. {instead} {SWITCH_OFF}"
    )
}

/// The reason a prompt caught polling is refused at its next launch in that session.
pub fn caught_reason(command: Option<&str>) -> String {
    match command {
        Some(c) => format!(
            "maestro: this prompt was caught polling the orchestration's state in a loop; maestro does its job without an LLM. Run `{c}` with Bash (run_in_background: true) instead. {SWITCH_OFF}"
        ),
        None => format!(
            "maestro: this prompt was caught polling the orchestration's state in a loop; maestro does its job without an LLM, nothing to run instead. {SWITCH_OFF}"
        ),
    }
}

fn launch_reason(poller: &Poller, command: Option<&str>, does: &str) -> String {
    let who = match poller {
        Poller::Sentinel => "the Sentinel's",
        Poller::SouffleurWatcher { .. } => "the Souffleur watcher's",
        Poller::SouffleurTeammate => "the Souffleur self-monitor's",
        Poller::MusicianWatcher { .. } | Poller::ConductorWatcher => "this watcher's",
    };
    match command {
        Some(c) => format!(
            "maestro does {who} job without an LLM: run `{c}` with Bash (run_in_background: true) instead; it {does} {SWITCH_OFF}"
        ),
        None => format!("maestro does {who} job without an LLM: {does} {SWITCH_OFF}"),
    }
}

/// Whether a hook event is the launch of a subagent (`PreToolUse` of `Agent`, or of
/// `Task`, its older name): the only event a poller can be refused at.
pub fn launches_subagent(event: &Value) -> bool {
    let text = |k: &str| event.get(k).and_then(Value::as_str);
    text("hook_event_name") == Some("PreToolUse")
        && matches!(text("tool_name"), Some("Agent" | "Task"))
}

/// The task the refusal is about, the command named (if any) and what it does.
type Instead = (Option<String>, Option<String>, String);

fn instead(poller: &Poller, ctx: &Context<'_>) -> Option<Instead> {
    let run = |args: &str| format!("{}{args}{}", ctx.program, project_flag(ctx));
    let root = &ctx.project.root;
    match poller {
        Poller::MusicianWatcher { task, pause } => {
            let task = task.as_ref()?;
            duty_ready(root, Some(task)).then_some(())?;
            let task = task.as_str().to_owned();
            let (command, does) = if *pause {
                (
                    run(&format!(" musician watch {task} --pause --join")),
                    format!(
                        "keeps {task}'s heartbeat fresh and exits, printing what came, when the Conductor ends the pause (or has been silent too long)."
                    ),
                )
            } else {
                (
                    run(&format!(" musician watch {task} --join")),
                    format!(
                        "keeps {task}'s heartbeat fresh and exits, printing the message, when the Conductor writes to {task}."
                    ),
                )
            };
            Some((Some(task), Some(command), does))
        }
        Poller::SouffleurWatcher {
            mode,
            pid,
            session_id,
            awaiting_session_id,
        } => {
            let session = session_id.as_deref()?;
            duty_ready(root, None).then_some(())?;
            let mut args = String::from(" souffleur --watcher");
            match mode {
                WatcherMode::Normal => args.push_str(&format!(" PID:{}", (*pid)?)),
                WatcherMode::HeartbeatOnly => args.push_str(" --heartbeat-only"),
            }
            args.push_str(&format!(" SESSION_ID:{session}"));
            if *awaiting_session_id {
                args.push_str(" --awaiting-session-id");
            }
            Some((
                Some("souffleur".into()),
                Some(run(&args)),
                "keeps the souffleur heartbeat fresh and exits with the watcher's report (CONDUCTOR_DEAD:pid, CONDUCTOR_DEAD:heartbeat, SESSION_ID_FOUND:<id>, CONDUCTOR_COMPLETE or CONTEXT_RECOVERY, and the task count): act on its output as on the watcher's.".into(),
            ))
        }
        Poller::ConductorWatcher => duty_ready(root, None).then(|| {
            (
                Some(crate::core::domain::CONDUCTOR_ID.to_owned()),
                Some(run(" conductor watch")),
                "keeps task-00's heartbeat fresh and exits, printing each event once, when a Musician enters needs_review, error, complete or exited, or a message reaches the Conductor (a Sentinel report among them): handle them, then run it again.".into(),
            )
        }),
        Poller::SouffleurTeammate => duty_ready(root, None).then(|| {
            (
                Some("souffleur".into()),
                None,
                "no self-monitor is needed here: the watcher is a maestro process run with Bash in the background, and Claude Code tells you when it exits, so it cannot die silently. Nothing to run instead.".into(),
            )
        }),
        Poller::Sentinel => ((ctx.reporting)() && duty_ready(root, None)).then(|| {
            (
                None,
                None,
                "maestro's Sentinel already watches this project's logs and reports each anomaly to comms.db in the Sentinel's format (a maestro runs with report_to_db); an LLM Sentinel beside it would report each one twice. Nothing to run instead: its reports reach you as messages to task-00, with your next tool call and through your message-watcher.".into(),
            )
        }),
    }
}

/// Whether the command maestro would name can do its duty now: the project's database
/// opens with the orchestration's schema (and holds `task`, when one is named), and
/// maestro's data folder is writable.
pub fn duty_ready(root: &Path, task: Option<&TaskId>) -> bool {
    use nix::unistd::{AccessFlags, access};
    let data_ok = crate::core::paths::data_dir().is_some_and(|d| {
        std::fs::create_dir_all(&d).is_ok() && access(&d, AccessFlags::W_OK).is_ok()
    });
    if !data_ok {
        return false;
    }
    // The schema's own checks (not the store's: hooks sit below it).
    let db = root.join("comms.db");
    if !db.is_file() || !crate::core::schema::writable(&db) {
        return false;
    }
    let Ok(conn) = crate::core::schema::open(&db) else {
        return false;
    };
    // A hook never waits long: a database held by another writer fails open (the
    // session's call goes on as if maestro had no replacement to name).
    if conn.busy_timeout(HOOK_BUSY_WAIT).is_err() {
        return false;
    }
    if crate::core::schema::verify(&conn, &db).is_err() {
        return false;
    }
    task.is_none_or(|t| {
        conn.query_row(
            "SELECT 1 FROM orchestration_tasks WHERE task_id = ?1",
            [t.as_str()],
            |_| Ok(()),
        )
        .is_ok()
    })
}

/// The longest a hook waits on a database another process holds.
const HOOK_BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// ` --project DIR` when the session's folder is not the project's root.
fn project_flag(ctx: &Context<'_>) -> String {
    let at_root = ctx
        .cwd
        .and_then(|c| std::fs::canonicalize(c).ok())
        .is_some_and(|c| c == ctx.project.root);
    if at_root {
        return String::new();
    }
    let root = ctx.project.root.to_string_lossy();
    shlex::try_quote(&root).map_or_else(|_| String::new(), |q| format!(" --project {q}"))
}

/// The answer that lets a call run without a permission prompt (a command the guard
/// named to this session).
pub fn allow_answer(reason: &str) -> Value {
    serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "permissionDecisionReason": reason,
        }
    })
}

/// The answer Claude Code reads on the hook's stdout: the call is denied, with `reason`.
pub fn answer(reason: &str) -> Value {
    serde_json::json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    })
}

/// What a session is known by: its id and the project's database (the recorded tie), the
/// `claude` process that ran the hook, and its transcript.
pub struct SessionFacts<'a> {
    pub db: &'a Path,
    pub session_id: Option<&'a str>,
    pub claude_pid: Option<i32>,
    pub transcript: Option<&'a Path>,
}

/// The task a session is tied to, from what is recorded: the database's row whose
/// `session_id` is this session, else the launch command it was started with
/// (`/musician task-03`, `/conductor`, `/souffleur` as a word of its own) in the `claude`
/// process's arguments or its transcript's first prompt. Words a prompt merely holds
/// (`src/conductor/plan.rs`) tie nothing.
pub fn session_task(facts: &SessionFacts<'_>) -> Option<TaskId> {
    facts
        .session_id
        .and_then(|id| recorded_task(facts.db, id))
        .or_else(|| {
            // The prompt is one argument among options (`-p`, `--permission-mode
            // acceptEdits`): each is weighed alone, never the line they make joined.
            let args = crate::core::procs::cmdline(facts.claude_pid?)?;
            args.iter().skip(1).find_map(|a| task_of_prompt(a))
        })
        .or_else(|| transcript_task(facts.transcript?))
}

/// The task whose row records `session_id` as its session (never waiting on a writer).
fn recorded_task(db: &Path, session_id: &str) -> Option<TaskId> {
    if !db.is_file() {
        return None;
    }
    let conn = crate::core::schema::open_without_writing(db).ok()?;
    conn.busy_timeout(HOOK_BUSY_WAIT).ok()?;
    let task: String = conn
        .query_row(
            "SELECT task_id FROM orchestration_tasks WHERE session_id = ?1 ORDER BY task_id LIMIT 1",
            [session_id],
            |r| r.get(0),
        )
        .ok()?;
    TaskId::parse(&task)
}

/// The task named by a transcript's first prompt: the start of the file only.
fn transcript_task(transcript: &Path) -> Option<TaskId> {
    use std::io::Read;
    let (file, _) = crate::core::safe_fs::open_regular(transcript).ok()?;
    let mut head = Vec::new();
    file.take(256 * 1024).read_to_end(&mut head).ok()?;
    let first = head
        .split(|b| *b == b'\n')
        .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
        .find(|v| {
            v.get("type").and_then(Value::as_str) == Some("user")
                && v.get("isSidechain").and_then(Value::as_bool) != Some(true)
        })?;
    let prompt = crate::core::text::prompt_text(first.get("message")?.get("content")?)?;
    task_of_prompt(&prompt)
}

/// `/musician task-03 …` → task-03; `/conductor …` → task-00; `/souffleur …` → souffleur
/// (as `maestro usage` ties a session: [`crate::core::sessions::find::task_by_command`]).
pub fn task_of_prompt(prompt: &str) -> Option<TaskId> {
    TaskId::parse(&crate::core::sessions::find::task_by_command(prompt)?)
}

#[cfg(test)]
mod tests;
