//! The pipeline host: loads every definition in `<project>/.maestro/sentinels/`, follows
//! the folder (new, changed and removed files take effect without a restart), starts
//! pipelines by their triggers, and answers `maestro sentinel …` over a Unix socket.
//! One process per project hosts pipelines (an advisory lock), so none runs twice.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use serde_json::{Value, json};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::core::event::{CoreEvent, PipelineBus};
use crate::core::ipc;
use crate::core::paths::{self, ProjectKey, Service};
use crate::core::pipeline::PipelineLimits;
use crate::core::pipeline::expr;
use crate::core::pipeline::files::{read_definition_bytes, valid_name};
use crate::core::pipeline::output::ProcessSlots;
use crate::core::pipeline::runner::{self, Ended, RunCmd, RunnerEnv};
use crate::core::pipeline::spec::{Definition, Trigger, parse_definition};
use crate::core::pipeline::trust::{TrustStore, content_hash};

/// Keeps the host running (and its lock held) while alive.
pub struct HostHandle {
    _lock: Flock<File>,
    socket: Option<PathBuf>,
    task: Option<tokio::task::JoinHandle<()>>,
    shutdown: CancellationToken,
}

impl HostHandle {
    /// Stops hosting: every run ends its step's processes (SIGTERM, then SIGKILL after
    /// a grace period, reaped) before this returns.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(runner::STEP_KILL_GRACE * 4, task).await;
        }
    }
}

impl Drop for HostHandle {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        if let Some(socket) = &self.socket {
            let _ = std::fs::remove_file(socket);
        }
    }
}

/// Starts hosting, unless another process already does (then `None`). A control socket
/// that cannot be made does not stop the host: it runs, and says once why
/// `maestro sentinel …` cannot reach it.
pub fn start(
    project: &Path,
    llm: Option<Vec<String>>,
    limits: PipelineLimits,
    events: mpsc::Sender<CoreEvent>,
    bus: PipelineBus,
) -> Option<HostHandle> {
    let key = ProjectKey::of(project);
    let lock_path = paths::lock_file(Service::Pipelines, &key).ok()?;
    crate::core::safe_fs::create_dirs(lock_path.parent()?, 0o700).ok()?;
    let file = crate::core::safe_fs::open_own(&lock_path, 0o600).ok()?;
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).ok()?;
    let bound = paths::socket_path(Service::Pipelines, &key)
        .and_then(|path| ipc::bind_owner_only(&path).map(|l| (path, l)));
    let (socket, listener, problem) = match bound {
        Ok((path, listener)) => (Some(path), Some(listener), None),
        Err(e) => (None, None, Some(e)),
    };
    let shutdown = CancellationToken::new();
    let host = Host {
        shutdown: shutdown.clone(),
        dir: paths::definitions_dir(project),
        defs: BTreeMap::new(),
        refused: HashMap::new(),
        announced: HashMap::new(),
        project: key.clone(),
        running: HashMap::new(),
        schedule: HashMap::new(),
        env: RunnerEnv {
            project: project.to_path_buf(),
            llm,
            events,
            bus,
            limits,
            all_slots: ProcessSlots::new(limits.max_processes, "in all pipelines"),
        },
        runs: JoinSet::new(),
    };
    let task = tokio::spawn(async move {
        if let Some(e) = problem {
            host.error(format!(
                "pipelines run, but `maestro sentinel …` cannot reach them: {e}"
            ))
            .await;
        }
        host.run(listener).await;
    });
    Some(HostHandle {
        _lock: lock,
        socket,
        task: Some(task),
        shutdown,
    })
}

struct Entry {
    raw: Value,
    def: Definition,
    /// SHA-256 of the file's bytes (what trust is given to).
    hash: String,
    /// The operator trusts this exact content: only then does anything in it run.
    trusted: bool,
}

struct Running {
    cmds: mpsc::Sender<RunCmd>,
    /// Set by the run itself when it pauses (asked, or at its time limit).
    paused: Arc<AtomicBool>,
    /// Ends the step that runs (its whole process group) at once.
    stop: CancellationToken,
}

type Request = (Value, oneshot::Sender<Value>);

