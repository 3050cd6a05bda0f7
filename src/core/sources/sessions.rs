//! The session source: finds each task's Claude Code sessions (docs/sessions.md, mapping
//! rules 1-3) and follows their transcripts as they grow.
//!
//! One OS thread owns a kernel watch on `<claude dir>/projects` (and `sessions/`),
//! an index of the transcripts' first lines, and one [`Follower`] per transcript
//! followed (a session's main file and its subagents' `agent-*` files). A write to a
//! followed file is read from where the last read stopped and sent on as the
//! session's figures; a new or still-empty transcript is looked at until its first
//! prompt says whose it is; the mapping runs again only when the tasks, the index or
//! the running sessions change. Nothing is polled: an idle session costs nothing.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use crate::core::domain::state;
use crate::core::event::CoreEvent;
use crate::core::sessions::figures::{SessionFigures, SessionReport, Whose};
use crate::core::sessions::find::{self, TaskFacts, Transcript};
use crate::core::sessions::follow::{Follower, Outcome};
use crate::core::sessions::prices::PriceTable;

/// Wake-ups queued for the thread before it reads the whole folder instead.
const WAKE_QUEUE: usize = 4096;
/// A transcript whose first this-many bytes name no prompt is not looked at again.
const SETTLED_AFTER: u64 = 256 * 1024;

#[derive(Debug, Clone)]
pub struct SessionSettings {
    pub project: PathBuf,
    pub temp: PathBuf,
    /// `$CLAUDE_CONFIG_DIR` or `~/.claude` (none: the source says so and stops).
    pub claude: Option<PathBuf>,
    pub windows: crate::core::sessions::ContextWindows,
    pub prices: PriceTable,
}

enum Wake {
    Paths(Vec<PathBuf>),
    Rescan,
    Tasks,
    Stop,
}

/// Where the hub sends the task list the mapping works from.
#[derive(Clone)]
pub struct TaskFactsSender {
    slot: Arc<Mutex<Option<Vec<TaskFacts>>>>,
    wake: SyncSender<Wake>,
    overflow: Arc<AtomicBool>,
}

impl TaskFactsSender {
    /// The tasks as they stand now (the last value wins).
    pub fn send(&self, facts: Vec<TaskFacts>) {
        if let Ok(mut slot) = self.slot.lock() {
            *slot = Some(facts);
        }
        if let Err(TrySendError::Full(_)) = self.wake.try_send(Wake::Tasks) {
            self.overflow.store(true, Ordering::Relaxed);
        }
    }
}

