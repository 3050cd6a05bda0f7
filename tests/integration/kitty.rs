//! A real kitty under Xvfb (software GL): the windows maestro opens, a stub `claude` in
//! one of them running the installed hooks as Claude Code does, the dashboard (in tmux)
//! showing the task needing the operator, and `w` giving that window the focus (read
//! back with `xdotool`). Skips, saying why, without kitty, Xvfb or xdotool.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Scratch, data_home, maestro};
use crate::tmux::Tmux;

fn missing_tool() -> Option<&'static str> {
    ["kitty", "Xvfb", "xdotool"].into_iter().find(|t| {
        Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .map_or(true, |o| !o.status.success())
    })
}

/// An X server of the test's own, on a free display; killed on drop.
pub struct Display {
    pub name: String,
    server: Child,
}

impl Display {
    /// `None` (with the reason printed) when a tool is missing.
    pub fn start() -> Option<Self> {
        if let Some(tool) = missing_tool() {
            eprintln!(
                "skipped: {tool} is not installed (.ci/run installs kitty, xvfb and xdotool with apt)"
            );
            return None;
        }
        // kitty opens no window without a monospace font.
        let fonts = Command::new("fc-list").arg(":spacing=mono").output();
        if !fonts.is_ok_and(|o| !o.stdout.is_empty()) {
            eprintln!("skipped: no monospace font for kitty (apt-get install fonts-dejavu-core)");
            return None;
        }
        // Xvfb picks a free display itself and says which (two tests starting at once
        // never share one).
        let mut server = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "1280x800x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut line = String::new();
        let stdout = server.stdout.take()?;
        let read = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        if read.is_ok()
            && let Ok(n) = line.trim().parse::<u32>()
        {
            let mut display = Self {
                name: format!(":{n}"),
                server,
            };
            if display.ready() {
                return Some(display);
            }
            eprintln!("skipped: Xvfb on :{n} did not answer");
            return None;
        }
        let _ = server.kill();
        let _ = server.wait();
        eprintln!("skipped: no free X display for Xvfb");
        None
    }

    fn ready(&mut self) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.server.try_wait().ok().flatten().is_some() {
                return false;
            }
            let ok = Command::new("xdotool")
                .arg("getmouselocation")
                .env("DISPLAY", &self.name)
                .output()
                .is_ok_and(|o| o.status.success());
            if ok {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// A command on this display, with software GL.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("DISPLAY", &self.name)
            .env("LIBGL_ALWAYS_SOFTWARE", "1");
        cmd
    }