struct Host {
    /// maestro is exiting.
    shutdown: CancellationToken,
    dir: PathBuf,
    defs: BTreeMap<String, Entry>,
    /// Files refused, with the hash of the content refused (one bad save is reported
    /// once).
    refused: HashMap<String, String>,
    /// Untrusted definitions already announced, with the content's hash.
    announced: HashMap<String, String>,
    project: ProjectKey,
    running: HashMap<String, Running>,
    schedule: HashMap<String, Instant>,
    env: RunnerEnv,
    runs: JoinSet<String>,
}

impl Host {
    async fn run(mut self, listener: Option<UnixListener>) {
        let (req_tx, mut requests) = mpsc::channel::<Request>(16);
        if let Some(listener) = listener {
            tokio::spawn(serve(listener, req_tx));
        }
        let (wake_tx, mut wake) = mpsc::unbounded_channel::<()>();
        let mut folder = FolderWatch::start(&self.dir, wake_tx);
        // Subscribed only while a trusted definition waits for an event: without a
        // receiver the hub builds no bus event at all, so a project without event
        // triggers pays nothing per happening.
        let mut bus = None;
        self.rescan().await;
        loop {
            let wanted = self
                .defs
                .values()
                .any(|e| e.trusted && matches!(e.def.trigger, Trigger::Event { .. }));
            if !wanted {
                bus = None;
            } else if bus.is_none() {
                bus = Some(self.env.bus.subscribe());
            }
            let next = self.schedule.values().min().copied();
            tokio::select! {
                Some(()) = wake.recv() => {
                    while wake.try_recv().is_ok() {}
                    folder.follow_dir();
                    self.rescan().await;
                }
                Some((req, reply)) = requests.recv() => {
                    let answer = self.handle(&req).await;
                    let _ = reply.send(answer);
                }
                Some(done) = self.runs.join_next() => {
                    if let Ok(name) = done {
                        self.running.remove(&name);
                    }
                }
                Ok((event, payload)) = next_on_bus(&mut bus) => {
                    let vars = HashMap::from([("event".to_owned(), payload.clone())]);
                    let names: Vec<String> = self
                        .defs
                        .iter()
                        .filter(|(_, e)| e.trusted)
                        .filter(|(_, e)| match &e.def.trigger {
                            Trigger::Event { name, filter } => {
                                *name == event
                                    && filter
                                        .as_ref()
                                        .is_none_or(|f| expr::eval_bool(f, &vars).unwrap_or(false))
                            }
                            _ => false,
                        })
                        .map(|(n, _)| n.clone())
                        .collect();
                    for n in names {
                        self.start_with(&n, Some(payload.clone()));
                    }
                }
                () = self.shutdown.cancelled() => {
                    // maestro is exiting: every run ends its steps' processes first.
                    for run in self.running.values() {
                        run.stop.cancel();
                    }
                    let all = async { while self.runs.join_next().await.is_some() {} };
                    let _ = tokio::time::timeout(runner::STEP_KILL_GRACE * 3, all).await;
                    return;
                }
                () = sleep_until(next) => {
                    let now = Instant::now();
                    let due: Vec<String> = self.schedule.iter().filter(|(_, at)| **at <= now).map(|(n, _)| n.clone()).collect();
                    for n in due {
                        if let Some(Trigger::Schedule(when)) = self.defs.get(&n).map(|e| e.def.trigger.clone()) {
                            self.schedule.insert(n.clone(), now + when.next_in());
                        }
                        self.start(&n);
                    }
                }
            }
        }
    }

    async fn error(&self, detail: String) {
        let _ = self
            .env
            .events
            .send(CoreEvent::SourceFailed {
                source: "pipelines",
                task: None,
                detail,
            })
            .await;
    }

    /// Reads the folder: new and changed definitions are taken (a running pipeline gets
    /// its new steps for the next iteration), removed ones stop. Trust is read again
    /// too: a definition runs only while its exact content is trusted.
    async fn rescan(&mut self) {
        let trust = TrustStore::load(&self.project);
        let mut seen = Vec::new();
        let entries: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        for path in entries {
            if let Some(name) = self.take_definition(&path, &trust).await {
                seen.push(name);
            }
        }
        self.forget_gone(&seen).await;
        let catalog = self
            .defs
            .iter()
            .map(|(n, e)| (n.clone(), e.def.steps.len(), e.trusted))
            .collect();
        let _ = self
            .env
            .events
            .send(CoreEvent::PipelineCatalog(catalog))
            .await;
    }

