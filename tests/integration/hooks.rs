//! Claude Code's hooks: `maestro hooks install | uninstall` on real settings files,
//! `maestro hook` on every kind of bad input, and a stub `claude` that runs the installed
//! hook command exactly as Claude Code does (the event JSON on stdin, as its child)
//! while a real maestro reports the task needing the operator.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::common::{Scratch, event, maestro};

fn hooks(s: &Scratch, args: &[&str]) -> std::process::Output {
    maestro()
        .arg("hooks")
        .args(args)
        .arg("--project")
        .arg(s.root())
        .output()
        .unwrap()
}

fn settings_file(s: &Scratch) -> PathBuf {
    s.root().join(".claude/settings.local.json")
}

/// The hook command installed for one event.
fn installed_command(s: &Scratch, event: &str) -> String {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(settings_file(s)).unwrap()).unwrap();
    v["hooks"][event]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["hooks"].as_array().unwrap().iter())
        .filter_map(|h| h["command"].as_str())
        .find(|c| c.contains(" hook"))
        .unwrap()
        .to_owned()
}

#[test]
fn install_merges_keeps_the_rest_is_idempotent_and_uninstall_gives_it_back() {
    let s = Scratch::new();
    let before = json!({
        "permissions": {"allow": ["Bash(cargo test:*)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard --strict"}]}]}
    });
    std::fs::create_dir_all(s.root().join(".claude")).unwrap();
    std::fs::write(
        settings_file(&s),
        serde_json::to_string_pretty(&before).unwrap(),
    )
    .unwrap();

    let out = hooks(&s, &["install"]);
    crate::common::assert_success(&out);
    let after: Value =
        serde_json::from_str(&std::fs::read_to_string(settings_file(&s)).unwrap()).unwrap();
    assert_eq!(after["permissions"], before["permissions"]);
    assert_eq!(
        after["hooks"]["PreToolUse"][0],
        before["hooks"]["PreToolUse"][0]
    );
    for e in [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Notification",
        "PermissionRequest",
        "Stop",
        "SessionEnd",
        "PreCompact",
    ] {
        let cmd = installed_command(&s, e);
        assert!(
            cmd.contains("maestro") && cmd.contains(" hook --project "),
            "{e}: {cmd}"
        );
    }
    let text = std::fs::read_to_string(settings_file(&s)).unwrap();
    let again = hooks(&s, &["install"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("already installed"));
    assert_eq!(
        std::fs::read_to_string(settings_file(&s)).unwrap(),
        text,
        "a second install changes nothing"
    );

    let doctor = maestro()
        .args(["doctor", "--json", "--project"])
        .arg(s.root())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("settings.local.json (10 of 10 events)"),
        "{report}"
    );

    let out = hooks(&s, &["uninstall"]);
    crate::common::assert_success(&out);
    let back: Value =
        serde_json::from_str(&std::fs::read_to_string(settings_file(&s)).unwrap()).unwrap();
    assert_eq!(back, before);
}

#[test]
fn a_settings_file_that_is_not_json_is_refused_with_its_place_and_left_alone() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.root().join(".claude")).unwrap();
    let broken = "{\n  \"permissions\": {\n    \"allow\": [\"x\",]\n  }\n}\n";
    std::fs::write(settings_file(&s), broken).unwrap();
    let out = hooks(&s, &["install"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3, column"), "{err}");
    assert!(err.contains("left untouched"), "{err}");
    assert_eq!(std::fs::read_to_string(settings_file(&s)).unwrap(), broken);
}

/// Runs `maestro hook` with `input` on stdin and the given data dir.
fn hook(input: &[u8], data: &Path) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_maestro"))
        .arg("hook")
        .env("XDG_DATA_HOME", data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    out
}

#[test]
fn the_hook_command_is_silent_and_succeeds_whatever_it_is_given() {
    use std::os::unix::fs::PermissionsExt;
    let data = tempfile::tempdir().unwrap();
    let file_as_data_dir = data.path().join("not-a-dir");
    std::fs::write(&file_as_data_dir, "x").unwrap();
    let valid =
        json!({"session_id": "s1", "hook_event_name": "Stop", "cwd": data.path()}).to_string();
    let huge = format!(
        "{{\"session_id\":\"s1\",\"hook_event_name\":\"PostToolUse\",\"cwd\":{},\"tool_response\":\"{}\"}}",
        json!(data.path()),
        "x".repeat(3 * 1024 * 1024)
    );
    for (what, input, dir) in [
        ("valid, no maestro running", valid.as_bytes(), data.path()),
        ("garbage", b"\x00\xff{{{ not json".as_slice(), data.path()),
        ("empty", b"".as_slice(), data.path()),
        ("3 MiB", huge.as_bytes(), data.path()),
        (
            "an unwritable data dir",
            valid.as_bytes(),
            file_as_data_dir.as_path(),
        ),
    ] {
        let out = hook(input, dir);
        assert_eq!(out.status.code(), Some(0), "{what}");
        assert!(
            out.stdout.is_empty() && out.stderr.is_empty(),
            "{what}: said something"
        );
    }
    // The valid events were spooled for the project of their cwd, owner-only; the cut
    // one still names its session.
    let spool = data.path().join("maestro/hooks");
    let files: Vec<_> = std::fs::read_dir(&spool).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        files[0].metadata().unwrap().permissions().mode() & 0o777,
        0o600
    );
    let text = std::fs::read_to_string(files[0].path()).unwrap();
    let events: Vec<Value> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[1]["event"], "PostToolUse");
    assert_eq!(events[1]["session_id"], "s1");
}

