//! `maestro demo`: a believable orchestration played into a scratch project, watched by
//! the same core and presenters as a real one.
//!
//! The script is data ([`scenario`]); the player is a plain writer like the sessions it
//! imitates: it sets rows with `datetime('now')` heartbeats, appends log lines and
//! inserts messages. maestro itself only reads, as in real use.

pub mod scenario;
mod transcripts;

pub use error::DemoError;
mod error;

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::cli::args::{DemoArgs, GlobalArgs};
use crate::cli::headless;
use crate::cli::life::Life;
use crate::cli::project::Project;
use crate::core::clock::Clock;
use crate::core::domain::state;
use crate::core::domain::{LogKind, TaskId};
use crate::core::store::{self, Author};
use crate::core::{runtime, schema};
use crate::settings::Settings;
use scenario::{Scenario, Step};

/// The demo's stand-in LLM provider: reads the prompt, answers with a fix.
const DEMO_LLM: [&str; 3] = [
    "sh",
    "-c",
    "cat >/dev/null; echo 'demo provider: add the missing semicolon after line 41'",
];

/// Puts the example pipelines in the project's `.maestro/sentinels/`, so `S` shows them
/// working: the anomaly check fires on the scenario's anomalies, the health check runs
/// on its schedule, and `build-fix` waits for `s`. The demo wrote them itself, so it
/// trusts exactly what it wrote (any other definition there stays untrusted).
fn install_examples(project: &Project) -> Result<(), DemoError> {
    use crate::core::pipeline::trust::{TrustStore, content_hash};
    let dir = crate::core::paths::definitions_dir(&project.root);
    std::fs::create_dir_all(&dir).map_err(DemoError::file("create", &dir))?;
    let mut trust = TrustStore::load(&crate::core::paths::ProjectKey::of(&project.root));
    for (name, text) in crate::core::pipeline::EXAMPLES {
        let path = dir.join(format!("{name}.json"));
        crate::core::safe_fs::write_atomic(&path, text.as_bytes(), 0o644)
            .map_err(DemoError::file("write", &path))?;
        trust.trust(name, &content_hash(text.as_bytes()));
    }
    Ok(trust.save()?)
}

/// A scratch project: the folder, its database and its logs. `at` is a folder the
/// operator chose (`--project`): created if missing, refused if it already holds an
/// orchestration (the demo never touches an existing `comms.db` or `temp/`).
pub fn create_project(at: Option<&Path>) -> Result<Project, DemoError> {
    let root = if let Some(dir) = at {
        for taken in ["comms.db", "temp"] {
            if dir.join(taken).symlink_metadata().is_ok() {
                return Err(DemoError::Occupied {
                    dir: dir.to_path_buf(),
                    taken,
                });
            }
        }
        dir.to_path_buf()
    } else {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        std::env::temp_dir().join(format!("maestro-demo-{}-{stamp}", std::process::id()))
    };
    let temp = root.join("temp");
    std::fs::create_dir_all(&temp).map_err(DemoError::file("create", &temp))?;
    // One canonical root from here on, as for every other command.
    let root = std::fs::canonicalize(&root).map_err(DemoError::file("resolve", &root))?;
    let temp = root.join("temp");
    let db = root.join("comms.db");
    schema::init_database(&db)?;
    Ok(Project { root, db, temp })
}

/// Runs the demo until the scenario's Conductor completes (headless) or the operator
/// quits (dashboard).
pub async fn run(
    args: DemoArgs,
    global: GlobalArgs,
    mut settings: Settings,
    clock: Clock,
) -> Result<(), DemoError> {
    let scenario = match &args.scenario {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(DemoError::file("read the scenario", path))?;
            Scenario::parse(&path.display().to_string(), &text)?
        }
        None => Scenario::parse("the built-in scenario", scenario::BUILT_IN)?,
    };
    let scale = |d: Duration| d.div_f64(args.speed);
    // The scenario's thresholds fit its pace; flags given by hand still win.
    settings.rules.sentinel.stall_after = global
        .stall_after
        .unwrap_or_else(|| scale(scenario.stall_after));
    settings.rules.deadlines.task_stale_after = global
        .task_stale_after
        .unwrap_or_else(|| scale(scenario.task_stale_after));
    settings.rules.deadlines.conductor_stale_after = global
        .conductor_stale_after
        .unwrap_or_else(|| scale(scenario.conductor_stale_after));

    // The example pipelines' `llm` step needs a provider; without one configured, the
    // demo brings a stand-in that answers without calling any model.
    if settings.llm.is_none() {
        settings.llm = Some(DEMO_LLM.iter().map(|s| (*s).to_owned()).collect());
    }
    let chosen = global.project()?.map(PathBuf::as_path);
    let project = create_project(chosen)?;
    install_examples(&project)?;
    let result = show(&project, &scenario, &args, &global, &settings, clock).await;
    if args.keep || chosen.is_some() {
        eprintln!(
            "maestro: the demo project is kept at {}",
            project.root.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(&project.root);
    }
    result
}