    /// One file of the folder: its definition read, checked and taken in (a run of it
    /// given the new steps, or stopped when the new content is not trusted). The
    /// definition's name when the file is one, usable or not.
    async fn take_definition(&mut self, path: &Path, trust: &TrustStore) -> Option<String> {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
            .filter(|n| valid_name(n))
            .map(str::to_owned)?;
        let bytes = match read_definition_bytes(path) {
            Ok(b) => b,
            Err(e) => {
                self.refuse(&name, String::new(), e.to_string()).await;
                return Some(name);
            }
        };
        let hash = content_hash(&bytes);
        if self.refused.get(&name) == Some(&hash) {
            return Some(name);
        }
        let parsed = match serde_json::from_slice::<Value>(&bytes) {
            Err(e) => Err(format!("not JSON ({e})")),
            Ok(raw) => match parse_definition(&raw, &name, "") {
                Ok(def) => Ok((raw, def)),
                Err(e) => Err(e.to_string()),
            },
        };
        let (raw, def) = match parsed {
            Ok(ok) => ok,
            Err(e) => {
                self.refuse(&name, hash, format!("{}: {e}", path.display()))
                    .await;
                return Some(name);
            }
        };
        self.refused.remove(&name);
        let trusted = trust.is_trusted(&name, &hash);
        let old = self.defs.get(&name);
        if old.is_some_and(|o| o.hash == hash && o.trusted == trusted) {
            return Some(name);
        }
        let was_trusted = old.is_some_and(|o| o.trusted);
        if let Some(run) = self.running.get(&name) {
            if trusted {
                let _ = run.cmds.send(RunCmd::Replace(Box::new(def.clone()))).await;
            } else {
                // Its content changed and is not trusted yet: it stops here.
                run.stop.cancel();
                let _ = run.cmds.send(RunCmd::Stop).await;
            }
        }
        match &def.trigger {
            Trigger::Schedule(when) if trusted => {
                self.schedule
                    .insert(name.clone(), Instant::now() + when.next_in());
            }
            _ => {
                self.schedule.remove(&name);
            }
        }
        if !trusted && self.announced.get(&name) != Some(&hash) {
            self.announced.insert(name.clone(), hash.clone());
            self.error(untrusted_notice(&name, &self.project.root))
                .await;
        }
        let immediate = def.trigger == Trigger::Immediate;
        self.defs.insert(
            name.clone(),
            Entry {
                raw,
                def,
                hash,
                trusted,
            },
        );
        if trusted && !was_trusted && immediate {
            self.start(&name);
        }
        Some(name)
    }

    /// Definitions whose file is gone: forgotten, a run of one stopped.
    async fn forget_gone(&mut self, seen: &[String]) {
        let gone: Vec<String> = self
            .defs
            .keys()
            .filter(|n| !seen.contains(n))
            .cloned()
            .collect();
        for name in gone {
            self.defs.remove(&name);
            self.schedule.remove(&name);
            if let Some(run) = self.running.get(&name) {
                let _ = run.cmds.send(RunCmd::Stop).await;
            }
        }
        self.refused.retain(|n, _| seen.contains(n));
        self.announced.retain(|n, _| seen.contains(n));
    }

    /// A definition that cannot be used: said once per content, the others keep going.
    async fn refuse(&mut self, name: &str, hash: String, detail: String) {
        if self.refused.get(name) == Some(&hash) {
            return;
        }
        self.refused.insert(name.to_owned(), hash);
        // A refused file is not loaded; an earlier version stops.
        if self.defs.remove(name).is_some() {
            self.schedule.remove(name);
            if let Some(run) = self.running.get(name) {
                let _ = run.cmds.send(RunCmd::Stop).await;
            }
        }
        self.error(format!("{detail}; the other pipelines keep running"))
            .await;
    }

    /// Starts a pipeline unless it runs already; false if unknown or running.
    fn start(&mut self, name: &str) -> bool {
        self.start_with(name, None)
    }

