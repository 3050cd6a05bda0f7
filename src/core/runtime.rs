//! Wiring: opens the sources for a project, starts the hub, and hands the presenters
//! their two feeds (every happening, and the latest snapshot).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::core::clock::Clock;
use crate::core::error::CoreError;
use crate::core::event::{CoreEvent, Happening, PipelineBus};
use crate::core::event_log::input::RecordedSettings;
use crate::core::hub::{Hub, HubSettings, ReportSink, Rules};
use crate::core::paths::ProjectKey;
use crate::core::snapshot::Snapshot;
use crate::core::sources::db::{self, DbSettings, DbSource};
use crate::core::sources::temp_logs::{self, TempLogSettings, TempLogsHandle};

/// Capacity of the source → hub channel; sources wait when it is full. With at most
/// 4096 lines an event, this bounds what a burst of log lines can hold in memory.
const EVENT_QUEUE: usize = 64;
/// Capacity of the hub → presenter channel.
const HAPPENING_QUEUE: usize = 4096;
/// Capacity of the pipeline bus (a host that falls this far behind skips the oldest).
const BUS_QUEUE: usize = 1024;

#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// The project folder (its key names the Musician watchers' folder).
    pub project: PathBuf,
    pub db: PathBuf,
    pub temp: PathBuf,
    /// What the hub judges by, built once from the settings.
    pub rules: Rules,
    /// What is written to the project's database.
    pub db_writes: crate::core::sources::db::DbWrites,
    /// How the sources read (`[logs]`).
    pub reading: crate::core::sources::Reading,
    /// This process holds the Souffleur role (its watcher reports the watchdog reasons).
    pub souffleur_role: bool,
    /// Who reads what the core says: what it forwards and skims follows from it.
    pub presenter: Presenter,
    /// Record the hub's inputs in the project's event log, each file bounded to this
    /// many bytes (0: no recording).
    pub event_log_bytes: u64,
    /// `[sessions]` context windows.
    pub context_windows: crate::core::sessions::ContextWindows,
    /// The prices session costs are estimated at.
    pub prices: crate::core::sessions::prices::PriceTable,
    /// Claude Code's folder, when not `$CLAUDE_CONFIG_DIR` or `~/.claude` (the demo's).
    pub claude_dir: Option<PathBuf>,
}

/// Who reads what the core says, the one choice from which the core's parts follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presenter {
    /// Lines on stdout or a script's pipe (`--no-tui`, the Souffleur without a screen).
    Lines,
    /// The dashboard: log lines are forwarded to it as they come.
    Screen,
    /// `serve`'s link to a remote maestro, which counts every line it tells: what the
    /// logs hold at start is read whole, not skimmed.
    Link,
}

impl Presenter {
    /// Log lines go to the presenter as they come.
    pub fn shows_log_lines(self) -> bool {
        self == Self::Screen
    }

    /// What the logs hold at start is skimmed (only the lines the Sentinel judges, and
    /// each file's last lines).
    pub fn skims_history(self) -> bool {
        self != Self::Link
    }
}

/// A running core. Dropping it stops the sources.
pub struct RunningCore {
    pub happenings: mpsc::Receiver<Happening>,
    /// For actors started next to the core (the Souffleur role) to report to the hub.
    pub events: mpsc::Sender<CoreEvent>,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub cancel: CancellationToken,
    pub with_database: bool,
    /// Every happening a pipeline can react to (and what `emit` steps send).
    pub bus: PipelineBus,
    /// Why this run is not recorded for `maestro replay`, when it should have been
    /// (for the presenter to say; the run itself is not affected).
    pub unrecorded: Option<String>,
    hub: Option<JoinHandle<()>>,
    _logs: Option<TempLogsHandle>,
    _sessions: Option<crate::core::sources::sessions::SessionsHandle>,
    /// Held while this maestro reports to the project's database (`report_to_db`):
    /// `maestro hook --replace-pollers` refuses the LLM Sentinel only then.
    _reporter: Option<crate::core::hooks::reporter::ReporterLock>,
}

impl RunningCore {
    /// For presenters that print happenings only (headless): with no one to read
    /// snapshots, the hub stops building them.
    pub fn without_snapshots(&mut self) {
        self.snapshots = watch::channel(Arc::new(Snapshot::default())).1;
    }

    /// Stops the hub (and with it the database source), then the log source.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        // Nobody reads happenings any more: a hub waiting to hand one over goes on.
        self.happenings.close();
        if let Some(hub) = self.hub.take() {
            // A hub stuck behind a blocked source is not waited for past this.
            let _ = tokio::time::timeout(std::time::Duration::from_millis(500), hub).await;
        }
    }
}

/// Starts the core for one project. A database that exists but is not the
/// orchestration's is an error, reported before anything runs; a missing one means
/// temp-only mode.
pub fn start(config: &CoreConfig, clock: Clock) -> Result<RunningCore, CoreError> {
    start_tapped(config, clock, None)
}

