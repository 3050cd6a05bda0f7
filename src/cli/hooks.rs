//! `maestro hook` (run by Claude Code for each hook event) and `maestro hooks
//! install | uninstall`.
//!
//! The hook command never gets in Claude Code's way: it prints nothing and decides
//! nothing, except, when installed with `--replace-pollers`, the refusal of an LLM
//! poller's launch (`core::hooks::replace`). It reads stdin to its end (at most 1 MiB, for at most [`STDIN_WAIT`]: Claude
//! Code closes it at once, and the limit holds when it never does), and exits 0 whatever
//! happens (no maestro running, garbage, an unwritable data dir, a full disk).

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::cli::error::CliError;
use crate::core::hooks::{self, event::HookEvent, guard, install, replace, spool};
use crate::core::paths::ProjectKey;

/// The most of stdin a hook event may take.
const MAX_INPUT: usize = 1024 * 1024;
/// How long the hook waits for its stdin to end: well inside the 5 s timeout maestro
/// installs its hooks with, and far longer than Claude Code takes to write an event.
const STDIN_WAIT: Duration = Duration::from_secs(1);

/// `maestro hook [--project DIR]`: spools the event on stdin. Always exit 0.
pub fn hook_main(args: &[std::ffi::OsString]) {
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    // `--project-hex`: a folder whose name is not UTF-8, as its bytes (see
    // `install::hook_command`).
    let project = flag("--project").map(PathBuf::from).or_else(|| {
        flag("--project-hex")
            .and_then(|h| h.to_str())
            .and_then(from_hex)
            .map(|b| {
                PathBuf::from(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&b))
            })
    });
    let input = read_stdin();
    let json =
        serde_json::from_slice::<serde_json::Value>(&input).unwrap_or_else(|_| cut_short(&input));
    let at_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as i64;
    let Some(mut event) = HookEvent::from_claude(&json, at_ms) else {
        return;
    };
    if let Some(claude) = hooks::claude_process() {
        event.claude_pid = Some(claude.pid);
        event.claude_start = claude.start_time;
    }
    let from_user_settings = project.is_none();
    let root = project_root(project, &event);
    // Installed for the user and in the project: the project's own entry speaks (it may
    // leave the guard off), so one event is one refusal and one spooled line.
    if from_user_settings && install::project_has_hooks(&root) {
        return;
    }
    let key = ProjectKey::of(&root);
    if args.iter().any(|a| a == "--replace-pollers")
        && let Some(verdict) = guard_verdict(&json, &key, event.claude_pid)
    {
        // The answer first: it is what Claude Code waits for.
        let _ = writeln!(std::io::stdout(), "{}", verdict.answer.to_json());
        event.replaced = verdict.replaced;
    } else if args.iter().any(|a| a == "--replace-pollers")
        && let Some(handed) = reports_for_the_conductor(&json, &root, &key, event.claude_pid)
    {
        let answer = serde_json::json!({"hookSpecificOutput": {
            "hookEventName": "PostToolUse", "additionalContext": handed.text}});
        let mut out = std::io::stdout();
        // Kept as told only once printed whole: a hook killed first tells it again.
        if writeln!(out, "{}", crate::core::text::json_line(&answer)).is_ok() && out.flush().is_ok()
        {
            let _ = handed.printed();
        }
    }
    if let Some(path) = spool::spool_path(&key) {
        let _ = spool::append(&path, &event);
    }
}

