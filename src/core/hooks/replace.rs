//! `maestro hook --replace-pollers`: a `PreToolUse` of `Agent`/`Task` that launches a
//! known LLM poller is refused, and the refusal's reason (which Claude Code hands the
//! model as the tool's result) names the maestro command that does the job instead.
//!
//! Nothing is refused unless its duty is done: a Musician's watcher only when its task is
//! known (the command names it), the Souffleur's watcher only with the ids its command
//! needs, the LLM Sentinel only while a maestro reports to the project's database. The
//! self-monitor guards a watcher that is now a process whose end Claude Code reports: it
//! is refused with nothing to run.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::domain::TaskId;
use crate::core::domain::souffleur::WatcherMode;
use crate::core::paths::ProjectKey;
use crate::core::sessions::pollers::{self, Launch, Poller};

/// A poller launch refused, as the hook spools it for the running maestros.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replaced {
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The command named instead (`None`: nothing to run, the self-monitor; the Sentinel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
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

/// The refusal for a hook event, if it launches a poller whose duty is covered.
pub fn refusal(event: &Value, ctx: &Context<'_>) -> Option<Refusal> {
    if !launches_subagent(event) {
        return None;
    }
    let input = event.get("tool_input")?;
    let prompt = crate::core::text::prompt_text(input.get("prompt")?)?;
    let launch = Launch {
        prompt: &prompt,
        background: input.get("run_in_background").and_then(Value::as_bool),
        session_task: ctx.session_task,
    };
    let poller = pollers::recognise(&launch)?;
    let (task, command, reason) = instead(&poller, ctx)?;
    Some(Refusal {
        replaced: Replaced {
            role: poller.role().to_owned(),
            task_id: task,
            command,
        },
        reason,
    })
}

/// Whether a hook event is the launch of a subagent (`PreToolUse` of `Agent`, or of
/// `Task`, its older name): the only event a poller can be refused at.
pub fn launches_subagent(event: &Value) -> bool {
    let text = |k: &str| event.get(k).and_then(Value::as_str);
    text("hook_event_name") == Some("PreToolUse")
        && matches!(text("tool_name"), Some("Agent" | "Task"))
}

type Instead = (Option<String>, Option<String>, String);

fn instead(poller: &Poller, ctx: &Context<'_>) -> Option<Instead> {
    let run = |args: &str| format!("{}{args}{}", ctx.program, project_flag(ctx));
    match poller {
        Poller::MusicianWatcher { task, pause } => {
            let task = task.as_ref()?.as_str().to_owned();
            let (command, does) = if *pause {
                (
                    run(&format!(" musician watch {task} --pause")),
                    format!(
                        "keeps {task}'s heartbeat fresh and exits, printing what came, when the Conductor ends the pause (or has been silent too long)"
                    ),
                )
            } else {
                (
                    run(&format!(" musician watch {task}")),
                    format!(
                        "keeps {task}'s heartbeat fresh and exits, printing the message, when the Conductor writes to {task}"
                    ),
                )
            };
            let reason = format!(
                "maestro does this watcher's job without an LLM: run `{command}` with Bash (run_in_background: true) instead; it {does}."
            );
            Some((Some(task), Some(command), reason))
        }
        Poller::SouffleurWatcher {
            mode,
            pid,
            session_id,
            awaiting_session_id,
        } => {
            let session = session_id.as_deref()?;
            let mut args = String::from(" souffleur --watcher");
            match mode {
                WatcherMode::Normal => args.push_str(&format!(" PID:{}", (*pid)?)),
                WatcherMode::HeartbeatOnly => args.push_str(" --heartbeat-only"),
            }
            args.push_str(&format!(" SESSION_ID:{session}"));
            if *awaiting_session_id {
                args.push_str(" --awaiting-session-id");
            }
            let command = run(&args);
            let reason = format!(
                "maestro does the Souffleur watcher's job without an LLM: run `{command}` with Bash (run_in_background: true) instead; it keeps the souffleur heartbeat fresh and exits with the watcher's report (CONDUCTOR_DEAD:pid, CONDUCTOR_DEAD:heartbeat, SESSION_ID_FOUND:<id>, CONDUCTOR_COMPLETE or CONTEXT_RECOVERY, and the task count): act on its output as on the watcher's."
            );
            Some((Some("souffleur".into()), Some(command), reason))
        }
        Poller::SouffleurTeammate => Some((
            Some("souffleur".into()),
            None,
            "maestro needs no self-monitor here: the watcher is a maestro process run with Bash in the background, and Claude Code tells you when it exits, so it cannot die silently. Nothing to run instead.".into(),
        )),
        Poller::Sentinel => (ctx.reporting)().then(|| {
            (
                None,
                None,
                "maestro's Sentinel already watches this project's logs and reports each anomaly to comms.db in the Sentinel's format (a maestro runs with report_to_db); an LLM Sentinel beside it would report each one twice. Nothing to run instead: read its messages as before.".into(),
            )
        }),
    }
}

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

/// The task a session is tied to, from the prompt it was started with (`/musician
/// task-03`, `/conductor`, `/souffleur`): the `claude` process's arguments, else the
/// first prompt of its transcript (Claude Code may not have written it yet).
pub fn session_task(claude_pid: Option<i32>, transcript: Option<&Path>) -> Option<TaskId> {
    claude_pid
        .and_then(crate::core::procs::cmdline)
        .and_then(|args| task_of_prompt(&args.get(1..)?.join(" ")))
        .or_else(|| transcript_task(transcript?))
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

/// `/musician task-03 …` → task-03; `/conductor …` → task-00; `/souffleur …` → souffleur.
fn task_of_prompt(prompt: &str) -> Option<TaskId> {
    static MUSICIAN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?s)/musician\b.{0,80}?\b(task-\d{2,4})\b").expect("static regex")
    });
    if let Some(c) = MUSICIAN.captures(prompt) {
        return TaskId::parse(&c[1]);
    }
    if prompt.contains("/conductor") {
        return TaskId::parse(crate::core::domain::CONDUCTOR_ID);
    }
    prompt
        .contains("/souffleur")
        .then(|| TaskId::parse(crate::core::domain::SOUFFLEUR_ID))
        .flatten()
}

#[cfg(test)]
mod tests;
