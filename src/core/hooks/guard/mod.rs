//! The poller guard (`maestro hook --replace-pollers`): a subagent is judged by what it
//! does and by who launched it, not by the words of its prompt.
//!
//! Every `PostToolUse` carries what the call did (`tool_response`, `duration_ms`); the
//! guard keeps it as a look in the session's [`ledger`], per subagent (`agent_id`). At
//! a `PreToolUse` that closes a poll loop over the orchestration's state (the loop rule,
//! [`loops::closes_loop`]: the same look, the same result, time passing, no progress) the
//! subagent is stopped: that call and every later one is refused with a reason telling
//! it to end and hand its caller the maestro command that does its duty
//! ([`replace::stop_in_loop`]). The command is then allowed to run in that session
//! without a permission prompt, and the prompt that looped is refused at its next
//! launch. A loop maestro has no replacement for, or the main session's own, is only
//! remembered as seen (`doctor` reports it). A launch is otherwise refused only where
//! words are certain ([`replace::refusal`]).

pub mod ledger;
mod monitor;

use std::path::Path;

use serde_json::Value;

use crate::core::hooks::replace::{self, Refusal, Replaced, Stage};
use crate::core::sessions::loops;
use ledger::{Caught, Ledger};

/// What the hook answers Claude Code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The call is refused, with the reason the model reads.
    Deny(String),
    /// The call runs without a permission prompt (a command the guard named).
    Allow(String),
    /// A prompt goes on, with this beside it for the model (a notification).
    Tell(String),
}

impl Answer {
    pub fn to_json(&self) -> Value {
        match self {
            Self::Deny(reason) => replace::answer(reason),
            Self::Allow(reason) => replace::allow_answer(reason),
            Self::Tell(text) => serde_json::json!({"hookSpecificOutput": {
                "hookEventName": "UserPromptSubmit", "additionalContext": text}}),
        }
    }
}

/// The guard's verdict on one event: its answer and, for a new refusal, what to spool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub answer: Answer,
    pub replaced: Option<Replaced>,
}