/// The Sentinel's voice while maestro does its job: after a tool call of the Conductor's
/// own session (not a subagent's), the messages to task-00 no watcher or earlier call
/// told yet, for the model's next request. Only while a maestro reports to the database
/// (else the LLM Sentinel runs and speaks for itself); each message once, shared with
/// `maestro conductor watch` through one record.
fn reports_for_the_conductor(
    json: &serde_json::Value,
    root: &Path,
    key: &ProjectKey,
    claude_pid: Option<i32>,
) -> Option<crate::core::conductor_watch::HandOver> {
    let text = |k: &str| json.get(k).and_then(serde_json::Value::as_str);
    if text("hook_event_name") != Some("PostToolUse") || json.get("agent_id").is_some() {
        return None;
    }
    if !hooks::reporter::is_held(key) {
        // No reports to hand over; the states this call may have moved are noted.
        crate::core::conductor_watch::seen::note_passed(root, &root.join("comms.db"));
        return None;
    }
    let transcript = text("transcript_path")
        .map(Path::new)
        .filter(|p| p.is_absolute());
    replace::session_task(&replace::SessionFacts {
        db: &root.join("comms.db"),
        session_id: text("session_id"),
        claude_pid,
        transcript,
    })
    .filter(crate::core::domain::TaskId::is_conductor)?;
    let seen =
        crate::core::conductor_watch::seen_path(&crate::core::paths::watchers_dir(key).ok()?);
    crate::core::conductor_watch::hand_over(&root.join("comms.db"), &seen)
}

/// The project a hook event belongs to: `--project`, else the session's folder's.
fn project_root(project: Option<PathBuf>, event: &HookEvent) -> PathBuf {
    project.unwrap_or_else(|| {
        // A cwd that is not UTF-8 reaches JSON with U+FFFD in it: the process's own
        // working folder (Claude Code runs hooks there) has the real bytes.
        let cwd = event
            .cwd
            .as_deref()
            .filter(|c| !c.contains('\u{FFFD}'))
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        hooks::project_of(&cwd)
    })
}

/// The poller guard's verdict on this event, with what this hook can learn of the
/// session (looked up only when a refusal is weighed).
fn guard_verdict(
    json: &serde_json::Value,
    project: &ProjectKey,
    claude_pid: Option<i32>,
) -> Option<guard::Verdict> {
    let text = |k: &str| json.get(k).and_then(serde_json::Value::as_str);
    let ledger = text("session_id").and_then(|s| guard::ledger::Ledger::of(project, s));
    let with_context =
        |decide: &mut dyn FnMut(&replace::Context<'_>) -> Option<replace::Refusal>| {
            let transcript = text("transcript_path")
                .map(Path::new)
                .filter(|p| p.is_absolute());
            let session_task = replace::session_task(&replace::SessionFacts {
                db: &project.root.join("comms.db"),
                session_id: text("session_id"),
                claude_pid,
                transcript,
            });
            let cwd = text("cwd").map(PathBuf::from);
            let program = program_word();
            let ctx = replace::Context {
                project,
                cwd: cwd.as_deref(),
                program: &program,
                session_task: session_task.as_ref(),
                reporting: &|| hooks::reporter::is_held(project),
            };
            decide(&ctx)
        };
    let lookups = guard::Lookups {
        root: &project.root,
        ledger: ledger.as_ref(),
        context: &with_context,
        now_ms: crate::core::sessions::now_ms(),
        claude_pid,
    };
    guard::remember(json, &lookups);
    guard::judge(json, &lookups)
}

/// How a shell in the session finds this maestro: `maestro` when that is what PATH
/// finds, else this program's own path, quoted.
fn program_word() -> String {
    let me = std::env::current_exe().ok();
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("maestro"))
            .find(|p| p.is_file())
    });
    let same = |a: &Path, b: &Path| {
        std::fs::canonicalize(a)
            .ok()
            .is_some_and(|a| std::fs::canonicalize(b).ok() == Some(a))
    };
    match (me, on_path) {
        (Some(me), Some(found)) if same(&me, &found) => "maestro".into(),
        (Some(me), _) => shlex::try_quote(&me.to_string_lossy())
            .map_or_else(|_| "maestro".into(), std::borrow::Cow::into_owned),
        (None, _) => "maestro".into(),
    }
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    text.len()
        .is_multiple_of(2)
        .then(|| {
            (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
                .collect()
        })
        .flatten()
}