    pub fn xdotool(&self, args: &[&str]) -> String {
        let out = self.command("xdotool").args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The window whose name is exactly `title`, once it is mapped.
    pub fn window(&self, title: &str) -> String {
        let pattern = format!("^{}$", regex::escape(title));
        // kitty with software GL can take tens of seconds to map a window while the
        // rest of the suite keeps both cores busy.
        let end = Instant::now() + Duration::from_secs(90);
        loop {
            let found = self.xdotool(&["search", "--onlyvisible", "--name", &pattern]);
            if let Some(id) = found.lines().next() {
                return id.to_owned();
            }
            assert!(
                Instant::now() < end,
                "no window named {title:?} appeared; windows: {:?}; kitty processes: {:?}",
                self.xdotool(&["search", "--onlyvisible", "--name", "."])
                    .lines()
                    .map(|id| self.xdotool(&["getwindowname", id]).trim().to_owned())
                    .collect::<Vec<_>>(),
                Command::new("pgrep")
                    .args(["-a", "kitty"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The name of the window with the keyboard focus.
    pub fn focused(&self) -> String {
        self.xdotool(&["getwindowfocus", "getwindowname"])
    }

    /// Waits until the focused window is `title`.
    pub fn wait_focus(&self, title: &str) {
        let end = Instant::now() + Duration::from_secs(20);
        loop {
            let now = self.focused();
            if now == title {
                return;
            }
            assert!(
                Instant::now() < end,
                "the focus stayed on {now:?}, not {title:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ends the kitty that shows window `id`.
    /// Opens another kitty window, titled `elsewhere`, and gives it the focus: its
    /// process and window id (close it with [`Display::close`]).
    pub fn focus_elsewhere(&self) -> (Child, String) {
        let other = self
            .command("kitty")
            .args(["--title", "elsewhere", "--", "sleep", "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let elsewhere = self.window("elsewhere");
        self.xdotool(&["windowfocus", "--sync", &elsewhere]);
        self.wait_focus("elsewhere");
        (other, elsewhere)
    }

    pub fn close(&self, id: &str) {
        if let Ok(pid) = self.xdotool(&["getwindowpid", id]).parse::<i32>() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

#[test]
fn launch_opens_a_real_kitty_window_titled_for_the_project() {
    let Some(x) = Display::start() else { return };
    let s = Scratch::new();
    let name = std::fs::canonicalize(s.root())
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let out = x
        .command(env!("CARGO_BIN_EXE_maestro"))
        .env("XDG_DATA_HOME", data_home())
        .args(["launch", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let id = x.window(&format!("maestro: {name}"));
    // Opened at [launch] window_columns x window_lines (120x36 cells), not kitty's
    // default 640x400 pixels (about 80x24).
    let geometry = x.xdotool(&["getwindowgeometry", "--shell", &id]);
    let size = |key: &str| -> u32 {
        geometry
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let (w, h) = (size("WIDTH="), size("HEIGHT="));
    assert!(w > 640 && h > 400, "window {w}x{h} pixels: {geometry}");
    assert!(
        w * 10 > h * 12,
        "wider than tall, as 120x36 cells are: {w}x{h}"
    );
    x.close(&id);
}

/// A stub `claude` for a real window: runs `$HOOK_CMD` (through `sh -c`, as Claude Code
/// runs a command hook) for each JSON line the test writes to the FIFO `$HOOK_FIFO`.
fn stub_claude_bin(dir: &Path) -> PathBuf {
    let bin = dir.join("stub-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join("claude");
    std::fs::write(
        &path,
        "#!/bin/sh\nwhile :; do\n  while IFS= read -r line; do\n    printf '%s\\n' \"$line\" | sh -c \"$HOOK_CMD\"\n  done < \"$HOOK_FIFO\"\ndone\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Opens the FIFO for writing once the stub reads it (never blocking: a stub that did
/// not start fails the test instead of hanging it).
fn open_writer(fifo: &Path) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(fifo)
        {
            Ok(f) => return f,
            Err(e) => assert!(
                Instant::now() < end,
                "the stub claude never read its events: {e}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_musician_at_a_permission_prompt_is_shown_and_w_brings_its_window_forward() {
    let Some(x) = Display::start() else { return };
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: tmux is not installed (.ci/run installs it)");
        return;
    }
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let install = maestro()
        .args(["hooks", "install", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    assert!(install.status.success());
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(s.root().join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    let hook_cmd = settings["hooks"]["PermissionRequest"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    let bin = stub_claude_bin(s.root());
    let fifo = s.root().join("hook.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    // The dashboard, in a terminal of its own.
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "env XDG_DATA_HOME={} PATH={} {exe} --project {}",
            shlex::try_quote(&data_home().to_string_lossy()).unwrap(),
            shlex::try_quote(&path).unwrap(),
            shlex::try_quote(&s.root().to_string_lossy()).unwrap()
        ),
        160,
        45,
    );
    t.wait("the task", |screen| screen.contains("task-03"));

    // maestro relaunches the Musician in a real kitty window: the stub claude runs there.
    let relaunch = x
        .command(exe)
        .env("XDG_DATA_HOME", data_home())
        .env("PATH", &path)
        .env("HOOK_CMD", &hook_cmd)
        .env("HOOK_FIFO", &fifo)
        .args(["task", "relaunch", "task-03", "--yes", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    crate::common::assert_success(&relaunch);
    let musician = x.window("Musician: task-03 (S2)");

    // Claude Code's events, as its hooks would see them.
    let mut events = open_writer(&fifo);
    let cwd = s.root().display().to_string();
    for v in [
        serde_json::json!({"session_id": "s-03", "hook_event_name": "UserPromptSubmit", "cwd": cwd, "prompt": "/musician task-03"}),
        serde_json::json!({"session_id": "s-03", "hook_event_name": "PermissionRequest", "cwd": cwd, "tool_name": "Bash", "tool_input": {"command": "cargo publish"}}),
    ] {
        use std::io::Write;
        writeln!(events, "{v}").unwrap();
    }
    t.wait("the task needing the operator", |screen| {
        screen.contains("⚑ task-03 needs you: permission for Bash `cargo publish`")
            && screen.contains("⚑task-03")
    });

    // Another window takes the focus; `w` brings the Musician's back.
    let (other, elsewhere) = x.focus_elsewhere();
    t.keys("w");
    x.wait_focus("Musician: task-03 (S2)");

    drop(events);
    x.close(&musician);
    x.close(&elsewhere);
    drop(other);
}

/// The real kitty with `DISPLAY` naming a display where no X server runs: it may live a
/// moment before it gives up, but no session runs in it, so three relaunches in a row
/// are never a success, never touch the running Musician, and change no row.
#[test]
fn a_relaunch_on_a_display_with_no_server_is_never_a_success() {
    if let Some(tool) = missing_tool() {
        eprintln!(
            "skipped: {tool} is not installed (.ci/run installs kitty, xvfb and xdotool with apt)"
        );
        return;
    }
    let Some(n) = (90..200).find(|n| !Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()) else {
        eprintln!("skipped: no unused display number");
        return;
    };
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let bin = s.root().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    crate::common::stub_claude(&bin, 30);
    crate::alive_actions::failed_relaunches_keep_the_musician(&s, &|| {
        maestro()
            .args(["task", "relaunch", "task-03", "--yes", "--project"])
            .arg(s.root())
            .env("DISPLAY", format!(":{n}"))
            .env_remove("WAYLAND_DISPLAY")
            .env(
                "PATH",
                format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
            )
            .output()
            .unwrap()
    });
}
