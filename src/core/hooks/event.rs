//! One Claude Code hook event as maestro keeps it: the few fields it acts on, cut to
//! size and made printable where Claude Code's JSON (which quotes the model's tool
//! calls, so anyone's text) arrives, plus the `claude` process that ran the hook.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::core::text::printable;

/// The events maestro installs hooks for.
pub const EVENTS: [&str; 10] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    // A call that failed (a non-zero exit): Claude Code sends this instead of
    // PostToolUse, with the error as its text. A poller's failing look is a look.
    "PostToolUseFailure",
    "Notification",
    "PermissionRequest",
    "Stop",
    "SessionEnd",
    "PreCompact",
];

/// Not a Claude Code hook: maestro's own note that the `claude` process that last ran a
/// session's hooks has ended (its pidfd said so). Never taken from a hook's input.
pub const PROCESS_ENDED: &str = "maestro:process-ended";

/// The longest prompt kept (enough to see `/musician task-03 …`).
const PROMPT_CHARS: usize = 300;
/// The longest tool argument or notification text kept.
const DETAIL_CHARS: usize = 200;
/// The longest id, name or path kept.
const FIELD_CHARS: usize = 512;

/// One hook event, as spooled by `maestro hook` and read by the hooks source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookEvent {
    /// `hook_event_name`: one of [`EVENTS`] (others are kept but mean nothing).
    pub event: String,
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `UserPromptSubmit`: the start of the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// `Notification`: `permission_prompt`, `idle_prompt`, …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `tool_name` (tool events, `PermissionRequest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's main argument: the command, file path, URL or pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The `claude` process that ran the hook, and its start time (its identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claude_pid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claude_start: Option<u64>,
    /// When `maestro hook` received it, Unix milliseconds.
    pub at_ms: i64,
    /// A poller launch `maestro hook --replace-pollers` refused (a `PreToolUse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<crate::core::hooks::replace::Replaced>,
}

/// Keeps at most `max` characters of printable text, with `…` where it was cut.
fn cut(text: &str, max: usize) -> String {
    let text = printable(text);
    if text.chars().count() <= max {
        return text.into_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn field(v: &Value, key: &str, max: usize) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(|s| cut(s, max))
}

/// The main argument of a tool call, as a person would name it.
fn main_argument(input: &Value) -> Option<String> {
    [
        "command",
        "file_path",
        "notebook_path",
        "url",
        "pattern",
        "path",
        "query",
        "description",
    ]
    .iter()
    .find_map(|k| field(input, k, DETAIL_CHARS))
}

impl HookEvent {
    /// Reads Claude Code's hook JSON; `None` when it is not a hook event (no session id
    /// or event name).
    pub fn from_claude(v: &Value, at_ms: i64) -> Option<Self> {
        let tool_input = v.get("tool_input").unwrap_or(&Value::Null);
        Some(Self {
            event: field(v, "hook_event_name", 64).filter(|e| !e.starts_with("maestro:"))?,
            session_id: field(v, "session_id", 128)?,
            transcript_path: field(v, "transcript_path", FIELD_CHARS),
            cwd: field(v, "cwd", FIELD_CHARS),
            prompt: field(v, "prompt", PROMPT_CHARS),
            notification_type: field(v, "notification_type", 64),
            message: field(v, "message", DETAIL_CHARS),
            tool: field(v, "tool_name", 128),
            detail: main_argument(tool_input),
            claude_pid: None,
            claude_start: None,
            at_ms,
            replaced: None,
        })
    }

    /// [`PROCESS_ENDED`] for `session`, whose `claude` process was `claude`.
    pub fn process_ended(session: &str, claude: (i32, Option<u64>), at_ms: i64) -> Self {
        Self {
            event: PROCESS_ENDED.to_owned(),
            session_id: session.to_owned(),
            transcript_path: None,
            cwd: None,
            prompt: None,
            notification_type: None,
            message: None,
            tool: None,
            detail: None,
            claude_pid: Some(claude.0),
            claude_start: claude.1,
            at_ms,
            replaced: None,
        }
    }

    /// What this event says about the session waiting for the operator.
    pub fn wait(&self) -> WaitChange {
        match self.event.as_str() {
            "PermissionRequest" => WaitChange::Needs(Wait::Permission {
                tool: self.tool.clone(),
                detail: self.detail.clone(),
            }),
            "Notification" => match self.notification_type.as_deref() {
                Some("permission_prompt") => WaitChange::Needs(Wait::Permission {
                    tool: self.tool.clone(),
                    detail: self.detail.clone().or_else(|| self.message.clone()),
                }),
                Some("idle_prompt") => WaitChange::Needs(Wait::Input),
                _ => WaitChange::None,
            },
            // A session whose process is gone waits for nobody.
            "PreToolUse" | "PostToolUse" | "PostToolUseFailure" | "UserPromptSubmit" | "Stop"
            | "SessionEnd" | PROCESS_ENDED => WaitChange::Clears,
            _ => WaitChange::None,
        }
    }
}

/// Why a session waits for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// A permission prompt, for this tool and argument when known.
    Permission {
        tool: Option<String>,
        detail: Option<String>,
    },
    /// Waiting for input.
    Input,
}