/// A stand-in for Claude Code: a script named `claude` that, for each line the test
/// writes to it, runs `$HOOK_CMD` with that line on stdin through `sh -c`, as Claude
/// Code runs a command hook, then stays alive until killed.
pub fn stub_claude(dir: &Path, hook_cmd: &str) -> Child {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("claude-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join("claude");
    std::fs::write(
        &path,
        "#!/bin/sh\nwhile IFS= read -r line; do\n  printf '%s\\n' \"$line\" | sh -c \"$HOOK_CMD\"\ndone\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    Command::new(&path)
        .env("HOOK_CMD", hook_cmd)
        .env("XDG_DATA_HOME", crate::common::data_home())
        .stdin(Stdio::piped())
        .spawn()
        .unwrap()
}

pub fn send(claude: &mut Child, v: &Value) {
    let stdin = claude.stdin.as_mut().unwrap();
    writeln!(stdin, "{v}").unwrap();
    stdin.flush().unwrap();
}

#[test]
fn a_permission_prompt_is_reported_for_its_task_and_cleared_when_it_goes_on() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    assert!(hooks(&s, &["install"]).status.success());
    let mut m = s.headless(&[]);
    m.wait_json("the task", |v| {
        event(v) == "task" && v["task_id"] == "task-03"
    });
    let mut claude = stub_claude(s.root(), &installed_command(&s, "PermissionRequest"));
    let cwd = s.root().display().to_string();
    let base = |name: &str| json!({"session_id": "7f3c-s1", "hook_event_name": name, "cwd": cwd, "transcript_path": "/nowhere/7f3c-s1.jsonl"});
    send(&mut claude, &base("SessionStart"));
    let mut prompt = base("UserPromptSubmit");
    prompt["prompt"] = json!("/musician task-03");
    send(&mut claude, &prompt);
    let mut ask = base("PermissionRequest");
    ask["tool_name"] = json!("Bash");
    ask["tool_input"] = json!({"command": "cargo publish\u{1b}[2J", "description": "Publish"});
    send(&mut claude, &ask);
    let needs = m.wait_json("needs you", |v| event(v) == "needs_you");
    assert_eq!(needs["task_id"], "task-03", "{needs}");
    assert_eq!(needs["reason"], "permission");
    assert_eq!(needs["tool"], "Bash");
    assert_eq!(
        needs["detail"], "cargo publish·[2J",
        "escape codes are data"
    );
    assert_eq!(needs["session_id"], "7f3c-s1");
    let mut ran = base("PostToolUse");
    ran["tool_name"] = json!("Bash");
    send(&mut claude, &ran);
    let cleared = m.wait_json("cleared", |v| event(v) == "needs_you_cleared");
    assert_eq!(cleared["task_id"], "task-03");
    assert!(cleared["waited_s"].is_u64());
    // Idle: waiting for input, then a prompt clears it.
    let mut idle = base("Notification");
    idle["notification_type"] = json!("idle_prompt");
    idle["message"] = json!("Claude is waiting for your input");
    send(&mut claude, &idle);
    let needs = m.wait_json("needs you again", |v| event(v) == "needs_you");
    assert_eq!(needs["reason"], "input");
    let _ = claude.kill();
    let _ = claude.wait();
}

#[test]
fn a_needs_you_from_a_session_whose_claude_is_gone_is_not_reported_at_start() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    assert!(hooks(&s, &["install"]).status.success());
    let mut claude = stub_claude(s.root(), &installed_command(&s, "PermissionRequest"));
    let cwd = s.root().display().to_string();
    let mut prompt = json!({"session_id": "old", "hook_event_name": "UserPromptSubmit", "cwd": cwd, "prompt": "/musician task-03"});
    send(&mut claude, &prompt);
    let ask = json!({"session_id": "old", "hook_event_name": "Notification", "cwd": cwd, "notification_type": "idle_prompt"});
    send(&mut claude, &ask);
    // Closing its stdin ends the stub once both hooks have run.
    drop(claude.stdin.take());
    claude.wait().unwrap();
    // A live session's prompt after it, so the test knows when the spool was read.
    let mut live = stub_claude(s.root(), &installed_command(&s, "PermissionRequest"));
    prompt["session_id"] = json!("new");
    send(&mut live, &prompt);
    let mut again = ask.clone();
    again["session_id"] = json!("new");
    send(&mut live, &again);
    let mut m = s.headless(&[]);
    let needs = m.wait_json("the live session", |v| event(v) == "needs_you");
    assert_eq!(
        needs["session_id"], "new",
        "the dead session's wait is not reported"
    );
    let _ = live.kill();
    let _ = live.wait();
}