async fn show(
    project: &Project,
    scenario: &Scenario,
    args: &DemoArgs,
    global: &GlobalArgs,
    settings: &Settings,
    clock: Clock,
) -> Result<(), DemoError> {
    let claude = demo_claude_dir(project);
    let (done, finished) = tokio::sync::oneshot::channel();
    let player = Player::spawn(project.clone(), scenario.clone(), args.speed, &claude, done)?;
    let kept = args.keep || !global.projects.is_empty();
    let config = runtime::CoreConfig {
        // The demo's sessions are its own, never the user's.
        claude_dir: Some(claude),
        presenter: if global.no_tui {
            runtime::Presenter::Lines
        } else {
            runtime::Presenter::Screen
        },
        // A scratch project that is deleted at exit leaves no event log behind.
        event_log_bytes: if kept { settings.event_log_bytes } else { 0 },
        ..project.core_config(settings)
    };
    let mut life = Life::start(project, settings, &config, clock).await?;
    let stop = life.stop.clone();
    if !global.no_tui {
        let tui = crate::tui::TuiConfig::from_settings(
            format!("demo: {}", scenario.name),
            settings,
            clock,
        )?;
        let mut tui = tui;
        tui.finished = Some((
            finished,
            if kept {
                format!(
                    "the demo is over: q quits; its folder stays at {}",
                    project.root.display()
                )
            } else {
                "the demo is over: q quits (maestro demo --keep keeps its folder)".to_owned()
            },
        ));
        tui.pipelines = Some(crate::tui::PipelineAccess::for_project(&project.root));
        tui.actions = Some(project.action_access(settings));
        let result = crate::tui::run(crate::tui::Feeds::live(life.core()), tui, stop).await;
        drop(player);
        life.shutdown().await;
        return Ok(result?);
    }
    headless::present_on_stdout(
        &mut life.core().happenings,
        global.json,
        clock,
        true,
        None,
        stop,
    )
    .await;
    drop(player);
    life.shutdown().await;
    Ok(())
}