/// Runs a decision with the refusal context (the session's task, maestro's name in a
/// shell, …), which the hook looks up only then.
pub type WithContext<'a> =
    dyn Fn(&mut dyn FnMut(&replace::Context<'_>) -> Option<Refusal>) -> Option<Refusal> + 'a;

/// What the guard asks of the hook. The hook runs before every tool call: an ordinary
/// call reads one small ledger file and nothing else.
pub struct Lookups<'a> {
    pub root: &'a Path,
    pub ledger: Option<&'a Ledger>,
    pub context: &'a WithContext<'a>,
    /// Now, in ms since the epoch.
    pub now_ms: i64,
    /// The `claude` process that ran the hook (a stopped monitor's shell is its child).
    pub claude_pid: Option<i32>,
}

/// The ledger's name for the calls of the session itself (not a subagent's).
const MAIN: &str = "main";

/// After a call ran (`PostToolUse`, or `PostToolUseFailure` for one that failed: its
/// error is its result): what it did, kept as the caller's latest look.
pub fn remember(event: &Value, look: &Lookups<'_>) {
    let text = |k: &str| event.get(k).and_then(Value::as_str);
    let failed = match text("hook_event_name") {
        Some("PostToolUse") => false,
        Some("PostToolUseFailure") => true,
        _ => return,
    };
    let (Some(ledger), Some(tool)) = (look.ledger, text("tool_name")) else {
        return;
    };
    let agent = text("agent_id").filter(|a| !a.is_empty()).unwrap_or(MAIN);
    let duration = event
        .get("duration_ms")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let input = event.get("tool_input").unwrap_or(&Value::Null);
    let response = if failed {
        event.get("error").unwrap_or(&Value::Null)
    } else {
        event.get("tool_response").unwrap_or(&Value::Null)
    };
    // A monitor started: its events are its looks, not this note (`monitor`), read
    // from the subagent's transcript at its session's notifications.
    if tool == crate::core::sessions::monitor::TOOL
        && crate::core::sessions::monitor::task_id(response).is_some()
    {
        if agent != MAIN {
            ledger.add_monitor(agent);
        }
        return;
    }
    let earlier = ledger.looks(agent);
    let at = look.now_ms - duration.clamp(0, 24 * 3600 * 1000);
    ledger.add_look(
        agent,
        &loops::look(tool, input, response, at, look.root, &earlier),
    );
}

/// The guard's verdict on a hook event, `None` when it lets the call go on as usual.
pub fn judge(event: &Value, look: &Lookups<'_>) -> Option<Verdict> {
    let text = |k: &str| event.get(k).and_then(Value::as_str);
    if text("hook_event_name") == Some("UserPromptSubmit") {
        return monitor::at_notification(event, look);
    }
    if text("hook_event_name") != Some("PreToolUse") {
        return None;
    }
    let tool = text("tool_name")?;
    let input = event.get("tool_input").unwrap_or(&Value::Null);
    if let Some(agent) = text("agent_id").filter(|a| !a.is_empty()) {
        return in_subagent(event, agent, tool, input, look);
    }
    if let Some(ledger) = look.ledger
        && let Some(states) = loops::closes_loop(
            &ledger.looks(MAIN),
            loops::call_hash(tool, input),
            look.now_ms,
        )
        && !states.is_empty()
    {
        // The session's own loop: seen, never stopped (its model is the operator's).
        ledger.saw_loop(MAIN, &states);
    }
    match tool {
        "Bash" => {
            let command = input.get("command").and_then(Value::as_str)?;
            look.ledger?.is_allowed(command).then(|| Verdict {
                answer: Answer::Allow("maestro named this command to replace an LLM poller".into()),
                replaced: None,
            })
        }
        "Agent" | "Task" => at_launch(event, look),
        _ => None,
    }
}

/// A subagent's launch: refused when its prompt was caught polling in this session, or
/// is a skill's verbatim poller prompt from the session that holds its role.
fn at_launch(event: &Value, look: &Lookups<'_>) -> Option<Verdict> {
    let prompt = replace::launch_prompt(event)?;
    let caught = look
        .ledger
        .and_then(|l| l.caught(ledger::prompt_hash(&prompt)));
    let refusal = match caught {
        Some(c) => {
            // Still only while its duty can be done.
            let ready = (look.context)(&mut |ctx| {
                let task = c
                    .replaced
                    .task_id
                    .as_deref()
                    .and_then(crate::core::domain::TaskId::parse);
                let ready = replace::duty_ready(
                    &ctx.project.root,
                    task.as_ref().filter(|t| t.is_musician()),
                );
                ready.then(|| Refusal {
                    replaced: c.replaced.clone(),
                    reason: c.reason.clone(),
                })
            });
            ready.map(|mut r| {
                r.replaced.at = Some(Stage::Launch);
                r
            })
        }
        None => (look.context)(&mut |ctx| replace::refusal(event, ctx)),
    }?;
    if let (Some(ledger), Some(command)) = (look.ledger, &refusal.replaced.command) {
        ledger.allow(command);
    }
    Some(Verdict {
        answer: Answer::Deny(refusal.reason),
        replaced: Some(refusal.replaced),
    })
}

/// A call made inside a subagent: kept, and refused once its calls loop.
fn in_subagent(
    event: &Value,
    agent: &str,
    tool: &str,
    input: &Value,
    look: &Lookups<'_>,
) -> Option<Verdict> {
    let ledger = look.ledger?;
    if let Some(reason) = ledger.stopped(agent) {
        return Some(Verdict {
            answer: Answer::Deny(reason),
            replaced: None,
        });
    }
    let history = ledger.looks(agent);
    let states = loops::closes_loop(&history, loops::call_hash(tool, input), look.now_ms)?;
    if states.is_empty() {
        return None;
    }
    let prompt = subagent_prompt(event, agent);
    let refusal = stop_subagent(ledger, agent, &states, prompt.as_deref(), look)?;
    Some(Verdict {
        answer: Answer::Deny(refusal.reason),
        replaced: Some(refusal.replaced),
    })
}

/// A subagent caught in a loop that read `states`: stopped (every later call refused
/// with the reason, the named command allowed, its prompt refused at its next launch)
/// when its session holds the role whose duty the loop does; else only seen.
fn stop_subagent(
    ledger: &Ledger,
    agent: &str,
    states: &[crate::core::sessions::deeds::State],
    prompt: Option<&str>,
    look: &Lookups<'_>,
) -> Option<Refusal> {
    let Some(refusal) = (look.context)(&mut |ctx| replace::stop_in_loop(states, prompt, ctx))
    else {
        ledger.saw_loop(agent, states);
        return None;
    };
    ledger.stop(agent, &refusal.reason);
    if let Some(command) = &refusal.replaced.command {
        ledger.allow(command);
    }
    if let Some(prompt) = prompt {
        ledger.add_caught(&Caught {
            prompt_hash: ledger::prompt_hash(prompt),
            replaced: refusal.replaced.clone(),
            reason: replace::caught_reason(refusal.replaced.command.as_deref()),
        });
    }
    Some(refusal)
}

/// A subagent's transcript: Claude Code 2.1's `<session>/subagents/agent-<id>.jsonl`
/// beside the session's own (an id that is no file name names none).
fn subagent_transcript(event: &Value, agent: &str) -> Option<std::path::PathBuf> {
    let text = |k: &str| event.get(k).and_then(Value::as_str);
    let path = if let Some(p) = text("agent_transcript_path") {
        std::path::PathBuf::from(p)
    } else {
        crate::core::paths::is_safe_id(agent).then_some(())?;
        let main = Path::new(text("transcript_path")?);
        main.parent()?
            .join(text("session_id")?)
            .join("subagents")
            .join(format!("agent-{agent}.jsonl"))
    };
    path.is_absolute().then_some(path)
}

/// The prompt a subagent was launched with: the first line of its transcript.
fn subagent_prompt(event: &Value, agent: &str) -> Option<String> {
    let path = subagent_transcript(event, agent)?;
    let head = crate::core::safe_fs::read_regular(&path, 256 * 1024).ok()?;
    let first = head
        .split(|b| *b == b'\n')
        .find_map(|line| serde_json::from_slice::<Value>(line).ok())?;
    crate::core::text::prompt_text(first.get("message")?.get("content")?)
}