/// `maestro hook` run as the user-wide install runs it (no `--project`, from the
/// session's folder), with `flags`.
fn user_hook(input: &Value, cwd: &Path, data: &Path, flags: &[&str]) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_maestro"))
        .arg("hook")
        .args(flags)
        .current_dir(cwd)
        .env("XDG_DATA_HOME", data)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Installed for the user with the guard and in the project without it: the project's
/// own install wins, so the user-wide hook neither refuses nor spools (one event).
#[test]
fn a_projects_own_install_without_the_guard_wins_over_the_users() {
    let s = Scratch::new();
    let data = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(s.root()).unwrap();
    let transcript = root.join("souffleur-session.jsonl");
    std::fs::write(
        &transcript,
        "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"/souffleur PID:4242 SESSION_ID:abc-1\"}}\n",
    )
    .unwrap();
    let launch = json!({
        "session_id": "win-w1", "transcript_path": transcript, "cwd": root,
        "hook_event_name": "PreToolUse", "tool_name": "Agent",
        "tool_input": {"prompt": "Poll the Conductor's liveness every ~60 seconds using comms-link.\nConductor PID: 4242\nConductor session ID: abc-1\nAwaiting session ID: false\nWatcher mode: normal", "run_in_background": true},
    });
    // The user's install alone refuses the Souffleur's watcher from its session.
    let out = user_hook(&launch, &root, data.path(), &["--replace-pollers"]);
    crate::common::assert_success(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"deny\""));
    let spool = data.path().join("maestro/hooks");
    let lines = || -> usize {
        crate::common::walk(&spool)
            .iter()
            .map(|p| {
                std::fs::read_to_string(p)
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| !l.is_empty())
                    .count()
            })
            .sum()
    };
    let before = lines();
    // The project installs maestro's hooks without the guard: the user's hook stands aside.
    crate::common::assert_success(&hooks(&s, &["install"]));
    let out = user_hook(&launch, &root, data.path(), &["--replace-pollers"]);
    crate::common::assert_success(&out);
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(lines(), before, "nothing spooled by the user's hook");
}

#[test]
fn the_hook_verb_has_help_for_a_person() {
    for args in [&["hook", "--help"][..], &["help", "hook"][..]] {
        let out = maestro().args(args).output().unwrap();
        crate::common::assert_success(&out);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("--replace-pollers"), "{args:?}: {text}");
        assert!(text.contains("--project"), "{args:?}: {text}");
    }
}

/// Hook events are told once across restarts: two waits and a clear, then `kill -9`, then
/// `--after` the last cursor printed. None of them comes back (with a new cursor or
/// not); a wait that comes after the restart is told.
#[test]
fn hook_events_are_told_once_across_a_kill_and_a_resume() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    assert!(hooks(&s, &["install"]).status.success());
    let mut m = s.headless(&[]);
    m.wait_json("the task", |v| {
        event(v) == "task" && v["task_id"] == "task-03"
    });
    let mut claude = stub_claude(s.root(), &installed_command(&s, "PermissionRequest"));
    let cwd = s.root().display().to_string();
    let base = |sid: &str, name: &str| json!({"session_id": sid, "hook_event_name": name, "cwd": cwd, "transcript_path": format!("/nowhere/{sid}.jsonl")});
    let ask = |sid: &str| {
        let mut a = base(sid, "PermissionRequest");
        a["tool_name"] = json!("Bash");
        a["tool_input"] = json!({"command": "cargo publish"});
        a
    };
    let mut prompt = base("s1", "UserPromptSubmit");
    prompt["prompt"] = json!("/musician task-03");
    send(&mut claude, &prompt);
    send(&mut claude, &ask("s1"));
    m.wait_json("the first wait", |v| event(v) == "needs_you");
    let mut ran = base("s1", "PostToolUse");
    ran["tool_name"] = json!("Bash");
    send(&mut claude, &ran);
    m.wait_json("cleared", |v| event(v) == "needs_you_cleared");
    let mut idle = base("s1", "Notification");
    idle["notification_type"] = json!("idle_prompt");
    idle["message"] = json!("Claude is waiting for your input");
    send(&mut claude, &idle);
    let last = m.wait_json("the second wait", |v| event(v) == "needs_you");
    let cursor = last["cursor"].as_str().unwrap().to_owned();
    m.signal(nix::sys::signal::Signal::SIGKILL);
    m.wait_exit();

    let mut resumed = s.headless(&["--after", &cursor]);
    let mut prompt = base("s2", "UserPromptSubmit");
    prompt["prompt"] = json!("/musician task-03");
    send(&mut claude, &prompt);
    send(&mut claude, &ask("s2"));
    let new = resumed.wait_json("the wait after the restart", |v| {
        event(v) == "needs_you" && v["session_id"] == "s2"
    });
    assert!(new["cursor"].is_string(), "{new}");
    for line in &resumed.seen {
        let v: Value = serde_json::from_str(line).unwrap();
        let hooked = matches!(event(&v), "needs_you" | "needs_you_cleared");
        assert!(
            !hooked || v["session_id"] == "s2",
            "told again after the resume: {line}"
        );
    }
    let _ = claude.kill();
    let _ = claude.wait();
}
