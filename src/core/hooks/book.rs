//! Which task each session is, and which tasks wait for the operator: the hub's record
//! of the hook events, a pure state machine (events in, changes out).

use std::collections::{BTreeMap, HashMap};
use std::sync::LazyLock;

use regex::Regex;

use crate::core::hooks::event::{HookEvent, Wait, WaitChange};
use crate::core::procs::ProcessId;

/// A hook event as the source hands it over, with what the source learned around it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HookInput {
    pub event: HookEvent,
    /// The task whose window (`temp/musician-task-NN.pid`, the Conductor's PID file) the
    /// `claude` process runs in, when the process tree says so.
    pub window_task: Option<String>,
    /// Whether the `claude` process that ran the hook is still that process (an event
    /// read from the spool at start may be from a session long gone).
    pub claude_alive: bool,
}

/// A task waiting for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub task_id: String,
    pub session_id: String,
    pub wait: Wait,
    /// When it began, Unix milliseconds.
    pub since_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Needs(Waiting),
    Cleared {
        task_id: String,
        waited_s: u64,
        /// When the wait it ends began, Unix milliseconds (which wait it was).
        since_ms: i64,
    },
}

#[derive(Debug, Default)]
pub struct NeedsYouBook {
    session_task: HashMap<String, String>,
    waiting: BTreeMap<String, Waiting>,
    /// The last live `claude` process seen for each task (where `w` takes the operator).
    claude: HashMap<String, ProcessId>,
    /// Events of sessions not tied to a task yet, in order: a permission prompt can come
    /// before the transcript line that names the session's task, and must wait for it.
    held: HashMap<String, std::collections::VecDeque<HookInput>>,
}

/// Events held per untied session (the newest kept), and untied sessions held.
const HELD_PER_SESSION: usize = 32;
const HELD_SESSIONS: usize = 256;

/// `/musician task-03` (the Conductor starts every Musician so).
static MUSICIAN_PROMPT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|\s)/musician\s+(task-\d+(?:-fix)?)(?:$|[^\w-])").expect("static regex")
});

impl NeedsYouBook {
    /// Applies one event. `known_task` says whether a task id is a row of the table;
    /// `by_session` finds the task the database or the session source gives a session.
    pub fn apply(
        &mut self,
        input: &HookInput,
        known_task: impl Fn(&str) -> bool,
        by_session: impl Fn(&str) -> Option<String>,
    ) -> Vec<Change> {
        let e = &input.event;
        let from_prompt = e
            .prompt
            .as_deref()
            .and_then(|p| MUSICIAN_PROMPT.captures(p))
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().to_owned())
            .filter(|t| known_task(t));
        // Exact evidence (the window the process runs in, the prompt) wins and is kept.
        if let Some(task) = input.window_task.clone().or(from_prompt) {
            self.session_task.insert(e.session_id.clone(), task);
        }
        let task = if let Some(t) = self.session_task.get(&e.session_id) {
            t.clone()
        } else {
            let Some(t) = by_session(&e.session_id) else {
                self.hold(input);
                return Vec::new();
            };
            self.session_task.insert(e.session_id.clone(), t.clone());
            t
        };
        if let (Some(pid), true) = (e.claude_pid, input.claude_alive) {
            self.claude.insert(
                task.clone(),
                ProcessId {
                    pid,
                    start_time: e.claude_start,
                },
            );
        }
        match e.wait() {
            WaitChange::Needs(_) if !input.claude_alive => Vec::new(),
            WaitChange::Needs(wait) => {
                if let Some(w) = self.waiting.get(&task)
                    && w.session_id == e.session_id
                    && (w.wait == wait || less_said(&w.wait, &wait))
                {
                    return Vec::new();
                }
                let waiting = Waiting {
                    task_id: task.clone(),
                    session_id: e.session_id.clone(),
                    wait,
                    since_ms: self
                        .waiting
                        .get(&task)
                        .filter(|w| w.session_id == e.session_id)
                        .map_or(e.at_ms, |w| w.since_ms),
                };
                self.waiting.insert(task, waiting.clone());
                vec![Change::Needs(waiting)]
            }
            WaitChange::Clears => match self.waiting.get(&task) {
                Some(w) if w.session_id == e.session_id => {
                    let waited_s = (e.at_ms - w.since_ms).max(0) as u64 / 1000;
                    let since_ms = w.since_ms;
                    self.waiting.remove(&task);
                    vec![Change::Cleared {
                        task_id: task,
                        waited_s,
                        since_ms,
                    }]
                }
                _ => Vec::new(),
            },
            WaitChange::None => Vec::new(),
        }
    }

    fn hold(&mut self, input: &HookInput) {
        let sid = &input.event.session_id;
        if !self.held.contains_key(sid) && self.held.len() >= HELD_SESSIONS {
            return;
        }
        let queue = self.held.entry(sid.clone()).or_default();
        if queue.len() == HELD_PER_SESSION {
            queue.pop_front();
        }
        queue.push_back(input.clone());
    }

    /// The sessions whose events wait for a tie.
    pub fn untied(&self) -> Vec<String> {
        self.held.keys().cloned().collect()
    }

    /// A session's held events, to apply again now that it may be tied.
    pub fn take_held(&mut self, session: &str) -> Vec<HookInput> {
        self.held.remove(session).map(Vec::from).unwrap_or_default()
    }

    /// The task a session was tied to, if any.
    pub fn task_of(&self, session: &str) -> Option<&str> {
        self.session_task.get(session).map(String::as_str)
    }

    /// What a task waits for, if it waits.
    pub fn waiting(&self, task: &str) -> Option<&Waiting> {
        self.waiting.get(task)
    }

    /// The `claude` process last seen for a task.
    pub fn claude_of(&self, task: &str) -> Option<ProcessId> {
        self.claude.get(task).copied()
    }

    /// The sessions the hooks mapped to a task (the session source trusts them first).
    pub fn sessions_of(&self, task: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .session_task
            .iter()
            .filter(|(_, t)| *t == task)
            .map(|(s, _)| s.clone())
            .collect();
        out.sort();
        out
    }
}