/// [`start`], with every input the hub takes handed to `tap` too (`maestro serve`).
pub fn start_tapped(
    config: &CoreConfig,
    clock: Clock,
    tap: Option<mpsc::Sender<crate::core::event_log::input::Line>>,
) -> Result<RunningCore, CoreError> {
    let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);
    let (out_tx, out_rx) = mpsc::channel(HAPPENING_QUEUE);
    let (snap_tx, snap_rx) = watch::channel(Arc::new(Snapshot::default()));

    let with_database = database_exists(&config.db);
    let (initial, opened) = if with_database {
        open_database(config)?
    } else {
        (Vec::new(), None)
    };
    // Without one, the source waits for it to appear (and re-arms after a removal or
    // a replacement either way).
    let reports: Option<Box<dyn ReportSink>> = Some(Box::new(db::spawn(
        db_settings(config),
        opened,
        events_tx.clone(),
    )));
    let settings = hub_settings(config, with_database);
    let recorded = crate::core::replay::rules::recorded(&settings);
    let bus = broadcast::channel(BUS_QUEUE).0;
    let mut hub = Hub::new(settings, clock, out_tx, snap_tx, reports).with_bus(bus.clone());
    if let Some(tap) = tap {
        hub = hub.with_tap(tap);
    }
    let sessions = spawn_sessions(config, events_tx.clone());
    hub = hub.with_session_facts(sessions.facts.clone());
    let (hub, unrecorded) = with_records(hub, config, recorded, clock);
    let cancel = CancellationToken::new();
    let hub = tokio::spawn(hub.run(initial, events_rx, cancel.clone()));
    let logs = spawn_file_sources(config, &events_tx, &cancel);
    Ok(RunningCore {
        happenings: out_rx,
        events: events_tx,
        snapshots: snap_rx,
        cancel,
        with_database,
        bus,
        unrecorded,
        hub: Some(hub),
        _logs: Some(logs),
        _sessions: Some(sessions),
        // None when the data directory cannot hold it: the LLM Sentinel is then not
        // refused, which leaves no duty undone.
        _reporter: config
            .db_writes
            .report_to_db
            .then(|| crate::core::hooks::reporter::hold(&ProjectKey::of(&config.project)).ok())
            .flatten(),
    })
}

/// The hub with the project's event log and journal, when it is an orchestration (a
/// folder with neither comms.db nor temp/, maestro started anywhere, leaves neither
/// behind); the first reason either cannot be kept, said once on stderr by the verb.
fn with_records(
    mut hub: Hub,
    config: &CoreConfig,
    recorded: RecordedSettings,
    clock: Clock,
) -> (Hub, Option<String>) {
    let orchestration = database_exists(&config.db) || config.temp.is_dir();
    if !orchestration {
        return (hub, None);
    }
    let mut unrecorded = None;
    if config.event_log_bytes > 0 {
        match start_recorder(config, recorded, clock) {
            Ok(Some(recorder)) => hub = hub.with_recorder(recorder),
            Ok(None) => {}
            Err(e) => unrecorded = Some(e.to_string()),
        }
    }
    let (ledger, problem) = open_told(config);
    (hub.with_told(ledger), unrecorded.or(problem))
}

/// The sources that follow the project's files: the Musician watchers' folder, the
/// hook spool and `temp/`'s logs (whose handle stops its thread when dropped).
fn spawn_file_sources(
    config: &CoreConfig,
    events: &mpsc::Sender<CoreEvent>,
    cancel: &CancellationToken,
) -> TempLogsHandle {
    tokio::spawn(crate::core::sources::watchers::run(
        ProjectKey::of(&config.project),
        events.clone(),
        cancel.clone(),
    ));
    tokio::spawn(crate::core::sources::hooks::run(
        ProjectKey::of(&config.project),
        config.temp.clone(),
        events.clone(),
        cancel.clone(),
    ));
    temp_logs::spawn(log_settings(config), events.clone())
}

/// The log source's settings for a configuration.
fn log_settings(config: &CoreConfig) -> TempLogSettings {
    TempLogSettings {
        dir: config.temp.clone(),
        reading: config.reading,
        skim_history: config.presenter.skims_history(),
        sentinel: config.rules.sentinel,
    }
}

fn db_settings(config: &CoreConfig) -> DbSettings {
    DbSettings {
        path: config.db.clone(),
        writes: config.db_writes,
        reading: config.reading,
    }
}

