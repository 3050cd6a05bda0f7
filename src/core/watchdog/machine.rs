//! The Souffleur's router (docs/orchestration.md §4) as a pure state machine: inputs are watcher
//! exits, teammate alarms, recovery outcomes and operator commands; outputs are
//! [`Effect`]s for the role to carry out. No I/O, no clock: tested with tables.

use crate::core::domain::souffleur::{RecoveryKind, RecoveryOutcome, WatchdogReason, WatcherMode};
use crate::core::domain::state;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Watching,
    Recovering,
    Exited,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    WatcherExit {
        reason: WatchdogReason,
        task_count: u64,
    },
    /// The teammate saw a stale Souffleur heartbeat; `fresh_now` is the heartbeat's
    /// state when the alarm is handled (a queued alarm may be stale).
    WatcherDead {
        fresh_now: bool,
    },
    RecoveryFinished(RecoveryOutcome),
    Hold,
    Release,
    /// The operator asked for a recovery (after confirming).
    Manual {
        kind: RecoveryKind,
        task_count: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Start a new watcher; only once it runs, stop the old teammate and start a new one.
    ReplaceLayers {
        mode: WatcherMode,
        awaiting_session_id: bool,
    },
    Recover(RecoveryKind),
    SetRow(&'static str),
    /// A message to the Conductor (`warning` falls back to `system` where not allowed).
    Message {
        kind: &'static str,
        text: String,
    },
    /// Shown to the operator (watchdog pane, headless output), not written anywhere.
    Alert(String),
    Stop,
}

#[derive(Debug, Clone)]
pub struct Router {
    pub phase: Phase,
    pub mode: WatcherMode,
    pub awaiting_session_id: bool,
    pub session_id: String,
    /// The Conductor window generation: 1 for the original, +1 per relaunch.
    pub generation: u32,
    /// Consecutive recoveries after which the task count had not grown.
    pub no_progress: u32,
    pub max_no_progress: u32,
    /// Task count when the current Conductor was launched.
    pub last_task_count: u64,
    /// Task count when the running recovery was triggered.
    trigger_task_count: u64,
    /// Automatic recovery held by the operator: alerts only.
    pub held: bool,
    completed: bool,
    /// The running recovery was asked for by the operator (it does not count towards
    /// retry exhaustion, which guards against automatic loops).
    manual: bool,
    /// The newest export or handoff a recovery wrote (named at retry exhaustion).
    last_artifact: Option<String>,
}

impl Router {
    pub fn new(session_id: String, task_count: u64, max_no_progress: u32) -> Self {
        Self {
            phase: Phase::Watching,
            mode: WatcherMode::Normal,
            awaiting_session_id: false,
            session_id,
            generation: 1,
            no_progress: 0,
            max_no_progress,
            last_task_count: task_count,
            trigger_task_count: task_count,
            held: false,
            completed: false,
            manual: false,
            last_artifact: None,
        }
    }

    /// The effects that start monitoring after validation.
    pub fn start(&mut self) -> Vec<Effect> {
        vec![self.layers()]
    }

    /// New layers. The session-id search is handed to exactly one watcher generation:
    /// the next replacement (for whatever reason) no longer looks.
    fn layers(&mut self) -> Effect {
        let awaiting = std::mem::take(&mut self.awaiting_session_id);
        Effect::ReplaceLayers {
            mode: self.mode,
            awaiting_session_id: awaiting,
        }
    }

    /// The role stopped because the Conductor completed (a clean end).
    pub fn last_exit_was_complete(&self) -> bool {
        self.completed
    }

    pub fn step(&mut self, input: Input) -> Vec<Effect> {
        if self.phase == Phase::Exited {
            return vec![];
        }
        match input {
            Input::Hold => {
                self.held = true;
                vec![Effect::Alert(
                    "automatic recovery held: alerts continue, nothing is killed".into(),
                )]
            }
            Input::Release => {
                self.held = false;
                vec![Effect::Alert("automatic recovery released".into())]
            }
            // During a recovery the role itself keeps the heartbeat; the layers restart after.
            Input::WatcherDead { .. } | Input::WatcherExit { .. }
                if self.phase == Phase::Recovering =>
            {
                vec![]
            }
            Input::WatcherDead { fresh_now: true } => vec![],
            Input::WatcherDead { fresh_now: false } => vec![self.layers()],
            Input::WatcherExit { reason, task_count } => self.on_exit(reason, task_count),
            Input::Manual { kind, task_count } => {
                if self.phase == Phase::Recovering {
                    return vec![Effect::Alert("a recovery is already running".into())];
                }
                let fx = self.begin(kind, task_count);
                self.manual = true;
                fx
            }
            Input::RecoveryFinished(outcome) => self.on_recovered(outcome),
        }
    }

    fn on_exit(&mut self, reason: WatchdogReason, task_count: u64) -> Vec<Effect> {
        match reason {
            WatchdogReason::ConductorComplete => {
                self.phase = Phase::Exited;
                self.completed = true;
                vec![Effect::SetRow(state::COMPLETE), Effect::Stop]
            }
            WatchdogReason::SessionIdFound(id) => {
                self.session_id = id;
                self.awaiting_session_id = false;
                vec![self.layers()]
            }
            WatchdogReason::ConductorDeadPid | WatchdogReason::ConductorDeadHeartbeat => {
                self.trigger(RecoveryKind::Relaunch, &reason, task_count)
            }
            WatchdogReason::ContextRecovery => {
                self.trigger(RecoveryKind::ContextRecovery, &reason, task_count)
            }
            // The teammate's alarm arrives as `WatcherDead`, never as a watcher exit.
            WatchdogReason::WatcherDead => vec![self.layers()],
        }
    }

    fn trigger(
        &mut self,
        kind: RecoveryKind,
        reason: &WatchdogReason,
        task_count: u64,
    ) -> Vec<Effect> {
        if self.held {
            return vec![
                Effect::Alert(format!(
                    "{reason}: recovery is held; press the release key or recover by hand"
                )),
                self.layers(),
            ];
        }
        self.begin(kind, task_count)
    }

    fn begin(&mut self, kind: RecoveryKind, task_count: u64) -> Vec<Effect> {
        self.phase = Phase::Recovering;
        self.manual = false;
        self.trigger_task_count = task_count;
        vec![Effect::Recover(kind)]
    }

    fn on_recovered(&mut self, outcome: RecoveryOutcome) -> Vec<Effect> {
        if self.phase != Phase::Recovering {
            return vec![];
        }
        if outcome.artifact.is_some() {
            self.last_artifact.clone_from(&outcome.artifact);
        }
        if !outcome.relaunched {
            return self.on_failed(outcome);
        }
        // Progress is judged by the task count between Conductor launches.
        if self.trigger_task_count > self.last_task_count {
            self.no_progress = 0;
        } else if !self.manual {
            self.no_progress += 1;
        }
        self.last_task_count = self.trigger_task_count;
        self.generation += 1;
        self.phase = Phase::Watching;
        self.awaiting_session_id = outcome.session_rediscover;
        if let Some(id) = outcome.new_session_id {
            self.session_id = id;
        }
        let mut fx = Vec::new();
        if outcome.pid_known {
            self.mode = WatcherMode::Normal;
        } else {
            self.mode = WatcherMode::HeartbeatOnly;
            fx.push(Effect::Message {
                kind: "warning",
                text: format!(
                    "Souffleur: Conductor (S{}) relaunched by {} but its PID is unknown; watching in heartbeat-only mode (PID checks disabled).",
                    self.generation,
                    outcome.provider.as_str()
                ),
            });
        }
        if self.no_progress >= self.max_no_progress {
            fx.extend(self.exhausted("recoveries in a row without new tasks"));
            return fx;
        }
        fx.push(self.layers());
        fx
    }

    /// A recovery that relaunched nothing is one attempt: the old Conductor (if alive)
    /// runs on as it was, and the Souffleur keeps watching; the next alarm tries again,
    /// until retry exhaustion (the seed's three exits: validation, exhaustion, complete).
    fn on_failed(&mut self, outcome: RecoveryOutcome) -> Vec<Effect> {
        let why = outcome.failure.unwrap_or_else(|| "recovery failed".into());
        if !self.manual {
            self.no_progress += 1;
        }
        self.phase = Phase::Watching;
        let said = format!(
            "recovery through {} failed: {why}",
            outcome.provider.as_str()
        );
        if self.no_progress >= self.max_no_progress {
            let mut fx = vec![Effect::Alert(said)];
            fx.extend(self.exhausted("recoveries in a row without a new Conductor or new tasks"));
            return fx;
        }
        vec![
            Effect::Alert(format!(
                "{said}; still watching, the next alarm tries again (attempt {} of {})",
                self.no_progress, self.max_no_progress
            )),
            self.layers(),
        ]
    }

    /// Retry exhaustion: the row in `error`, the Conductor told where the last recovery
    /// artifact is, and the role stops.
    fn exhausted(&mut self, what: &str) -> Vec<Effect> {
        self.phase = Phase::Exited;
        let artifact = match &self.last_artifact {
            Some(path) => format!("the last recovery artifact is {path}"),
            None => "no recovery artifact was written".to_owned(),
        };
        vec![
            Effect::SetRow(state::ERROR),
            Effect::Message {
                kind: "error",
                text: format!(
                    "Souffleur: {} {what}; stopping ({artifact}). Relaunch the Conductor by hand.",
                    self.no_progress
                ),
            },
            Effect::Alert(format!(
                "retry exhaustion after {} recoveries without progress; {artifact}",
                self.no_progress
            )),
            Effect::Stop,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::domain::souffleur::Provider;

    fn exit(reason: WatchdogReason, task_count: u64) -> Input {
        Input::WatcherExit { reason, task_count }
    }

    fn relaunched(provider: Provider, pid_known: bool, rediscover: bool) -> Input {
        Input::RecoveryFinished(RecoveryOutcome {
            provider,
            relaunched: true,
            pid_known,
            session_rediscover: rediscover,
            new_session_id: None,
            failure: None,
            artifact: None,
        })
    }

    fn layers(mode: WatcherMode, awaiting: bool) -> Effect {
        Effect::ReplaceLayers {
            mode,
            awaiting_session_id: awaiting,
        }
    }

    #[test]
    fn each_exit_reason_routes() {
        let table: Vec<(WatchdogReason, Vec<Effect>)> = vec![
            (
                WatchdogReason::ConductorDeadPid,
                vec![Effect::Recover(RecoveryKind::Relaunch)],
            ),
            (
                WatchdogReason::ConductorDeadHeartbeat,
                vec![Effect::Recover(RecoveryKind::Relaunch)],
            ),
            (
                WatchdogReason::ContextRecovery,
                vec![Effect::Recover(RecoveryKind::ContextRecovery)],
            ),
            (
                WatchdogReason::ConductorComplete,
                vec![Effect::SetRow("complete"), Effect::Stop],
            ),
            (
                WatchdogReason::SessionIdFound("new".into()),
                vec![layers(WatcherMode::Normal, false)],
            ),
        ];
        for (reason, expected) in table {
            let mut r = Router::new("s1".into(), 5, 3);
            assert_eq!(r.step(exit(reason.clone(), 5)), expected, "{reason}");
        }
    }

    #[test]
    fn session_id_found_is_awaited_for_one_generation_only() {
        let mut r = Router::new("s1".into(), 5, 3);
        r.step(exit(WatchdogReason::ConductorDeadPid, 6));
        // claude_export starts a new session: the next watcher looks for its id.
        assert_eq!(
            r.step(relaunched(Provider::ClaudeExport, true, true)),
            [layers(WatcherMode::Normal, true)]
        );
        assert_eq!(r.generation, 2);
        assert_eq!(
            r.step(exit(WatchdogReason::SessionIdFound("s2".into()), 6)),
            [layers(WatcherMode::Normal, false)]
        );
        assert_eq!(r.session_id, "s2");
        assert!(!r.awaiting_session_id);
    }

    #[test]
    fn unknown_pid_means_heartbeat_only_with_a_warning() {
        let mut r = Router::new("s1".into(), 5, 3);
        r.step(exit(WatchdogReason::ContextRecovery, 6));
        let fx = r.step(relaunched(Provider::Lethe, false, false));
        assert!(
            matches!(&fx[0], Effect::Message { kind: "warning", text } if text.contains("heartbeat-only"))
        );
        assert_eq!(fx[1], layers(WatcherMode::HeartbeatOnly, false));
        // A later recovery that knows the PID returns to normal mode.
        r.step(exit(WatchdogReason::ConductorDeadHeartbeat, 7));
        assert_eq!(
            r.step(relaunched(Provider::ClaudeExport, true, true)),
            [layers(WatcherMode::Normal, true)]
        );
    }

    #[test]
    fn retry_exhaustion_after_three_recoveries_without_new_tasks() {
        let mut r = Router::new("s1".into(), 5, 3);
        for round in 1..=3 {
            assert_eq!(
                r.step(exit(WatchdogReason::ConductorDeadPid, 5)),
                [Effect::Recover(RecoveryKind::Relaunch)]
            );
            let fx = r.step(relaunched(Provider::ClaudeExport, true, false));
            assert_eq!(r.no_progress, round);
            if round < 3 {
                assert_eq!(fx, [layers(WatcherMode::Normal, false)]);
            } else {
                assert_eq!(fx[0], Effect::SetRow("error"));
                assert_eq!(fx.last(), Some(&Effect::Stop));
                assert_eq!(r.phase, Phase::Exited);
            }
        }
        assert!(
            r.step(exit(WatchdogReason::ConductorDeadPid, 5)).is_empty(),
            "nothing after exit"
        );
    }

    #[test]
    fn growth_resets_the_no_progress_count() {
        let mut r = Router::new("s1".into(), 5, 3);
        r.step(exit(WatchdogReason::ConductorDeadPid, 5));
        r.step(relaunched(Provider::ClaudeExport, true, false));
        r.step(exit(WatchdogReason::ConductorDeadPid, 5));
        r.step(relaunched(Provider::ClaudeExport, true, false));
        assert_eq!(r.no_progress, 2);
        r.step(exit(WatchdogReason::ConductorDeadPid, 8));
        r.step(relaunched(Provider::ClaudeExport, true, false));
        assert_eq!(r.no_progress, 0);
    }

    fn failed_with(provider: Provider, artifact: Option<&str>) -> Input {
        Input::RecoveryFinished(RecoveryOutcome {
            provider,
            relaunched: false,
            pid_known: false,
            session_rediscover: false,
            new_session_id: None,
            failure: Some("no compact_boundary within 300s, twice".into()),
            artifact: artifact.map(str::to_owned),
        })
    }

    #[test]
    fn a_failed_recovery_is_one_attempt_and_watching_goes_on() {
        let mut r = Router::new("s1".into(), 5, 3);
        for round in 1..=3u32 {
            assert_eq!(
                r.step(exit(WatchdogReason::ContextRecovery, 5)),
                [Effect::Recover(RecoveryKind::ContextRecovery)]
            );
            let artifact = (round == 2).then_some("the s1-S2 export");
            let fx = r.step(failed_with(Provider::StandardCompact, artifact));
            if round < 3 {
                assert_eq!(r.phase, Phase::Watching, "round {round}: {fx:?}");
                assert_eq!(fx.last(), Some(&layers(WatcherMode::Normal, false)));
                assert!(!fx.contains(&Effect::Stop));
                assert!(!fx.contains(&Effect::SetRow("error")));
            } else {
                assert_eq!(r.phase, Phase::Exited);
                assert!(fx.contains(&Effect::SetRow("error")));
                assert_eq!(fx.last(), Some(&Effect::Stop));
                assert!(
                    fx.iter().any(|e| matches!(e, Effect::Message { kind: "error", text } if text.contains("the s1-S2 export"))),
                    "{fx:?}"
                );
            }
        }
    }

    #[test]
    fn no_second_recovery_while_one_runs() {
        let mut r = Router::new("s1".into(), 5, 3);
        r.step(exit(WatchdogReason::ConductorDeadPid, 5));
        assert!(
            r.step(exit(WatchdogReason::ConductorDeadHeartbeat, 5))
                .is_empty()
        );
        assert!(r.step(Input::WatcherDead { fresh_now: false }).is_empty());
        assert_eq!(r.phase, Phase::Recovering);
    }

    #[test]
    fn stale_watcher_dead_alarms_are_dropped() {
        let mut r = Router::new("s1".into(), 5, 3);
        assert!(r.step(Input::WatcherDead { fresh_now: true }).is_empty());
        assert_eq!(
            r.step(Input::WatcherDead { fresh_now: false }),
            [layers(WatcherMode::Normal, false)]
        );
    }

    #[test]
    fn hold_alerts_without_recovering_and_release_resumes() {
        let mut r = Router::new("s1".into(), 5, 3);
        r.step(Input::Hold);
        let fx = r.step(exit(WatchdogReason::ConductorDeadHeartbeat, 5));
        assert!(matches!(&fx[0], Effect::Alert(a) if a.contains("held")));
        assert_eq!(fx[1], layers(WatcherMode::Normal, false));
        assert!(!fx.iter().any(|e| matches!(e, Effect::Recover(_))));
        r.step(Input::Release);
        assert_eq!(
            r.step(exit(WatchdogReason::ConductorDeadHeartbeat, 5)),
            [Effect::Recover(RecoveryKind::Relaunch)]
        );
    }

    #[test]
    fn manual_recovery_is_refused_while_one_runs() {
        let mut r = Router::new("s1".into(), 5, 3);
        assert_eq!(
            r.step(Input::Manual {
                kind: RecoveryKind::ContextRecovery,
                task_count: 5
            }),
            [Effect::Recover(RecoveryKind::ContextRecovery)]
        );
        assert!(matches!(
            &r.step(Input::Manual {
                kind: RecoveryKind::Relaunch,
                task_count: 5
            })[0],
            Effect::Alert(_)
        ));
        // A recovery outcome that arrives when none is running is ignored.
        // A manual recovery does not count towards retry exhaustion.
        assert_eq!(
            r.step(relaunched(Provider::Lethe, true, false)),
            [layers(WatcherMode::Normal, false)]
        );
        assert_eq!(r.no_progress, 0);
        let mut idle = Router::new("s1".into(), 5, 3);
        assert!(
            idle.step(relaunched(Provider::Lethe, true, false))
                .is_empty()
        );
    }
}
