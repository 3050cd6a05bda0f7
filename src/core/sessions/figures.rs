//! One session's figures as maestro reports them (headless `session` events, the
//! dashboard, `maestro usage`, the event log): plain data, in the usage tools' names.

use serde::{Deserialize, Serialize};

use crate::core::sessions::activity::ToolCall;
use crate::core::sessions::tally::Tally;

/// One tool call of the recent list and how its result came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentCall {
    pub name: String,
    pub argument: Option<String>,
    pub at: Option<String>,
    /// `ok`, `error`, or `waiting` (no result yet).
    pub result: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionFigures {
    pub task_id: String,
    pub session_id: String,
    /// The transcript read.
    pub file: String,
    /// How the session was tied to its task: `process`, `transcript` or `database`.
    pub found_by: String,
    pub models: Vec<String>,
    /// The model of the latest response.
    pub model: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_write_tokens: u64,
    pub cache_read_tokens: u64,
    pub total_tokens: u64,
    /// At list prices; `None` when a model has no price.
    pub cost_usd: Option<f64>,
    /// The models without a price (the reason `cost_usd` is `None`).
    #[serde(default)]
    pub unpriced_models: Vec<String>,
    pub context_tokens: u64,
    pub context_window: u64,
    /// One decimal.
    pub context_percent: f64,
    pub compactions: u32,
    pub started: Option<String>,
    pub last_activity: Option<String>,
    /// `working`, `waiting` (on a tool), `idle` (end of turn), `unknown`, or `ended`
    /// (the hub's word when the session's `claude` process is gone).
    pub activity: String,
    pub tool: Option<ToolCall>,
    pub last_error: Option<String>,
    /// Tokens and cost of the last ten minutes.
    pub burn_tokens_10m: u64,
    pub burn_cost_usd_10m: Option<f64>,
    /// The last tool calls, oldest first.
    pub recent: Vec<RecentCall>,
    /// The LLM pollers among its subagents ([`crate::core::sessions::pollers`]).
    #[serde(default)]
    pub pollers: Vec<crate::core::sessions::pollers::PollerFigures>,
}

/// What a session does, as compared to tell a change: its state, and the tool (name,
/// main argument) it is on.
pub type ActivityKey = (String, Option<(String, Option<String>)>);

/// Which session the figures are of, and how it was found.
#[derive(Debug, Clone, Copy)]
pub struct Whose<'a> {
    pub task_id: &'a str,
    pub session_id: &'a str,
    pub file: &'a std::path::Path,
    pub found_by: &'a str,
}

impl SessionFigures {
    /// The figures of a session whose main transcript is `main`, with its subagents'
    /// files' bills, as of `now_ms`.
    pub fn of(
        whose: Whose<'_>,
        main: &Tally,
        agents: &[&Tally],
        now_ms: i64,
        windows: &crate::core::sessions::ContextWindows,
    ) -> Self {
        let default_window = windows.of(main.last_model.as_deref());
        // The bill adds the subagents' files; the rest is the main chain's. (No copy of
        // the tally: its set of counted responses can be large.)
        let t = main;
        let mut tokens = main.tokens;
        let mut models = main.models.clone();
        let mut unpriced = main.unpriced_models.clone();
        let (mut burn_tokens, mut burn_cost) = main.burn(now_ms);
        let mut cost = main.cost_usd;
        let mut last_activity = main.last_activity.clone();
        for a in agents {
            tokens.add(&a.tokens);
            models.extend(a.models.iter().cloned());
            unpriced.extend(a.unpriced_models.iter().cloned());
            let (bt, bc) = a.burn(now_ms);
            burn_tokens = burn_tokens.saturating_add(bt);
            burn_cost = burn_cost.zip(bc).map(|(x, y)| x + y);
            cost = cost.zip(a.cost_usd).map(|(x, y)| x + y);
            if a.last_activity > last_activity {
                last_activity.clone_from(&a.last_activity);
            }
        }
        let window = t.context_window(default_window);
        Self {
            task_id: whose.task_id.to_owned(),
            session_id: whose.session_id.to_owned(),
            file: whose.file.display().to_string(),
            found_by: whose.found_by.to_owned(),
            models: models.into_iter().collect(),
            model: main.last_model.clone(),
            input_tokens: tokens.input,
            output_tokens: tokens.output,
            cache_write_tokens: tokens.cache_write,
            cache_read_tokens: tokens.cache_read,
            total_tokens: tokens.total(),
            cost_usd: cost,
            unpriced_models: unpriced.into_iter().collect(),
            context_tokens: t.context_tokens,
            context_window: window,
            context_percent: (t.context_percent(default_window) * 10.0).round() / 10.0,
            compactions: t.compactions,
            started: t.started.clone(),
            last_activity,
            activity: if t.activity.state.is_empty() {
                "unknown".into()
            } else {
                t.activity.state.to_owned()
            },
            tool: t.activity.tool.clone(),
            last_error: t.activity.last_error.clone(),
            burn_tokens_10m: burn_tokens,
            burn_cost_usd_10m: burn_cost,
            recent: t
                .activity
                .recent
                .iter()
                .map(|(call, result)| RecentCall {
                    name: call.name.clone(),
                    argument: call.argument.clone(),
                    at: call.at.clone(),
                    result: match result {
                        None => "waiting",
                        Some(true) => "error",
                        Some(false) => "ok",
                    }
                    .into(),
                })
                .collect(),
            pollers: crate::core::sessions::pollers::pollers_of(
                agents,
                crate::core::domain::TaskId::parse(whose.task_id).as_ref(),
            ),
        }
    }

    /// What changes the `activity` event: the state and the tool it is on.
    pub fn activity_key(&self) -> ActivityKey {
        (
            self.activity.clone(),
            self.tool
                .as_ref()
                .map(|t| (t.name.clone(), t.argument.clone())),
        )
    }

    /// "Bash cargo test" (the tool and its main argument), or the state.
    pub fn doing(&self) -> String {
        match (&self.tool, self.activity.as_str()) {
            (Some(t), "waiting" | "working") => match &t.argument {
                Some(a) => format!("{} {}", t.name, a),
                None => t.name.clone(),
            },
            (_, crate::core::sessions::activity::API_ERROR) => format!(
                "stopped on an API error: {}",
                self.last_error.as_deref().unwrap_or("(no text)")
            ),
            (_, state) => state.to_owned(),
        }
    }
}

/// A dollar figure as shown: `$0.42`, `$12.30`, `unknown`.
pub fn dollars(cost: Option<f64>) -> String {
    cost.map_or_else(|| "unknown".to_owned(), |c| format!("${c:.2}"))
}

/// A token count as shown: `950`, `19.2k`, `1.35M`.
pub fn short_tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.2}M", n as f64 / 1e6),
    }
}

/// What the session source tells the hub.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SessionReport {
    /// A session of a task was found (or its transcript is back), with its figures.
    Found(Box<SessionFigures>),
    /// Its transcript grew (or was counted again after a truncation or replacement).
    Update(Box<SessionFigures>),
    /// Its transcript can no longer be read.
    Lost {
        task_id: String,
        session_id: String,
        detail: String,
    },
    /// No session could be found for a task that has started: why (said once).
    Missing { task_id: String, detail: String },
    /// Claude Code's projects folder is (`watching`) or is not (`waiting`) there.
    Folder { seeing: bool, detail: String },
}
