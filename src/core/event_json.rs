//! The JSON form of each happening (docs/cli.md "Headless JSON output"), shared by the
//! headless presenter and the pipeline bus, where the same fields are `$event`.

use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::core::clock::{parse_sqlite_utc, rfc3339};
use crate::core::domain::souffleur::Provider;
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::domain::{AnomalyKind, CONDUCTOR_ID, SOUFFLEUR_ID};
use crate::core::event::{Happening, What};

/// One happening as the line a JSON presenter prints (with its newline), or `None` for
/// what headless does not show: its fields, its `cursor` (and `replayed` when an earlier
/// run told it), the `project` when several are watched, and every string escaped by
/// the one sanitizer ([`crate::core::text::json_line`]). The only way out for an event's
/// JSON: the fields themselves are private to this module.
pub fn output_line(h: &Happening, project: Option<&str>) -> Option<String> {
    // The line as journaled is the line printed: built once, on the event's way out.
    if project.is_none()
        && let Some(told) = &h.told
        && let Some(line) = &told.line
    {
        return Some(format!("{line}\n"));
    }
    let mut v = fields(h)?;
    // Always there; null for an event the journal does not hold (none is kept, or it
    // could not be written): there is no place to resume from.
    v["cursor"] = h
        .told
        .as_ref()
        .and_then(|t| t.cursor)
        .map_or(Value::Null, |c| json!(c.to_string()));
    if h.told.as_ref().is_some_and(|t| t.replayed) {
        v["replayed"] = json!(true);
    }
    if let Some(p) = project {
        v["project"] = json!(p);
    }
    Some(format!("{}\n", crate::core::text::json_line(&v)))
}

/// A database time (`YYYY-MM-DD HH:MM:SS`, UTC) as RFC 3339; text that is no such time
/// is kept as written.
fn db_time(text: Option<&str>) -> Value {
    match text {
        Some(t) => parse_sqlite_utc(t).map_or_else(|| json!(t), |at| json!(rfc3339(at))),
        None => Value::Null,
    }
}

/// One happening's fields, or `None` for what headless does not show.
fn fields(h: &Happening) -> Option<Value> {
    fields_of(h.at, &h.what)
}

/// The line the journal keeps for a happening told at `at` under `cursor` (`None`: it
/// has no printed form, so it is not journaled).
pub fn journal_fields(at: OffsetDateTime, what: &What) -> Option<Value> {
    fields_of(at, what)
}

/// The `gap` event a reader resuming after `--after` gets first when the journal no
/// longer holds the `count` entries after its cursor (`before`: the place just before the
/// oldest entry kept), as one JSON line.
pub fn gap_line(now: OffsetDateTime, count: u64, before: crate::core::told::Cursor) -> String {
    let v = json!({
        "ts": rfc3339(now),
        "event": "gap",
        "detail": format!(
            "the journal no longer holds the {count} entries after your cursor (it keeps its newest {} MiB); what follows starts at its oldest",
            crate::core::told::MAX_BYTES >> 20
        ),
        "count": count,
        "cursor": before.to_string(),
    });
    crate::core::text::json_line(&v)
}

/// The `gap` event a reader following the journal gets when a new journal (`id`)
/// replaced it: what the old one held past the reader's place may be lost, and how much
/// is not known (`count` null); what follows is the new journal's, from its start.
pub fn replaced_gap_line(now: OffsetDateTime, id: u64) -> String {
    let v = json!({
        "ts": rfc3339(now),
        "event": "gap",
        "detail": "the journal was deleted, cut short or replaced under maestro, and a new one started: what the old one held after your place may be lost (how much is not known); what follows starts at the new journal's beginning",
        "count": Value::Null,
        "cursor": crate::core::told::Cursor { journal: id, seq: 0 }.to_string(),
    });
    crate::core::text::json_line(&v)
}

/// `fields` with its cursor, as one JSON line (no newline).
pub fn journal_line(mut fields: Value, cursor: crate::core::told::Cursor) -> String {
    fields["cursor"] = json!(cursor.to_string());
    crate::core::text::json_line(&fields)
}

/// An anomaly's journal line, written straight from its fields: the same bytes as
/// [`journal_line`] of its [`journal_fields`] (a test holds them equal), without the map
/// in between; anomalies are what the Sentinel's readers wait for.
pub fn anomaly_journal_line(
    at: OffsetDateTime,
    a: &crate::core::domain::Anomaly,
    cursor: crate::core::told::Cursor,
) -> String {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        ts: String,
        event: &'static str,
        task_id: &'a crate::core::domain::TaskId,
        anomaly: &'a str,
        detail: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        from: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        to: Option<u8>,
        cursor: String,
    }
    let spike = a.spike.filter(|_| a.kind == AnomalyKind::ContextSpike);
    let line = Line {
        ts: rfc3339(at),
        event: "anomaly",
        task_id: &a.task_id,
        anomaly: a.kind.as_str(),
        detail: &a.detail,
        from: spike.map(|(from, _)| from),
        to: spike.map(|(_, to)| to),
        cursor: cursor.to_string(),
    };
    crate::core::text::json_line_of(&line)
        .unwrap_or_else(|| journal_line(anomaly_fields(&line.ts, a), cursor))
}

