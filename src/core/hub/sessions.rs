//! Each task's Claude Code sessions as the session source reads them: kept for the
//! views, told to the presenters (`found`, `lost`, `missing` at once; what a session
//! does as it changes; its tokens, cost and context at most once per
//! [`USAGE_EVERY`] per session, the last figures always told), and held against the
//! budgets.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Hub;
use super::written::Written;
use crate::core::domain::state;
use crate::core::event::What;
use crate::core::sessions::figures::SessionReport;
use crate::core::sessions::figures::{ActivityKey, SessionFigures};
use crate::core::sessions::find::TaskFacts;

/// The activity of a session whose `claude` process has ended.
pub const ENDED: &str = "ended";

/// A session's `usage` event comes at most this often.
pub const USAGE_EVERY: Duration = Duration::from_secs(10);

pub use crate::core::sessions::Budgets;

/// What the session source is told of a task: id, session id, state, hook sessions.
type Facts = (String, Option<String>, Option<String>, Vec<String>);

struct Told {
    at: Instant,
    key: ActivityKey,
    /// A `usage` event waits for this moment.
    due: Option<Instant>,
}

/// What a task's view reads of its sessions.
#[derive(Debug, Default)]
pub(super) struct Shown {
    /// Task → its sessions, in the order found (the last is current).
    by_task: BTreeMap<String, Vec<Arc<SessionFigures>>>,
    lost: HashSet<String>,
}

#[derive(Default)]
pub(super) struct SessionBook {
    /// What the task views read: each task's sessions, the lost ones.
    shown: Written<Shown>,
    told: HashMap<String, Told>,
    due: BTreeSet<(Instant, String)>,
    missing_said: HashSet<String>,
    /// (task or none, budget, level) already told.
    budgets_told: HashSet<(Option<String>, &'static str, u8)>,
    /// What the session source was last told about the tasks.
    facts_sent: Vec<Facts>,
    /// Sessions whose `claude` process ended, with their last activity's time then: shown
    /// `ended` until their transcript moves on.
    pub(super) ended: HashMap<String, Option<String>>,
}

impl SessionBook {
    /// The tasks whose sessions (as a view shows them) were written since last asked.
    pub(super) fn take_shown_marks(&mut self) -> (bool, std::collections::HashSet<String>) {
        self.shown.take_marks()
    }

    /// A task's sessions, oldest first.
    pub(super) fn of(&self, task: &str) -> Vec<Arc<SessionFigures>> {
        self.shown.by_task.get(task).cloned().unwrap_or_default()
    }

    /// Whether a session of the task is known.
    /// The task the session source found a session for.
    pub(super) fn task_of_session(&self, session: &str) -> Option<String> {
        self.shown
            .by_task
            .iter()
            .find(|(_, list)| list.iter().any(|s| s.session_id == session))
            .map(|(task, _)| task.clone())
    }

    pub(super) fn knows(&self, task: &str) -> bool {
        self.shown.by_task.get(task).is_some_and(|l| !l.is_empty())
    }

    pub(super) fn is_lost(&self, session: &str) -> bool {
        self.shown.lost.contains(session)
    }

    pub(super) fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Whether these are the figures of their task's newest session.
    fn is_current(&self, f: &SessionFigures) -> bool {
        self.shown
            .by_task
            .get(&f.task_id)
            .and_then(|l| l.last())
            .is_some_and(|c| c.session_id == f.session_id)
    }

    fn find(&self, session: &str) -> Option<Arc<SessionFigures>> {
        self.shown
            .by_task
            .values()
            .flatten()
            .find(|f| f.session_id == session)
            .cloned()
    }

    /// Puts a session's figures in its task's list (replacing its earlier ones).
    fn keep(&mut self, f: Arc<SessionFigures>) {
        let list = self
            .shown
            .write(&f.task_id)
            .by_task
            .entry(f.task_id.clone())
            .or_default();
        match list.iter_mut().find(|x| x.session_id == f.session_id) {
            Some(slot) => *slot = f,
            None => list.push(f),
        }
    }

    /// The cost of every session of a task (or of all), and whether one has no price.
    /// Every model of a known session that has no price.
    fn unpriced_models(&self) -> Vec<String> {
        let models: std::collections::BTreeSet<&String> = self
            .shown
            .by_task
            .values()
            .flatten()
            .flat_map(|f| f.unpriced_models.iter())
            .collect();
        models.into_iter().cloned().collect()
    }

    fn cost(&self, task: Option<&str>) -> (f64, bool) {
        let lists: Vec<&Vec<Arc<SessionFigures>>> = match task {
            Some(t) => self.shown.by_task.get(t).into_iter().collect(),
            None => self.shown.by_task.values().collect(),
        };
        let mut sum = 0.0;
        let mut unknown = false;
        for f in lists.into_iter().flatten() {
            match f.cost_usd {
                Some(c) => sum += c,
                None => unknown = true,
            }
        }
        (sum, unknown)
    }
}

impl Hub {
    /// The `claude` process of a session ended (killed, or `/exit`): whatever its
    /// transcript's last line says, it is no longer working, waiting or idle.
    pub(super) async fn session_process_ended(&mut self, session: &str) {
        let Some(f) = self.sessions.find(session) else {
            return;
        };
        self.sessions
            .ended
            .insert(session.to_owned(), f.last_activity.clone());
        let f = self.as_known(Box::new((*f).clone()));
        self.sessions.keep(f.clone());
        self.costs_changed();
        self.told(&f.session_id, Instant::now(), f.activity_key());
        self.emit_session("activity", &f, None).await;
    }

