//! The Souffleur role as tokio actors: validation of the invocation, then the watcher
//! and teammate layers under the router ([`Router`]), and the recoveries it asks for.
//! Every step is reported to the hub, so the dashboard and headless output show it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::core::clock::Clock;
use crate::core::domain::souffleur::{
    Provider, RecoveryKind, RecoveryOutcome, WatchdogReason, WatcherMode,
};
use crate::core::domain::state;
use crate::core::error::OwnFileError;
use crate::core::event::{CoreEvent, RoleReport, RoleView, SouffleurSettings};
use crate::core::paths::{self, PathError, ProjectKey, Service};
use crate::core::procs::{self, ProcessId};
use crate::core::recovery::payload::{self, OrchestraConfig};
use crate::core::recovery::transcript::find_transcript;
use crate::core::recovery::{self, Recovered, RecoveryEnv, RecoveryRequest};
use crate::core::store::role::RoleDb;
use crate::core::watchdog::checks::{InvocationError, parse_invocation, watcher_is_dead};
use crate::core::watchdog::control::{Refusal, WatchdogCmd, WatchdogRequest};
use crate::core::watchdog::hold;
pub use crate::core::watchdog::layers::RoleTimings;
use crate::core::watchdog::layers::{Layers, WatcherArgs, WatcherMsg, teammate, watcher};
use crate::core::watchdog::machine::{Effect, Input, Phase, Router};

/// The role's answer to a command, from the effects the router returned for it.
fn answer(cmd: WatchdogCmd, effects: &[Effect]) -> Result<String, Refusal> {
    let alert = effects.iter().find_map(|e| match e {
        Effect::Alert(a) => Some(a.clone()),
        _ => None,
    });
    match cmd {
        WatchdogCmd::Recover(_) if effects.iter().any(|e| matches!(e, Effect::Recover(_))) => {
            Ok("recovery started".into())
        }
        WatchdogCmd::Recover(_) => Err(alert.map_or(Refusal::Ended, Refusal::Alert)),
        WatchdogCmd::Hold | WatchdogCmd::Release => alert.ok_or(Refusal::Ended),
    }
}

pub struct RoleConfig {
    pub db_path: PathBuf,
    /// `PID:<pid> SESSION_ID:<id>` as given.
    pub invocation: String,
    pub timings: RoleTimings,
    pub recovery: RecoveryEnv,
    pub orchestra: OrchestraConfig,
    pub clock: Clock,
    /// Where the operator's hold is recorded (`None`: not recorded, as in tests).
    pub hold: Option<ProjectKey>,
}

/// How the role ended.
#[derive(Debug, PartialEq, Eq)]
pub enum RoleEnd {
    ConductorComplete,
    Stopped,
    Failed(String),
}

/// The advisory lock that makes the role exclusive per project.
pub struct RoleLock {
    _lock: Flock<File>,
    pub path: PathBuf,
}

/// Why this process cannot take the Souffleur role.
#[derive(Debug, thiserror::Error)]
pub enum RoleLockError {
    #[error(transparent)]
    Place(#[from] PathError),
    #[error(transparent)]
    File(#[from] OwnFileError),
    #[error(
        "another maestro (PID {holder}) already holds the Souffleur role for {}. Only one Souffleur may run per project; dashboards can watch alongside it with plain `maestro`.",
        .project.display()
    )]
    Held { holder: String, project: PathBuf },
}

/// Takes the project's Souffleur lock, or says who holds it.
pub fn acquire_lock(project: &Path) -> Result<RoleLock, RoleLockError> {
    let key = ProjectKey::of(project);
    let path = paths::lock_file(Service::Souffleur, &key)?;
    let file = crate::core::safe_fs::open_own_lock(&path)?;
    if let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        // Only the holder writes its PID, after it holds the lock.
        let _ = std::fs::write(&path, format!("{}\n", std::process::id()));
        Ok(RoleLock { _lock: lock, path })
    } else {
        let holder = std::fs::read_to_string(&path).unwrap_or_default();
        Err(RoleLockError::Held {
            holder: holder.trim().to_owned(),
            project: key.root,
        })
    }
}

