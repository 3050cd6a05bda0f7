//! Text is never code (issue 34): what a session, a log or the database says cannot run
//! as a command through a trusted pipeline, redraw the operator's terminal, or lead
//! maestro to a path outside the project. Each test reproduces one finding of the
//! review on the real executable.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::common::{PipelineRig as Rig, event};

/// Hostile text as a Musician (or a prompt injection steering one) would write it.
const HOSTILE: &str = "step 2 self-correction: $(touch pwned1) `touch pwned2` '; touch pwned3; '";

fn unsafe_definitions() -> Vec<(&'static str, Value)> {
    let def = |program: &str, args: Vec<&str>| {
        json!({
            "trigger": {"type": "event", "event": "anomaly"},
            "steps": [{"type": "command", "command": program, "params": {"args": args}}],
            "safety": {"maxIterations": 1}
        })
    };
    vec![
        (
            "quoted",
            def("sh", vec!["-c", "echo \"$event.detail\" > seen-quoted"]),
        ),
        (
            "pipefail",
            def(
                "bash",
                vec!["-o", "pipefail", "-c", "echo $event.detail > seen-pipefail"],
            ),
        ),
        (
            "wrapped",
            def(
                "timeout",
                vec!["5", "sh", "-c", "echo '$event.detail' > seen-wrapped"],
            ),
        ),
    ]
}

fn trust_file(rig: &Rig) -> PathBuf {
    let dir = rig.data.path().join("maestro/trust");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap()
}

#[test]
fn a_variable_in_a_shell_script_is_refused_at_trust_naming_the_step_and_the_safe_form() {
    let rig = Rig::new();
    for (name, def) in unsafe_definitions() {
        rig.write(name, &def);
        let (code, out, err) = rig.sentinel(&["trust", name]);
        assert_ne!(code, 0, "{name} was trusted: {out}");
        assert!(
            err.contains("steps[0].params.args[") && err.contains("$event.detail"),
            "{name}: {err}"
        );
        assert!(
            err.contains("MAESTRO_EVENT_DETAIL") && err.contains("docs/cli.md"),
            "{name} does not say how to write it: {err}"
        );
    }
}

#[test]
fn a_trusted_pipeline_passes_hostile_event_text_as_data_and_never_runs_it() {
    let rig = Rig::new();
    rig.s.set_task("task-03", "working");
    // The safe forms: the environment, and a positional argument after the script.
    rig.define(
        "by-env",
        &json!({
            "trigger": {"type": "event", "event": "anomaly"},
            "steps": [{"type": "command", "command": "sh",
                       "params": {"args": ["-c", "printf '%s|%s' \"$MAESTRO_EVENT_TASK_ID\" \"$MAESTRO_EVENT_DETAIL\" > seen-env"]}}],
            "safety": {"maxIterations": 1}
        }),
    );
    rig.define(
        "by-argument",
        &json!({
            "trigger": {"type": "event", "event": "anomaly"},
            "steps": [{"type": "command", "command": "timeout",
                       "params": {"args": ["5", "sh", "-c", "printf '%s' \"$1\" > seen-arg", "_", "$event.detail"]}}],
            "safety": {"maxIterations": 1}
        }),
    );
    // Definitions trusted before this rule (by an older maestro): refused at load.
    let mut trust: Value =
        serde_json::from_str(&std::fs::read_to_string(trust_file(&rig)).unwrap()).unwrap();
    for (name, def) in unsafe_definitions() {
        rig.write(name, &def);
        let hash = maestro::core::pipeline::trust::content_hash(def.to_string().as_bytes());
        trust["trusted"][name] = json!([hash]);
    }
    std::fs::write(trust_file(&rig), trust.to_string()).unwrap();
    let mut m = rig.host();
    let refused = |name: &'static str| {
        move |v: &Value| {
            event(v) == "error"
                && v["detail"].as_str().is_some_and(|d| {
                    d.contains(&format!("{name}.json")) && d.contains("steps[0].params.args[")
                })
        }
    };
    let (quoted, pipefail, wrapped) = (refused("quoted"), refused("pipefail"), refused("wrapped"));
    let runs = |v: &Value| event(v) == "task" && v["task_id"] == "task-03";
    m.wait_all(
        "each refused at load, and the host runs",
        &[&quoted, &pipefail, &wrapped, &runs],
    );
    rig.s.append("task-03-status", &format!("{HOSTILE}\n"));
    let done = |name: &'static str| {
        move |v: &Value| event(v) == "pipeline" && v["name"] == name && v["status"] == "completed"
    };
    let (by_env, by_arg) = (done("by-env"), done("by-argument"));
    m.wait_all("the safe pipelines ran", &[&by_env, &by_arg]);
    for f in [
        "pwned1",
        "pwned2",
        "pwned3",
        "seen-quoted",
        "seen-pipefail",
        "seen-wrapped",
    ] {
        assert!(!rig.marker(f).exists(), "{f}: event text ran as code");
    }
    let by_env = std::fs::read_to_string(rig.marker("seen-env")).unwrap();
    assert!(
        by_env.starts_with("task-03|") && by_env.contains("$(touch pwned1)"),
        "{by_env}"
    );
    let by_arg = std::fs::read_to_string(rig.marker("seen-arg")).unwrap();
    assert!(by_arg.contains("'; touch pwned3; '"), "{by_arg}");
}

