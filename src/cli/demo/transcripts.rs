//! The demo's Claude Code transcripts: each Musician and the Conductor get a session
//! file shaped like Claude Code's own (docs/sessions.md), written as the script plays, so
//! the session columns and the Session overlay move. Each status line becomes a tool
//! call and its result, with the context growing to what the line's `[ctx: NN%]` says;
//! a drop in context, or a written handoff, is a compaction; a line naming an agent a
//! subagent's response; a line about a failure an error result; and a task leaving
//! `working` ends its turn.
//!
//! They live in the demo's own folder (never the user's `~/.claude`, which usage tools
//! would then count).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::core::domain::state;
use crate::core::domain::{CONDUCTOR_ID, TaskId};

/// The context window the demo's sessions are measured against.
const WINDOW: u64 = 200_000;

pub struct Transcripts {
    /// `<claude dir>/projects/<slug>/`.
    folder: PathBuf,
    cwd: String,
    sessions: HashMap<TaskId, Session>,
}

struct Session {
    id: String,
    responses: u64,
    context: u64,
}

/// The session id the demo gives a task's session (the Conductor's goes in the
/// database, mapping rule 3).
pub fn session_id(task: &TaskId) -> String {
    let n: u64 = task
        .as_str()
        .bytes()
        .fold(7, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    format!(
        "{:08x}-demo-4000-8000-{:012x}",
        n & 0xffff_ffff,
        n & 0xffff_ffff_ffff
    )
}

impl Transcripts {
    pub fn new(claude: &Path, project: &Path) -> Self {
        let cwd = project.display().to_string();
        let slug: String = cwd
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        Self {
            folder: claude.join("projects").join(slug),
            cwd,
            sessions: HashMap::new(),
        }
    }

    /// A task entered `state` with these status lines.
    pub fn step(&mut self, task: &TaskId, state: Option<&str>, status: &[String]) {
        let starts =
            state == Some(state::WORKING) || (task.as_str() == CONDUCTOR_ID && state.is_some());
        if !self.sessions.contains_key(task) && !starts {
            return;
        }
        let mut lines = Vec::new();
        if !self.sessions.contains_key(task) {
            let prompt = if task.as_str() == CONDUCTOR_ID {
                "/conductor".to_owned()
            } else {
                format!("/musician {task}")
            };
            self.sessions.insert(
                task.clone(),
                Session {
                    id: session_id(task),
                    responses: 0,
                    context: 18_000,
                },
            );
            lines.push(self.user(task, &json!(prompt)));
            lines.push(self.response(
                task,
                &[tool("Read", "file_path", &format!("docs/tasks/{task}.md"))],
                "tool_use",
                None,
                false,
            ));
            lines.push(self.result(task, false, "# Task brief"));
        }
        for line in status {
            let ctx = context_of(line);
            let lower = line.to_lowercase();
            if let Some(pct) = ctx {
                let target = pct * WINDOW / 100;
                let current = self.sessions.get(task).map_or(0, |s| s.context);
                if target + 20_000 < current {
                    // The context fell: a compaction happened first.
                    lines.push(self.compaction(task, current));
                }
            }
            if lower.contains("agent") {
                lines.push(self.response(
                    task,
                    &[tool("Grep", "pattern", "fn parse_")],
                    "tool_use",
                    None,
                    true,
                ));
            }
            let call = if lower.contains("test") || lower.contains("correction") {
                tool("Bash", "command", "cargo test -q")
            } else if lower.contains("review") || lower.contains("claimed") {
                tool("Read", "file_path", "src/parser/mod.rs")
            } else {
                tool("Edit", "file_path", "src/parser/expr.rs")
            };
            lines.push(self.response(task, &[call], "tool_use", ctx, false));
            let failed = lower.contains("fail") || lower.contains("error");
            lines.push(self.result(
                task,
                failed,
                if failed {
                    "error: test parser::tokens::trailing_comment failed"
                } else {
                    "ok"
                },
            ));
            if lower.contains("handoff written") {
                // The operator compacts the session once its handoff is safe.
                let before = self.sessions.get(task).map_or(0, |s| s.context);
                lines.push(self.compaction(task, before));
                lines.push(self.response(
                    task,
                    &[json!({"type": "text", "text": "Context compacted; the handoff is in temp/."})],
                    "end_turn",
                    Some(6),
                    false,
                ));
            }
        }
        if state.is_some_and(|s| s != state::WORKING && s != state::REVIEWING) {
            lines.push(self.response(
                task,
                &[json!({"type": "text", "text": "Done; waiting for the Conductor."})],
                "end_turn",
                None,
                false,
            ));
        }
        self.write(task, &lines);
    }

    fn write(&self, task: &TaskId, lines: &[String]) {
        let Some(s) = self.sessions.get(task) else {
            return;
        };
        if lines.is_empty() || std::fs::create_dir_all(&self.folder).is_err() {
            return;
        }
        let text = lines.join("\n") + "\n";
        // A demo that cannot write its transcripts shows no session columns; the rest
        // of the demo is unaffected.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.folder.join(format!("{}.jsonl", s.id)))
        {
            let _ = f.write_all(text.as_bytes());
        }
    }

    fn base(&self, task: &TaskId, kind: &str) -> Value {
        let ts = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        json!({
            "type": kind,
            "sessionId": self.sessions.get(task).map(|s| s.id.clone()),
            "cwd": self.cwd,
            "timestamp": ts,
            "isSidechain": false,
            "version": "2.0.0-demo",
        })
    }

    fn user(&self, task: &TaskId, content: &Value) -> String {
        let mut v = self.base(task, "user");
        v["message"] = json!({"role": "user", "content": content});
        v.to_string()
    }

    fn result(&self, task: &TaskId, error: bool, text: &str) -> String {
        let n = self.sessions.get(task).map_or(0, |s| s.responses);
        self.user(
            task,
            &json!([{"type": "tool_result", "tool_use_id": format!("toolu_{n}"), "is_error": error, "content": text}]),
        )
    }

    fn compaction(&mut self, task: &TaskId, before: u64) -> String {
        if let Some(s) = self.sessions.get_mut(task) {
            s.context = 12_000;
        }
        let mut v = self.base(task, "system");
        v["subtype"] = json!("compact_boundary");
        v["compactMetadata"] = json!({"trigger": "auto", "preTokens": before});
        v.to_string()
    }

    /// One response (written as one line), its context grown to `ctx` percent when
    /// given, else by a little.
    fn response(
        &mut self,
        task: &TaskId,
        content: &[Value],
        stop: &str,
        ctx: Option<u64>,
        sidechain: bool,
    ) -> String {
        let model = if task.as_str() == CONDUCTOR_ID {
            "claude-opus-4-5-20251101"
        } else {
            "claude-sonnet-4-5-20250929"
        };
        let Some(s) = self.sessions.get_mut(task) else {
            return String::new();
        };
        s.responses += 1;
        let n = s.responses;
        let previous = s.context;
        if !sidechain {
            s.context = ctx.map_or(previous + 1_500, |pct| (pct * WINDOW / 100).max(8_000));
        }
        let written = s.context.saturating_sub(previous).min(s.context);
        let usage = if sidechain {
            json!({"input_tokens": 9_000, "output_tokens": 700})
        } else {
            json!({
                "input_tokens": 4,
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": s.context - written - 4.min(s.context),
                "output_tokens": 350 + (n * 37) % 900,
            })
        };
        // The tool call's id matches the result written after it.
        let content: Vec<Value> = content
            .iter()
            .map(|c| {
                let mut c = c.clone();
                if c["type"] == "tool_use" {
                    c["id"] = json!(format!("toolu_{n}"));
                }
                c
            })
            .collect();
        let mut v = self.base(task, "assistant");
        v["isSidechain"] = json!(sidechain);
        v["requestId"] = json!(format!("req_{n}"));
        v["message"] = json!({
            "id": format!("msg_{n}"), "model": model, "role": "assistant",
            "content": content, "stop_reason": stop, "usage": usage,
        });
        v.to_string()
    }
}

fn tool(name: &str, key: &str, argument: &str) -> Value {
    json!({"type": "tool_use", "name": name, "input": {key: argument}})
}

/// The `[ctx: NN%]` a status line reports.
fn context_of(line: &str) -> Option<u64> {
    crate::core::domain::context_percent(line).map(u64::from)
}