    /// The figures as maestro knows them: `ended` while the process that wrote them is
    /// gone and the transcript has not moved on since.
    fn as_known(&mut self, mut f: Box<SessionFigures>) -> Arc<SessionFigures> {
        if let Some(at) = self.sessions.ended.get(&f.session_id) {
            if *at == f.last_activity {
                ENDED.clone_into(&mut f.activity);
            } else {
                self.sessions.ended.remove(&f.session_id);
            }
        }
        Arc::from(f)
    }

    pub(super) async fn on_session(&mut self, report: SessionReport) {
        let now = Instant::now();
        match report {
            SessionReport::Found(f) => self.on_session_found(f, now).await,
            SessionReport::Update(f) => self.on_session_update(f, now).await,
            SessionReport::Lost {
                task_id,
                session_id,
                detail,
            } => {
                self.sessions
                    .shown
                    .write(&task_id)
                    .lost
                    .insert(session_id.clone());
                self.costs_changed();
                self.emit(What::Session {
                    status: "lost",
                    task_id,
                    session_id: Some(session_id),
                    figures: None,
                    detail: Some(detail),
                })
                .await;
            }
            SessionReport::Folder { seeing, detail } => {
                self.draft.edit().sessions_waiting = (!seeing).then(|| detail.clone());
                self.emit(What::Source {
                    source: "sessions",
                    status: if seeing { "watching" } else { "waiting" },
                    detail,
                })
                .await;
            }
            SessionReport::Missing { task_id, detail } => {
                if self.sessions.missing_said.insert(task_id.clone()) {
                    self.emit(What::Session {
                        status: "missing",
                        task_id,
                        session_id: None,
                        figures: None,
                        detail: Some(detail),
                    })
                    .await;
                }
            }
        }
    }

    /// A session seen for the first time (or again after it was lost).
    async fn on_session_found(&mut self, f: Box<SessionFigures>, now: Instant) {
        let f = self.as_known(f);
        self.sessions
            .shown
            .write(&f.task_id)
            .lost
            .remove(&f.session_id);
        self.sessions.keep(f.clone());
        // A new current session's context starts over: so does the forecast, from now
        // on the transcript's (the self-report stays in the views beside it).
        if self.sessions.is_current(&f)
            && let Some(task) = crate::core::domain::TaskId::parse(&f.task_id)
        {
            self.forecasts.write(task.as_str()).reset(&task);
        }
        self.forecast_from(&f).await;
        self.told(&f.session_id, now, f.activity_key());
        self.costs_changed();
        self.emit_session("found", &f, None).await;
        self.check_budgets(&f.task_id).await;
        self.release_held_hooks().await;
    }

    /// New figures of a known session: a change of activity is told at once, the
    /// figures alone at most every [`USAGE_EVERY`] (a due `usage` event waits).
    async fn on_session_update(&mut self, f: Box<SessionFigures>, now: Instant) {
        let f = self.as_known(f);
        let before = self
            .sessions
            .find(&f.session_id)
            .map(|old| old.context_tokens);
        self.sessions.keep(f.clone());
        if before != Some(f.context_tokens) {
            self.forecast_from(&f).await;
        }
        self.costs_changed();
        let key = f.activity_key();
        let told = self.sessions.told.get(&f.session_id);
        if told.is_none_or(|t| t.key != key) {
            self.told(&f.session_id, now, key);
            self.emit_session("activity", &f, None).await;
        } else if told.is_some_and(|t| now >= t.at + USAGE_EVERY) {
            self.told(&f.session_id, now, key);
            self.emit_session("usage", &f, None).await;
        } else if let Some(t) = self.sessions.told.get_mut(&f.session_id)
            && t.due.is_none()
        {
            let due = t.at + USAGE_EVERY;
            t.due = Some(due);
            self.sessions.due.insert((due, f.session_id.clone()));
        }
        self.check_budgets(&f.task_id).await;
    }

    /// The `usage` events that waited out their interval.
    pub(super) async fn tell_due_sessions(&mut self) {
        let now = Instant::now();
        while let Some((due, session)) = self.sessions.due.first().cloned() {
            if due > now {
                break;
            }
            self.sessions.due.pop_first();
            let Some(f) = self.sessions.find(&session) else {
                continue;
            };
            self.told(&session, now, f.activity_key());
            self.emit_session("usage", &f, None).await;
        }
    }