// ---- The user's Claude Code settings are edited, not rewritten ----

fn hooks_cmd(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    crate::common::maestro()
        .arg("hooks")
        .args(args)
        .arg("--project")
        .arg(dir)
        .output()
        .unwrap()
}

#[test]
fn install_keeps_key_order_and_the_users_own_commands_and_uninstall_gives_the_file_back() {
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    // As Claude Code writes it: its own key order, two-space indent.
    let before = r#"{
  "permissions": {
    "deny": [],
    "allow": [
      "Bash(cargo test:*)"
    ]
  },
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "maestro hook && ~/bin/backup.sh"
          }
        ]
      }
    ]
  },
  "env": {
    "ZED": "1",
    "ALPHA": "2"
  }
}
"#;
    std::fs::write(&settings, before).unwrap();
    let out = hooks_cmd(dir.path(), &["install"]);
    crate::common::assert_success(&out);
    let after = std::fs::read_to_string(&settings).unwrap();
    let v: Value = serde_json::from_str(&after).unwrap();
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["permissions", "hooks", "env"], "{after}");
    assert!(after.find("\"deny\"").unwrap() < after.find("\"allow\"").unwrap());
    assert!(after.find("\"ZED\"").unwrap() < after.find("\"ALPHA\"").unwrap());
    let stop = v["hooks"]["Stop"].as_array().unwrap();
    assert_eq!(
        stop[0]["hooks"][0]["command"],
        "maestro hook && ~/bin/backup.sh"
    );
    assert_eq!(
        after.matches("backup.sh").count(),
        1,
        "the user's command is neither replaced nor doubled"
    );
    // A second install changes nothing; uninstall gives back the very bytes.
    assert!(hooks_cmd(dir.path(), &["install"]).status.success());
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), after);
    assert!(hooks_cmd(dir.path(), &["uninstall"]).status.success());
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), before);
}

#[test]
fn a_read_only_or_foreign_settings_file_is_refused_and_left_as_it_was() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join(".claude/settings.local.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{\"a\": 1}\n").unwrap();
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o444)).unwrap();
    let out = hooks_cmd(dir.path(), &["install"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("read-only") && err.contains("chmod u+w"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{\"a\": 1}\n");
    assert_eq!(
        std::fs::metadata(&settings).unwrap().permissions().mode() & 0o777,
        0o444
    );
    // Another user's file (as root, give it to nobody; otherwise this part cannot run).
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o644)).unwrap();
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&settings, Some(65534), Some(65534)).unwrap();
        let out = hooks_cmd(dir.path(), &["install"]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("belongs to uid 65534"), "{err}");
        let meta = std::fs::metadata(&settings).unwrap();
        assert_eq!((meta.uid(), meta.mode() & 0o777), (65534, 0o644));
        assert_eq!(std::fs::read_to_string(&settings).unwrap(), "{\"a\": 1}\n");
    } else {
        eprintln!("skipped the foreign-owner half: it needs root to chown the file");
    }
}

// ---- Hooks that do not lose events ----

