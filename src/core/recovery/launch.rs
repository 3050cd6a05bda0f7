//! Opening windows from argv templates (never a shell string) and recording their PIDs.
//! A launched window belongs to the orchestration, not to maestro: it runs in its own
//! process group and outlives maestro; a background task reaps it when it exits.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::gate::{Gate, GateSays};
use crate::core::error::OwnFileError;
use crate::core::procs::ProcessId;
use crate::core::windows::LaunchTemplates;

/// Fills `{project}` and `{title}` in a template.
pub fn fill(template: &[String], project: &Path, title: &str) -> Vec<String> {
    template
        .iter()
        .map(|a| {
            a.replace("{project}", &project.display().to_string())
                .replace("{title}", title)
        })
        .collect()
}

pub use super::gate::find_program;

/// A terminal template filled for one window. A kitty window maestro opens listens for
/// remote control on an owner-only socket (one per kitty process), so `w` and
/// `maestro task focus` can bring it to the front without any kitty.conf setting, and
/// opens at `[launch] window_columns` x `window_lines` cells (kitty's default, 640x400
/// pixels, is about 80x24: too small for the dashboard's detail).
pub fn terminal_argv(templates: &LaunchTemplates, project: &Path, title: &str) -> Vec<String> {
    let mut argv = fill(&templates.terminal, project, title);
    if !argv.first().is_some_and(|p| is_kitty(p)) {
        return argv;
    }
    let mut extra = Vec::new();
    if templates.kitty_remote_control
        && let Ok(socket) = kitty_socket_base(project)
    {
        extra.extend([
            "--listen-on".to_owned(),
            format!("unix:{}-{{kitty_pid}}", socket.display()),
            "-o".to_owned(),
            "allow_remote_control=socket-only".to_owned(),
        ]);
    }
    if templates.window_columns > 0 && templates.window_lines > 0 {
        extra.extend([
            "-o".to_owned(),
            "remember_window_size=no".to_owned(),
            "-o".to_owned(),
            format!("initial_window_width={}c", templates.window_columns),
            "-o".to_owned(),
            format!("initial_window_height={}c", templates.window_lines),
        ]);
    }
    // After the template's own options (scripts read `--directory`, `--title` where the
    // template puts them), before the `--` that starts the command.
    let at = argv.iter().rposition(|a| a == "--").unwrap_or(argv.len());
    argv.splice(at..at, extra);
    argv
}

/// Whether a terminal program is kitty (by its file name: `kitty`, `/usr/bin/kitty`).
pub fn is_kitty(program: &str) -> bool {
    Path::new(program).file_name().is_some_and(|n| n == "kitty")
}

/// Where the kitty windows of a project listen, without the `-<kitty pid>` kitty adds:
/// in maestro's private socket folder, short enough for `sun_path` with the pid. An
/// error says why windows cannot listen (a socket folder another user owns, a path too
/// long), for a warning: focus is then off for the windows maestro opens.
pub fn kitty_socket_base(project: &Path) -> Result<PathBuf, crate::core::paths::PathError> {
    let key = crate::core::paths::ProjectKey::of(project);
    let path = crate::core::paths::socket_path(crate::core::paths::Service::Kitty, &key)?;
    let base = path.with_extension("");
    // Room for "-" and a pid of up to 7 digits.
    if base.as_os_str().len() + 8 <= 107 {
        Ok(base)
    } else {
        Err(crate::core::paths::PathError::NoRoomForPid { base })
    }
}

/// Why a kitty window maestro opens with these templates will not listen for remote
/// control (so `w` cannot focus it), when it will not: for `launch` and `doctor`.
pub fn kitty_focus_problem(templates: &LaunchTemplates, project: &Path) -> Option<String> {
    let kitty = templates.terminal.first().is_some_and(|p| is_kitty(p));
    if !kitty || !templates.kitty_remote_control {
        return None;
    }
    kitty_socket_base(project).err().map(|why| {
        format!("kitty windows maestro opens cannot listen for remote control, so `w` and `maestro task focus` cannot bring them to the front: {why}")
    })
}

