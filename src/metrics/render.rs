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

/// The metrics of every project as they stand in their latest snapshots.
pub fn render(feeds: &[ProjectFeed], clock: Clock) -> String {
    let mut registry = Registry::default();
    let gauge = || Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let counter = || Family::<Labels, Counter>::default();
    let task_state = gauge();
    let heartbeat_age = gauge();
    let needs_operator = gauge();
    let context = gauge();
    let conductor_up = gauge();
    let watchdog_state = gauge();
    let source_up = gauge();
    let session_tokens = counter();
    let session_cost = gauge();
    let budget_used = gauge();
    let anomalies = counter();
    let messages = counter();
    let recoveries = counter();
    let pipeline_runs = counter();
    let pollers_replaced = counter();
    let build = gauge();
    let remote_up = gauge();
    let l = |pairs: &[(&str, &str)]| -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), LabelText((*v).to_owned())))
            .collect()
    };
    build
        .get_or_create(&l(&[("version", env!("CARGO_PKG_VERSION"))]))
        .set(1.0);
    for feed in feeds {
        let snap = feed.snapshots.borrow().clone();
        let p = feed.name.as_str();
        // A remote project whose link is down: its ages are unknown, not old.
        let unseen = snap.link_down();
        if let Some(link) = &snap.link {
            remote_up
                .get_or_create(&l(&[("project", p)]))
                .set(if link.is_down() { 0.0 } else { 1.0 });
        }
        for t in &snap.tasks {
            let id = t.id();
            task_state
                .get_or_create(&l(&[("project", p), ("task", id), ("state", &t.row.state)]))
                .set(1.0);
            if let Some(hb) = t.heartbeat.filter(|_| !unseen) {
                heartbeat_age
                    .get_or_create(&l(&[("project", p), ("task", id)]))
                    .set(clock.evidence_age(hb).as_secs_f64());
            }
            needs_operator
                .get_or_create(&l(&[("project", p), ("task", id)]))
                .set(if t.needs_you.is_some() { 1.0 } else { 0.0 });
            if let Some(c) = t.context() {
                context
                    .get_or_create(&l(&[("project", p), ("task", id), ("source", "self")]))
                    .set(f64::from(c));
            }
            if let Some(s) = t.session() {
                context
                    .get_or_create(&l(&[
                        ("project", p),
                        ("task", id),
                        ("source", "transcript"),
                    ]))
                    .set(s.context_percent);
            }
            // Every session of the task, relaunches included.
            for (kind, n) in [
                ("input", (|s| s.input_tokens) as fn(&SessionFigures) -> u64),
                ("output", |s: &SessionFigures| s.output_tokens),
                ("cache_write", |s: &SessionFigures| s.cache_write_tokens),
                ("cache_read", |s: &SessionFigures| s.cache_read_tokens),
            ] {
                let sum: u64 = t.sessions.iter().map(|s| n(s)).sum();
                if !t.sessions.is_empty() {
                    session_tokens
                        .get_or_create(&l(&[("project", p), ("task", id), ("kind", kind)]))
                        .inc_by(sum);
                }
            }
            if let Some(cost) = t.cost_usd().filter(|_| !t.sessions.is_empty()) {
                session_cost
                    .get_or_create(&l(&[("project", p), ("task", id)]))
                    .set(cost);
            }
        }
        let conductor = snap
            .tasks
            .iter()
            .find(|t| t.is_conductor())
            .and_then(|t| t.heartbeat)
            .is_some_and(|hb| clock.evidence_age(hb) <= feed.conductor_stale_after);
        if !unseen {
            conductor_up
                .get_or_create(&l(&[("project", p)]))
                .set(if conductor { 1.0 } else { 0.0 });
        }
        let phase = snap
            .watchdog
            .role
            .as_ref()
            .map_or("none", |r| r.phase.as_str());
        watchdog_state
            .get_or_create(&l(&[("project", p), ("state", phase)]))
            .set(1.0);
        let database = matches!(snap.database, DatabaseHealth::Ok);
        source_up
            .get_or_create(&l(&[("project", p), ("source", "database")]))
            .set(if database { 1.0 } else { 0.0 });
        source_up
            .get_or_create(&l(&[("project", p), ("source", "sessions")]))
            .set(if snap.sessions_waiting.is_none() {
                1.0
            } else {
                0.0
            });
        source_up
            .get_or_create(&l(&[("project", p), ("source", "temp")]))
            .set(if snap.logs_waiting.is_none() {
                1.0
            } else {
                0.0
            });
        for ((task, budget), ratio) in &snap.budgets {
            let mut labels = vec![("project", p), ("budget", *budget)];
            if let Some(task) = task {
                labels.push(("task", task.as_str()));
            }
            budget_used.get_or_create(&l(&labels)).set(*ratio);
        }
        for (kind, n) in &snap.counts.anomalies {
            anomalies
                .get_or_create(&l(&[("project", p), ("kind", kind)]))
                .inc_by(*n);
        }
        for (kind, n) in &snap.counts.messages {
            messages
                .get_or_create(&l(&[("project", p), ("type", kind)]))
                .inc_by(*n);
        }
        for ((provider, outcome), n) in &snap.counts.recoveries {
            recoveries
                .get_or_create(&l(&[
                    ("project", p),
                    ("provider", provider),
                    ("outcome", outcome),
                ]))
                .inc_by(*n);
        }
        for (role, n) in &snap.counts.pollers_replaced {
            pollers_replaced
                .get_or_create(&l(&[("project", p), ("role", role)]))
                .inc_by(*n);
        }
        for ((name, outcome), n) in &snap.counts.pipeline_runs {
            pipeline_runs
                .get_or_create(&l(&[
                    ("project", p),
                    ("pipeline", name),
                    ("outcome", outcome),
                ]))
                .inc_by(*n);
        }
    }
    registry.register(
        "maestro_task_state",
        "A task's state (value 1 for its current state)",
        task_state,
    );
    registry.register(
        "maestro_task_heartbeat_age_seconds",
        "Seconds since the task's last heartbeat that maestro was running to see (ages restart after a suspend or pause)",
        heartbeat_age,
    );
    registry.register(
        "maestro_task_needs_operator",
        "1 while the task's session waits for the operator (a permission prompt or input; from Claude Code's hooks)",
        needs_operator,
    );
    registry.register(
        "maestro_task_context_percent",
        "The task's context in use, percent (source: self = its own [ctx] report)",
        context,
    );
    registry.register(
        "maestro_conductor_up",
        "1 while task-00's heartbeat is fresh",
        conductor_up,
    );
    registry.register(
        "maestro_watchdog_state",
        "The Souffleur role's phase in this process (none when it holds no role)",
        watchdog_state,
    );
    registry.register(
        "maestro_source_up",
        "1 while maestro can see the source (database, temp, sessions)",
        source_up,
    );
    registry.register(
        "maestro_session_tokens",
        "Tokens billed to the task's Claude Code sessions, by kind (input, output, cache_write, cache_read)",
        session_tokens,
    );
    registry.register(
        "maestro_budget_used_ratio",
        "Each configured [budget] as used: value / limit (1 = reached)",
        budget_used,
    );
    registry.register(
        "maestro_session_cost_usd",
        "Estimated cost of the task's sessions at API list prices, USD (subscriptions do not pay it)",
        session_cost,
    );
    registry.register(
        "maestro_anomalies",
        "Sentinel anomalies reported, by kind",
        anomalies,
    );
    registry.register(
        "maestro_messages",
        "Messages read from comms.db, by type",
        messages,
    );
    registry.register(
        "maestro_recoveries",
        "Recovery steps of the Souffleur role, by provider and outcome",
        recoveries,
    );
    registry.register(
        "maestro_pipeline_runs",
        "Pipeline runs ended, by outcome",
        pipeline_runs,
    );
    registry.register(
        "maestro_pollers_replaced",
        "LLM poller launches refused by `maestro hook --replace-pollers`, by role",
        pollers_replaced,
    );
    let clock_gaps = counter();
    for (kind, n) in clock.gap_counts() {
        clock_gaps
            .get_or_create(&l(&[("kind", kind.as_str())]))
            .inc_by(n);
    }
    registry.register(
        "maestro_clock_gaps",
        "Gaps in maestro's own running (suspend, pause, clock step), after which ages restart",
        clock_gaps,
    );
    registry.register(
        "maestro_remote_up",
        "1 while a remote project's ssh link is up, 0 while it is down (its task ages and Conductor are then unknown, not reported)",
        remote_up,
    );
    registry.register("maestro_build_info", "maestro's version (value 1)", build);
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &registry);
    out
}