fn fields_of(at: OffsetDateTime, what: &What) -> Option<Value> {
    let ts = rfc3339(at);
    Some(match what {
        What::Anomaly(a) => anomaly_fields(&ts, a),
        What::Task {
            task_id,
            state,
            prev_state,
        } => json!({
            "ts": ts, "event": "task", "task_id": task_id, "state": state, "prev_state": prev_state,
        }),
        What::Stale { task_id, age_s } => {
            json!({"ts": ts, "event": "stale", "task_id": task_id, "age_s": age_s})
        }
        What::Message(m) => json!({
            "ts": ts, "event": "message", "id": m.id, "task_id": m.task_id,
            "from_session": m.from_session, "message_type": m.message_type, "message": m.message,
            "timestamp": db_time(m.timestamp.as_deref()),
        }),
        // Both are about one task: the Conductor (or, for WATCHER_DEAD, the Souffleur).
        What::Watchdog { reason, task_count } => json!({
            "ts": ts, "event": "watchdog", "reason": reason.to_string(), "task_count": task_count,
            "task_id": if matches!(reason, WatchdogReason::WatcherDead) { SOUFFLEUR_ID } else { CONDUCTOR_ID },
        }),
        What::Recovery(r) => json!({
            "ts": ts, "event": "recovery", "task_id": CONDUCTOR_ID, "provider": contract_provider(r.provider),
            "step": r.provider.as_str(), "status": r.status.as_str(), "generation": r.generation, "pid": r.pid,
        }),
        What::Error { task_id, detail } => {
            json!({"ts": ts, "event": "error", "task_id": task_id, "detail": detail})
        }
        What::Source {
            source,
            status,
            detail,
        } => {
            json!({"ts": ts, "event": "source", "source": source, "status": status, "detail": detail})
        }
        What::Settings(s) => settings_fields(&ts, s),
        What::Pipeline(p) => json!({
            "ts": ts, "event": "pipeline", "name": p.name, "status": p.status,
            "iteration": p.iteration, "step": p.step, "outcome": p.outcome,
        }),
        What::Watcher {
            task_id,
            mode,
            status,
            pid,
        } => json!({
            "ts": ts, "event": "watcher", "task_id": task_id, "mode": mode, "status": status, "pid": pid,
        }),
        What::Forecast {
            task_id,
            threshold,
            at: forecast_at,
        } => json!({
            "ts": ts, "event": "forecast", "task_id": task_id, "threshold": threshold,
            "at": rfc3339(*forecast_at), "in_s": (*forecast_at - at).whole_seconds().max(0),
        }),
        What::ForecastWithdrawn { task_id, reason } => json!({
            "ts": ts, "event": "forecast_withdrawn", "task_id": task_id, "reason": reason,
        }),
        What::Session {
            status,
            task_id,
            session_id,
            figures,
            detail,
        } => {
            let mut v = json!({"ts": ts, "event": "session", "status": status, "task_id": task_id, "session_id": session_id});
            if let Some(f) = figures {
                add_figures(&mut v, f, at);
            }
            if let Some(d) = detail {
                v["detail"] = json!(d);
            }
            v
        }
        What::Budget { .. }
        | What::NeedsYou { .. }
        | What::NeedsYouCleared { .. }
        | What::PollerReplaced { .. } => return for_the_operator(&ts, what),
        What::Clock { kind, seconds } => {
            json!({"ts": ts, "event": "clock", "kind": kind, "seconds": seconds})
        }
        What::Link(l) => {
            json!({"ts": ts, "event": "link", "project": l.project, "status": l.status, "detail": l.detail})
        }
        What::Log { .. } | What::RoleEnded => return None,
    })
}

/// The events about what the operator is asked for or spared: budgets, waits and
/// refused pollers (`None` for any other kind: `fields_of` routes only these here).
fn for_the_operator(ts: &str, what: &What) -> Option<Value> {
    Some(match what {
        What::Budget {
            task_id,
            budget,
            level,
            value,
            limit,
        } => json!({
            "ts": ts, "event": "budget", "task_id": task_id, "budget": budget,
            "level": level, "value": value, "limit": limit,
        }),
        What::NeedsYou {
            task_id,
            session_id,
            reason,
            tool,
            detail,
            text,
        } => json!({
            "ts": ts, "event": "needs_you", "task_id": task_id, "session_id": session_id,
            "reason": reason, "tool": tool, "detail": detail, "text": text,
        }),
        What::NeedsYouCleared { task_id, waited_s } => {
            json!({"ts": ts, "event": "needs_you_cleared", "task_id": task_id, "waited_s": waited_s})
        }
        What::PollerReplaced {
            task_id,
            session_id,
            role,
            command,
            at,
        } => json!({
            "ts": ts, "event": "poller_replaced", "task_id": task_id,
            "session_id": session_id, "role": role, "command": command, "at": at,
        }),
        _ => return None,
    })
}