/// Why no window (or no session in it) was started; each says what was seen or the fix.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("`[launch] terminal` is empty: set it to your terminal's argv")]
    NoTerminal,
    #[error(
        "{program} was not found on PATH, so no window can be opened: install kitty, or set `[launch] terminal` to your terminal's argv"
    )]
    NotFound { program: String },
    #[error(
        "no display to open a window on: DISPLAY and WAYLAND_DISPLAY are both unset, so {program} cannot start here; run this from a graphical session"
    )]
    NoDisplay { program: String },
    #[error("empty launch template")]
    EmptyTemplate,
    #[error("cannot make a scratch file: {0}")]
    Scratch(#[source] std::io::Error),
    #[error("cannot start {program}: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("the window exited at once")]
    ExitedAtOnce,
    #[error(
        "maestro's own program cannot be found (replaced or deleted while it ran), so a new window cannot hold its session until the handoff is written: start maestro again"
    )]
    NoMaestro,
    /// The window ran no session that stayed: what was seen, with the window's own
    /// last error line when it printed one.
    #[error("{0}")]
    NoSession(String),
}

/// What Claude Code 2.1 puts in the environment of the commands a session runs, naming
/// that session (learned by running it: `tests/integration/claude/launch_env.rs`). A
/// window maestro opens from inside a session (a Conductor's Bash call) must not inherit
/// them: a new claude that finds them takes itself for the old one's child and writes
/// no transcript of its own.
pub const SESSION_IDENTITY: [&str; 11] = [
    "CLAUDECODE",
    "CLAUDE_PID",
    "CLAUDE_CODE_SESSION_ID",
    "CLAUDE_CODE_CHILD_SESSION",
    "CLAUDE_CODE_CHILD_NOTES_DIR",
    "CLAUDE_CODE_SESSION_ATTENDED",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDE_CODE_EXECPATH",
    "CLAUDE_CODE_MESSAGING_SOCKET",
    "CLAUDE_CODE_MESSAGING_TOKEN",
    "AI_AGENT",
];

/// How long the session in a new window must have run to count as started (a session
/// that ends sooner ended at once).
pub const ALIVE_AFTER: std::time::Duration = std::time::Duration::from_millis(1500);
/// The longest wait for the session's program to run in a new window.
pub const SESSION_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// How often the window's processes are looked at while waiting.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);
#[derive(Debug, Clone)]
pub struct Launcher {
    pub templates: LaunchTemplates,
    pub project: PathBuf,
}

impl Launcher {
    /// The full argv of a Claude window: terminal template, claude template, `args`.
    pub fn claude_window(&self, title: &str, args: &[String]) -> Vec<String> {
        let mut argv = terminal_argv(&self.templates, &self.project, title);
        argv.extend(fill(&self.templates.claude, &self.project, title));
        argv.extend(args.iter().cloned());
        argv
    }

    /// What can be checked before anything is written: the terminal program is there,
    /// and kitty has a display to open a window on. An error names the fix.
    pub fn preflight(&self) -> Result<(), LaunchError> {
        let Some(program) = self.templates.terminal.first() else {
            return Err(LaunchError::NoTerminal);
        };
        if find_program(program).is_none() {
            return Err(LaunchError::NotFound {
                program: program.clone(),
            });
        }
        let unset = |v: &str| std::env::var_os(v).is_none_or(|d| d.is_empty());
        if is_kitty(program) && unset("DISPLAY") && unset("WAYLAND_DISPLAY") {
            return Err(LaunchError::NoDisplay {
                program: program.clone(),
            });
        }
        Ok(())
    }

    /// The program a Claude window is asked to run, as its process is named (seen
    /// through `env` and its options: `env -u CLAUDECODE claude` runs `claude`).
    pub fn session_program(&self) -> String {
        crate::core::windows::launched_program(&self.templates.claude)
            .unwrap_or_else(|| "claude".into())
    }

    /// Starts a Claude window and returns its process once the session runs in it: a
    /// process of [`Self::session_program`] below the window, or the new session's
    /// `SessionStart` hook in the project (whichever comes first), still running
    /// [`ALIVE_AFTER`] after the start. A window that exits first (no display, a bad
    /// option: its own last error line is quoted), runs nothing within
    /// [`SESSION_WAIT`], or whose session ends at once, is an error; a window still up
    /// then is ended (maestro started it).
    pub async fn spawn_alive(&self, argv: &[String]) -> Result<ProcessId, LaunchError> {
        self.spawn_running(argv, &self.session_program()).await
    }