/// The Watchdog pane's settings line: provider order, the compaction threshold and the
/// permission ceiling with where each came from.
fn settings_line(cfg: &RoleConfig) -> String {
    let o = &cfg.orchestra;
    format!(
        "providers lethe→claude_export→standard_compact · FORCE_COMPACT {} ({}) · ceiling {} ({})",
        o.force_compact,
        o.force_compact_from,
        o.max_permission.as_str(),
        o.max_permission_from
    )
}

/// Runs the role until the Conductor completes, the role fails, or `cancel` fires;
/// the hub hears `Ended` last.
pub async fn run(
    cfg: RoleConfig,
    events: mpsc::Sender<CoreEvent>,
    cmds: mpsc::Receiver<WatchdogRequest>,
    cancel: CancellationToken,
) -> RoleEnd {
    let end = run_role(cfg, &events, cmds, cancel).await;
    let _ = events.send(CoreEvent::Role(RoleReport::Ended)).await;
    end
}

async fn run_role(
    cfg: RoleConfig,
    events: &mpsc::Sender<CoreEvent>,
    mut cmds: mpsc::Receiver<WatchdogRequest>,
    cancel: CancellationToken,
) -> RoleEnd {
    let mut role = match start_role(cfg, events, &cancel).await {
        Ok(role) => role,
        Err(end) => return end,
    };
    let (watch_tx, mut watch_rx) = mpsc::channel::<(u64, WatcherMsg)>(16);
    let (alarm_tx, mut alarm_rx) = mpsc::channel::<()>(4);
    let mut effects = role.router.start();
    // A hold recorded before this role started (or before a crash) still holds.
    if role.cfg.hold.as_ref().is_some_and(hold::is_held) {
        effects.extend(role.router.step(Input::Hold));
    }
    if let Some(end) = role.execute(effects, &watch_tx, &alarm_tx).await {
        return end;
    }
    let mut keepalive = tokio::time::interval(role.cfg.timings.poll.min(Duration::from_secs(60)));
    keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        role.publish().await;
        let recovering = role.recovery.is_some();
        let effects = tokio::select! {
            () = cancel.cancelled() => return role.stopped_by_operator().await,
            Some((id, msg)) = watch_rx.recv() => match msg {
                _ if id != role.layers.watcher_id => vec![],
                WatcherMsg::NextCheck(at) => {
                    role.next_check = Some(at);
                    vec![]
                }
                WatcherMsg::Exit(reason, task_count) => {
                    role.report(RoleReport::Reason { reason: reason.clone(), task_count }).await;
                    role.router.step(Input::WatcherExit { reason, task_count })
                }
            },
            Some(()) = alarm_rx.recv() => role.on_alarm().await,
            Some(request) = cmds.recv() => role.on_request(request).await,
            done = join_recovery(&mut role.recovery), if recovering => role.on_recovered(done),
            // While recovering, no watcher runs: the role keeps the heartbeat itself.
            _ = keepalive.tick(), if recovering => {
                let _ = role.db.refresh_souffleur_heartbeat().await;
                vec![]
            }
        };
        if let Some(end) = role.execute(effects, &watch_tx, &alarm_tx).await {
            role.publish().await;
            return end;
        }
    }
}

