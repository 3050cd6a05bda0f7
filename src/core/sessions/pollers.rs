//! The orchestration's LLM pollers, recognised among a session's subagents by the
//! prompt that launched them (a subagent file's first user line): the work maestro's
//! actors do at no cost, still paid for while a skill launches them.
//!
//! Each role is named by phrases its prompt always holds, never by the parts a launcher
//! fills in (task lists, PIDs, session ids). Whitespace is compared loosely (a prompt
//! may be re-wrapped). A subagent that matches no row is not a poller.

/// One poller: its role, the phrases its launch prompt holds (all of them), where they
/// come from, and the maestro command that does its work.
pub struct Poller {
    pub role: &'static str,
    pub phrases: &'static [&'static str],
    pub source: &'static str,
    pub replaced_by: &'static str,
}

/// The table, most specific first.
pub const POLLERS: &[Poller] = &[
    Poller {
        role: "sentinel",
        phrases: &[
            "You are the Sentinel",
            "a monitoring teammate watching Musicians' progress logs for anomalies",
        ],
        source: "the Sentinel monitoring protocol, \"Sentinel Launch Prompt\" (seed)",
        replaced_by: "maestro --no-tui --report-to-db (maestro's Sentinel, reporting to the Conductor)",
    },
    Poller {
        role: "souffleur-watcher",
        phrases: &[
            "Poll the Conductor's liveness every ~60 seconds",
            "Watcher mode:",
        ],
        source: "kyle-skills/souffleur, its subagent prompts reference: the watcher prompts (normal and heartbeat-only)",
        replaced_by: "maestro souffleur PID:<pid> SESSION_ID:<id> (the watchdog role)",
    },
    Poller {
        role: "souffleur-teammate",
        phrases: &[
            "You are the Souffleur's self-monitor",
            "background watcher is alive",
        ],
        source: "kyle-skills/souffleur, its subagent prompts reference: the teammate (self-monitor) prompt",
        replaced_by: "maestro souffleur PID:<pid> SESSION_ID:<id> (the watchdog role)",
    },
    // The Musician writes its watchers' prompts from its watcher protocol (the skill has
    // no verbatim one): recognised by the protocol's own words for the job.
    Poller {
        role: "musician-pause-watcher",
        phrases: &["pause watcher", "last_heartbeat", "needs_review"],
        source: "kyle-skills/musician, its watcher protocol reference: \"Pause Watcher\"",
        replaced_by: "maestro musician watch TASK --pause",
    },
    Poller {
        role: "musician-watcher",
        phrases: &[
            "background watcher",
            "last_heartbeat",
            "orchestration_messages",
        ],
        source: "kyle-skills/musician, its watcher protocol reference: \"Background Watcher\"",
        replaced_by: "maestro musician watch TASK",
    },
];

/// The poller a subagent's launch prompt makes it, if any.
pub fn role_of(prompt: &str) -> Option<&'static Poller> {
    let text = loose(prompt);
    POLLERS
        .iter()
        .find(|p| p.phrases.iter().all(|phrase| text.contains(&loose(phrase))))
}

/// Lower case, runs of whitespace as one space.
fn loose(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launch_prompts_are_recognised_by_their_fixed_phrases() {
        let sentinel = "You are the Sentinel — a monitoring teammate watching Musicians'\n  progress logs for anomalies.\n\n**Active tasks to monitor:** task-03, task-07";
        assert_eq!(role_of(sentinel).map(|p| p.role), Some("sentinel"));
        let watcher = "Poll the Conductor's liveness every ~60 seconds using comms-link.\n\nConductor PID: 4242\nWatcher mode: heartbeat-only (PID unavailable)";
        assert_eq!(role_of(watcher).map(|p| p.role), Some("souffleur-watcher"));
        let teammate = "You are the Souffleur's self-monitor. Your job is to ensure the\nbackground watcher is alive by checking the Souffleur's heartbeat.";
        assert_eq!(
            role_of(teammate).map(|p| p.role),
            Some("souffleur-teammate")
        );
        let pause = "You are task-03's pause watcher: every 10 s read its state; refresh last_heartbeat when older than 60 s; exit when it is no longer error or needs_review.";
        assert_eq!(
            role_of(pause).map(|p| p.role),
            Some("musician-pause-watcher")
        );
        let background = "Background watcher for task-03: poll orchestration_messages for id > 12 every 15 s and refresh last_heartbeat.";
        assert_eq!(
            role_of(background).map(|p| p.role),
            Some("musician-watcher")
        );
        for ordinary in [
            "SUB-4K: list the files",
            "Add a unit test for the empty input edge case of extractContent()",
            "You are the Sentinel of this codebase: review it",
        ] {
            assert!(role_of(ordinary).is_none(), "{ordinary}");
        }
    }
}

/// What one poller subagent cost, as `maestro usage` lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PollerFigures {
    pub role: String,
    /// The subagent's id (`agent-<id>.jsonl`).
    pub agent: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_write_tokens: u64,
    pub cache_read_tokens: u64,
    pub total_tokens: u64,
    /// At list prices; `None` when a model has no price.
    pub cost_usd: Option<f64>,
    pub last_activity: Option<String>,
}

/// The pollers among a session's subagents, in the order their files were read.
pub fn pollers_of(agents: &[&crate::core::sessions::tally::Tally]) -> Vec<PollerFigures> {
    agents
        .iter()
        .filter_map(|a| {
            let poller = role_of(a.agent_prompt.as_deref()?)?;
            Some(PollerFigures {
                role: poller.role.to_owned(),
                agent: a.agent_id.clone(),
                input_tokens: a.tokens.input,
                output_tokens: a.tokens.output,
                cache_write_tokens: a.tokens.cache_write,
                cache_read_tokens: a.tokens.cache_read,
                total_tokens: a.tokens.total(),
                cost_usd: a.cost_usd.map(|c| (c * 1e6).round() / 1e6),
                last_activity: a.last_activity.clone(),
            })
        })
        .collect()
}
