//! The real Claude Code in the loop: the `claude` binary from npm
//! (`@anthropic-ai/claude-code@2.1.328`), run offline against [`model_server`], writes
//! the transcripts, subagents and hook events maestro reads. `.ci/run` installs it (and
//! ccusage, the usage tool maestro must agree with) into a cache folder; the tests find
//! them through `MAESTRO_TEST_CLAUDE` / `MAESTRO_TEST_CCUSAGE` or that folder, and skip
//! with the reason when neither has them.
#![allow(clippy::unwrap_used)]

mod compaction;
mod conductor;
mod errors;
mod guard;
mod guard_cases;
mod guard_ordinary;
mod hooks;
mod interactive;
mod kitty;
mod launch_env;
mod model_server;
mod monitor;
mod orchestration;
mod pollers;
mod replace_pollers;
mod souffleur;
mod spellings;
mod untied;
mod usage;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

pub use model_server::{ModelServer, Reply, Usage};

/// The version the tests and the recorded fixtures are of.
pub const CLAUDE_VERSION: &str = "2.1.328";
/// The API key the scripted server accepts (any); `.claude.json` approves its last 20.
const API_KEY: &str = "sk-ant-api03-maestro-test-key-0123456789";

/// `${XDG_CACHE_HOME:-$HOME/.cache}/maestro-test-tools`, where `.ci/run` installs them.
fn cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("maestro-test-tools"))
}

fn tool(env: &str, bin: &str) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{env}={} is not a file", p.display()))
        };
    }
    let p = cache_dir()
        .map(|d| d.join("node_modules/.bin").join(bin))
        .filter(|p| p.is_file());
    p.ok_or_else(|| {
        format!(
            "{bin} is not installed: set {env}, or run .ci/run (it installs it with npm into {})",
            cache_dir().map_or_else(
                || "~/.cache/maestro-test-tools".into(),
                |d| d.display().to_string()
            )
        )
    })
}

/// The real `claude`, or `None` after printing why the test is skipped.
pub fn claude_or_skip(test: &str) -> Option<PathBuf> {
    match tool("MAESTRO_TEST_CLAUDE", "claude") {
        Ok(p) => Some(p),
        Err(why) => {
            eprintln!("skipped {test}: {why}");
            None
        }
    }
}

/// ccusage, when installed (comparisons with it are skipped otherwise, with the reason).
pub fn ccusage() -> Result<PathBuf, String> {
    tool("MAESTRO_TEST_CCUSAGE", "ccusage")
}

/// A home of its own for one test: `.claude.json` answers every first-run question
/// (onboarding done, the key approved, `project` trusted).
pub fn home_for(project: &Path) -> tempfile::TempDir {
    home_with(project, &serde_json::json!({}))
}

/// [`home_for`] with more global settings (`messageIdleNotifThresholdMs`, …).
pub fn home_with(project: &Path, extra: &serde_json::Value) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let project = std::fs::canonicalize(project).unwrap();
    let key_tail: String = API_KEY
        .chars()
        .rev()
        .take(20)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let mut config = serde_json::json!({
        "hasCompletedOnboarding": true,
        "customApiKeyResponses": {"approved": [key_tail], "rejected": []},
        "projects": {project.display().to_string(): {"hasTrustDialogAccepted": true}},
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    std::fs::write(home.path().join(".claude.json"), config.to_string()).unwrap();
    home
}

/// The environment every run of `claude` gets: its home, the scripted server, nothing
/// sent anywhere else (remove `CLAUDE_CONFIG_DIR` and `CLAUDECODE` beside it).
pub fn claude_env(home: &Path, server: &ModelServer) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", home.display().to_string()),
        ("ANTHROPIC_BASE_URL", server.url()),
        ("ANTHROPIC_API_KEY", API_KEY.to_owned()),
        ("DISABLE_TELEMETRY", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
    ]
}

