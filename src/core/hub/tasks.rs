//! The task table: rows as they change, and heartbeat staleness judged from a
//! deadline order (a wake-up looks at the rows due, never at all of them).

use std::collections::HashSet;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;

use super::{Hub, HubSettings, TaskEntry};
use crate::core::clock::parse_sqlite_utc;
use crate::core::domain::souffleur::WatchdogReason;
use crate::core::domain::state;
use crate::core::domain::{TaskId, TaskState};
use crate::core::event::{TaskRow, What};

impl Hub {
    pub(super) async fn on_tasks(&mut self, rows: Vec<TaskRow>) {
        // The whole table comes after each change: rows as they were cost a lookup and
        // a comparison, nothing more. Ids are unique, so when every known row is still
        // there, none was deleted.
        let known = rows
            .iter()
            .filter(|r| self.tasks.contains_key(&r.task_id))
            .count();
        let gone: Vec<String> = if known == self.tasks.len() {
            Vec::new()
        } else {
            let present: HashSet<&str> = rows.iter().map(|r| r.task_id.as_str()).collect();
            self.tasks
                .keys()
                .filter(|k| !present.contains(k.as_str()))
                .cloned()
                .collect()
        };
        for row in rows {
            if self.tasks.get(&row.task_id).is_some_and(|p| p.row == row) {
                continue;
            }
            self.on_row(row).await;
        }
        // Rows deleted by another process.
        for key in gone {
            let Some(entry) = self.tasks.write(&key).remove(&key) else {
                continue;
            };
            if let Some(due) = entry.stale_due {
                self.stale_order.remove(&(due, key.clone()));
            }
            if let Some(id) = entry.id {
                self.sentinel.set_active(&id, false);
            }
        }
    }

    /// One new or changed row: the Sentinel told whether it works, its staleness
    /// scheduled, its view rebuilt, and a state change told.
    async fn on_row(&mut self, row: TaskRow) {
        let id = TaskId::parse(&row.task_id);
        let heartbeat = self.check_row(&row, id.is_none()).await;
        let prev = self.tasks.get(&row.task_id);
        let prev_state = prev.map(|p| p.row.state.clone());
        let changed_state = prev_state.as_deref() != Some(row.state.as_str());
        let refreshed = prev.is_none_or(|p| p.heartbeat != heartbeat);
        let stale_reported = prev.is_some_and(|p| p.stale_reported) && !refreshed && !changed_state;
        // Known only from a change maestro saw: a wait older than maestro is not
        // timed.
        let waiting_since = if !TaskState(row.state.clone()).waits_on_conductor() {
            None
        } else if changed_state && prev.is_some() {
            Some(self.clock.now_utc())
        } else {
            prev.and_then(|p| p.waiting_since)
        };
        if let Some(id) = &id
            && id.is_musician()
        {
            let state = TaskState(row.state.clone());
            self.sentinel.set_active(id, super::watched(id, &state));
            self.sentinel
                .set_working(id, state.is_working(), Instant::now());
            if prev.is_none() {
                self.budgets_at_zero(Some(id.as_str()));
            }
        }
        let mut entry = TaskEntry {
            row: row.clone(),
            id: id.clone(),
            heartbeat,
            stale_reported,
            stale_due: None,
            waiting_since,
        };
        entry.stale_due = self.stale_due(&entry);
        let due = entry.stale_due;
        if let Some(old) = self
            .tasks
            .write(&row.task_id)
            .insert(row.task_id.clone(), entry)
            && let Some(was) = old.stale_due
        {
            self.stale_order.remove(&(was, row.task_id.clone()));
        }
        if let Some(due) = due {
            self.stale_order.insert((due, row.task_id.clone()));
        }
        if changed_state {
            self.state_changed(&row, id.as_ref(), prev_state).await;
        }
    }

    /// A row's id and heartbeat as maestro can use them: a bad one said once.
    async fn check_row(&mut self, row: &TaskRow, bad_id: bool) -> Option<OffsetDateTime> {
        if bad_id && self.invalid_ids.insert(row.task_id.clone()) {
            self.emit(What::Error {
                task_id: Some(row.task_id.clone()),
                detail: format!(
                    "orchestration_tasks holds the task id {:?}, which is not of the form task-NN[-fix|-S<n>]; it is shown but never used as a file name",
                    row.task_id
                ),
            })
            .await;
        }
        let heartbeat = row.last_heartbeat.as_deref().and_then(parse_sqlite_utc);
        if let Some(text) = &row.last_heartbeat
            && heartbeat.is_none()
            && self
                .bad_heartbeats
                .insert((row.task_id.clone(), text.clone()))
        {
            self.emit(What::Error {
                task_id: Some(row.task_id.clone()),
                detail: format!(
                    "{}'s last_heartbeat {text:?} is not a time (YYYY-MM-DD HH:MM:SS, UTC); its staleness cannot be judged until a writer refreshes it",
                    row.task_id
                ),
            })
            .await;
        }
        heartbeat
    }

    /// A row's new state: told, a forecast withdrawn when it stops working, and the
    /// Conductor's end or recovery seen by the observing watchdog.
    async fn state_changed(
        &mut self,
        row: &TaskRow,
        id: Option<&TaskId>,
        prev_state: Option<String>,
    ) {
        if let Some(id) = id.filter(|i| i.is_musician())
            && row.state != state::WORKING
        {
            self.withdraw_forecast_of_idle(id, &row.state).await;
        }
        self.emit(What::Task {
            task_id: row.task_id.clone(),
            state: row.state.clone(),
            prev_state,
        })
        .await;
        if self.settings.observe_watchdog && id.is_some_and(TaskId::is_conductor) {
            let reason = match row.state.as_str() {
                state::COMPLETE => Some(WatchdogReason::ConductorComplete),
                state::CONTEXT_RECOVERY => Some(WatchdogReason::ContextRecovery),
                _ => None,
            };
            if let Some(reason) = reason {
                self.watchdog(reason).await;
            }
        }
    }