impl Wait {
    /// `permission` or `input` (the `needs_you` event's `reason`).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Permission { .. } => "permission",
            Self::Input => "input",
        }
    }

    /// "permission for Bash `cargo publish`", "waiting for input".
    pub fn describe(&self) -> String {
        match self {
            Self::Permission {
                tool: Some(t),
                detail: Some(d),
            } => format!("permission for {t} `{d}`"),
            Self::Permission {
                tool: Some(t),
                detail: None,
            } => format!("permission for {t}"),
            Self::Permission {
                tool: None,
                detail: Some(d),
            } => format!("permission: {d}"),
            Self::Permission { .. } => "permission".into(),
            Self::Input => "waiting for input".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitChange {
    Needs(Wait),
    Clears,
    None,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_hook_cannot_pass_for_maestros_own_note_that_a_process_ended() {
        let v = json!({"session_id": "7f3c", "hook_event_name": PROCESS_ENDED});
        assert_eq!(HookEvent::from_claude(&v, 5), None);
        let ended = HookEvent::process_ended("7f3c", (42, Some(1)), 5);
        assert_eq!(ended.wait(), WaitChange::Clears);
    }

    #[test]
    fn claude_codes_json_is_cut_to_what_maestro_needs() {
        let v = json!({
            "session_id": "7f3c", "hook_event_name": "PermissionRequest",
            "cwd": "/work/p", "transcript_path": "/h/.claude/projects/x/7f3c.jsonl",
            "tool_name": "Bash",
            "tool_input": {"command": "cargo publish\u{1b}]0;pwned\u{7}", "description": "x".repeat(5000)},
        });
        let e = HookEvent::from_claude(&v, 5).unwrap();
        assert_eq!(e.detail.as_deref(), Some("cargo publish·]0;pwned·"));
        assert_eq!(
            e.wait().clone(),
            WaitChange::Needs(Wait::Permission {
                tool: Some("Bash".into()),
                detail: Some("cargo publish·]0;pwned·".into())
            })
        );
        let long = json!({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "y".repeat(10_000)});
        let e = HookEvent::from_claude(&long, 0).unwrap();
        assert_eq!(e.prompt.unwrap().chars().count(), PROMPT_CHARS);
        assert!(HookEvent::from_claude(&json!({"hook_event_name": "Stop"}), 0).is_none());
        assert!(HookEvent::from_claude(&json!([1, 2]), 0).is_none());
    }

    #[test]
    fn which_events_set_and_clear_the_wait() {
        let ev = |name: &str, kind: Option<&str>| HookEvent {
            event: name.into(),
            notification_type: kind.map(str::to_owned),
            ..HookEvent::from_claude(&json!({"session_id": "s", "hook_event_name": "x"}), 0)
                .unwrap()
        };
        assert_eq!(
            ev("Notification", Some("idle_prompt")).wait(),
            WaitChange::Needs(Wait::Input)
        );
        assert!(matches!(
            ev("Notification", Some("permission_prompt")).wait(),
            WaitChange::Needs(Wait::Permission { .. })
        ));
        assert_eq!(
            ev("Notification", Some("auth_success")).wait(),
            WaitChange::None
        );
        for name in [
            "PreToolUse",
            "PostToolUse",
            "UserPromptSubmit",
            "Stop",
            "SessionEnd",
        ] {
            assert_eq!(ev(name, None).wait(), WaitChange::Clears, "{name}");
        }
        assert_eq!(ev("PreCompact", None).wait(), WaitChange::None);
        assert_eq!(
            Wait::Permission {
                tool: Some("Bash".into()),
                detail: Some("cargo publish".into())
            }
            .describe(),
            "permission for Bash `cargo publish`"
        );
    }
}