/// The role's database opened, its settings told, the Conductor validated (with
/// retries): the role, ready to start its layers; or how it ended before.
async fn start_role(
    cfg: RoleConfig,
    events: &mpsc::Sender<CoreEvent>,
    cancel: &CancellationToken,
) -> Result<Role, RoleEnd> {
    let events = events.clone();
    let db = match RoleDb::open(&cfg.db_path) {
        Ok(db) => db,
        Err(e) => return Err(fail(&events, format!("cannot open the database: {e}")).await),
    };
    announce_settings(&cfg, &db, &events).await;
    let wake = DbWake::start(&cfg.db_path);
    let (pid, session) = validate_with_retries(&cfg, &db, &events, &wake, cancel).await?;
    alert(
        &events,
        format!("validated: Conductor PID {pid}, session {session}"),
    )
    .await;
    let task_count = db.task_count().await.unwrap_or(0);
    Ok(Role {
        router: Router::new(session, task_count, cfg.timings.max_no_progress),
        conductor: Some(ProcessId::observe(pid)),
        layers: Layers::default(),
        recovery: None,
        next_check: None,
        db,
        cfg,
        events,
    })
}

/// The settings the role runs with, told; each warning about them said and written.
async fn announce_settings(cfg: &RoleConfig, db: &RoleDb, events: &mpsc::Sender<CoreEvent>) {
    let o = &cfg.orchestra;
    let _ = events
        .send(CoreEvent::Role(RoleReport::Settings(SouffleurSettings {
            force_compact: o.force_compact,
            force_compact_from: o.force_compact_from.clone(),
            max_permission: o.max_permission.as_str().into(),
            max_permission_from: o.max_permission_from.clone(),
            source: o.source.as_ref().map(|p| p.display().to_string()),
            warnings: o.warnings.clone(),
        })))
        .await;
    for w in &o.warnings {
        alert(events, w.clone()).await;
        let _ = db
            .message("souffleur", "warning", format!("Souffleur: {w}"))
            .await;
    }
}

impl Role {
    /// An operator's request (`maestro conductor …`): a hold kept in its file, the
    /// router stepped, and the answer sent back.
    async fn on_request(&mut self, request: WatchdogRequest) -> Vec<Effect> {
        let task_count = self.db.task_count().await.unwrap_or(0);
        if let (Some(key), WatchdogCmd::Hold | WatchdogCmd::Release) = (&self.cfg.hold, request.cmd)
            && let Err(e) = hold::set(key, request.cmd == WatchdogCmd::Hold)
        {
            alert(&self.events, e.to_string()).await;
        }
        let effects = self.router.step(match request.cmd {
            WatchdogCmd::Hold => Input::Hold,
            WatchdogCmd::Release => Input::Release,
            WatchdogCmd::Recover(kind) => Input::Manual { kind, task_count },
        });
        if let Some(reply) = request.reply {
            let _ = reply.send(answer(request.cmd, &effects));
        }
        effects
    }

    /// A recovery ended (a task that panicked counts as a failed one): a relaunched
    /// Conductor is the one watched from now on.
    fn on_recovered(&mut self, done: Result<Recovered, tokio::task::JoinError>) -> Vec<Effect> {
        self.recovery = None;
        let done = done.unwrap_or_else(|e| Recovered {
            outcome: RecoveryOutcome {
                provider: Provider::ClaudeExport,
                relaunched: false,
                pid_known: false,
                session_rediscover: false,
                new_session_id: None,
                failure: Some(format!("the recovery task failed: {e}")),
                artifact: None,
            },
            conductor: None,
        });
        if done.outcome.relaunched {
            self.conductor = done.conductor;
        }
        self.router.step(Input::RecoveryFinished(done.outcome))
    }
}

async fn join_recovery(
    handle: &mut Option<JoinHandle<Recovered>>,
) -> Result<Recovered, tokio::task::JoinError> {
    match handle {
        Some(h) => h.await,
        None => std::future::pending().await,
    }
}

async fn alert(events: &mpsc::Sender<CoreEvent>, text: String) {
    let _ = events.send(CoreEvent::Role(RoleReport::Alert(text))).await;
}

async fn fail(events: &mpsc::Sender<CoreEvent>, why: String) -> RoleEnd {
    let _ = events
        .send(CoreEvent::Role(RoleReport::Fatal(why.clone())))
        .await;
    RoleEnd::Failed(why)
}

