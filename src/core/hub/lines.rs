//! Log lines: the Sentinel's verdicts, the context history and its forecasts.

use std::sync::Arc;

use time::OffsetDateTime;
use tokio::time::Instant;

use super::Hub;
use crate::core::domain::{LogKind, TaskId};
use crate::core::event::{HistoryPiece, What};
use crate::core::snapshot::CTX_HISTORY;

impl Hub {
    pub(super) async fn on_lines(
        &mut self,
        task: TaskId,
        kind: LogKind,
        (lines, starts): (Vec<String>, Vec<u64>),
        initial_mtime: Option<std::time::SystemTime>,
    ) {
        // The anomalies first: the context's bookkeeping (history, forecasts) and the
        // lines for the dashboard follow, off the path from a line read to its report.
        let found = self.judge(&task, kind, (&lines, &starts), initial_mtime);
        for anomaly in found {
            self.report(anomaly).await;
        }
        self.take_context(&task, kind, &lines, initial_mtime).await;
        if self.settings.forward_logs && !lines.is_empty() {
            let lines: Arc<[String]> = lines.into();
            self.emit(What::Log {
                task,
                kind,
                skipped: 0,
                lines,
                reset: false,
            })
            .await;
        }
    }

    /// A history skimmed at start: its pieces judged in order; the dashboard is told
    /// how many lines it stood for (it reads them back from the file when asked).
    pub(super) async fn on_history(
        &mut self,
        task: TaskId,
        kind: LogKind,
        pieces: Vec<HistoryPiece>,
        initial_mtime: Option<std::time::SystemTime>,
    ) {
        let mut found = Vec::new();
        let mut counted = 0;
        for piece in pieces {
            counted += piece.count();
            match piece {
                HistoryPiece::Skipped(n) => self.sentinel.skip(&task, kind, n),
                HistoryPiece::Context { values, last_line } => {
                    if let Some(last) = values.last() {
                        self.sentinel.set_context(&task, *last, last_line);
                    }
                    self.take_values(&task, &values, initial_mtime).await;
                }
                HistoryPiece::Lines(batch) => {
                    let (lines, starts) = (&batch.lines, &batch.starts);
                    found.extend(self.judge(&task, kind, (lines, starts), initial_mtime));
                    self.take_context(&task, kind, lines, initial_mtime).await;
                }
            }
        }
        if self.settings.forward_logs && counted > 0 {
            self.emit(What::Log {
                task,
                kind,
                skipped: counted,
                lines: Arc::new([]),
                reset: false,
            })
            .await;
        }
        for anomaly in found {
            self.report(anomaly).await;
        }
    }

    /// Lines of one log through the Sentinel: the anomalies they raise, not reported yet.
    fn judge(
        &mut self,
        task: &TaskId,
        kind: LogKind,
        (lines, starts): (&[String], &[u64]),
        initial_mtime: Option<std::time::SystemTime>,
    ) -> Vec<crate::core::domain::Anomaly> {
        if !self.settings.with_database && !self.sentinel.is_active(task) {
            self.sentinel.set_active(task, true);
            // Without a database, a task is known by its files: its session is looked
            // for from now on.
            self.send_task_facts();
        }
        let arrived_at = match initial_mtime {
            Some(mtime) => self.clock.instant_of(OffsetDateTime::from(mtime)),
            None => Instant::now(),
        };
        if lines.is_empty() {
            self.sentinel.on_file_seen(task, kind, arrived_at);
            Vec::new()
        } else {
            self.sentinel
                .on_lines_at(task, kind, (lines, starts), arrived_at)
        }
    }

    /// The context values of a status log's lines: the task's history (sparkline,
    /// trend) and its forecast.
    async fn take_context(
        &mut self,
        task: &TaskId,
        kind: LogKind,
        lines: &[String],
        initial_mtime: Option<std::time::SystemTime>,
    ) {
        if kind == LogKind::Status {
            let values: Vec<u8> = lines
                .iter()
                .filter_map(|l| crate::core::domain::context_percent(l))
                .collect();
            self.take_values(task, &values, initial_mtime).await;
        }
    }

    /// Context values of a task, in the order written.
    async fn take_values(
        &mut self,
        task: &TaskId,
        values: &[u8],
        initial_mtime: Option<std::time::SystemTime>,
    ) {
        if values.is_empty() {
            return;
        }
        let history = self
            .ctx
            .write(task.as_str())
            .entry(task.clone())
            .or_default();
        for v in values {
            if history.len() == CTX_HISTORY {
                history.pop_front();
            }
            history.push_back(*v);
        }
        let seen = initial_mtime.map_or_else(|| self.clock.now_utc(), OffsetDateTime::from);
        // Once the task's session is known, its forecast follows the transcript.
        if !self.sessions.knows(task.as_str()) {
            self.forecasts
                .write(task.as_str())
                .on_values(task, seen, values);
        }
        self.warn_forecasts().await;
    }

    /// Withdraws the forecasts whose trend is too old to speak for.
    pub(super) async fn withdraw_old_forecasts(&mut self) {
        let now = self.clock.now_utc();
        let withdrawn = self.forecasts.write_then(
            |f| f.withdraw_expired(now),
            |tasks| tasks.iter().map(ToString::to_string).collect(),
        );
        for task in withdrawn {
            self.emit(What::ForecastWithdrawn {
                task_id: task.to_string(),
                reason: "no new context value for as long as its trend was measured over".into(),
            })
            .await;
        }
    }

    /// A task that stopped working has no trend to extrapolate.
    pub(super) async fn withdraw_forecast_of_idle(&mut self, task: &TaskId, state: &str) {
        if self.forecasts.write(task.as_str()).withdraw(task) {
            self.emit(What::ForecastWithdrawn {
                task_id: task.to_string(),
                reason: format!("{task} is {state}, not working"),
            })
            .await;
        }
    }

    /// Raises the `forecast` warnings that fell due (once each).
    pub(super) async fn warn_forecasts(&mut self) {
        let now = self.clock.now_utc();
        let sentinel = &self.sentinel;
        // A warning spends its crossing; what a view reads (the forecast) is unchanged.
        let due = self
            .forecasts
            .write_then(|f| f.due(now, |t| sentinel.is_active(t)), |_| Vec::new());
        for (task, threshold, at) in due {
            self.emit(What::Forecast {
                task_id: task.to_string(),
                threshold,
                at,
            })
            .await;
        }
    }
}
