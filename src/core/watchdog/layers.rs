//! The role's two layers (docs/orchestration.md §4): the watcher, which checks the Conductor every
//! poll and exits with the first reason found, and the teammate, which watches the
//! watcher through the Souffleur heartbeat. [`Layers`] replaces them in the safe order.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::core::clock::Clock;
use crate::core::domain::souffleur::{ConductorView, WatchdogReason, WatcherMode};
use crate::core::error::CoreError;
use crate::core::procs::{self, ProcessId};
use crate::core::store::role::RoleDb;
use crate::core::watchdog::checks::{watcher_check, watcher_is_dead};

/// The role's timings (docs/orchestration.md §4, `[souffleur]`).
#[derive(Debug, Clone)]
pub struct RoleTimings {
    /// When the Conductor's and the watcher's heartbeats are stale (the hub's too).
    pub deadlines: crate::core::hub::Deadlines,
    pub initial_wait: Duration,
    pub poll: Duration,
    pub teammate_initial_wait: Duration,
    pub teammate_poll: Duration,
    /// `max_no_progress_recoveries`: recoveries in a row with no progress between them.
    pub max_no_progress: u32,
}

pub(super) enum WatcherMsg {
    NextCheck(time::OffsetDateTime),
    Exit(WatchdogReason, u64),
}

/// Why the layers were not replaced.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("the new watcher could not start ({0}); the teammate keeps watching")]
    Watcher(#[source] CoreError),
    #[error("the teammate could not start: {0}")]
    Teammate(#[source] CoreError),
}

#[derive(Default)]
pub(super) struct Layers {
    watcher: Option<JoinHandle<()>>,
    pub(super) watcher_id: u64,
    teammate: Option<JoinHandle<()>>,
}

impl Layers {
    /// The ordering invariant: the new watcher starts first; only once it runs are the
    /// old watcher and the old teammate stopped and a new teammate started. If the
    /// watcher cannot start, everything running keeps running.
    pub(super) fn replace(
        &mut self,
        start_watcher: impl FnOnce(u64) -> Result<JoinHandle<()>, CoreError>,
        start_teammate: impl FnOnce() -> Result<JoinHandle<()>, CoreError>,
    ) -> Result<(), LayerError> {
        let id = self.watcher_id + 1;
        let watcher = start_watcher(id).map_err(LayerError::Watcher)?;
        if let Some(old) = self.watcher.replace(watcher) {
            old.abort();
        }
        self.watcher_id = id;
        if let Some(old) = self.teammate.take() {
            old.abort();
        }
        self.teammate = Some(start_teammate().map_err(LayerError::Teammate)?);
        Ok(())
    }

    pub(super) fn stop(&mut self) {
        if let Some(w) = self.watcher.take() {
            w.abort();
        }
        if let Some(t) = self.teammate.take() {
            t.abort();
        }
    }
}

impl Drop for Layers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the watcher and the teammate read and write: the real one is [`RoleDb`];
/// tests drive the layers with paused time through an in-memory one.
pub trait RoleStore: Send + Sync + 'static {
    fn refresh_souffleur_heartbeat(
        &self,
    ) -> impl std::future::Future<Output = Result<(), CoreError>> + Send;
    fn conductor_view(
        &self,
    ) -> impl std::future::Future<Output = Result<ConductorView, CoreError>> + Send;
    fn task_count(&self) -> impl std::future::Future<Output = Result<u64, CoreError>> + Send;
    fn souffleur_heartbeat_age(
        &self,
    ) -> impl std::future::Future<Output = Result<Option<Duration>, CoreError>> + Send;
}

impl RoleStore for RoleDb {
    fn refresh_souffleur_heartbeat(
        &self,
    ) -> impl std::future::Future<Output = Result<(), CoreError>> + Send {
        RoleDb::refresh_souffleur_heartbeat(self)
    }
    fn conductor_view(
        &self,
    ) -> impl std::future::Future<Output = Result<ConductorView, CoreError>> + Send {
        RoleDb::conductor_view(self)
    }
    fn task_count(&self) -> impl std::future::Future<Output = Result<u64, CoreError>> + Send {
        RoleDb::task_count(self)
    }
    fn souffleur_heartbeat_age(
        &self,
    ) -> impl std::future::Future<Output = Result<Option<Duration>, CoreError>> + Send {
        RoleDb::souffleur_heartbeat_age(self)
    }
}

pub(super) struct WatcherArgs<S> {
    pub(super) id: u64,
    pub(super) db: S,
    pub(super) mode: WatcherMode,
    pub(super) awaiting: bool,
    pub(super) session: String,
    pub(super) conductor: Option<ProcessId>,
    pub(super) timings: RoleTimings,
    pub(super) clock: Clock,
}

