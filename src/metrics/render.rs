//! The exposition: every project's metrics as they stand in its latest snapshot,
//! written with `prometheus-client`, label values escaped.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::ProjectFeed;
use crate::core::clock::Clock;
use crate::core::sessions::figures::SessionFigures;
use crate::core::snapshot::DatabaseHealth;
use crate::core::snapshot::{Snapshot, TaskView};

type Labels = Vec<(String, LabelText)>;

/// A label value escaped as the exposition formats require (`\\`, `\"`, `\n`):
/// `prometheus-client` writes values as they are, and a task id, project name, model or
/// pipeline name is written by someone else (a `"` or a newline in one would break the
/// scrape, or forge a line of its own).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct LabelText(String);

impl prometheus_client::encoding::EncodeLabelValue for LabelText {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;
type CounterFamily = Family<Labels, Counter>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), LabelText((*v).to_owned())))
        .collect()
}

fn flag(on: bool) -> f64 {
    if on { 1.0 } else { 0.0 }
}

/// Every metric family, filled project by project, then registered in the order the
/// exposition lists them.
#[derive(Default)]
struct Families {
    task_state: GaugeFamily,
    heartbeat_age: GaugeFamily,
    needs_operator: GaugeFamily,
    context: GaugeFamily,
    conductor_up: GaugeFamily,
    watchdog_state: GaugeFamily,
    source_up: GaugeFamily,
    session_tokens: CounterFamily,
    session_cost: GaugeFamily,
    budget_used: GaugeFamily,
    anomalies: CounterFamily,
    messages: CounterFamily,
    recoveries: CounterFamily,
    pipeline_runs: CounterFamily,
    pollers_replaced: CounterFamily,
    clock_gaps: CounterFamily,
    build: GaugeFamily,
    remote_up: GaugeFamily,
}

/// The metrics of every project as they stand in their latest snapshots.
pub fn render(feeds: &[ProjectFeed], clock: Clock) -> String {
    let mut families = Families::default();
    families
        .build
        .get_or_create(&labels(&[("version", env!("CARGO_PKG_VERSION"))]))
        .set(1.0);
    for feed in feeds {
        let snap = feed.snapshots.borrow().clone();
        families.project(feed, &snap, clock);
    }
    for (kind, n) in clock.gap_counts() {
        families
            .clock_gaps
            .get_or_create(&labels(&[("kind", kind.as_str())]))
            .inc_by(n);
    }
    let registry = families.register();
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &registry);
    out
}

impl Families {
    fn project(&mut self, feed: &ProjectFeed, snap: &Snapshot, clock: Clock) {
        let p = feed.name.as_str();
        // A remote project whose link is down: its ages are unknown, not old.
        let unseen = snap.link_down();
        if let Some(link) = &snap.link {
            self.remote_up
                .get_or_create(&labels(&[("project", p)]))
                .set(flag(!link.is_down()));
        }
        for t in &snap.tasks {
            self.task(p, t, unseen, clock);
        }
        let conductor = snap
            .tasks
            .iter()
            .find(|t| t.is_conductor())
            .and_then(|t| t.heartbeat)
            .is_some_and(|hb| clock.evidence_age(hb) <= feed.rules.deadlines.conductor_stale_after);
        if !unseen {
            self.conductor_up
                .get_or_create(&labels(&[("project", p)]))
                .set(flag(conductor));
        }
        self.health(p, snap);
        self.counts(p, snap);
    }

    fn task(&mut self, p: &str, t: &TaskView, unseen: bool, clock: Clock) {
        let id = t.id();
        self.task_state
            .get_or_create(&labels(&[
                ("project", p),
                ("task", id),
                ("state", &t.row.state),
            ]))
            .set(1.0);
        if let Some(hb) = t.heartbeat.filter(|_| !unseen) {
            self.heartbeat_age
                .get_or_create(&labels(&[("project", p), ("task", id)]))
                .set(clock.evidence_age(hb).as_secs_f64());
        }
        self.needs_operator
            .get_or_create(&labels(&[("project", p), ("task", id)]))
            .set(flag(t.needs_you.is_some()));
        if let Some(c) = t.context() {
            self.context
                .get_or_create(&labels(&[("project", p), ("task", id), ("source", "self")]))
                .set(f64::from(c));
        }
        if let Some(s) = t.session() {
            self.context
                .get_or_create(&labels(&[
                    ("project", p),
                    ("task", id),
                    ("source", "transcript"),
                ]))
                .set(s.context_percent);
        }
        if t.sessions.is_empty() {
            return;
        }
        // Every session of the task, relaunches included.
        for (kind, n) in [
            ("input", (|s| s.input_tokens) as fn(&SessionFigures) -> u64),
            ("output", |s: &SessionFigures| s.output_tokens),
            ("cache_write", |s: &SessionFigures| s.cache_write_tokens),
            ("cache_read", |s: &SessionFigures| s.cache_read_tokens),
        ] {
            let sum: u64 = t.sessions.iter().map(|s| n(s)).sum();
            self.session_tokens
                .get_or_create(&labels(&[("project", p), ("task", id), ("kind", kind)]))
                .inc_by(sum);
        }
        if let Some(cost) = t.cost_usd() {
            self.session_cost
                .get_or_create(&labels(&[("project", p), ("task", id)]))
                .set(cost);
        }
    }