/// The three checks, up to three attempts, each retry with arguments from the
/// Conductor's next `instruction` message.
async fn validate_with_retries(
    cfg: &RoleConfig,
    db: &RoleDb,
    events: &mpsc::Sender<CoreEvent>,
    wake: &DbWake,
    cancel: &CancellationToken,
) -> Result<(i32, String), RoleEnd> {
    let mut last_seen = db.max_message_id().await.unwrap_or(0);
    let mut invocation = cfg.invocation.clone();
    for attempt in 1..=3 {
        let _ = events
            .send(CoreEvent::Role(RoleReport::Status(Box::new(RoleView {
                phase: "validating".into(),
                mode: "normal".into(),
                generation: 1,
                no_progress: 0,
                held: false,
                conductor_pid: None,
                session_id: String::new(),
                next_check: None,
                last_provider: None,
                alert: Some(format!("validation attempt {attempt} of 3")),
                settings: settings_line(cfg),
            }))))
            .await;
        match validate(cfg, db, &invocation).await {
            Ok(ok) => {
                let _ = db.set_souffleur_state(state::CONFIRMED).await;
                return Ok(ok);
            }
            Err(check) => {
                let _ = db.set_souffleur_state(state::ERROR).await;
                let _ = db
                    .message(
                        "souffleur",
                        "error",
                        format!(
                            "Souffleur validation failed (attempt {attempt} of 3): {check}. Answer with an instruction message for task souffleur holding PID:<pid> SESSION_ID:<id>."
                        ),
                    )
                    .await;
                alert(
                    events,
                    format!("validation attempt {attempt} failed: {check}"),
                )
                .await;
                if attempt == 3 {
                    let _ = db.set_souffleur_state(state::EXITED).await;
                    let _ = db
                        .message(
                            "souffleur",
                            "error",
                            format!("Souffleur: validation failed 3 times ({check}); exiting."),
                        )
                        .await;
                    return Err(fail(events, format!("validation failed 3 times: {check}")).await);
                }
                invocation = tokio::select! {
                    () = cancel.cancelled() => return Err(RoleEnd::Stopped),
                    text = next_instruction(db, wake, &mut last_seen) => text,
                };
            }
        }
    }
    Err(RoleEnd::Failed("validation".into()))
}

/// PID alive, transcript present, `souffleur` row present, in that order.
async fn validate(
    cfg: &RoleConfig,
    db: &RoleDb,
    invocation: &str,
) -> Result<(i32, String), ValidationError> {
    let (pid, session) = parse_invocation(invocation)?;
    if !procs::is_alive(pid) {
        return Err(ValidationError::NotRunning { pid });
    }
    if find_transcript(&cfg.recovery.timings.claude_projects_dir, &session).is_none() {
        return Err(ValidationError::NoTranscript {
            dir: cfg.recovery.timings.claude_projects_dir.clone(),
            session,
        });
    }
    match db.souffleur_row_exists().await {
        Ok(true) => Ok((pid, session)),
        Ok(false) => Err(ValidationError::NoRow),
        Err(e) => Err(ValidationError::Table(e)),
    }
}