    /// Starts a run; `event` is the happening that triggered it (`$event`).
    fn start_with(&mut self, name: &str, event: Option<Value>) -> bool {
        if self.running.contains_key(name) {
            return false;
        }
        let Some(entry) = self.defs.get(name).filter(|e| e.trusted) else {
            return false;
        };
        let (tx, mut rx) = mpsc::channel(16);
        let def = entry.def.clone();
        let env = self.env.clone();
        let owned = name.to_owned();
        let stop = CancellationToken::new();
        let run_stop = stop.clone();
        let paused = Arc::new(AtomicBool::new(false));
        let run_paused = paused.clone();
        self.runs.spawn(async move {
            let (_ended, _vars): (Ended, _) =
                runner::run(def, &env, (&mut rx, run_paused), run_stop, event).await;
            owned
        });
        self.running.insert(
            name.to_owned(),
            Running {
                cmds: tx,
                paused,
                stop,
            },
        );
        true
    }

    /// A pipeline's state as `list` and `show` say it.
    fn status(&self, name: &str) -> &'static str {
        match self.running.get(name) {
            Some(r) if r.paused.load(Ordering::Relaxed) => "paused",
            Some(_) => "running",
            None if self.defs.get(name).is_some_and(|e| !e.trusted) => "untrusted",
            None => "stopped",
        }
    }

    /// Every definition with its state and steps, and the files refused (not loaded
    /// from an earlier version), by name.
    fn list(&self) -> Value {
        let mut list: Vec<(String, Value)> = self
            .defs
            .iter()
            .map(|(n, e)| {
                (
                    n.clone(),
                    json!({"name": n, "status": self.status(n), "steps": e.def.steps.len()}),
                )
            })
            .collect();
        list.extend(
            self.refused
                .keys()
                .filter(|n| !self.defs.contains_key(*n))
                .map(|n| {
                    (
                        n.clone(),
                        json!({"name": n, "status": "invalid", "steps": null}),
                    )
                }),
        );
        list.sort_by(|a, b| a.0.cmp(&b.0));
        let list: Vec<Value> = list.into_iter().map(|(_, v)| v).collect();
        json!({"ok": true, "pipelines": list})
    }

    async fn handle(&mut self, req: &Value) -> Value {
        let op = req["op"].as_str().unwrap_or_default();
        let name = req["name"].as_str().unwrap_or_default().to_owned();
        if op == "list" {
            return self.list();
        }
        if op == "reload" {
            self.rescan().await;
            return match self.refused.get(&name) {
                Some(_) => {
                    json!({"ok": false, "detail": format!("{name}: the new definition was refused (see the error event)")})
                }
                None if self.defs.contains_key(&name) => json!({"ok": true, "detail": "accepted"}),
                None => json!({"ok": true, "detail": "removed"}),
            };
        }
        if !self.defs.contains_key(&name) {
            return json!({"ok": false, "detail": format!("no pipeline named {name:?} in .maestro/sentinels/")});
        }
        let send =
            |h: &Self, cmd: RunCmd| h.running.get(&name).map(|r| r.cmds.try_send(cmd).is_ok());
        match op {
            "show" => {
                json!({"ok": true, "name": name, "status": self.status(&name), "definition": self.defs[&name].raw})
            }
            "start" => {
                if !self.defs[&name].trusted {
                    json!({"ok": false, "detail": untrusted_notice(&name, &self.project.root)})
                } else if self.start(&name) {
                    json!({"ok": true, "detail": "started"})
                } else {
                    json!({"ok": false, "detail": "already running"})
                }
            }
            "stop" => {
                if let Some(run) = self.running.get(&name) {
                    run.stop.cancel();
                }
                match send(self, RunCmd::Stop) {
                    Some(true) => {
                        json!({"ok": true, "detail": "stopping; the running step's processes are ended"})
                    }
                    _ => json!({"ok": false, "detail": "not running"}),
                }
            }
            "pause" | "resume" => {
                let pause = op == "pause";
                let Some(run) = self.running.get_mut(&name) else {
                    return json!({"ok": false, "detail": "not running"});
                };
                if run.paused.load(Ordering::Relaxed) == pause {
                    return json!({"ok": false, "detail": if pause { "already paused" } else { "not paused" }});
                }
                let _ = run
                    .cmds
                    .try_send(if pause { RunCmd::Pause } else { RunCmd::Resume });
                json!({"ok": true, "detail": if pause { "paused" } else { "resumed" }})
            }
            _ => json!({"ok": false, "detail": format!("unknown request {op:?}")}),
        }
    }
}