/// The scenario player, on its own thread; dropping it stops the play.
pub struct Player {
    stop: Option<std_mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Where the demo writes its Claude Code transcripts (inside the demo project).
pub fn demo_claude_dir(project: &Project) -> PathBuf {
    project.root.join(".demo-claude")
}

impl Player {
    pub fn spawn(
        project: Project,
        scenario: Scenario,
        speed: f64,
        claude: &Path,
        done: tokio::sync::oneshot::Sender<()>,
    ) -> Result<Self, DemoError> {
        let transcripts = transcripts::Transcripts::new(claude, &project.root);
        let open = |source| DemoError::Database {
            path: project.db.clone(),
            source,
        };
        let conn = Connection::open(&project.db).map_err(open)?;
        conn.busy_timeout(Duration::from_secs(2)).map_err(open)?;
        let (stop, stopped) = std_mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("maestro-demo".into())
            .spawn(move || {
                let mut play = Play {
                    conn,
                    temp: project.temp,
                    silent: HashSet::new(),
                    transcripts,
                };
                play.run(&scenario, speed, &stopped, done);
            })
            .map_err(DemoError::Player)?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Player {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Play {
    conn: Connection,
    temp: PathBuf,
    /// Tasks whose heartbeat the script stopped.
    silent: HashSet<TaskId>,
    transcripts: transcripts::Transcripts,
}

impl Play {
    /// Plays the scenario until stopped; `done` fires once its last step is played (the
    /// heartbeats go on after it).
    fn run(
        &mut self,
        scenario: &Scenario,
        speed: f64,
        stopped: &std_mpsc::Receiver<()>,
        done: tokio::sync::oneshot::Sender<()>,
    ) {
        let mut done = Some(done);
        let start = Instant::now();
        let beat = scenario.heartbeat_every.div_f64(speed);
        let mut next_beat = start + beat;
        let mut steps = scenario.steps.iter().peekable();
        loop {
            let next_step = steps.peek().map(|s| start + s.at.div_f64(speed));
            let wake = next_step.map_or(next_beat, |s| s.min(next_beat));
            match stopped.recv_timeout(wake.saturating_duration_since(Instant::now())) {
                Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let now = Instant::now();
            if now >= next_beat {
                self.refresh_heartbeats();
                next_beat += beat;
            }
            while let Some(step) = steps.next_if(|s| start + s.at.div_f64(speed) <= now) {
                // A failed write is shown by the dashboard as the absence of the change;
                // the play goes on, as a real session's would.
                if let Err(e) = self.apply(step) {
                    eprintln!("maestro demo: step at {:?} failed: {e}", step.at);
                }
            }
            if steps.peek().is_none()
                && let Some(done) = done.take()
            {
                let _ = done.send(());
            }
        }
    }

    fn refresh_heartbeats(&self) {
        let silent: Vec<String> = self.silent.iter().map(ToString::to_string).collect();
        let _ = store::refresh_live_heartbeats(&self.conn, &silent);
    }

    fn apply(&mut self, step: &Step) -> Result<(), DemoError> {
        if let Some(wanted) = &step.if_state {
            let now = store::task_state(&self.conn, step.task.as_str())?;
            if now.as_deref() != Some(wanted.as_str()) {
                return Ok(());
            }
        }
        // A Musician creates both its logs at bootstrap (verify-temp-files.sh checks).
        if step.state.as_deref() == Some(state::WORKING) {
            for kind in [LogKind::Status, LogKind::Deviations] {
                if let Some(name) = step.task.log_file_name(kind) {
                    let path = self.temp.join(name);
                    OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
                        .map_err(DemoError::file("create", &path))?;
                }
            }
        }
        // A session's transcript exists before its task is claimed, as in real use.
        self.transcripts
            .step(&step.task, step.state.as_deref(), &step.status);
        let id = step.task.as_str();
        let tx = self.conn.unchecked_transaction()?;
        let written = (|| -> rusqlite::Result<()> {
            if let Some(state) = &step.state {
                store::put_task(&tx, id, state)?;
                // The Conductor's session id, as the Souffleur is given it (rule 3).
                if id == crate::core::domain::CONDUCTOR_ID {
                    store::set_session_id_once(&tx, id, &transcripts::session_id(&step.task))?;
                }
            }
            if let Some(who) = &step.worked_by {
                store::set_worked_by(&tx, id, who)?;
            }
            if let Some(err) = &step.last_error {
                store::set_last_error(&tx, id, err)?;
            }
            if step.retry {
                store::record_retry(&tx, id)?;
            }
            if let Some(m) = &step.message {
                store::send_message(&tx, id, Author::Session(&m.from), &m.kind, &m.text)?;
            }
            Ok(())
        })();
        written?;
        tx.commit()?;
        match step.heartbeat {
            Some(false) => {
                self.silent.insert(step.task.clone());
            }
            Some(true) => {
                self.silent.remove(&step.task);
                self.refresh_heartbeats();
            }
            None => {}
        }
        append(&self.temp, &step.task, LogKind::Status, &step.status)?;
        append(
            &self.temp,
            &step.task,
            LogKind::Deviations,
            &step.deviations,
        )
    }
}

/// Appends lines to one of a task's logs, in one write.
pub fn append(
    temp: &Path,
    task: &TaskId,
    kind: LogKind,
    lines: &[String],
) -> Result<(), DemoError> {
    if lines.is_empty() {
        return Ok(());
    }
    let Some(name) = task.log_file_name(kind) else {
        return Ok(());
    };
    let path = temp.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(DemoError::file("append to", &path))
}
