//! What the dashboard shows of the pipelines this process hosts: their list from the
//! host's catalog, each one's state from its reports, and the run history (each
//! finished step, bounded in memory; the database keeps them all).

use std::collections::HashMap;
use std::time::Duration;

use time::OffsetDateTime;

use crate::core::clock::rfc3339;
use crate::core::event::{PipelineReport, StepRecord};
use crate::core::snapshot::PipelineView;

/// Steps of run history kept per pipeline in memory.
pub const HISTORY_KEPT: usize = 50;

/// The pipelines' views and when each current run started (its identity in the
/// history).
#[derive(Debug, Default)]
pub struct PipelineViews {
    run_started: HashMap<String, String>,
}

impl PipelineViews {
    /// The host's new catalog: known views keep their state, new ones start stopped.
    pub fn catalog(views: &mut Vec<PipelineView>, names: Vec<(String, usize, bool)>) {
        let old = std::mem::take(views);
        *views = names
            .into_iter()
            .map(
                |(name, steps, trusted)| match old.iter().find(|p| p.name == name) {
                    Some(p) => PipelineView {
                        steps,
                        trusted,
                        ..p.clone()
                    },
                    None => PipelineView {
                        name,
                        steps,
                        status: "stopped".into(),
                        iteration: 0,
                        step: None,
                        outcome: None,
                        history: Vec::new(),
                        trusted,
                    },
                },
            )
            .collect();
    }

    /// Applies a report (nested runs are not listed); a finished step's record is
    /// returned for the history table.
    pub fn report(
        &mut self,
        views: &mut [PipelineView],
        r: &PipelineReport,
        now: OffsetDateTime,
    ) -> Option<StepRecord> {
        if r.status == "started" {
            self.run_started.insert(r.name.clone(), rfc3339(now));
        }
        let record = r.trace.as_ref().map(|t| StepRecord {
            pipeline: r.name.clone(),
            run_started: self
                .run_started
                .get(&r.name)
                .cloned()
                .unwrap_or_else(|| rfc3339(now)),
            iteration: r.iteration,
            step: r.step.unwrap_or_default() as u64,
            step_type: t.step_type.to_owned(),
            started: rfc3339(now - Duration::from_millis(t.duration_ms)),
            duration_ms: t.duration_ms,
            outcome: r.outcome.clone().unwrap_or_default(),
            excerpt: t.excerpt.clone(),
        });
        let Some(p) = views.iter_mut().find(|p| p.name == r.name) else {
            return record;
        };
        if let Some(record) = &record {
            if p.history.len() == HISTORY_KEPT {
                p.history.remove(0);
            }
            p.history.push(record.clone());
        }
        p.status = match r.status {
            "paused" => "paused",
            "stopped" => "stopped",
            "completed" => "completed",
            "failed" => "failed",
            _ => "running",
        }
        .into();
        if r.iteration > 0 {
            p.iteration = r.iteration;
        }
        if r.step.is_some() {
            p.step = r.step;
        }
        if r.outcome.is_some() {
            p.outcome.clone_from(&r.outcome);
        }
        record
    }
}