fn anomaly_fields(ts: &str, a: &crate::core::domain::Anomaly) -> Value {
    let mut v = json!({
        "ts": ts, "event": "anomaly", "task_id": a.task_id,
        "anomaly": a.kind.as_str(), "detail": a.detail,
    });
    if let (AnomalyKind::ContextSpike, Some((from, to))) = (a.kind, a.spike) {
        v["from"] = json!(from);
        v["to"] = json!(to);
    }
    v
}

fn settings_fields(ts: &str, s: &crate::core::event::SouffleurSettings) -> Value {
    json!({
        "ts": ts,
        "event": "souffleur_settings",
        "force_compact": s.force_compact,
        "force_compact_from": s.force_compact_from,
        "max_external_permission": s.max_permission,
        "max_external_permission_from": s.max_permission_from,
        "source": s.source,
        "warnings": s.warnings,
    })
}

/// A session's figures into its event (the dashboard's recent calls left out), and how
/// long it has waited on its tool at `at`.
fn add_figures(
    v: &mut Value,
    f: &crate::core::sessions::figures::SessionFigures,
    at: OffsetDateTime,
) {
    if let Ok(Value::Object(fields)) = serde_json::to_value(f) {
        for (k, field) in fields {
            // The recent calls are the dashboard's; the event names the last.
            if k != "recent" && k != "task_id" && k != "session_id" {
                v[k] = field;
            }
        }
    }
    if f.activity == "waiting"
        && let Some(since) = f
            .tool
            .as_ref()
            .and_then(|t| t.at.as_deref())
            .and_then(crate::core::sessions::timestamp::epoch_ms)
    {
        let now = (at.unix_timestamp_nanos() / 1_000_000) as i64;
        v["waiting_s"] = json!((now - since).max(0) / 1000);
    }
}

/// docs/cli.md names two providers; `standard_compact` is `claude_export`'s escalation,
/// reported under it (with a `step` field in JSON).
pub fn contract_provider(p: Provider) -> &'static str {
    match p {
        Provider::Lethe => "lethe",
        Provider::ClaudeExport | Provider::StandardCompact => "claude_export",
    }
}

/// The happenings a pipeline can react to, as `(event name, fields)`: anomalies, stale
/// heartbeats, task state changes, messages, watchdog reasons, recoveries, source
/// changes, forecasts, sessions, budgets, clock gaps and sessions that need the operator. An anomaly also carries `kind` (the same as `anomaly`).
pub fn bus_event(h: &Happening) -> Option<(String, Value)> {
    if !matches!(
        h.what,
        What::Anomaly(_)
            | What::Stale { .. }
            | What::Task { .. }
            | What::Message(_)
            | What::Watchdog { .. }
            | What::Recovery(_)
            | What::Source { .. }
            | What::Forecast { .. }
            | What::ForecastWithdrawn { .. }
            | What::Session { .. }
            | What::Budget { .. }
            | What::Clock { .. }
            | What::NeedsYou { .. }
            | What::NeedsYouCleared { .. }
            | What::PollerReplaced { .. }
    ) {
        return None;
    }
    let mut v = fields(h)?;
    let name = v["event"].as_str()?.to_owned();
    if let What::Anomaly(a) = &h.what {
        v["kind"] = json!(a.kind.as_str());
    }
    Some((name, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::domain::{Anomaly, TaskId};
    use crate::core::told::Cursor;

    /// The anomaly's line written straight is the line the general path writes, byte
    /// for byte, with a spike's figures and with text a terminal must not act on.
    #[test]
    fn an_anomaly_written_straight_is_the_general_line() {
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::nanoseconds(1_234_567_891);
        let cursor = Cursor {
            journal: 0xabc,
            seq: 42,
        };
        for (kind, spike, detail) in [
            (
                AnomalyKind::SelfCorrection,
                None,
                "\"a self-correction \u{1b}[2J \u{202e}\"",
            ),
            (
                AnomalyKind::ContextSpike,
                Some((10, 40)),
                "ctx 10% → 40% \u{85}\n",
            ),
            (AnomalyKind::Stalled, Some((1, 2)), "Last entry: x\t\"y\""),
            (AnomalyKind::HighDeviation, None, ""),
        ] {
            let a = Anomaly {
                task_id: TaskId::parse("task-07").expect("id"),
                kind,
                detail: detail.to_owned(),
                spike,
                line: None,
            };
            let general = journal_line(
                journal_fields(at, &What::Anomaly(a.clone())).expect("shown"),
                cursor,
            );
            assert_eq!(anomaly_journal_line(at, &a, cursor), general);
        }
    }
}