/// A database that is there must be the orchestration's: checked before anything runs.
/// Known tasks first, so the hub judges the first log lines correctly. One another
/// process holds locked is waited for by the source (never an exit): it reads the tasks
/// once it can.
fn open_database(config: &CoreConfig) -> Result<(Vec<CoreEvent>, Option<DbSource>), CoreError> {
    let read = DbSource::open(db_settings(config))
        .and_then(|mut source| source.initial_events().map(|events| (source, events)));
    match read {
        Ok((source, events)) => Ok((events, Some(source))),
        Err(CoreError::Busy { .. }) => Ok((
            vec![CoreEvent::Database(crate::core::event::DbStatus::Waiting(
                format!(
                    "{} is busy (another process holds a lock); maestro waits and retries",
                    config.db.display()
                ),
            ))],
            None,
        )),
        Err(e) => Err(e),
    }
}

/// Claude Code's sessions of the project, followed.
fn spawn_sessions(
    config: &CoreConfig,
    events: mpsc::Sender<CoreEvent>,
) -> crate::core::sources::sessions::SessionsHandle {
    crate::core::sources::sessions::spawn(
        crate::core::sources::sessions::SessionSettings {
            project: config.project.clone(),
            temp: config.temp.clone(),
            claude: config
                .claude_dir
                .clone()
                .or_else(crate::core::sessions::find::claude_dir),
            windows: config.context_windows.clone(),
            prices: config.prices.clone(),
        },
        events,
    )
}

/// A hub with no sources of its own: what it is told comes on the returned core's
/// `events` (a remote project's link). Nothing is recorded: the host's maestro records.
pub fn start_fed(config: &CoreConfig, clock: Clock) -> RunningCore {
    let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);
    let (out_tx, out_rx) = mpsc::channel(HAPPENING_QUEUE);
    let (snap_tx, snap_rx) = watch::channel(Arc::new(Snapshot::default()));
    let settings = hub_settings(config, true);
    let bus = broadcast::channel(BUS_QUEUE).0;
    let (ledger, problem) = open_told(config);
    let hub = Hub::new(settings, clock, out_tx, snap_tx, None)
        .with_bus(bus.clone())
        .with_told(ledger);
    let cancel = CancellationToken::new();
    let hub = tokio::spawn(hub.run(Vec::new(), events_rx, cancel.clone()));
    RunningCore {
        happenings: out_rx,
        events: events_tx,
        snapshots: snap_rx,
        cancel,
        with_database: true,
        bus,
        unrecorded: problem,
        hub: Some(hub),
        _logs: None,
        _sessions: None,
        _reporter: None,
    }
}

/// The hub's settings for a configuration, with or without a database at start.
pub fn hub_settings(config: &CoreConfig, with_database: bool) -> HubSettings {
    HubSettings {
        rules: config.rules,
        db_writes: config.db_writes,
        with_database,
        observe_watchdog: !config.souffleur_role,
        forward_logs: config.presenter.shows_log_lines(),
        db_name: config
            .db
            .file_name()
            .map_or_else(|| "comms.db".into(), |n| n.to_string_lossy().into_owned()),
    }
}

/// What maestros told about this project before (beside its event log), so a restart
/// marks restatements and `--after` resumes. Under the event log's rule: a run that
/// records nothing (the demo, `event_log_mib = 0`) remembers this run only, as does one
/// without a data directory.
fn open_told(config: &CoreConfig) -> (crate::core::told::Journal, Option<String>) {
    if config.event_log_bytes == 0 {
        return (crate::core::told::Journal::in_memory(), None);
    }
    let key = ProjectKey::of(&config.project);
    match crate::core::paths::event_log(&key) {
        Ok(files) => crate::core::told::Journal::open(&files.journal),
        Err(e) => (crate::core::told::Journal::in_memory(), Some(e.to_string())),
    }
}

/// Where this project's journal is (for `--after`), when maestro keeps one.
pub fn journal_path(config: &CoreConfig) -> Result<std::path::PathBuf, JournalPathError> {
    if config.event_log_bytes == 0 {
        return Err(JournalPathError::NoJournal);
    }
    Ok(crate::core::paths::event_log(&ProjectKey::of(&config.project))?.journal)
}

/// Why there is no journal to resume from.
#[derive(Debug, thiserror::Error)]
pub enum JournalPathError {
    #[error(
        "this project keeps no journal ([logs] event_log_mib = 0), so there is nothing to resume from: drop --after or the setting"
    )]
    NoJournal,
    #[error(transparent)]
    Place(#[from] crate::core::paths::PathError),
}

/// The flight recorder for this project, unless another maestro records it.
fn start_recorder(
    config: &CoreConfig,
    settings: RecordedSettings,
    clock: Clock,
) -> Result<
    Option<crate::core::event_log::recorder::Recorder>,
    crate::core::event_log::recorder::RecorderError,
> {
    let key = ProjectKey::of(&config.project);
    let files = crate::core::paths::event_log(&key)?;
    crate::core::event_log::recorder::Recorder::start(
        &files,
        config.event_log_bytes,
        settings,
        key.root.display().to_string(),
        clock.now_utc(),
    )
}

/// Whether a file (of any kind) is at the database path.
pub fn database_exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}