/// Layer 1: waits, then every `poll` refreshes the Souffleur heartbeat and checks the
/// Conductor; exits with the first reason found. A dead PID is noticed at once (pidfd).
pub(super) async fn watcher<S: RoleStore>(a: WatcherArgs<S>, out: mpsc::Sender<(u64, WatcherMsg)>) {
    let pid_death = async {
        match (a.mode, a.conductor) {
            (WatcherMode::Normal, Some(p)) => procs::wait_for_exit(p, a.timings.poll).await,
            _ => std::future::pending().await,
        }
    };
    tokio::pin!(pid_death);
    let mut next = Instant::now() + a.timings.initial_wait;
    loop {
        tokio::select! {
            () = &mut pid_death => {
                let count = a.db.task_count().await.unwrap_or(0);
                let _ = out.send((a.id, WatcherMsg::Exit(WatchdogReason::ConductorDeadPid, count))).await;
                return;
            }
            () = tokio::time::sleep_until(next) => {}
        }
        // A failed refresh is left to the teammate to notice.
        let _ = a.db.refresh_souffleur_heartbeat().await;
        if let Ok(mut view) = a.db.conductor_view().await {
            // An age that includes a suspend or a pause of maestro is no evidence.
            view.heartbeat_age = view.heartbeat_age.map(|age| a.clock.evidence(age));
            let alive = a.conductor.is_some_and(|p| p.is_same_alive());
            if let Some(reason) = watcher_check(
                &view,
                a.mode,
                alive,
                a.awaiting,
                &a.session,
                a.timings.deadlines.conductor_stale_after,
            ) {
                let _ = out
                    .send((a.id, WatcherMsg::Exit(reason, view.task_count)))
                    .await;
                return;
            }
        }
        next += a.timings.poll;
        let at = a.clock.now_utc() + next.saturating_duration_since(Instant::now());
        let _ = out.send((a.id, WatcherMsg::NextCheck(at))).await;
    }
}

/// The watcher layer alone, for a Souffleur session that runs its skill
/// (`maestro souffleur --watcher`): the Souffleur heartbeat refreshed at once and every
/// `poll` (the self-monitor's check never sees it stale), the Conductor checked as the
/// layer checks it; the first exit reason and the task count then.
pub async fn watch_until_exit(
    db: RoleDb,
    mode: WatcherMode,
    awaiting: bool,
    session: String,
    conductor: Option<ProcessId>,
    timings: RoleTimings,
    clock: Clock,
) -> (WatchdogReason, u64) {
    let beat = {
        let db = db.clone();
        let every = timings
            .poll
            .min(Duration::from_secs(60))
            .max(Duration::from_secs(1));
        tokio::spawn(async move {
            loop {
                let _ = db.refresh_souffleur_heartbeat().await;
                tokio::time::sleep(every).await;
            }
        })
    };
    let (tx, mut rx) = mpsc::channel(4);
    let args = WatcherArgs {
        id: 1,
        db: db.clone(),
        mode,
        awaiting,
        session,
        conductor,
        timings,
        clock,
    };
    tokio::spawn(watcher(args, tx));
    let end = loop {
        match rx.recv().await {
            Some((_, WatcherMsg::Exit(reason, count))) => break (reason, count),
            Some((_, WatcherMsg::NextCheck(_))) => {}
            // The layer never ends without a reason; a closed channel is a panic in it.
            None => {
                break (
                    WatchdogReason::WatcherDead,
                    db.task_count().await.unwrap_or(0),
                );
            }
        }
    };
    beat.abort();
    end
}