/// Which check of the role's arguments failed, and what it saw.
#[derive(Debug, thiserror::Error)]
enum ValidationError {
    #[error("arguments: {0}")]
    Arguments(#[from] InvocationError),
    #[error("PID check: process {pid} is not running")]
    NotRunning { pid: i32 },
    #[error("session check: no transcript {}/*/{session}*.jsonl", .dir.display())]
    NoTranscript { dir: PathBuf, session: String },
    #[error("table check: orchestration_tasks has no souffleur row")]
    NoRow,
    #[error("table check: {0}")]
    Table(#[source] crate::core::error::CoreError),
}

/// Waits for an `instruction` to the Souffleur that holds new arguments.
async fn next_instruction(db: &RoleDb, wake: &DbWake, last_seen: &mut i64) -> String {
    loop {
        if let Ok(found) = db.instructions_after(*last_seen).await {
            for (id, text) in found {
                *last_seen = id;
                if parse_invocation(&text).is_ok() {
                    return text;
                }
            }
        }
        wake.changed().await;
    }
}

/// Wakes on changes to the database files (notify), or every few seconds without it.
struct DbWake {
    notify: std::sync::Arc<Notify>,
    watcher: Option<notify::RecommendedWatcher>,
}

impl DbWake {
    fn start(db: &Path) -> Self {
        use notify::{RecursiveMode, Watcher};
        let notify = std::sync::Arc::new(Notify::new());
        let n = notify.clone();
        let dir = db
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let watcher =
            notify::recommended_watcher(move |_res: notify::Result<notify::Event>| n.notify_one())
                .and_then(|mut w| w.watch(&dir, RecursiveMode::NonRecursive).map(|()| w))
                .ok();
        Self { notify, watcher }
    }

    async fn changed(&self) {
        let fallback = if self.watcher.is_some() {
            Duration::from_secs(30)
        } else {
            Duration::from_secs(2)
        };
        let _ = tokio::time::timeout(fallback, self.notify.notified()).await;
    }
}

struct Role {
    router: Router,
    conductor: Option<ProcessId>,
    layers: Layers,
    recovery: Option<JoinHandle<Recovered>>,
    next_check: Option<time::OffsetDateTime>,
    db: RoleDb,
    cfg: RoleConfig,
    events: mpsc::Sender<CoreEvent>,
}

impl Role {
    async fn report(&self, r: RoleReport) {
        let _ = self.events.send(CoreEvent::Role(r)).await;
    }

    /// The operator stopped the role: its layers end, and the project is told no
    /// watchdog runs.
    async fn stopped_by_operator(&mut self) -> RoleEnd {
        self.layers.stop();
        let _ = self.db.set_souffleur_state(state::EXITED).await;
        let _ = self
            .db
            .message(
                "souffleur",
                "system",
                "Souffleur stopped by the operator; no watchdog is running.".into(),
            )
            .await;
        RoleEnd::Stopped
    }

    /// The watcher's alarm rang: its heartbeat is looked at again (an age across a
    /// suspend is no evidence) before it is called dead.
    async fn on_alarm(&mut self) -> Vec<Effect> {
        let age = self.db.souffleur_heartbeat_age().await.ok().flatten();
        let age = age.map(|a| self.cfg.clock.evidence(a));
        let fresh_now = !watcher_is_dead(age, self.cfg.timings.deadlines.souffleur_stale_after);
        if !fresh_now {
            let task_count = self.db.task_count().await.unwrap_or(0);
            self.report(RoleReport::Reason {
                reason: WatchdogReason::WatcherDead,
                task_count,
            })
            .await;
        }
        self.router.step(Input::WatcherDead { fresh_now })
    }

    async fn publish(&self) {
        let r = &self.router;
        let view = RoleView {
            phase: match r.phase {
                Phase::Watching => "watching",
                Phase::Recovering => "recovering",
                Phase::Exited => "exited",
            }
            .into(),
            mode: r.mode.as_str().into(),
            generation: r.generation,
            no_progress: r.no_progress,
            held: r.held,
            conductor_pid: self.conductor.map(|p| p.pid),
            session_id: r.session_id.clone(),
            next_check: if r.phase == Phase::Watching {
                self.next_check
            } else {
                None
            },
            last_provider: None,
            alert: None,
            settings: settings_line(&self.cfg),
        };
        self.report(RoleReport::Status(Box::new(view))).await;
    }

    /// Carries out effects in order; returns how the role ended, if it did.
    async fn execute(
        &mut self,
        effects: Vec<Effect>,
        watch_tx: &mpsc::Sender<(u64, WatcherMsg)>,
        alarm_tx: &mpsc::Sender<()>,
    ) -> Option<RoleEnd> {
        let mut end = None;
        for effect in effects {
            match effect {
                Effect::ReplaceLayers {
                    mode,
                    awaiting_session_id,
                } => {
                    self.replace_layers(mode, awaiting_session_id, watch_tx, alarm_tx)
                        .await;
                }
                Effect::Recover(kind) => self.start_recovery(kind).await,
                Effect::SetRow(state) => {
                    if let Err(e) = self.db.set_souffleur_state(state).await {
                        alert(
                            &self.events,
                            format!("could not set the souffleur row to {state}: {e}"),
                        )
                        .await;
                    }
                }
                Effect::Message { kind, text } => {
                    if let Err(e) = self.db.message("souffleur", kind, text).await {
                        alert(&self.events, format!("could not insert a message: {e}")).await;
                    }
                }
                Effect::Alert(text) => {
                    // Fatal alerts come with a Stop; they are errors for headless output.
                    alert(&self.events, text.clone()).await;
                    end = end.or(Some(text));
                }
                Effect::Stop => {
                    self.layers.stop();
                    let why = end.take().unwrap_or_default();
                    return Some(if self.router.last_exit_was_complete() {
                        RoleEnd::ConductorComplete
                    } else {
                        fail(&self.events, why).await
                    });
                }
            }
        }
        None
    }

    /// New watcher first; only once it runs is the old teammate replaced.
    async fn replace_layers(
        &mut self,
        mode: WatcherMode,
        awaiting: bool,
        watch_tx: &mpsc::Sender<(u64, WatcherMsg)>,
        alarm_tx: &mpsc::Sender<()>,
    ) {
        // Without a known PID only the heartbeat can be watched.
        let mode = if self.conductor.is_none() {
            WatcherMode::HeartbeatOnly
        } else {
            mode
        };
        let db_path = self.cfg.db_path.clone();
        let args = |id, db| WatcherArgs {
            id,
            db,
            mode,
            awaiting,
            session: self.router.session_id.clone(),
            conductor: self.conductor,
            timings: self.cfg.timings.clone(),
            clock: self.cfg.clock,
        };
        let timings = self.cfg.timings.clone();
        let clock = self.cfg.clock;
        let replaced = self.layers.replace(
            |id| {
                Ok(tokio::spawn(watcher(
                    args(id, RoleDb::open(&db_path)?),
                    watch_tx.clone(),
                )))
            },
            || {
                Ok(tokio::spawn(teammate(
                    RoleDb::open(&db_path)?,
                    timings,
                    clock,
                    alarm_tx.clone(),
                )))
            },
        );
        match replaced {
            Ok(()) => {
                self.next_check = Some(self.cfg.clock.now_utc() + self.cfg.timings.initial_wait);
            }
            Err(e) => alert(&self.events, e.to_string()).await,
        }
    }

    async fn start_recovery(&mut self, kind: RecoveryKind) {
        self.layers.stop();
        let payload_text = self.db.latest_payload().await.ok().flatten();
        let parsed = payload_text.as_deref().and_then(payload::parse_payload);
        let resolved = payload::resolve(parsed.as_ref(), self.cfg.orchestra.max_permission);
        for w in &resolved.warnings {
            let _ = self
                .db
                .message("souffleur", "warning", format!("Souffleur: {w}"))
                .await;
            alert(&self.events, w.clone()).await;
        }
        let _ = self.db.refresh_souffleur_heartbeat().await;
        let req = RecoveryRequest {
            kind,
            conductor: self.conductor,
            session_id: self.router.session_id.clone(),
            generation: self.router.generation + 1,
            resolved,
        };
        let env = self.cfg.recovery.clone();
        self.recovery = Some(tokio::spawn(
            async move { recovery::recover(&env, req).await },
        ));
    }
}