    /// Reports the stalls and stale heartbeats whose time has come.
    pub(super) async fn check_deadlines(&mut self) {
        self.notice_gap().await;
        if self.link.blind {
            // A remote project whose link is down: no news is not news of trouble.
            return;
        }
        for anomaly in self.sentinel.tick(Instant::now()) {
            self.report(anomaly).await;
        }
        self.warn_forecasts().await;
        self.withdraw_old_forecasts().await;
        self.tell_due_sessions().await;
        // Only the rows due are looked at; the wall clock has the last word (a row
        // whose heartbeat is not old enough yet goes back in line).
        let now = Instant::now();
        let link_floor = self.link.evidence_floor;
        // A remote heartbeat's age is what it was when the host last spoke: a silent
        // host (before its link is called down) makes nothing stale.
        let unheard = self
            .link
            .last_heard
            .map_or(Duration::ZERO, |at| now.saturating_duration_since(at));
        let link_evidence = |seen: Duration| {
            let seen = seen.saturating_sub(unheard);
            link_floor.map_or(seen, |floor| seen.min(now.saturating_duration_since(floor)))
        };
        let mut newly_stale = Vec::new();
        while let Some((due, key)) = self.stale_order.first().cloned() {
            if due > now {
                break;
            }
            self.stale_order.pop_first();
            let Some(entry) = self.tasks.write(&key).get_mut(&key) else {
                continue;
            };
            entry.stale_due = None;
            let Some((threshold, hb)) = stale_rule(&self.settings, entry) else {
                continue;
            };
            // Judged on what maestro was there to see; reported as the stamp's real age.
            let age = self.clock.age(hb);
            let seen = link_evidence(self.clock.evidence(age));
            if seen > threshold {
                entry.stale_reported = true;
                newly_stale.push((
                    key.clone(),
                    age,
                    entry.id.as_ref().is_some_and(TaskId::is_conductor),
                ));
            } else {
                // While the host is silent its last word does not move: look again no
                // sooner than a beat's quarter, never in a spin.
                let wait = threshold.saturating_sub(seen) + Duration::from_millis(1);
                let wait = if unheard.is_zero() {
                    wait
                } else {
                    wait.max(Duration::from_millis(500))
                };
                let due = now + wait;
                entry.stale_due = Some(due);
                self.stale_order.insert((due, key));
            }
        }
        for (task_id, age, conductor) in newly_stale {
            self.emit(What::Stale {
                task_id,
                age_s: age.as_secs(),
            })
            .await;
            if conductor && self.settings.observe_watchdog {
                self.watchdog(WatchdogReason::ConductorDeadHeartbeat).await;
            }
        }
    }

    /// A new gap in maestro's running (suspend, pause, clock step): said once, and every
    /// age-based judgement restarts its clock from the resume.
    async fn notice_gap(&mut self) {
        let Some(gap) = self.clock.latest_gap() else {
            return;
        };
        if gap.generation <= self.gap_seen {
            return;
        }
        self.gap_seen = gap.generation;
        self.sentinel.restart_clocks(gap.resumed_at);
        self.forecasts.write_all().restart_all();
        let kind = gap.kind.as_str();
        let seconds = gap.length.as_secs();
        self.draft.edit().last_gap = Some((gap.resumed_wall, kind, seconds));
        self.emit_at(gap.resumed_wall, What::Clock { kind, seconds })
            .await;
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        if self.link.blind {
            return None;
        }
        let stale = self.stale_order.first().map(|(due, _)| *due);
        let forecast = self
            .forecasts
            .next_due()
            .into_iter()
            .chain(self.forecasts.next_expiry())
            .min()
            .map(|at| self.clock.deadline_of(at));
        stale
            .into_iter()
            .chain(self.sentinel.next_deadline())
            .chain(forecast)
            .chain(self.sessions.next_due())
            .min()
    }

    /// When a row turns stale, if it can (not reported yet, a rule applies).
    pub(super) fn stale_due(&self, entry: &TaskEntry) -> Option<Instant> {
        if entry.stale_reported {
            return None;
        }
        let (threshold, hb) = stale_rule(&self.settings, entry)?;
        Some(self.clock.instant_of(hb) + threshold + Duration::from_millis(1))
    }
}

/// Which staleness threshold applies to a row right now, with its heartbeat.
fn stale_rule(settings: &HubSettings, entry: &TaskEntry) -> Option<(Duration, OffsetDateTime)> {
    let hb = entry.heartbeat?;
    let id = entry.id.as_ref()?;
    let state = entry.row.state.as_str();
    let threshold = if id.is_conductor() {
        (state != state::COMPLETE).then_some(settings.rules.deadlines.conductor_stale_after)
    } else if id.is_souffleur() {
        (state == state::CONFIRMED).then_some(settings.rules.deadlines.souffleur_stale_after)
    } else {
        TaskState(state.to_owned())
            .is_heartbeat_active()
            .then_some(settings.rules.deadlines.task_stale_after)
    }?;
    Some((threshold, hb))
}