/// Layer 2: watches the watcher through the Souffleur heartbeat; nags every cycle
/// while it is stale. Never exits on its own.
pub(super) async fn teammate<S: RoleStore>(
    db: S,
    t: RoleTimings,
    clock: Clock,
    alarms: mpsc::Sender<()>,
) {
    tokio::time::sleep(t.teammate_initial_wait).await;
    loop {
        let age = db.souffleur_heartbeat_age().await.ok().flatten();
        let age = age.map(|a| clock.evidence(a));
        if watcher_is_dead(age, t.deadlines.souffleur_stale_after) {
            let _ = alarms.send(()).await;
        }
        tokio::time::sleep(t.teammate_poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// An in-memory store: a Conductor view the test sets, and a count of refreshes.
    #[derive(Clone)]
    struct FakeStore {
        view: Arc<Mutex<ConductorView>>,
        souffleur_age: Arc<Mutex<Option<Duration>>>,
        refreshes: Arc<Mutex<u32>>,
    }

    impl FakeStore {
        fn new() -> Self {
            Self {
                view: Arc::new(Mutex::new(ConductorView {
                    heartbeat_age: Some(Duration::from_secs(5)),
                    state: "reviewing".into(),
                    session_id: Some("s1".into()),
                    task_count: 4,
                })),
                souffleur_age: Arc::new(Mutex::new(Some(Duration::from_secs(5)))),
                refreshes: Arc::new(Mutex::new(0)),
            }
        }
    }

    impl RoleStore for FakeStore {
        async fn refresh_souffleur_heartbeat(&self) -> Result<(), CoreError> {
            *self.refreshes.lock().unwrap() += 1;
            Ok(())
        }
        async fn conductor_view(&self) -> Result<ConductorView, CoreError> {
            Ok(self.view.lock().unwrap().clone())
        }
        async fn task_count(&self) -> Result<u64, CoreError> {
            Ok(4)
        }
        async fn souffleur_heartbeat_age(&self) -> Result<Option<Duration>, CoreError> {
            Ok(*self.souffleur_age.lock().unwrap())
        }
    }

    fn timings() -> RoleTimings {
        RoleTimings {
            deadlines: crate::core::hub::Deadlines {
                task_stale_after: Duration::from_secs(540),
                conductor_stale_after: Duration::from_secs(240),
                souffleur_stale_after: Duration::from_secs(180),
            },
            initial_wait: Duration::from_secs(240),
            poll: Duration::from_secs(60),
            teammate_initial_wait: Duration::from_secs(360),
            teammate_poll: Duration::from_secs(180),
            max_no_progress: 3,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_watcher_keeps_the_seed_cadence_and_exits_with_the_first_reason() {
        let store = FakeStore::new();
        let (tx, mut rx) = mpsc::channel(16);
        let start = Instant::now();
        tokio::spawn(watcher(
            WatcherArgs {
                id: 7,
                db: store.clone(),
                mode: WatcherMode::HeartbeatOnly,
                awaiting: false,
                session: "s1".into(),
                conductor: None,
                timings: timings(),
                clock: Clock::following_tokio(time::OffsetDateTime::UNIX_EPOCH),
            },
            tx,
        ));
        // First check after the initial wait, then one per poll.
        for n in 1..=3u32 {
            let (id, msg) = rx.recv().await.unwrap();
            assert_eq!(id, 7);
            assert!(matches!(msg, WatcherMsg::NextCheck(_)));
            assert_eq!(
                Instant::now() - start,
                Duration::from_secs(240 + 60 * u64::from(n - 1))
            );
            assert_eq!(
                *store.refreshes.lock().unwrap(),
                n,
                "the heartbeat is refreshed every cycle"
            );
        }
        store.view.lock().unwrap().heartbeat_age = Some(Duration::from_secs(241));
        store.view.lock().unwrap().state = "complete".into();
        let (_, msg) = rx.recv().await.unwrap();
        let WatcherMsg::Exit(reason, count) = msg else {
            panic!("expected an exit")
        };
        assert_eq!(
            reason,
            WatchdogReason::ConductorDeadHeartbeat,
            "heartbeat comes before complete"
        );
        assert_eq!(count, 4);
        assert_eq!(Instant::now() - start, Duration::from_secs(420));
        assert!(rx.recv().await.is_none(), "a watcher exits exactly once");
    }

    fn epoch_clock() -> Clock {
        Clock::following_tokio(time::OffsetDateTime::UNIX_EPOCH)
    }

    /// The machine slept 10 minutes: the Conductor's heartbeat is 10 minutes old when the
    /// watcher wakes, which is no evidence; the PID is alive. Silent a full interval after
    /// the resume, it is dead by heartbeat all the same.
    #[tokio::test(start_paused = true)]
    async fn after_a_suspend_the_conductor_gets_one_interval_to_speak() {
        use crate::core::clock::gaps::{GapKind, Gaps};
        let gaps = Gaps::detached();
        let store = FakeStore::new();
        store.view.lock().unwrap().heartbeat_age = Some(Duration::from_secs(1));
        let (tx, mut rx) = mpsc::channel(16);
        let start = Instant::now();
        tokio::spawn(watcher(
            WatcherArgs {
                id: 1,
                db: store.clone(),
                mode: WatcherMode::HeartbeatOnly,
                awaiting: false,
                session: "s1".into(),
                conductor: None,
                timings: RoleTimings {
                    initial_wait: Duration::from_secs(4),
                    poll: Duration::from_secs(1),
                    deadlines: crate::core::hub::Deadlines {
                        conductor_stale_after: Duration::from_secs(4),
                        ..timings().deadlines
                    },
                    ..timings()
                },
                clock: epoch_clock().with_gaps(gaps),
            },
            tx,
        ));
        assert!(matches!(
            rx.recv().await,
            Some((1, WatcherMsg::NextCheck(_)))
        ));
        // The suspend: the next check sees a heartbeat 600 s old, just after the resume.
        gaps.declare(
            GapKind::Suspend,
            Duration::from_secs(600),
            Instant::now(),
            epoch_clock().now_utc(),
        );
        store.view.lock().unwrap().heartbeat_age = Some(Duration::from_secs(600));
        for _ in 0..4 {
            let (_, msg) = rx.recv().await.unwrap();
            assert!(
                matches!(msg, WatcherMsg::NextCheck(_)),
                "no death within 4 s of the resume"
            );
        }
        let (_, msg) = rx.recv().await.unwrap();
        let WatcherMsg::Exit(reason, _) = msg else {
            panic!("expected an exit")
        };
        assert_eq!(reason, WatchdogReason::ConductorDeadHeartbeat);
        assert_eq!(Instant::now() - start, Duration::from_secs(9));
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_pause_the_teammate_waits_an_interval_before_watcher_dead() {
        use crate::core::clock::gaps::{GapKind, Gaps};
        let gaps = Gaps::detached();
        let store = FakeStore::new();
        let (tx, mut rx) = mpsc::channel(16);
        let start = Instant::now();
        *store.souffleur_age.lock().unwrap() = Some(Duration::from_secs(200));
        tokio::time::sleep(Duration::from_secs(300)).await;
        gaps.declare(
            GapKind::Pause,
            Duration::from_secs(200),
            Instant::now(),
            epoch_clock().now_utc(),
        );
        tokio::spawn(teammate(
            store.clone(),
            timings(),
            epoch_clock().with_gaps(gaps),
            tx,
        ));
        // At 360 s after the spawn the age since the resume (360 s) counts in full.
        rx.recv().await.unwrap();
        assert_eq!(Instant::now() - start, Duration::from_secs(660));
        *store.souffleur_age.lock().unwrap() = Some(Duration::from_secs(100));
        let quiet = tokio::time::timeout(Duration::from_secs(3600), rx.recv()).await;
        assert!(quiet.is_err(), "no alarm while the heartbeat is fresh");
    }

    #[tokio::test(start_paused = true)]
    async fn the_teammate_nags_while_the_heartbeat_is_stale() {
        let store = FakeStore::new();
        let (tx, mut rx) = mpsc::channel(16);
        let start = Instant::now();
        tokio::spawn(teammate(store.clone(), timings(), epoch_clock(), tx));
        *store.souffleur_age.lock().unwrap() = Some(Duration::from_secs(200));
        rx.recv().await.unwrap();
        assert_eq!(Instant::now() - start, Duration::from_secs(360));
        rx.recv().await.unwrap();
        assert_eq!(Instant::now() - start, Duration::from_secs(540));
        *store.souffleur_age.lock().unwrap() = Some(Duration::from_secs(10));
        let quiet = tokio::time::timeout(Duration::from_secs(3600), rx.recv()).await;
        assert!(quiet.is_err(), "no alarm while the heartbeat is fresh");
    }

    #[tokio::test]
    async fn a_new_watcher_starts_before_the_old_teammate_stops() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut layers = Layers::default();
        let old_teammate = tokio::spawn(std::future::pending::<()>());
        let old_handle = old_teammate.abort_handle();
        layers.teammate = Some(old_teammate);

        // A watcher that cannot start leaves the old teammate running.
        let failed = layers.replace(
            |_| Err(CoreError::database_text("database locked".into())),
            || unreachable!("no teammate without a watcher"),
        );
        assert!(
            failed
                .unwrap_err()
                .to_string()
                .contains("teammate keeps watching")
        );
        tokio::task::yield_now().await;
        assert!(!old_handle.is_finished());

        let seen = order.clone();
        let seen2 = order.clone();
        let handle = old_handle.clone();
        layers
            .replace(
                move |id| {
                    seen.lock().unwrap().push(format!(
                        "watcher {id} starts; old teammate running: {}",
                        !handle.is_finished()
                    ));
                    Ok(tokio::spawn(std::future::pending()))
                },
                move || {
                    seen2.lock().unwrap().push("teammate starts".to_owned());
                    Ok(tokio::spawn(std::future::pending()))
                },
            )
            .unwrap();
        tokio::task::yield_now().await;
        assert_eq!(
            *order.lock().unwrap(),
            [
                "watcher 1 starts; old teammate running: true",
                "teammate starts"
            ]
        );
        assert!(
            old_handle.is_finished(),
            "the old teammate was stopped after"
        );
        assert_eq!(layers.watcher_id, 1);
    }
}
