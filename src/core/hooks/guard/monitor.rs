//! A subagent that polls through a `Monitor` (`core::sessions::monitor`): one call, then
//! a model request for every line its command prints. No hook sees a subagent's
//! notifications, and it makes no call the guard could refuse; but each time the
//! subagent ends a turn its session is told (a `UserPromptSubmit` holding a
//! `<task-notification>` naming the subagent). There the guard reads the subagent's
//! transcript by the rule `maestro usage` reads it with ([`LoopWatch`]), so the two
//! agree by construction.
//!
//! A monitor whose events say the same thing a third time, with time passing and no
//! progress, is stopped: its command's shell is ended (the subagent's next event is the
//! stream's end), the subagent is marked stopped (any later call of it, a new monitor
//! too, is refused with the reason), its prompt is refused at its next launch, and the
//! session's model is told, beside the notification, what to run in its place.
//!
//! [`LoopWatch`]: crate::core::sessions::loop_watch::LoopWatch

use serde_json::Value;

use super::{Answer, Lookups, Verdict, ledger, stop_subagent, subagent_transcript};
use crate::core::hooks::replace;
use crate::core::sessions::{monitor, prices::PriceTable, tally::Tally};

/// The most of a subagent's transcript read (a monitor's poller is a few kilobytes).
const MAX_TRANSCRIPT: u64 = 1024 * 1024;

/// How long Claude Code may hold a line before it writes the transcript (its queue
/// drains every 100 ms, learned from the program), with room to spare.
const TRANSCRIPT_FLUSH: std::time::Duration = std::time::Duration::from_millis(200);

/// A subagent's transcript read by `maestro usage`'s rule.
fn read(path: &std::path::Path) -> Option<Tally> {
    let bytes = crate::core::safe_fs::read_regular(path, MAX_TRANSCRIPT).ok()?;
    let prices = PriceTable::default();
    let mut tally = Tally::new();
    for line in bytes.split(|b| *b == b'\n') {
        tally.feed_bytes(line, &prices);
    }
    Some(tally)
}

/// The guard's verdict on a notification to the session itself: the subagents it names
/// whose monitor loops, stopped.
pub fn at_notification(event: &Value, look: &Lookups<'_>) -> Option<Verdict> {
    let text = |k: &str| event.get(k).and_then(Value::as_str);
    if text("hook_event_name") != Some("UserPromptSubmit")
        || text("agent_id").is_some_and(|a| !a.is_empty())
    {
        return None;
    }
    let ledger = look.ledger?;
    let prompt = text("prompt")?;
    let mut told = Vec::new();
    let mut replaced = None;
    for agent in monitor::notified_tasks(prompt) {
        // Only a subagent that started a monitor is read, and one stopped is told.
        if !ledger.has_monitor(agent) || ledger.stopped(agent).is_some() {
            continue;
        }
        if let Some((tell, r)) = judge_subagent(event, agent, look, ledger) {
            told.push(tell);
            replaced.get_or_insert(r);
        }
    }
    (!told.is_empty()).then(|| Verdict {
        answer: Answer::Tell(told.join("\n")),
        replaced,
    })
}

/// One subagent named by a notification: what the session is told, once its monitor
/// loops and maestro can do its job.
fn judge_subagent(
    event: &Value,
    agent: &str,
    look: &Lookups<'_>,
    ledger: &ledger::Ledger,
) -> Option<(String, replace::Replaced)> {
    let path = subagent_transcript(event, agent)?;
    let mut tally = read(&path)?;
    if tally.loops.found().is_none() && tally.loops.monitor_commands().next().is_some() {
        // The turn that ended was queued for the file, not yet written: Claude Code
        // writes a transcript every 100 ms.
        std::thread::sleep(TRANSCRIPT_FLUSH);
        tally = read(&path)?;
    }
    // A loop of calls is the guard's at the call (`in_subagent`); this one is the
    // monitor's.
    let states = tally
        .loops
        .found_by_monitor()
        .filter(|s| !s.is_empty())?
        .to_vec();
    let refusal = stop_subagent(ledger, agent, &states, tally.agent_prompt.as_deref(), look)?;
    if let Some(claude) = look.claude_pid {
        for command in tally.loops.monitor_commands() {
            crate::core::procs::end_shells_running(claude, command);
        }
    }
    let tell = replace::monitor_stopped(agent, refusal.replaced.command.as_deref());
    Some((tell, refusal.replaced))
}