/// Runs `maestro hook` with `--project`, writing `input` to its stdin after `delay`.
fn late_hook(
    project: &std::path::Path,
    data: &std::path::Path,
    input: &str,
    delay: std::time::Duration,
) {
    use std::io::Write;
    let mut child = crate::common::maestro()
        .args(["hook", "--project"])
        .arg(project)
        .env("XDG_DATA_HOME", data)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    std::thread::sleep(delay); // the delay is the case under test, not a wait for an event
    let _ = stdin.write_all(input.as_bytes());
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

fn spooled(project: &std::path::Path, data: &std::path::Path) -> Vec<String> {
    let dir = data.join("maestro/hooks");
    let key = maestro::core::paths::ProjectKey::of(project).key;
    let path = dir.join(format!("{key}.jsonl"));
    maestro::core::hooks::spool::SpoolReader::new(path)
        .read_new()
        .into_iter()
        .map(|e| e.session_id)
        .collect()
}

#[test]
fn an_event_written_late_to_the_hooks_stdin_is_still_spooled() {
    let project = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    for (sid, ms) in [("late-40", 40), ("late-150", 150)] {
        let event = json!({"session_id": sid, "hook_event_name": "Stop"}).to_string();
        late_hook(
            project.path(),
            data.path(),
            &event,
            std::time::Duration::from_millis(ms),
        );
    }
    assert_eq!(
        spooled(project.path(), data.path()),
        ["late-40", "late-150"]
    );
}

#[test]
fn a_write_cut_short_by_a_full_disk_does_not_swallow_the_next_event() {
    let project = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let event = |sid: &str| {
        json!({"session_id": sid, "hook_event_name": "Stop", "message": "x".repeat(700)})
            .to_string()
    };
    late_hook(
        project.path(),
        data.path(),
        &event("first"),
        std::time::Duration::ZERO,
    );
    // The disk fills: a file-size limit (512 bytes: one block of the shell's `ulimit -f`)
    // stops the second event's write partway, as ENOSPC would.
    let exe = env!("CARGO_BIN_EXE_maestro");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 1; printf '%s' \"$1\" | exec \"$2\" hook --project \"$3\"")
        .args(["_", &event("cut"), exe])
        .arg(project.path())
        .env("XDG_DATA_HOME", data.path())
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let key = maestro::core::paths::ProjectKey::of(project.path()).key;
    let raw = std::fs::read(data.path().join(format!("maestro/hooks/{key}.jsonl"))).unwrap();
    assert!(
        raw.len() < 512 || (raw.len() == 512 && raw.last() != Some(&b'\n')),
        "{}",
        raw.len()
    );
    assert_eq!(raw.len(), 512, "the second write was cut at the limit");
    // Space again: the next event is read, and so was the first.
    late_hook(
        project.path(),
        data.path(),
        &event("after"),
        std::time::Duration::ZERO,
    );
    assert_eq!(spooled(project.path(), data.path()), ["first", "after"]);
}

#[test]
fn a_project_whose_path_is_not_utf8_gets_its_own_spool() {
    use std::os::unix::ffi::OsStrExt;
    let base = tempfile::tempdir().unwrap();
    let project = base
        .path()
        .join(std::ffi::OsStr::from_bytes(b"proj-\xff\xfe"));
    std::fs::create_dir(&project).unwrap();
    let other = base.path().join("proj-\u{fffd}\u{fffd}");
    std::fs::create_dir(&other).unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = hooks_cmd(&project, &["install"]);
    crate::common::assert_success(&out);
    let v: Value = serde_json::from_slice(
        &std::fs::read(project.join(".claude/settings.local.json")).unwrap(),
    )
    .unwrap();
    let command = v["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    // Claude Code runs the command through a shell, in the project, the event on stdin.
    let event =
        json!({"session_id": "raw-bytes", "hook_event_name": "Stop", "cwd": other}).to_string();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' \"$1\" | {command}"))
        .args(["_", &event])
        .current_dir(&project)
        .env("XDG_DATA_HOME", data.path())
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    assert_eq!(spooled(&project, data.path()), ["raw-bytes"]);
    assert!(
        spooled(&other, data.path()).is_empty(),
        "sent to a look-alike folder's spool"
    );
}

// ---- kitty sockets ----

/// A socket folder another user made where maestro keeps kitty's sockets is said at
/// `launch` and by `doctor`, never silently turning focus off.
#[test]
fn a_squatted_socket_folder_is_a_warning_at_launch_and_in_doctor() {
    use std::os::unix::fs::PermissionsExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: making a folder another user's needs root");
        return;
    }
    let s = crate::common::Scratch::new();
    let run = tempfile::tempdir().unwrap();
    let squatted = run.path().join("maestro");
    std::fs::create_dir(&squatted).unwrap();
    std::os::unix::fs::chown(&squatted, Some(65534), Some(65534)).unwrap();
    // A stand-in terminal named kitty that opens nothing.
    let bin = tempfile::tempdir().unwrap();
    let kitty = bin.path().join("kitty");
    std::fs::write(&kitty, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&kitty, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run_maestro = |args: &[&str]| {
        crate::common::maestro()
            .args(args)
            .arg("--project")
            .arg(s.root())
            .env("XDG_RUNTIME_DIR", run.path())
            .env("PATH", &path)
            .env("DISPLAY", ":99")
            .output()
            .unwrap()
    };
    let out = run_maestro(&["launch"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning")
            && err.contains(&format!("{} belongs to uid 65534", squatted.display())),
        "{err}"
    );
    let out = run_maestro(&["doctor"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("belongs to uid 65534"), "{said}");
    assert_eq!(out.status.code(), Some(1), "a warning: {said}");
}