/// An event cut at [`MAX_INPUT`] (a tool's huge output) is not valid JSON, but its
/// first fields still say which session moved on.
fn cut_short(input: &[u8]) -> serde_json::Value {
    static FIELD: std::sync::LazyLock<regex::bytes::Regex> = std::sync::LazyLock::new(|| {
        regex::bytes::Regex::new(r#""(session_id|hook_event_name|cwd)"\s*:\s*"([^"\\]{1,512})""#)
            .expect("static regex")
    });
    let head = &input[..input.len().min(8192)];
    let mut v = serde_json::json!({});
    for c in FIELD.captures_iter(head) {
        let key = String::from_utf8_lossy(&c[1]).into_owned();
        if v.get(&key).is_none() {
            v[key] = serde_json::json!(String::from_utf8_lossy(&c[2]));
        }
    }
    v
}

/// Stdin up to [`MAX_INPUT`] bytes, until it ends or [`STDIN_WAIT`] runs out.
fn read_stdin() -> Vec<u8> {
    let stdin = std::io::stdin();
    let mut lock = stdin.lock();
    let deadline = Instant::now() + STDIN_WAIT;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while out.len() < MAX_INPUT {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms =
            PollTimeout::try_from(left.as_millis().min(1000) as i32).unwrap_or(PollTimeout::ZERO);
        let ready = {
            let mut fds = [PollFd::new(lock.as_fd(), PollFlags::POLLIN)];
            poll(&mut fds, ms).unwrap_or(0)
        };
        if ready == 0 {
            break;
        }
        match lock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n.min(MAX_INPUT - out.len())]),
        }
    }
    out
}

/// `maestro hooks install | uninstall [--user] [--replace-pollers]` on a project (or the
/// user's settings).
pub fn run(
    project_root: &Path,
    action: &str,
    user: bool,
    replace_pollers: bool,
    json: bool,
) -> Result<(), CliError> {
    let root = std::fs::canonicalize(project_root).unwrap_or_else(|_| project_root.to_path_buf());
    let path = install::settings_path((!user).then_some(root.as_path())).ok_or_else(|| {
        CliError::Runtime("cannot find Claude Code's folder: set HOME or CLAUDE_CONFIG_DIR.".into())
    })?;
    install::refuse_unwritable(&path).map_err(crate::cli::error::runtime)?;
    let (settings, mode) = install::read(&path).map_err(crate::cli::error::runtime)?;
    let changed = match action {
        "install" => {
            let exe = std::env::current_exe()
                .map_err(|e| CliError::Runtime(format!("cannot find maestro's own path: {e}")))?;
            let command =
                install::hook_command(&exe, (!user).then_some(root.as_path()), replace_pollers);
            install::merged(settings, &command).map_err(|why| {
                CliError::Runtime(format!(
                    "{} is not shaped like Claude Code's settings ({why}); fix it and run this again; it was left untouched",
                    path.display()
                ))
            })?
        }
        _ => install::removed(settings),
    };
    let done = changed.is_some();
    if let Some(new) = changed {
        install::write(&path, &new, mode).map_err(crate::cli::error::runtime)?;
    }
    let said = match (action, done) {
        ("install", true) => format!(
            "installed maestro's hooks for {} events in {}; sessions started from now on report to maestro{}",
            hooks::event::EVENTS.len(),
            path.display(),
            if replace_pollers {
                ", and an LLM poller's launch is refused with the maestro command to run instead"
            } else {
                ""
            }
        ),
        ("install", false) => format!(
            "maestro's hooks are already installed in {}",
            path.display()
        ),
        (_, true) => format!("removed maestro's hooks from {}", path.display()),
        (_, false) => format!("no maestro hooks in {}; nothing changed", path.display()),
    };
    if json {
        println!(
            "{}",
            crate::core::text::json_line(
                &serde_json::json!({"ok": true, "action": action, "changed": done, "file": path, "replace_pollers": replace_pollers && action == "install"})
            )
        );
    } else {
        println!("{said}");
    }
    Ok(())
}
