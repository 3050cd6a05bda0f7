//! Helpers for tests that run the real `maestro` binary on scratch projects.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

/// How long any single expected event may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The real binary, with a data directory shared by this test run (locks, event logs,
/// holds) instead of the user's own; a test that needs its own sets `XDG_DATA_HOME`.
pub fn maestro() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_maestro"));
    cmd.env("XDG_DATA_HOME", data_home());
    cmd
}

/// The data directory [`maestro`] gives every maestro of this test run.
pub fn data_home() -> &'static Path {
    static DATA: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DATA.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// A scratch project with `comms.db` (made by `maestro init`), `temp/`, and the rows an
/// orchestration's setup writes when its Conductor starts (`task-00` and `souffleur`,
/// `watching`, fresh heartbeats): a running orchestration. [`Scratch::fresh`] is the
/// project `maestro init` alone leaves.
pub struct Scratch {
    /// The temporary folder that holds the project (removed on drop), when it is ours.
    _dir: Option<tempfile::TempDir>,
    root: PathBuf,
}

impl Scratch {
    pub fn new() -> Self {
        let s = Self::fresh();
        s.conductor_started();
        s
    }

    /// What `maestro init` leaves: the database and `temp/`, no participant rows.
    pub fn fresh() -> Self {
        let s = Self::without_db();
        s.init();
        s
    }

    /// The rows the orchestration's setup inserts (PROTOCOL.md §1).
    pub fn conductor_started(&self) {
        self.set_task("souffleur", "watching");
        self.set_task("task-00", "watching");
    }

    /// `maestro init` on this project.
    fn init(&self) {
        let out = maestro()
            .arg("init")
            .arg("--project")
            .arg(self.root())
            .output()
            .unwrap();
        assert_success(&out);
    }

    pub fn without_db() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("temp")).unwrap();
        Self {
            root: dir.path().to_path_buf(),
            _dir: Some(dir),
        }
    }

    /// A project named `name` inside `parent` (which the caller keeps alive), with a
    /// database and `temp/`.
    pub fn new_in(parent: &Path, name: &str) -> Self {
        let root = parent.join(name);
        std::fs::create_dir_all(root.join("temp")).unwrap();
        let s = Self { _dir: None, root };
        let out = maestro()
            .arg("init")
            .arg("--project")
            .arg(s.root())
            .output()
            .unwrap();
        assert_success(&out);
        s.conductor_started();
        s
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn db(&self) -> PathBuf {
        self.root().join("comms.db")
    }

    pub fn temp(&self) -> PathBuf {
        self.root().join("temp")
    }

    pub fn conn(&self) -> Connection {
        let c = Connection::open(self.db()).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        c
    }

    pub fn set_task(&self, id: &str, state: &str) {
        self.conn()
            .execute(
                "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, ?2, datetime('now'))
                 ON CONFLICT(task_id) DO UPDATE SET state = excluded.state, last_heartbeat = datetime('now')",
                [id, state],
            )
            .unwrap();
    }

    pub fn append(&self, file: &str, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.temp().join(file))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    /// Starts `maestro --no-tui --json` on this project with extra arguments.
    pub fn headless(&self, extra: &[&str]) -> Running {
        let mut cmd = maestro();
        cmd.arg("--no-tui")
            .arg("--json")
            .arg("--project")
            .arg(self.root())
            .args(extra);
        Running::spawn(cmd)
    }
}

/// A running maestro whose stdout lines arrive on a channel.
pub struct Running {
    pub child: Child,
    lines: mpsc::Receiver<String>,
    pub seen: Vec<String>,
}