    /// The session source's view of the tasks, sent when ids, session ids or states
    /// changed (a heartbeat alone changes nothing for it).
    pub(super) fn send_task_facts(&mut self) {
        let Some(tx) = &self.session_facts else {
            return;
        };
        let mut facts: Vec<Facts> = if self.settings.with_database {
            self.tasks
                .values()
                .filter(|e| e.id.is_some())
                .map(|e| {
                    (
                        e.row.task_id.clone(),
                        e.row.session_id.clone(),
                        Some(e.row.state.clone()),
                        self.hook_sessions(&e.row.task_id),
                    )
                })
                .collect()
        } else {
            // Tasks known by their log files, as working.
            self.sentinel
                .active_tasks()
                .map(|t| {
                    let hooks = self.hook_sessions(t.as_str());
                    (t.to_string(), None, Some(state::WORKING.to_owned()), hooks)
                })
                .collect()
        };
        facts.sort();
        if facts == self.sessions.facts_sent {
            return;
        }
        tx.send(
            facts
                .iter()
                .map(|(task_id, session_id, state, hooks)| TaskFacts {
                    task_id: task_id.clone(),
                    session_id: session_id.clone(),
                    started_at: None,
                    state: state.clone(),
                    hook_sessions: hooks.clone(),
                })
                .collect(),
        );
        self.sessions.facts_sent = facts;
    }

    fn told(&mut self, session: &str, at: Instant, key: ActivityKey) {
        if let Some(old) = self
            .sessions
            .told
            .insert(session.to_owned(), Told { at, key, due: None })
            && let Some(due) = old.due
        {
            self.sessions.due.remove(&(due, session.to_owned()));
        }
    }

    /// The current session's context, a point of its task's forecast.
    async fn forecast_from(&mut self, f: &SessionFigures) {
        let Some(task) = crate::core::domain::TaskId::parse(&f.task_id) else {
            return;
        };
        if !self.sessions.is_current(f) {
            return;
        }
        let percent = f.context_percent.round().clamp(0.0, 100.0) as u8;
        self.forecasts
            .write(task.as_str())
            .on_values(&task, self.clock.now_utc(), &[percent]);
        self.warn_forecasts().await;
    }

    /// The sessions' costs, as the status line shows them, after a session changed.
    fn costs_changed(&mut self) {
        let (total, unknown) = self.sessions.cost(None);
        self.draft.edit().session_cost_usd = Some(total);
        self.draft.edit().session_cost_unknown = unknown;
        self.draft.edit().unpriced_models = self.sessions.unpriced_models();
    }

    async fn emit_session(
        &mut self,
        status: &'static str,
        f: &Arc<SessionFigures>,
        detail: Option<String>,
    ) {
        self.emit(What::Session {
            status,
            task_id: f.task_id.clone(),
            session_id: Some(f.session_id.clone()),
            figures: Some(f.clone()),
            detail,
        })
        .await;
    }

    /// Each configured budget is a series from the start, at 0 until money is spent
    /// (an alert rule on a metric that does not exist cannot be checked).
    pub(super) fn budgets_at_zero(&mut self, task: Option<&str>) {
        let b = self.settings.rules.budgets;
        let mut add = |key: (Option<String>, &'static str)| {
            self.draft.edit().budgets.entry(key).or_insert(0.0);
        };
        match task {
            None => {
                if b.orchestration_usd.is_some_and(|l| l > 0.0) {
                    add((None, "orchestration_usd"));
                }
            }
            Some(t) => {
                if b.task_usd.is_some_and(|l| l > 0.0) {
                    add((Some(t.to_owned()), "task_usd"));
                }
                if b.context_percent.is_some_and(|l| l > 0.0) {
                    add((Some(t.to_owned()), "context_percent"));
                }
            }
        }
    }

    /// Tells each budget of this task (and the orchestration's) reaching 80 % and
    /// 100 % of its limit, once each.
    async fn check_budgets(&mut self, task: &str) {
        let b = self.settings.rules.budgets;
        let mut reached = Vec::new();
        if let Some(limit) = b.task_usd {
            reached.push((
                Some(task.to_owned()),
                "task_usd",
                self.sessions.cost(Some(task)).0,
                limit,
            ));
        }
        if let Some(limit) = b.orchestration_usd {
            reached.push((None, "orchestration_usd", self.sessions.cost(None).0, limit));
        }
        if let Some(limit) = b.context_percent
            && let Some(current) = self.sessions.shown.by_task.get(task).and_then(|l| l.last())
        {
            reached.push((
                Some(task.to_owned()),
                "context_percent",
                current.context_percent,
                limit,
            ));
        }
        for (task_id, budget, value, limit) in reached {
            if limit <= 0.0 {
                continue;
            }
            self.draft
                .edit()
                .budgets
                .insert((task_id.clone(), budget), value / limit);
            for level in [80u8, 100] {
                if value >= limit * f64::from(level) / 100.0
                    && self
                        .sessions
                        .budgets_told
                        .insert((task_id.clone(), budget, level))
                {
                    self.emit(What::Budget {
                        task_id: task_id.clone(),
                        budget,
                        level,
                        value: (value * 1e4).round() / 1e4,
                        limit,
                    })
                    .await;
                }
            }
        }
    }
}
