//! A remote project's connection, as its hub sees it: while the link is down nothing
//! is judged (the tasks keep their last state, shown as last known, never stale,
//! stalled or dead for want of news), and once it is up again every age-based rule
//! restarts its clock from then, as after a suspend. The hub of a `maestro serve`
//! hands each input to a tap, which the link's other end reads.

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::core::event::{CoreEvent, LinkReport, What};
use crate::core::event_log::input::{Line, TaskTable, wire_input_of};
use crate::core::snapshot::LinkView;

use super::Hub;

/// The hub's side of a link, and of a tap.
#[derive(Debug, Default)]
pub(super) struct LinkState {
    /// The link is down (or retrying): no judgement until it is up.
    pub blind: bool,
    /// The last time the link came back up: silence before it is no evidence.
    pub evidence_floor: Option<Instant>,
    /// When the host last spoke (an input or a beat): a heartbeat is only known to be
    /// old up to then, so no age is judged past the host's last word.
    pub last_heard: Option<Instant>,
    /// Where `maestro serve` sends each input, with the task table as last sent.
    pub tap: Option<(mpsc::Sender<Line>, TaskTable)>,
}

impl Hub {
    /// Hands every input to `tap` as the link's wire carries it (`maestro serve`).
    #[must_use]
    pub fn with_tap(mut self, tap: mpsc::Sender<Line>) -> Self {
        self.link.tap = Some((tap, TaskTable::default()));
        self
    }

    /// Sends an input down the tap; a tap whose reader went away is closed.
    pub(super) async fn tap(&mut self, event: &CoreEvent) {
        let Some((tx, table)) = &mut self.link.tap else {
            return;
        };
        let Some(input) = wire_input_of(event, table) else {
            return;
        };
        if tx
            .send(Line::new(self.clock.now_utc(), input))
            .await
            .is_err()
        {
            self.link.tap = None;
        }
    }

    pub(super) async fn on_link(&mut self, report: LinkReport) {
        let now = self.clock.now_utc();
        let was_down = self.link.blind;
        self.link.blind = report.status != "up";
        if was_down && !self.link.blind {
            // Every clock restarts: a full interval of silence from now before a verdict.
            let at = Instant::now();
            self.link.evidence_floor = Some(at);
            self.sentinel.restart_clocks(at);
            self.forecasts.write_all().restart_all();
        }
        let since = match &self.draft.read().link {
            // Retrying is still down: "down since" the first failure.
            Some(v) if v.is_down() && self.link.blind => v.since,
            _ => now,
        };
        self.draft.edit().link = Some(LinkView {
            status: report.status,
            since,
            detail: report.detail.clone(),
        });
        self.emit(What::Link(report)).await;
    }
}