/// `K=V …`, each value quoted for a shell (for `env` and `export` in a command line).
pub fn assignments(env: &[(&str, String)]) -> String {
    env.iter()
        .map(|(k, v)| format!("{k}={}", shlex::try_quote(v).unwrap()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A folder in `root` holding a `claude` that is the real one, and a PATH that finds it
/// first (for what maestro launches by name).
pub fn real_claude_first(root: &Path, claude: &Path) -> (PathBuf, String) {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(claude, bin.join("claude")).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (bin, path)
}

/// The real `claude` for a test that also needs tmux; `None` after saying why not.
pub fn claude_and_tmux_or_skip(test: &str) -> Option<PathBuf> {
    let claude = claude_or_skip(test)?;
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped {test}: tmux is not installed (.ci/run installs it)");
        return None;
    }
    Some(claude)
}

/// `claude` run in `cwd` with [`claude_env`].
pub fn claude_command(exe: &Path, home: &Path, server: &ModelServer, cwd: &Path) -> Command {
    let mut c = Command::new(exe);
    c.current_dir(cwd)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CLAUDECODE")
        .envs(claude_env(home, server))
        .stdin(Stdio::null());
    c
}

/// Runs `claude -p PROMPT` to its end (at most a minute).
pub fn print(
    exe: &Path,
    home: &Path,
    server: &ModelServer,
    cwd: &Path,
    prompt: &str,
    extra: &[&str],
) -> Output {
    let mut c = claude_command(exe, home, server, cwd);
    c.args(["-p", prompt, "--model", "claude-sonnet-4-5"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let Ok(out) = rx.recv_timeout(Duration::from_secs(60)) else {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        panic!("claude -p did not finish within a minute");
    };
    out.unwrap()
}

/// A project with one working task, and a home for `claude` that trusts it.
pub struct Rig {
    /// Kept for its folder's lifetime (it removes the project when dropped).
    _scratch: crate::common::Scratch,
    /// The project's canonical path (what Claude Code writes as `cwd`).
    pub root: PathBuf,
    pub home: tempfile::TempDir,
}

impl Rig {
    pub fn new(task: &str) -> Self {
        let scratch = crate::common::Scratch::new();
        scratch.set_task(task, "working");
        let root = std::fs::canonicalize(scratch.root()).unwrap();
        let home = home_for(&root);
        Self {
            _scratch: scratch,
            root,
            home,
        }
    }

    /// `maestro usage --json` as this home's user sees it.
    pub fn usage(&self) -> serde_json::Value {
        Self::usage_of(self.home.path(), &self.root)
    }

    /// `maestro usage --json --project ROOT` as the user of `home` sees it.
    pub fn usage_of(home: &Path, root: &Path) -> serde_json::Value {
        let out = crate::common::maestro()
            .env("HOME", home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .args(["usage", "--json", "--project"])
            .arg(root)
            .output()
            .unwrap();
        crate::common::assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// `maestro usage --json`'s totals equal ccusage's on the same home, token for token and
/// cent for cent (said and skipped when ccusage is not installed).
pub fn assert_same_as_ccusage(home: &Path, usage: &serde_json::Value) {
    let exe = match ccusage() {
        Ok(exe) => exe,
        Err(why) => {
            eprintln!("not compared with ccusage: {why}");
            return;
        }
    };
    let out = Command::new(exe)
        .args(["session", "--json", "--offline"])
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("HOME", home)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // With no session at all, ccusage's totals are `null`.
    let zero = serde_json::json!({"inputTokens": 0, "outputTokens": 0,
        "cacheCreationTokens": 0, "cacheReadTokens": 0, "totalCost": 0.0});
    let t = if v["totals"].is_null() {
        &zero
    } else {
        &v["totals"]
    };
    let m = &usage["total"];
    assert_eq!(t["inputTokens"], m["input_tokens"], "{t} {m}");
    assert_eq!(t["outputTokens"], m["output_tokens"], "{t} {m}");
    assert_eq!(t["cacheCreationTokens"], m["cache_write_tokens"], "{t} {m}");
    assert_eq!(t["cacheReadTokens"], m["cache_read_tokens"], "{t} {m}");
    let cents = |x: &serde_json::Value| (x.as_f64().unwrap_or(0.0) * 100.0).round() as i64;
    assert_eq!(cents(&t["totalCost"]), cents(&m["cost_usd"]), "{t} {m}");
}

/// maestro's hooks installed in `root` (their spool in `data`), and maestro watching the
/// project headless (`--json`) as the user of `home`, once it has told `task`.
pub fn watch_with_hooks(
    root: &Path,
    home: &Path,
    data: &Path,
    task: &str,
) -> crate::common::Running {
    crate::common::assert_success(
        &crate::common::maestro()
            .args(["hooks", "install", "--project"])
            .arg(root)
            .env("XDG_DATA_HOME", data)
            .output()
            .unwrap(),
    );
    let mut m = crate::common::Running::spawn({
        let mut c = crate::common::maestro();
        c.env("HOME", home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("XDG_DATA_HOME", data)
            .args(["--no-tui", "--json", "--project"])
            .arg(root);
        c
    });
    m.wait_json("started", |v| {
        crate::common::event(v) == "task" && v["task_id"] == task
    });
    m
}
