//! `doctor`'s word on the poll loops the guard saw but did not stop: a main session's
//! own (its model is the operator's to steer), or a subagent's with no maestro command
//! to replace it (no role recorded for its session, or a role whose duty maestro cannot
//! do there). Seen and counted, so "zero LLM pollers" can be measured.

use crate::core::sessions::deeds::State;

/// One warning naming each loop seen and not stopped in the project, if any was.
pub fn seen_loops(root: &std::path::Path) -> Option<String> {
    let key = crate::core::paths::ProjectKey::of(root);
    let dir = crate::core::paths::data_dir()?.join("guard").join(&key.key);
    let seen = crate::core::hooks::guard::ledger::seen_loops(&dir);
    if seen.is_empty() {
        return None;
    }
    let each: Vec<String> = seen
        .iter()
        .map(|(session, agent, states)| {
            let who = if agent == "main" {
                "its own calls".to_owned()
            } else {
                format!("subagent {}", crate::core::text::printable(agent))
            };
            let what: Vec<&str> = states.iter().map(|s| describe(*s)).collect();
            format!(
                "session {} ({who}) read {} in a loop",
                crate::core::text::printable(session),
                what.join(" and ")
            )
        })
        .collect();
    Some(format!(
        "{} poll {} seen and not stopped (no maestro command replaces {}): {}. See docs/orchestration.md, \"What the guard stops and what it only reports\".",
        each.len(),
        if each.len() == 1 { "loop" } else { "loops" },
        if each.len() == 1 { "it" } else { "them" },
        each.join("; ")
    ))
}

fn describe(state: State) -> &'static str {
    match state {
        State::Comms => "comms.db",
        State::Logs => "the logs in temp/",
        State::Pid => "a process's life",
    }
}
