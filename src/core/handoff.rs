//! The Conductor's handoff procedure for relaunching a Musician (the Conductor skill's
//! Musician lifecycle): which handoff this is, who the next session is, and what the
//! handoff message says. Pure: the caller gathers the facts and carries out the plan.
//!
//! - clean: `temp/<task>-HANDOFF` present and context ≤ 80 %;
//! - dirty: a HANDOFF but context above 80 % (the message asks to re-run every
//!   verification test from the last completed checkpoint);
//! - crash: no HANDOFF (the PID is checked first; the message names the last completed
//!   step and asks to verify it before going on).

use serde::Serialize;

use crate::core::domain::TaskId;

/// Above this context a HANDOFF is not trusted without re-running the tests.
pub const TRUSTED_CONTEXT: i64 = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoffKind {
    Clean,
    Dirty,
    Crash,
}

impl HandoffKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Dirty => "dirty",
            Self::Crash => "crash",
        }
    }
}

/// What the relaunch found.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub handoff_present: bool,
    /// The last `[ctx: …]` value of the status file.
    pub context: Option<i64>,
    /// The old window is still running (for a crash: stuck rather than dead).
    pub pid_alive: bool,
    pub worked_by: Option<String>,
    /// The last "step N … completed" line of the status file.
    pub last_completed: Option<String>,
    pub deviations: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub kind: HandoffKind,
    pub previous: String,
    pub next: String,
    /// `S2`, `S3`, … for titles.
    pub generation: String,
    pub message: String,
}

/// `musician-task-03` → `musician-task-03-S2` → `-S3`; anything else starts at S2.
pub fn next_worked_by(task: &TaskId, current: Option<&str>) -> String {
    let base = format!("musician-{task}");
    let n = current
        .and_then(|c| c.strip_prefix(&base))
        .and_then(|rest| match rest {
            "" => Some(1),
            _ => rest.strip_prefix("-S")?.parse::<u32>().ok(),
        })
        .unwrap_or(1);
    format!("{base}-S{}", n + 1)
}

pub fn plan(task: &TaskId, facts: &Facts) -> Plan {
    let kind = match (facts.handoff_present, facts.context) {
        (true, Some(c)) if c > TRUSTED_CONTEXT => HandoffKind::Dirty,
        (true, _) => HandoffKind::Clean,
        (false, _) => HandoffKind::Crash,
    };
    let previous = facts
        .worked_by
        .clone()
        .unwrap_or_else(|| format!("musician-{task}"));
    let next = next_worked_by(task, facts.worked_by.as_deref());
    let generation = next.rsplit('-').next().unwrap_or("S2").to_owned();
    let context = facts
        .context
        .map_or_else(|| "unknown".to_owned(), |c| format!("{c}%"));
    let message = match kind {
        HandoffKind::Clean | HandoffKind::Dirty => {
            let mut m = format!(
                "HANDOFF RECEIVED: Musician session exited ({} handoff).\nPrevious session: {previous}\nHANDOFF: temp/{task}-HANDOFF\nContext usage: {context}\nNext musician: {next}\nAction: Replacement session launched.",
                kind.as_str()
            );
            if kind == HandoffKind::Dirty {
                m.push_str(&format!(
                    "\nPrevious session context was {context} (potential hallucination risk).\nBefore proceeding: Re-run ALL verification tests from last completed checkpoint.\nIf any fail, do NOT trust the test results in the HANDOFF — use your own judgment."
                ));
            }
            m
        }
        HandoffKind::Crash => {
            let last = facts
                .last_completed
                .clone()
                .unwrap_or_else(|| "no completed step recorded".to_owned());
            format!(
                "CRASH DETECTED: No HANDOFF doc. Previous session {}.\nPrevious session: {previous}\nLast known state: temp/{task}-status\nLast completed: {last}\nContext at crash: {context}\nDeviations logged: {}\nNext musician: {next}\nAction: Replacement session launched. Verify the last completed step's results before resuming the next one.\nRe-run its tests. Do NOT trust results from the step after it (may be partial/broken).",
                if facts.pid_alive {
                    "was stuck (window alive, no progress)"
                } else {
                    "crashed (window gone)"
                },
                facts.deviations
            )
        }
    };
    Plan {
        kind,
        previous,
        next,
        generation,
        message,
    }
}

/// The last "step … completed" line of a status file, without its `[ctx]` marker.
pub fn last_completed_step(status: &str) -> Option<String> {
    status
        .lines()
        .rev()
        .find(|l| l.contains("step") && l.contains("completed"))
        .map(|l| {
            crate::core::domain::without_context_marker(l)
                .trim()
                .to_owned()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> TaskId {
        TaskId::parse("task-03").expect("id")
    }

    #[test]
    fn the_succession_counts_on() {
        let t = task();
        assert_eq!(
            next_worked_by(&t, Some("musician-task-03")),
            "musician-task-03-S2"
        );
        assert_eq!(
            next_worked_by(&t, Some("musician-task-03-S2")),
            "musician-task-03-S3"
        );
        assert_eq!(
            next_worked_by(&t, Some("musician-task-03-S9")),
            "musician-task-03-S10"
        );
        assert_eq!(next_worked_by(&t, None), "musician-task-03-S2");
        assert_eq!(
            next_worked_by(&t, Some("someone-else")),
            "musician-task-03-S2"
        );
    }

    #[test]
    fn the_kind_follows_the_handoff_and_the_context() {
        let t = task();
        let facts = |handoff, context| Facts {
            handoff_present: handoff,
            context,
            ..Facts::default()
        };
        assert_eq!(plan(&t, &facts(true, Some(80))).kind, HandoffKind::Clean);
        assert_eq!(plan(&t, &facts(true, Some(81))).kind, HandoffKind::Dirty);
        assert_eq!(plan(&t, &facts(false, Some(40))).kind, HandoffKind::Crash);
        let dirty = plan(&t, &facts(true, Some(85)));
        assert!(
            dirty.message.contains("Re-run ALL verification tests"),
            "{}",
            dirty.message
        );
        assert!(!plan(&t, &facts(true, Some(50))).message.contains("Re-run"));
        let crash = plan(
            &t,
            &Facts {
                last_completed: Some("step 2 completed".into()),
                ..facts(false, Some(44))
            },
        );
        assert!(crash.message.starts_with("CRASH DETECTED"));
        assert!(crash.message.contains("Last completed: step 2 completed"));
        assert!(crash.message.contains("Context at crash: 44%"));
        assert_eq!(crash.generation, "S2");
    }
}