/// A second notice of the same prompt that says less (a `Notification` after the
/// `PermissionRequest` that named the tool) changes nothing.
fn less_said(before: &Wait, now: &Wait) -> bool {
    matches!(
        (before, now),
        (
            Wait::Permission { tool: Some(_), .. },
            Wait::Permission { tool: None, .. }
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(v: &serde_json::Value, at_ms: i64) -> HookInput {
        HookInput {
            event: HookEvent::from_claude(v, at_ms).unwrap(),
            window_task: None,
            claude_alive: true,
        }
    }

    fn apply(book: &mut NeedsYouBook, v: &serde_json::Value, at_ms: i64) -> Vec<Change> {
        book.apply(&input(v, at_ms), |t| t.starts_with("task-"), |_| None)
    }

    #[test]
    fn a_permission_prompt_waits_until_the_session_moves_on() {
        let mut book = NeedsYouBook::default();
        assert!(
            apply(
                &mut book,
                &json!({"session_id": "s3", "hook_event_name": "SessionStart"}),
                0
            )
            .is_empty()
        );
        apply(
            &mut book,
            &json!({"session_id": "s3", "hook_event_name": "UserPromptSubmit", "prompt": "/musician task-03"}),
            1_000,
        );
        let got = apply(
            &mut book,
            &json!({"session_id": "s3", "hook_event_name": "PermissionRequest", "tool_name": "Bash", "tool_input": {"command": "cargo publish"}}),
            2_000,
        );
        let [Change::Needs(w)] = got.as_slice() else {
            panic!("{got:?}")
        };
        assert_eq!(
            (w.task_id.as_str(), w.wait.describe()),
            ("task-03", "permission for Bash `cargo publish`".into())
        );
        // The notification of the same prompt says less: nothing new.
        assert!(apply(&mut book, &json!({"session_id": "s3", "hook_event_name": "Notification", "notification_type": "permission_prompt", "message": "Claude needs your permission to use Bash"}), 2_100).is_empty());
        let got = apply(
            &mut book,
            &json!({"session_id": "s3", "hook_event_name": "PostToolUse", "tool_name": "Bash"}),
            47_500,
        );
        assert_eq!(
            got,
            [Change::Cleared {
                task_id: "task-03".into(),
                waited_s: 45,
                since_ms: 2_000
            }]
        );
        assert!(book.waiting("task-03").is_none());
        assert_eq!(book.sessions_of("task-03"), ["s3"]);
    }

    #[test]
    fn an_unknown_session_a_dead_claude_and_another_session_change_nothing() {
        let mut book = NeedsYouBook::default();
        let idle = json!({"session_id": "x", "hook_event_name": "Notification", "notification_type": "idle_prompt"});
        assert!(
            apply(&mut book, &idle, 0).is_empty(),
            "no task for the session"
        );
        let mut dead = input(&idle, 0);
        dead.window_task = Some("task-05".into());
        dead.claude_alive = false;
        assert!(book.apply(&dead, |_| true, |_| None).is_empty());
        let mut live = dead.clone();
        live.claude_alive = true;
        assert_eq!(book.apply(&live, |_| true, |_| None).len(), 1);
        // Another session of the task stopping does not clear this one's wait.
        let other = input(&json!({"session_id": "y", "hook_event_name": "Stop"}), 5);
        assert!(
            book.apply(&other, |_| true, |s| (s == "y").then(|| "task-05".into()))
                .is_empty()
        );
        assert!(book.waiting("task-05").is_some());
    }

    #[test]
    fn only_a_musician_prompt_naming_a_known_task_maps_a_session() {
        let mut book = NeedsYouBook::default();
        for (prompt, mapped) in [
            ("/musician task-03", true),
            ("please /musician task-03-fix now", true),
            ("/musician task-99", false),
            ("look at task-03", false),
            ("/musician task-03x", false),
        ] {
            let sid = format!("s-{prompt}");
            book.apply(
                &input(&json!({"session_id": sid, "hook_event_name": "UserPromptSubmit", "prompt": prompt}), 0),
                |t| t != "task-99",
                |_| None,
            );
            assert_eq!(book.session_task.contains_key(&sid), mapped, "{prompt}");
        }
    }
}