    /// The Souffleur role's phase, and whether each source is seen.
    fn health(&mut self, p: &str, snap: &Snapshot) {
        let phase = snap
            .watchdog
            .role
            .as_ref()
            .map_or("none", |r| r.phase.as_str());
        self.watchdog_state
            .get_or_create(&labels(&[("project", p), ("state", phase)]))
            .set(1.0);
        for (source, up) in [
            ("database", matches!(snap.database, DatabaseHealth::Ok)),
            ("sessions", snap.sessions_waiting.is_none()),
            ("temp", snap.logs_waiting.is_none()),
        ] {
            self.source_up
                .get_or_create(&labels(&[("project", p), ("source", source)]))
                .set(flag(up));
        }
        for ((task, budget), ratio) in &snap.budgets {
            let mut pairs = vec![("project", p), ("budget", *budget)];
            if let Some(task) = task {
                pairs.push(("task", task.as_str()));
            }
            self.budget_used.get_or_create(&labels(&pairs)).set(*ratio);
        }
    }

    /// What the project's run has counted: anomalies, messages, recoveries, runs.
    fn counts(&mut self, p: &str, snap: &Snapshot) {
        let counts = &snap.counts;
        for (kind, n) in &counts.anomalies {
            self.anomalies
                .get_or_create(&labels(&[("project", p), ("kind", kind)]))
                .inc_by(*n);
        }
        for (kind, n) in &counts.messages {
            self.messages
                .get_or_create(&labels(&[("project", p), ("type", kind)]))
                .inc_by(*n);
        }
        for ((provider, outcome), n) in &counts.recoveries {
            self.recoveries
                .get_or_create(&labels(&[
                    ("project", p),
                    ("provider", provider),
                    ("outcome", outcome),
                ]))
                .inc_by(*n);
        }
        for (role, n) in &counts.pollers_replaced {
            self.pollers_replaced
                .get_or_create(&labels(&[("project", p), ("role", role)]))
                .inc_by(*n);
        }
        for ((name, outcome), n) in &counts.pipeline_runs {
            self.pipeline_runs
                .get_or_create(&labels(&[
                    ("project", p),
                    ("pipeline", name),
                    ("outcome", outcome),
                ]))
                .inc_by(*n);
        }
    }

    fn register(mut self) -> Registry {
        let mut registry = Registry::default();
        registry.register(
            "maestro_task_state",
            "A task's state (value 1 for its current state)",
            std::mem::take(&mut self.task_state),
        );
        registry.register(
            "maestro_task_heartbeat_age_seconds",
            "Seconds since the task's last heartbeat that maestro was running to see (ages restart after a suspend or pause)",
            std::mem::take(&mut self.heartbeat_age),
        );
        registry.register(
            "maestro_task_needs_operator",
            "1 while the task's session waits for the operator (a permission prompt or input; from Claude Code's hooks)",
            std::mem::take(&mut self.needs_operator),
        );
        registry.register(
            "maestro_task_context_percent",
            "The task's context in use, percent (source: self = its own [ctx] report)",
            std::mem::take(&mut self.context),
        );
        registry.register(
            "maestro_conductor_up",
            "1 while task-00's heartbeat is fresh",
            std::mem::take(&mut self.conductor_up),
        );
        registry.register(
            "maestro_watchdog_state",
            "The Souffleur role's phase in this process (none when it holds no role)",
            std::mem::take(&mut self.watchdog_state),
        );
        registry.register(
            "maestro_source_up",
            "1 while maestro can see the source (database, temp, sessions)",
            std::mem::take(&mut self.source_up),
        );
        registry.register(
            "maestro_session_tokens",
            "Tokens billed to the task's Claude Code sessions, by kind (input, output, cache_write, cache_read)",
            std::mem::take(&mut self.session_tokens),
        );
        registry.register(
            "maestro_budget_used_ratio",
            "Each configured [budget] as used: value / limit (1 = reached)",
            std::mem::take(&mut self.budget_used),
        );
        registry.register(
            "maestro_session_cost_usd",
            "Estimated cost of the task's sessions at API list prices, USD (subscriptions do not pay it)",
            std::mem::take(&mut self.session_cost),
        );
        self.register_counts(&mut registry);
        registry
    }

    fn register_counts(&mut self, registry: &mut Registry) {
        registry.register(
            "maestro_anomalies",
            "Sentinel anomalies reported, by kind",
            std::mem::take(&mut self.anomalies),
        );
        registry.register(
            "maestro_messages",
            "Messages read from comms.db, by type",
            std::mem::take(&mut self.messages),
        );
        registry.register(
            "maestro_recoveries",
            "Recovery steps of the Souffleur role, by provider and outcome",
            std::mem::take(&mut self.recoveries),
        );
        registry.register(
            "maestro_pipeline_runs",
            "Pipeline runs ended, by outcome",
            std::mem::take(&mut self.pipeline_runs),
        );
        registry.register(
            "maestro_pollers_replaced",
            "LLM poller launches refused by `maestro hook --replace-pollers`, by role",
            std::mem::take(&mut self.pollers_replaced),
        );
        registry.register(
            "maestro_clock_gaps",
            "Gaps in maestro's own running (suspend, pause, clock step), after which ages restart",
            std::mem::take(&mut self.clock_gaps),
        );
        registry.register(
            "maestro_remote_up",
            "1 while a remote project's ssh link is up, 0 while it is down (its task ages and Conductor are then unknown, not reported)",
            std::mem::take(&mut self.remote_up),
        );
        registry.register(
            "maestro_build_info",
            "maestro's version (value 1)",
            std::mem::take(&mut self.build),
        );
    }
}