    /// [`Self::spawn_alive`] for a window asked to run `wanted` (a process name).
    pub async fn spawn_running(
        &self,
        argv: &[String],
        wanted: &str,
    ) -> Result<ProcessId, LaunchError> {
        // The terminal's complaints land in an unnamed file, read only if it fails: a
        // pipe would break a window that lives on.
        let errors = tempfile::tempfile().map_err(LaunchError::Scratch)?;
        let stderr = errors.try_clone().map_err(LaunchError::Scratch)?;
        let (mut child, program) = self.start_window(argv, stderr.into())?;
        let pid = child.id().ok_or(LaunchError::ExitedAtOnce)? as i32;
        let recorded = ProcessId::observe(pid);
        let started = tokio::time::Instant::now();
        let mut session: Option<ProcessId> = None;
        let mut hook = StartHook::watch(&self.project);
        let failure = loop {
            tokio::select! {
                status = child.wait() => {
                    let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                    let what = if session.is_some() {
                        format!("{program} exited ({status}) and its {wanted} session with it")
                    } else {
                        format!("{program} exited ({status}) before {wanted} ran in it")
                    };
                    break with_last_error(what, errors);
                }
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            if session.is_none() {
                session = program_below(pid, wanted)
                    .or_else(|| hook.as_mut().and_then(StartHook::session));
            }
            if let Some(s) = session {
                if !s.is_same_alive() {
                    break format!(
                        "{wanted} started in the window (PID {}) and ended at once",
                        s.pid
                    );
                }
                if started.elapsed() >= ALIVE_AFTER {
                    tokio::spawn(async move {
                        let _ = child.wait().await;
                    });
                    return Ok(recorded);
                }
            } else if started.elapsed() >= SESSION_WAIT {
                break format!(
                    "{program} opened, but no {wanted} process ran in it within {} s",
                    SESSION_WAIT.as_secs()
                );
            }
        };
        end_window(pid, &mut child).await;
        Err(LaunchError::NoSession(failure))
    }

    /// The window's program started from the project in a process group of its own,
    /// its stderr to `stderr`; with the program's name, for what is said about it.
    fn start_window(
        &self,
        argv: &[String],
        stderr: Stdio,
    ) -> Result<(tokio::process::Child, String), LaunchError> {
        let (program, args) = argv.split_first().ok_or(LaunchError::EmptyTemplate)?;
        let mut command = tokio::process::Command::new(program);
        for name in SESSION_IDENTITY {
            command.env_remove(name);
        }
        let child = command
            .args(args)
            .current_dir(&self.project)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .map_err(|source| LaunchError::Start {
                program: program.clone(),
                source,
            })?;
        Ok((child, program.clone()))
    }

    /// Starts a window and returns the recorded process.
    pub fn spawn(&self, argv: &[String]) -> Result<ProcessId, LaunchError> {
        let (mut child, _) = self.start_window(argv, Stdio::null())?;
        let pid = child.id().ok_or(LaunchError::ExitedAtOnce)? as i32;
        let recorded = ProcessId::observe(pid);
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        Ok(recorded)
    }
}

/// A window opened with its session held at a gate (`super::gate`): the window is
/// proven to run the gate, and nothing in it has started yet.
pub struct HeldWindow {
    project: PathBuf,
    child: tokio::process::Child,
    program: String,
    wanted: String,
    window: ProcessId,
    gate_process: ProcessId,
    gate: Gate,
    errors: std::fs::File,
}

impl Launcher {
    /// Opens a Claude window whose session waits at a gate until [`HeldWindow::release`].
    /// A window that exits first (its own last error line quoted), whose gate refuses
    /// (the session's program is missing there), or that shows no gate within
    /// [`SESSION_WAIT`], is an error; a window still up then is ended.
    pub async fn open_held(&self, title: &str, args: &[String]) -> Result<HeldWindow, LaunchError> {
        let gate = Gate::new().map_err(LaunchError::Scratch)?;
        let maestro = std::env::current_exe()
            .ok()
            .filter(|p| p.is_file())
            .ok_or(LaunchError::NoMaestro)?;
        let mut argv = terminal_argv(&self.templates, &self.project, title);
        argv.extend(gate.argv(&maestro));
        argv.extend(fill(&self.templates.claude, &self.project, title));
        argv.extend(args.iter().cloned());
        let wanted = self.session_program();
        let errors = tempfile::tempfile().map_err(LaunchError::Scratch)?;
        let stderr = errors.try_clone().map_err(LaunchError::Scratch)?;
        let (mut child, program) = self.start_window(&argv, stderr.into())?;
        let pid = child.id().ok_or(LaunchError::ExitedAtOnce)? as i32;
        let window = ProcessId::observe(pid);
        let started = tokio::time::Instant::now();
        let failure = loop {
            tokio::select! {
                status = child.wait() => {
                    // The gate's own word first: why it would not run the session.
                    if let GateSays::Refused(why) = gate.says() {
                        break format!("{program} opened, but {why}");
                    }
                    let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                    break with_last_error(format!("{program} exited ({status}) before {wanted} ran in it"), errors);
                }
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            match gate.says() {
                GateSays::Ready(gate_process) => {
                    let project = self.project.clone();
                    return Ok(HeldWindow {
                        project,
                        child,
                        program,
                        wanted,
                        window,
                        gate_process,
                        gate,
                        errors,
                    });
                }
                GateSays::Refused(why) => break format!("{program} opened, but {why}"),
                GateSays::Nothing if started.elapsed() >= SESSION_WAIT => {
                    break format!(
                        "{program} opened, but no {wanted} process ran in it within {} s",
                        SESSION_WAIT.as_secs()
                    );
                }
                GateSays::Nothing => {}
            }
        };
        end_window(pid, &mut child).await;
        Err(LaunchError::NoSession(failure))
    }
}

impl HeldWindow {
    /// The window's own process (what its PID file records).
    pub fn window(&self) -> ProcessId {
        self.window
    }