impl Running {
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for the next JSON line matching `pred`, failing after [`DEADLINE`].
    pub fn wait_json(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let line = self.wait_line(what, |l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| pred(&v))
        });
        serde_json::from_str(&line).unwrap()
    }

    /// Waits until each of `preds` has matched a line, in any order.
    pub fn wait_all(&mut self, what: &str, preds: &[&dyn Fn(&Value) -> bool]) {
        let mut left: Vec<usize> = (0..preds.len()).collect();
        while !left.is_empty() {
            let line = self.wait_line(what, |l| {
                serde_json::from_str::<Value>(l).is_ok_and(|v| left.iter().any(|i| preds[*i](&v)))
            });
            let v: Value = serde_json::from_str(&line).unwrap();
            left.retain(|i| !preds[*i](&v));
        }
    }

    /// Waits for the next JSON line matching `pred`, failing after `within`.
    pub fn wait_json_within(
        &mut self,
        what: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let line = self.wait_line_within(what, within, |l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| pred(&v))
        });
        serde_json::from_str(&line).unwrap()
    }

    /// Waits for the next line matching `pred`.
    pub fn wait_line(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        self.wait_line_within(what, DEADLINE, pred)
    }

    fn wait_line_within(
        &mut self,
        what: &str,
        within: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> String {
        let end = Instant::now() + within;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if pred(&line) {
                        return line;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout | mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "timed out waiting for {what}; output so far:\n{}\nstderr: {}",
                        self.seen.join("\n"),
                        self.stderr_now()
                    )
                }
            }
        }
    }

    /// Every remaining line until stdout closes (the process ended).
    pub fn rest(&mut self) -> Vec<String> {
        let end = Instant::now() + DEADLINE;
        let mut out = Vec::new();
        loop {
            match self
                .lines
                .recv_timeout(end.saturating_duration_since(Instant::now()))
            {
                Ok(l) => {
                    self.seen.push(l.clone());
                    out.push(l);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return out,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("process did not end; got {out:?}"),
            }
        }
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// Waits for exit: stdout closes when the process ends (within the deadline).
    pub fn wait_exit(&mut self) -> i32 {
        self.rest();
        self.child.wait().unwrap().code().unwrap_or(-1)
    }

    fn stderr_now(&mut self) -> String {
        let _ = self.child.kill();
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
        }
        s
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A program on PATH, as a shell would find it.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether a process is stopped (state `T`: SIGSTOP).
pub fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

/// Whether a process runs (exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .map(|r| r.trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
}

pub fn event(v: &Value) -> &str {
    v["event"].as_str().unwrap_or_default()
}

/// A scratch project with a `.maestro/sentinels/` folder and a data directory of its
/// own (trust, locks, sockets), for the pipeline tests.
pub struct PipelineRig {
    pub s: Scratch,
    pub data: tempfile::TempDir,
}

impl PipelineRig {
    pub fn new() -> Self {
        let s = Scratch::new();
        std::fs::create_dir_all(s.root().join(".maestro/sentinels")).unwrap();
        Self {
            s,
            data: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes a definition as a clone or a Musician would: untrusted.
    pub fn write(&self, name: &str, def: &Value) {
        std::fs::write(
            self.s
                .root()
                .join(format!(".maestro/sentinels/{name}.json")),
            def.to_string(),
        )
        .unwrap();
    }

    /// Writes a definition and trusts it, as the operator would.
    pub fn define(&self, name: &str, def: &Value) {
        self.write(name, def);
        let (code, out, err) = self.sentinel(&["trust", name]);
        assert_eq!(code, 0, "{out}{err}");
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = maestro();
        c.env("XDG_DATA_HOME", self.data.path())
            .args(args)
            .arg("--project")
            .arg(self.s.root());
        c
    }

    /// `maestro --no-tui --json` hosting the project's pipelines.
    pub fn host(&self) -> Running {
        Running::spawn(self.cmd(&["--no-tui", "--json"]))
    }

    pub fn sentinel(&self, args: &[&str]) -> (i32, String, String) {
        let out = self
            .cmd(&[&["sentinel"][..], args].concat())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub fn marker(&self, name: &str) -> PathBuf {
        self.s.root().join(name)
    }
}

/// Fails with the process's exit status, stdout and stderr unless it succeeded.
pub fn assert_success(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until `ok` holds, looking every 50 ms, failing after [`DEADLINE`].
pub fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every file below `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Gives `root`, every folder and file below it, to another user (nobody), as when
/// HOME=/tmp and that user made maestro's folders first. `false` (nothing changed) when
/// not root: only root can give a file away.
pub fn give_away(root: &Path) -> bool {
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("skipped: giving a folder to another user needs root");
        return false;
    }
    std::os::unix::fs::chown(root, Some(65534), Some(65534)).unwrap();
    for e in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            give_away(&e.path());
        } else {
            std::os::unix::fs::chown(e.path(), Some(65534), Some(65534)).unwrap();
        }
    }
    true
}

/// What a stub kitty does after recording its argv, as kitty does: runs the command
/// after `--` as its child, and ends when it ends.
pub const RUN_AFTER_DASHES: &str =
    "while [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\n[ $# -gt 0 ] && shift\n\"$@\"\n";

/// A stub `claude` in `dir` that stays up for `seconds` (its process is named claude).
pub fn stub_claude(dir: &Path, seconds: u32) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("claude");
    std::fs::write(&path, format!("#!/bin/sh\nsleep {seconds}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A scratch project with a stub `kitty` on PATH that records its argv and runs the
/// command it was given (a stub `claude` that stays up).
pub struct Relauncher {
    pub s: Scratch,
    pub bin: std::path::PathBuf,
    pub log: std::path::PathBuf,
}

impl Relauncher {
    pub fn new() -> Self {
        use std::os::unix::fs::PermissionsExt;
        let s = Scratch::new();
        let bin = s.root().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let log = s.root().join("kitty.log");
        std::fs::write(
            bin.join("kitty"),
            format!(
                "#!/bin/sh\n{{ for a in \"$@\"; do printf '%s\\037' \"$a\"; done; printf '\\n'; }} > {}\n{RUN_AFTER_DASHES}",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(bin.join("kitty"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        stub_claude(&bin, 30);
        Self { s, bin, log }
    }

    pub fn relaunch(&self, task: &str) -> serde_json::Value {
        let _ = std::fs::remove_file(&self.log);
        let out = maestro()
            .args(["task", "relaunch", task, "--yes", "--json", "--project"])
            .arg(self.s.root())
            // The stub kitty needs none, but maestro checks there is a display to open
            // a window on before it changes anything.
            .env("DISPLAY", ":99")
            .env(
                "PATH",
                format!("{}:{}", self.bin.display(), std::env::var("PATH").unwrap()),
            )
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The stub's argv, once it has started and recorded all of it.
    pub fn argv(&self) -> Vec<String> {
        let end = std::time::Instant::now() + DEADLINE;
        loop {
            // Complete once the closing newline is written (the stub writes in pieces).
            if let Ok(text) = std::fs::read_to_string(&self.log)
                && let Some(text) = text.strip_suffix('\n')
            {
                let argv: Vec<String> = text
                    .trim_end_matches('\u{1f}')
                    .split('\u{1f}')
                    .map(str::to_owned)
                    .collect();
                return without_remote_control(&argv);
            }
            assert!(std::time::Instant::now() < end, "the window never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The whole task row, and the newest message (type, sender, text).
    pub fn row(&self, task: &str) -> (String, Option<String>, i64) {
        self.s
            .conn()
            .query_row(
                "SELECT state, worked_by, (julianday('now') - julianday(last_heartbeat)) * 86400 < 5 FROM orchestration_tasks WHERE task_id = ?1",
                [task],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
    }

    pub fn last_message(&self) -> (String, String, String) {
        self.s
            .conn()
            .query_row(
                "SELECT message_type, from_session, message FROM orchestration_messages ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
    }

    pub fn end_window(v: &serde_json::Value) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(v["pid"].as_i64().unwrap() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A stand-in for a Musician's window: a shell whose child is a program named
/// `claude` (a `sleep`), with its PID written to `temp/musician-<task>.pid`. Returns
/// the window and the `claude` child's PID; kill the window when done.
// The window is returned to the caller, who kills and waits on it.
#[allow(clippy::zombie_processes)]
pub fn claude_window(s: &Scratch, task: &str) -> (Child, u32) {
    let bin = s.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap();
    let claude = bin.join("claude");
    if !claude.exists() {
        std::os::unix::fs::symlink(sleep, &claude).unwrap();
    }
    let window = Command::new("sh")
        .arg("-c")
        .arg(format!("{} 60; true", claude.display()))
        .spawn()
        .unwrap();
    std::fs::write(
        s.temp().join(format!("musician-{task}.pid")),
        format!("{}\n", window.id()),
    )
    .unwrap();
    let end = Instant::now() + DEADLINE;
    loop {
        let child = std::fs::read_to_string(format!(
            "/proc/{}/task/{}/children",
            window.id(),
            window.id()
        ))
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = child {
            return (window, pid);
        }
        assert!(Instant::now() < end, "the claude stand-in never started");
        std::thread::yield_now();
    }
}

/// An argv without the gate maestro puts before a new window's session
/// (`<maestro> gate <dir> --`), checked to be well formed where it is there.
pub fn without_gate(argv: &[String]) -> Vec<String> {
    let Some(at) = argv.windows(2).position(|w| {
        w[1] == "gate" && Path::new(&w[0]).file_name().is_some_and(|n| n == "maestro")
    }) else {
        return argv.to_vec();
    };
    assert!(
        argv.get(at + 2)
            .is_some_and(|d| d.contains("maestro-gate-"))
            && argv.get(at + 3).is_some_and(|d| d == "--"),
        "{argv:?}"
    );
    let mut out = argv[..at].to_vec();
    out.extend_from_slice(&argv[at + 4..]);
    out
}

/// A kitty argv without the options maestro adds to the windows it opens, right
/// before `--` (`--listen-on <socket>`, `-o allow_remote_control=socket-only` and the
/// window size), checked to be there and well formed, so tests can read the template's
/// own positions.
pub fn without_remote_control(argv: &[String]) -> Vec<String> {
    let argv = without_gate(argv);
    let Some(at) = argv.iter().position(|a| a == "--listen-on") else {
        return argv;
    };
    assert!(
        argv[at + 1].starts_with("unix:/") && argv[at + 1].ends_with("-{kitty_pid}"),
        "{argv:?}"
    );
    let mut end = at + 2;
    let ours = [
        "allow_remote_control=socket-only",
        "remember_window_size=no",
        "initial_window_width=",
        "initial_window_height=",
    ];
    while argv.get(end).is_some_and(|a| a == "-o")
        && argv
            .get(end + 1)
            .is_some_and(|v| ours.iter().any(|o| v.starts_with(o)))
    {
        end += 2;
    }
    assert_eq!(argv[at + 3], "allow_remote_control=socket-only", "{argv:?}");
    assert_eq!(
        argv[end], "--",
        "the options come right before the command: {argv:?}"
    );
    let mut out = argv[..at].to_vec();
    out.extend_from_slice(&argv[end..]);
    out
}

/// A shell started with `shell` (its first line of output: the PID of a `maestro
/// conductor watch` it started in the background) is killed once that watcher holds its
/// claim (its PID in a `task-00.background` file under `data`); the watcher must end too.
pub fn watcher_ends_with_its_shell(shell: &mut Command, data: &Path) {
    let mut shell = shell.stdout(Stdio::piped()).spawn().unwrap();
    let mut pid = String::new();
    BufReader::new(shell.stdout.take().unwrap())
        .read_line(&mut pid)
        .unwrap();
    let watcher: u32 = pid.trim().parse().unwrap();
    wait_until("the watcher to hold its claim", || {
        walk(data).iter().any(|p| {
            p.file_name().is_some_and(|n| n == "task-00.background")
                && std::fs::read_to_string(p).is_ok_and(|t| t.trim() == watcher.to_string())
        })
    });
    shell.kill().unwrap();
    shell.wait().unwrap();
    wait_until("the watcher to end with its shell", || !alive(watcher));
}