/// What an untrusted definition waits for, and the command that gives it.
pub fn untrusted_notice(name: &str, project: &Path) -> String {
    format!(
        "pipeline {name} is not trusted, so nothing in it runs: read it (`maestro sentinel show {name}`), then trust it with `maestro sentinel trust {name} --project {}`",
        shlex::try_quote(&crate::core::text::printable(
            &project.display().to_string()
        ))
        .map_or_else(|_| "DIR".into(), std::borrow::Cow::into_owned)
    )
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The definitions folder's watch: the folder itself once it exists, and the two
/// folders above it to see it appear. Only changes inside the folder, or to the
/// folders on its path, wake the host: the project root's other traffic (every
/// `comms.db` commit) is dropped on notify's thread and re-reads nothing.
struct FolderWatch {
    watcher: Option<notify::RecommendedWatcher>,
    dir: PathBuf,
    watching_dir: bool,
}

impl FolderWatch {
    fn start(dir: &Path, wake: mpsc::UnboundedSender<()>) -> Self {
        use notify::{RecursiveMode, Watcher};
        let inside = dir.to_path_buf();
        let parent = dir.parent().map(Path::to_path_buf);
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(e) = res else {
                let _ = wake.send(());
                return;
            };
            if matches!(e.kind, notify::EventKind::Access(_)) {
                return;
            }
            let ours = e.need_rescan()
                || e.paths.iter().any(|p| {
                    p.parent() == Some(inside.as_path())
                        || p == &inside
                        || parent.as_deref() == Some(p.as_path())
                });
            if ours {
                let _ = wake.send(());
            }
        })
        .ok();
        if let Some(w) = watcher.as_mut() {
            for d in [dir.parent(), dir.parent().and_then(Path::parent)]
                .into_iter()
                .flatten()
            {
                if d.is_dir() {
                    let _ = w.watch(d, RecursiveMode::NonRecursive);
                }
            }
        }
        let mut me = Self {
            watcher,
            dir: dir.to_path_buf(),
            watching_dir: false,
        };
        me.follow_dir();
        me
    }

    /// Watches the definitions folder itself once it is there (again), and `.maestro/`
    /// once that is there (to see the definitions folder appear in it).
    fn follow_dir(&mut self) {
        use notify::{RecursiveMode, Watcher};
        if let Some(w) = self.watcher.as_mut() {
            if let Some(parent) = self.dir.parent().filter(|p| p.is_dir()) {
                let _ = w.watch(parent, RecursiveMode::NonRecursive);
            }
            // Looked at only once its parent is watched: a folder made in between sends
            // no event, and is seen here instead.
            let exists = self.dir.is_dir();
            if exists && !self.watching_dir {
                self.watching_dir = w.watch(&self.dir, RecursiveMode::NonRecursive).is_ok();
            } else if !exists {
                self.watching_dir = false;
            }
        }
    }
}

/// One JSON request line in, one JSON answer line out.
async fn serve(listener: UnixListener, requests: mpsc::Sender<Request>) {
    ipc::serve_lines(listener, 64 * 1024, move |line| {
        let requests = requests.clone();
        async move {
            let answer = match serde_json::from_str::<Value>(&line) {
                Err(e) => json!({"ok": false, "detail": format!("not a JSON request: {e}")}),
                Ok(req) => {
                    let (tx, rx) = oneshot::channel();
                    if requests.send((req, tx)).await.is_err() {
                        json!({"ok": false, "detail": "the pipeline host has stopped"})
                    } else {
                        tokio::time::timeout(Duration::from_secs(30), rx)
                            .await
                            .ok()
                            .and_then(Result::ok)
                            .unwrap_or_else(|| json!({"ok": false, "detail": "no answer from the pipeline host"}))
                    }
                }
            };
            answer.to_string()
        }
    })
    .await;
}

/// One request to the host of a project's pipelines, from another process (or the
/// dashboard's blocking pool); `None` when no host listens.
pub fn request(project: &Path, req: &Value) -> Option<Value> {
    let socket = paths::socket_path(Service::Pipelines, &ProjectKey::of(project)).ok()?;
    let line = ipc::request_line(&socket, &req.to_string(), Duration::from_secs(35)).ok()?;
    serde_json::from_str(&line).ok()
}

/// The next event on the bus, or never while not subscribed.
async fn next_on_bus(
    bus: &mut Option<tokio::sync::broadcast::Receiver<(String, Value)>>,
) -> Result<(String, Value), tokio::sync::broadcast::error::RecvError> {
    match bus {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