    /// Lets the session start and returns the window once the session runs in it:
    /// the gate's process now runs [`Launcher::session_program`] (or it runs below it),
    /// still [`ALIVE_AFTER`] after the release. Otherwise the window is ended and the
    /// error says what was seen.
    pub async fn release(mut self) -> Result<ProcessId, LaunchError> {
        if let Err(e) = self.gate.release() {
            let what = format!("the gate in the {} window was gone ({e})", self.program);
            return Err(self.fail(what).await);
        }
        // Its SessionStart hook is evidence too (a session whose program execs on).
        let mut hook = StartHook::watch(&self.project);
        let released = tokio::time::Instant::now();
        let session = self.gate_process;
        let mut seen = false;
        let failure = loop {
            tokio::select! {
                status = self.child.wait() => {
                    let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                    break format!("{} exited ({status}) and its {} session with it", self.program, self.wanted);
                }
                () = tokio::time::sleep(LOOK_EVERY) => {}
            }
            if !session.is_same_alive() {
                break format!(
                    "{} started in the window (PID {}) and ended at once",
                    self.wanted, session.pid
                );
            }
            seen = seen
                || runs_program(session.pid, &self.wanted)
                || hook.as_mut().and_then(StartHook::session).is_some();
            let runs = seen;
            if runs && released.elapsed() >= ALIVE_AFTER {
                let mut child = self.child;
                tokio::spawn(async move {
                    let _ = child.wait().await;
                });
                return Ok(self.window);
            }
            if !runs && released.elapsed() >= SESSION_WAIT {
                break format!(
                    "{} opened, but no {} process ran in it within {} s",
                    self.program,
                    self.wanted,
                    SESSION_WAIT.as_secs()
                );
            }
        };
        Err(self.fail(failure).await)
    }

    /// Ends a window whose session was never released: nothing ran in it.
    pub async fn close(mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.gate_process.pid),
            nix::sys::signal::Signal::SIGTERM,
        );
        end_window(self.window.pid, &mut self.child).await;
    }

    async fn fail(mut self, what: String) -> LaunchError {
        if self.gate_process.is_same_alive() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.gate_process.pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        end_window(self.window.pid, &mut self.child).await;
        LaunchError::NoSession(with_last_error(what, self.errors))
    }
}