/// The running source; dropping it stops the thread.
pub struct SessionsHandle {
    pub facts: TaskFactsSender,
    /// Set when the thread must stop (checked after every wake-up, so a full queue
    /// cannot lose the request).
    stopping: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for SessionsHandle {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
        let _ = self.facts.wake.try_send(Wake::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn spawn(settings: SessionSettings, events: mpsc::Sender<CoreEvent>) -> SessionsHandle {
    let (wake_tx, wake_rx) = sync_channel(WAKE_QUEUE);
    let overflow = Arc::new(AtomicBool::new(false));
    let facts = TaskFactsSender {
        slot: Arc::new(Mutex::new(None)),
        wake: wake_tx.clone(),
        overflow: overflow.clone(),
    };
    let slot = facts.slot.clone();
    let stopping = Arc::new(AtomicBool::new(false));
    let stop_seen = stopping.clone();
    let thread = std::thread::Builder::new()
        .name("maestro-sessions".into())
        .spawn(move || {
            let mut source = Sessions {
                prices: settings.prices.clone(),
                settings,
                events,
                index: HashMap::new(),
                tasks: Vec::new(),
                live: BTreeMap::new(),
                main_files: HashMap::new(),
                agent_files: HashMap::new(),
                missing_said: HashSet::new(),
                watch: None,
                seeing: None,
            };
            source.run(&wake_rx, &wake_tx, &overflow, &slot, &stop_seen);
        })
        .ok();
    SessionsHandle {
        facts,
        stopping,
        thread,
    }
}

/// One session followed.
struct Live {
    task_id: String,
    found_by: &'static str,
    main: Follower,
    agents: BTreeMap<PathBuf, Follower>,
    lost: bool,
}

struct IndexEntry {
    transcript: Transcript,
    /// Its first prompt is known (or will never be): not looked at again.
    settled: bool,
}

struct Sessions {
    settings: SessionSettings,
    events: mpsc::Sender<CoreEvent>,
    prices: PriceTable,
    /// Main transcripts' first lines, by path.
    index: HashMap<PathBuf, IndexEntry>,
    tasks: Vec<TaskFacts>,
    /// Sessions followed, by session id.
    live: BTreeMap<String, Live>,
    /// Main transcript → its session id.
    main_files: HashMap<PathBuf, String>,
    /// Subagent file → its session id.
    agent_files: HashMap<PathBuf, String>,
    missing_said: HashSet<String>,
    watch: Option<notify::RecommendedWatcher>,
    /// Whether `<claude>/projects` is seen (None: not said yet).
    seeing: Option<bool>,
}

impl Sessions {
    fn run(
        &mut self,
        wake_rx: &Receiver<Wake>,
        wake_tx: &SyncSender<Wake>,
        overflow: &Arc<AtomicBool>,
        slot: &Arc<Mutex<Option<Vec<TaskFacts>>>>,
        stopping: &AtomicBool,
    ) {
        let Some(claude) = self.settings.claude.clone() else {
            self.send(CoreEvent::Session(SessionReport::Folder {
                seeing: false,
                detail: "neither HOME nor CLAUDE_CONFIG_DIR is set, so Claude Code's sessions cannot be found; set one of them".into(),
            }));
            return;
        };
        self.watch = start_watch(&claude, wake_tx.clone(), overflow.clone());
        self.rescan(&claude);
        loop {
            let Ok(first) = wake_rx.recv() else { return };
            let mut dirty: HashSet<PathBuf> = HashSet::new();
            let mut rescan = false;
            let mut tasks_changed = false;
            for wake in std::iter::once(first).chain(wake_rx.try_iter()) {
                match wake {
                    Wake::Stop => return,
                    Wake::Paths(paths) => dirty.extend(paths),
                    Wake::Rescan => rescan = true,
                    Wake::Tasks => tasks_changed = true,
                }
            }
            if stopping.load(Ordering::Relaxed) {
                return;
            }
            // The Claude folder, or its projects or sessions folder, came or went: the
            // watch is set up again and everything looked at.
            let roots = [
                claude.clone(),
                claude.join("projects"),
                claude.join("sessions"),
            ];
            if dirty.iter().any(|p| roots.contains(p)) {
                rescan = true;
            }
            if overflow.swap(false, Ordering::Relaxed) {
                rescan = true;
                tasks_changed = true;
            }
            if tasks_changed && let Some(facts) = slot.lock().ok().and_then(|mut s| s.take()) {
                self.tasks = facts;
            }
            let mut rematch = tasks_changed;
            if rescan {
                self.watch = start_watch(&claude, wake_tx.clone(), overflow.clone());
                self.rescan(&claude);
                rematch = true;
                dirty.extend(self.followed_paths());
            }
            let mut touched = HashSet::new();
            for path in dirty {
                rematch |= self.on_path(&claude, &path, &mut touched);
            }
            if rematch {
                self.rematch(&claude);
            }
            for sid in touched {
                if !self.report(&sid) {
                    return;
                }
            }
        }
    }

    fn followed_paths(&self) -> Vec<PathBuf> {
        self.live
            .values()
            .flat_map(|l| std::iter::once(l.main.path.clone()).chain(l.agents.keys().cloned()))
            .collect()
    }

    /// Reads every transcript's first lines again.
    fn rescan(&mut self, claude: &Path) {
        let projects = claude.join("projects");
        let seeing = projects.is_dir();
        if self.seeing != Some(seeing) {
            self.seeing = Some(seeing);
            let detail = if seeing {
                format!("following Claude Code's sessions in {}", projects.display())
            } else {
                format!(
                    "{} does not exist (yet): no Claude Code session can be followed until it does",
                    projects.display()
                )
            };
            self.send(CoreEvent::Session(SessionReport::Folder { seeing, detail }));
        }
        self.index.clear();
        for folder in std::fs::read_dir(&projects).into_iter().flatten().flatten() {
            for file in std::fs::read_dir(folder.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                self.look_at(&file.path());
            }
        }
    }

    /// Indexes a main transcript's first lines; true if what it says changed.
    fn look_at(&mut self, path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !find::is_jsonl(path) || name.starts_with("agent-") {
            return false;
        }
        if self.index.get(path).is_some_and(|e| e.settled) {
            return false;
        }
        let Some(mut transcript) = find::head(path) else {
            return self.index.remove(path).is_some();
        };
        let size = path.metadata().map_or(0, |m| m.len());
        // Another project's transcript can only be found by its session id: its prompt
        // is not kept (a user may have thousands of them).
        let elsewhere = transcript
            .cwd
            .as_deref()
            .is_some_and(|cwd| !find::in_project(cwd, &self.settings.project));
        if elsewhere {
            transcript.first_prompt = None;
        }
        let settled = elsewhere || transcript.first_prompt.is_some() || size >= SETTLED_AFTER;
        let changed = self.index.get(path).is_none_or(|old| {
            old.transcript.first_prompt != transcript.first_prompt
                || old.transcript.session_id != transcript.session_id
                || old.transcript.cwd != transcript.cwd
        });
        self.index.insert(
            path.to_path_buf(),
            IndexEntry {
                transcript,
                settled,
            },
        );
        changed
    }

    /// One changed path; true if the mapping must run again.
    fn on_path(&mut self, claude: &Path, path: &Path, touched: &mut HashSet<String>) -> bool {
        if let Some(sid) = self.agent_files.get(path).cloned() {
            self.read_agent(&sid, path, touched);
            return false;
        }
        if let Some(sid) = self.main_files.get(path) {
            touched.insert(sid.clone());
            return false;
        }
        if path.starts_with(claude.join("sessions")) {
            return true;
        }
        if !path.starts_with(claude.join("projects")) {
            return false;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("agent-") && find::is_jsonl(path) {
            // A subagent's file of a followed session (its first line names it; until
            // that line is written, a later write brings it here again).
            if let Some(sid) = self.agent_owner(path) {
                self.read_agent(&sid, path, touched);
            }
            return false;
        }
        if path.is_dir() {
            // A new folder (a project's, a session's, its `subagents/`): what it already
            // holds, since files made before the watch reached it send no event.
            return self.look_into(path, touched, 2);
        }
        self.look_at(path)
    }

    /// The transcripts and subagents' files already in a new folder, `depth` levels down.
    fn look_into(&mut self, dir: &Path, touched: &mut HashSet<String>, depth: u8) -> bool {
        let mut changed = false;
        for file in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = file.path();
            let name = file.file_name().to_string_lossy().into_owned();
            if file.file_type().is_ok_and(|t| t.is_dir()) {
                if depth > 0 {
                    changed |= self.look_into(&path, touched, depth - 1);
                }
            } else if name.starts_with("agent-") && find::is_jsonl(&path) {
                if let Some(sid) = self.agent_owner(&path) {
                    self.read_agent(&sid, &path, touched);
                }
            } else {
                changed |= self.look_at(&path);
            }
        }
        changed
    }

    /// The followed session a subagent's file belongs to, by its first line.
    fn agent_owner(&self, path: &Path) -> Option<String> {
        let sid = find::head(path)?.session_id;
        self.live.contains_key(&sid).then_some(sid)
    }

    fn read_agent(&mut self, sid: &str, path: &Path, touched: &mut HashSet<String>) {
        let Some(live) = self.live.get_mut(sid) else {
            return;
        };
        let follower = live
            .agents
            .entry(path.to_path_buf())
            .or_insert_with(|| Follower::new(path, Some(sid.to_owned())));
        let outcome = follower.read(&self.prices);
        if follower.is_foreign() {
            live.agents.remove(path);
            return;
        }
        self.agent_files.insert(path.to_path_buf(), sid.to_owned());
        if outcome != Outcome::Same {
            touched.insert(sid.to_owned());
        }
    }

    /// Ties tasks to sessions again; new sessions are read and announced.
    fn rematch(&mut self, claude: &Path) {
        let by_id: BTreeMap<String, Transcript> = self
            .index
            .values()
            .map(|e| (e.transcript.session_id.clone(), e.transcript.clone()))
            .collect();
        let (found, missing) = find::match_tasks(
            &self.settings.project,
            &self.settings.temp,
            &self.tasks,
            claude,
            &by_id,
        );
        // Every file of every new session is read at once, on all cores (a day of
        // transcripts at start), then each session is announced.
        let new: Vec<_> = found
            .into_iter()
            .filter(|f| !self.live.contains_key(&f.transcript.session_id))
            .collect();
        let list: Vec<(&Path, &str)> = new
            .iter()
            .map(|f| {
                (
                    f.transcript.path.as_path(),
                    f.transcript.session_id.as_str(),
                )
            })
            .collect();
        let read = crate::core::sessions::read_sessions(&list, &self.prices);
        for (f, (main, agents)) in new.iter().zip(read) {
            let sid = f.transcript.session_id.clone();
            let mut live = Live {
                task_id: f.task_id.clone(),
                found_by: f.rule,
                main,
                agents: BTreeMap::new(),
                lost: false,
            };
            // Subagents' files already there, of this session, in either layout (a
            // folder holds every session of its project, relaunches included).
            for a in agents {
                self.agent_files.insert(a.path.clone(), sid.clone());
                live.agents.insert(a.path.clone(), a);
            }
            let figures = self.figures(&sid, &live);
            self.main_files.insert(live.main.path.clone(), sid.clone());
            self.live.insert(sid, live);
            self.send(CoreEvent::Session(SessionReport::Found(Box::new(figures))));
        }
        for (task_id, detail) in missing {
            let started = self
                .tasks
                .iter()
                .find(|t| t.task_id == task_id)
                .is_some_and(|t| t.state.as_deref().is_some_and(|s| s != state::WATCHING));
            // Without the projects folder, the folder's own notice says it all.
            let seeing = self.seeing == Some(true);
            if started && seeing && self.missing_said.insert(task_id.clone()) {
                self.send(CoreEvent::Session(SessionReport::Missing {
                    task_id,
                    detail,
                }));
            }
        }
    }

    /// Reads a session's main transcript and sends its figures; false once the hub
    /// is gone.
    fn report(&mut self, sid: &str) -> bool {
        let Some(live) = self.live.get_mut(sid) else {
            return true;
        };
        let outcome = live.main.read(&self.prices);
        let report = match outcome {
            Outcome::Gone(why) => {
                if live.lost {
                    return true;
                }
                live.lost = true;
                SessionReport::Lost {
                    task_id: live.task_id.clone(),
                    session_id: sid.to_owned(),
                    detail: why,
                }
            }
            _ if live.lost => {
                live.lost = false;
                let live = &self.live[sid];
                SessionReport::Found(Box::new(self.figures(sid, live)))
            }
            _ => {
                let live = &self.live[sid];
                SessionReport::Update(Box::new(self.figures(sid, live)))
            }
        };
        self.send(CoreEvent::Session(report))
    }

    fn figures(&self, sid: &str, live: &Live) -> SessionFigures {
        let agents: Vec<_> = live.agents.values().map(|a| &a.tally).collect();
        SessionFigures::of(
            Whose {
                task_id: &live.task_id,
                session_id: sid,
                file: &live.main.path,
                found_by: live.found_by,
            },
            &live.main.tally,
            &agents,
            crate::core::sessions::now_ms(),
            &self.settings.windows,
        )
    }

    /// False once the hub is gone.
    fn send(&self, event: CoreEvent) -> bool {
        self.events.blocking_send(event).is_ok()
    }
}

/// Watches `<claude>/projects` (recursively), `<claude>/sessions`, and the folders
/// above them to see them appear. Reads and opens are dropped on notify's thread.
fn start_watch(
    claude: &Path,
    wake: SyncSender<Wake>,
    overflow: Arc<AtomicBool>,
) -> Option<notify::RecommendedWatcher> {
    use notify::{RecursiveMode, Watcher};
    let again = wake.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let message = match res {
            Ok(e) if super::is_read_access(&e.kind) => return,
            Ok(e) if e.need_rescan() => Wake::Rescan,
            Ok(e) => Wake::Paths(e.paths),
            Err(_) => Wake::Rescan,
        };
        if let Err(TrySendError::Full(_)) = wake.try_send(message) {
            overflow.store(true, Ordering::Relaxed);
        }
    })
    .ok()?;
    let projects = claude.join("projects");
    let sessions = claude.join("sessions");
    // The Claude folder, or the nearest folder above it that exists, first: a folder
    // made below it from now on is announced by an event.
    let mut above = Some(claude);
    let mut watched = None;
    while let Some(dir) = above {
        if dir.is_dir() {
            let _ = watcher.watch(dir, RecursiveMode::NonRecursive);
            watched = Some(dir);
            break;
        }
        above = dir.parent();
    }
    let projects_there = projects.is_dir();
    if projects_there {
        let _ = watcher.watch(&projects, RecursiveMode::Recursive);
    }
    if sessions.is_dir() {
        let _ = watcher.watch(&sessions, RecursiveMode::NonRecursive);
    }
    // A folder made while the watches were being set up (between a look and the watch
    // above it) has no event: it is looked for again, as if one had come.
    let claude_came = watched != Some(claude) && claude.is_dir();
    if claude_came || (!projects_there && projects.is_dir()) {
        let _ = again.try_send(Wake::Rescan);
    }
    Some(watcher)
}
