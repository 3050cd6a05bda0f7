//! Claude Code's `Monitor` tool: one call starts a shell command in the background, and
//! each line it prints reaches the model later as a `<task-notification>` of its own (a
//! new model request each). Learned by running Claude Code 2.1.328: the call's result
//! names the monitor (`taskId`), and an event is a `user` line (a hook's
//! `UserPromptSubmit` in the session itself, a transcript line with `origin.kind`
//! `task-notification` in a subagent) holding
//!
//! ```text
//! <task-notification>
//! <task-id>b0icwtp12</task-id>
//! <summary>Monitor event: "task-03 state"</summary>
//! <event>working</event>
//! </task-notification>
//! ```
//!
//! The loop rule reads each event as a look of the call that started its monitor: a
//! monitor that prints the same row again and again polls as a loop of calls does.

use serde_json::Value;

/// The tool's name.
pub const TOOL: &str = "Monitor";

/// One event a monitor printed, as the model was handed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// The monitor's id (the `taskId` of the call that started it).
    pub task_id: &'a str,
    /// The line it printed.
    pub text: &'a str,
}

/// The text between `<tag>` and the next `</tag>` in `text`, and what follows it.
fn element<'a>(text: &'a str, tag: &str) -> Option<(&'a str, &'a str)> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&close)?;
    Some((
        &text[start..start + len],
        &text[start + len + close.len()..],
    ))
}

/// The `<task-notification>` blocks of a text, in order.
fn blocks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let (block, after) = element(rest, "task-notification")?;
        rest = after;
        Some(block)
    })
}

/// The monitor events a notification holds (several, when they came while the model
/// was busy), in order. Other notifications (a background command's end, a subagent
/// waiting) hold none.
pub fn events(text: &str) -> Vec<Event<'_>> {
    blocks(text)
        .filter_map(|block| {
            let (task_id, _) = element(block, "task-id")?;
            let (text, _) = element(block, "event")?;
            Some(Event {
                task_id: task_id.trim(),
                text,
            })
        })
        .collect()
}

/// The id of the monitor a `Monitor` call started, from its result: the data (the
/// hook's `tool_response`, a session's `toolUseResult`), else the text the model read
/// (`Monitor started (task b0icwtp12, expires …`: a subagent's transcript keeps only that).
pub fn task_id(response: &Value) -> Option<&str> {
    let id = match response {
        Value::String(text) => text
            .strip_prefix("Monitor started (task ")?
            .split([',', ')', ' '])
            .next()?,
        _ => response.get("taskId").and_then(Value::as_str)?,
    };
    crate::core::paths::is_safe_id(id).then_some(id)
}

/// The ids of the tasks a notification is about (a monitor's, a subagent's).
pub fn notified_tasks(text: &str) -> Vec<&str> {
    blocks(text)
        .filter_map(|block| element(block, "task-id").map(|(id, _)| id.trim()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str = "<task-notification>\n<task-id>b0icwtp12</task-id>\n<summary>Monitor event: \"task-03 state\"</summary>\n<event>working</event>\n</task-notification>";

    #[test]
    fn an_event_is_read_from_its_notification() {
        assert_eq!(
            events(EVENT),
            [Event {
                task_id: "b0icwtp12",
                text: "working"
            }]
        );
        // As a subagent reads it: Claude Code's warning before it, two joined.
        let joined = format!("[SYSTEM NOTIFICATION - NOT USER INPUT]\n\n{EVENT}\n{EVENT}");
        assert_eq!(events(&joined).len(), 2);
    }

    #[test]
    fn a_monitors_id_is_read_from_its_result() {
        let said = Value::String(
            "Monitor started (task b0x, expires in 30s unless the source ends first).".into(),
        );
        assert_eq!(task_id(&said), Some("b0x"));
        assert_eq!(task_id(&serde_json::json!({"taskId": "b0x"})), Some("b0x"));
        assert_eq!(
            task_id(&Value::String("Error: no such command".into())),
            None
        );
        assert_eq!(task_id(&serde_json::json!({"taskId": "../x"})), None);
    }

    #[test]
    fn other_notifications_hold_no_event() {
        let ended = "<task-notification>\n<task-id>a02</task-id>\n<status>completed</status>\n<summary>Agent \"watch\" is waiting on its own background work</summary>\n</task-notification>";
        assert!(events(ended).is_empty());
        assert_eq!(notified_tasks(ended), ["a02"]);
        assert!(events("<task-notification><task-id>x</task-id><event>cut").is_empty());
        assert!(events("/musician task-03").is_empty());
    }
}