/// Whether `pid` runs `program`, or a process below it does.
fn runs_program(pid: i32, program: &str) -> bool {
    let comm: String = program.chars().take(15).collect();
    crate::core::procs::comm(pid).is_some_and(|c| c == comm)
        || crate::core::procs::cmdline(pid).is_some_and(|args| {
            args.iter()
                .take(2)
                .any(|a| Path::new(a).file_name().is_some_and(|n| n == program))
        })
        || program_below(pid, program).is_some()
}

/// The new session's `SessionStart` hook in the project's spool (maestro's hooks
/// installed): evidence of a session whose process is not below the window (a terminal
/// that hands its windows to an instance already running).
struct StartHook {
    reader: crate::core::hooks::spool::SpoolReader,
    project: PathBuf,
    since_ms: i64,
}

impl StartHook {
    fn watch(project: &Path) -> Option<Self> {
        let key = crate::core::paths::ProjectKey::of(project);
        let path = crate::core::hooks::spool::spool_path(&key)?;
        Some(Self {
            reader: crate::core::hooks::spool::SpoolReader::at_end(path),
            project: project.to_path_buf(),
            since_ms: (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64,
        })
    }

    /// The `claude` process of a session that started in the project since the launch.
    fn session(&mut self) -> Option<ProcessId> {
        self.reader
            .read_new()
            .into_iter()
            .filter(|e| e.event == "SessionStart" && e.at_ms >= self.since_ms)
            .filter(|e| {
                e.cwd
                    .as_deref()
                    .is_some_and(|c| Path::new(c).starts_with(&self.project))
            })
            .find_map(|e| e.claude_pid.map(ProcessId::observe))
    }
}

/// A process of `program` below `window`: its name, or its first two arguments' (a
/// script's interpreter, then the script).
fn program_below(window: i32, program: &str) -> Option<ProcessId> {
    let comm: String = program.chars().take(15).collect();
    crate::core::procs::descendants(window)
        .into_iter()
        .find(|p| {
            crate::core::procs::comm(*p).is_some_and(|c| c == comm)
                || crate::core::procs::cmdline(*p).is_some_and(|args| {
                    args.iter()
                        .take(2)
                        .any(|a| Path::new(a).file_name().is_some_and(|n| n == program))
                })
        })
        .map(ProcessId::observe)
}

/// `what`, and the terminal's own last error line when it printed one.
fn with_last_error(what: String, mut errors: std::fs::File) -> String {
    let mut said = String::new();
    let _ = std::io::Seek::rewind(&mut errors);
    let _ =
        std::io::Read::read_to_string(&mut std::io::Read::take(&mut errors, 64 * 1024), &mut said);
    let last = said.lines().rev().map(str::trim).find(|l| !l.is_empty());
    match last {
        Some(line) => format!("{what}: {}", crate::core::text::one_line(line)),
        None => what,
    }
}

/// Ends a window maestro started that failed: its whole process group, politely first.
async fn end_window(pid: i32, child: &mut tokio::process::Child) {
    use nix::sys::signal::{Signal, killpg};
    let group = nix::unistd::Pid::from_raw(pid);
    let _ = killpg(group, Signal::SIGTERM);
    if tokio::time::timeout(std::time::Duration::from_secs(2), child.wait())
        .await
        .is_err()
    {
        let _ = killpg(group, Signal::SIGKILL);
        let _ = child.wait().await;
    }
}

/// Writes a PID file under `temp/` atomically (temporary file, then rename).
pub fn write_pid_file(temp: &Path, name: &str, pid: i32) -> Result<(), OwnFileError> {
    std::fs::create_dir_all(temp).map_err(OwnFileError::doing("create", temp))?;
    let path = temp.join(name);
    // Replaced atomically through an unpredictable name: a symlink planted at either
    // name is never written through.
    crate::core::safe_fs::write_atomic(&path, format!("{pid}\n").as_bytes(), 0o644)
        .map_err(OwnFileError::doing("write", &path))?;
    crate::core::windows::record_launch(temp, name, ProcessId::observe(pid));
    Ok(())
}
