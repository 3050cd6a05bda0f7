//! The rules a run was judged by, between the hub's settings and the event log's
//! (kept apart from the log's format, which the hub's recorder uses).

use std::time::Duration;

use crate::core::event_log::input::RecordedSettings;
use crate::core::hub::{HubSettings, Rules};
use crate::core::sentinel::SentinelSettings;

/// A duration in whole milliseconds (saturating).
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What a recording notes of the hub's settings.
pub fn recorded(s: &HubSettings) -> RecordedSettings {
    RecordedSettings {
        stall_after_ms: millis(s.rules.sentinel.stall_after),
        spike_threshold: s.rules.sentinel.spike_threshold,
        task_stale_after_ms: millis(s.rules.deadlines.task_stale_after),
        conductor_stale_after_ms: millis(s.rules.deadlines.conductor_stale_after),
        souffleur_stale_after_ms: millis(s.rules.deadlines.souffleur_stale_after),
        forecast_lead_ms: millis(s.rules.forecast_lead),
        with_database: s.with_database,
        observe_watchdog: s.observe_watchdog,
        db_name: s.db_name.clone(),
    }
}

/// Hub settings for a replay: the recorded rules, no database writes.
pub fn for_replay(r: &RecordedSettings, forward_logs: bool) -> HubSettings {
    HubSettings {
        rules: Rules {
            sentinel: SentinelSettings {
                stall_after: Duration::from_millis(r.stall_after_ms),
                spike_threshold: r.spike_threshold,
            },
            deadlines: crate::core::hub::Deadlines {
                task_stale_after: Duration::from_millis(r.task_stale_after_ms),
                conductor_stale_after: Duration::from_millis(r.conductor_stale_after_ms),
                souffleur_stale_after: Duration::from_millis(r.souffleur_stale_after_ms),
            },
            forecast_lead: Duration::from_millis(r.forecast_lead_ms),
            budgets: crate::core::sessions::Budgets::default(),
        },
        db_writes: crate::core::sources::db::DbWrites {
            report_to_db: false,
            history_runs: 1,
        },
        with_database: r.with_database,
        // A recording maestro that held the Souffleur role heard the watchdog from its
        // role, which is not recorded; the replay tells what the task table showed, as
        // any observer's maestro does.
        observe_watchdog: true,
        forward_logs,
        db_name: r.db_name.clone(),
    }
}
