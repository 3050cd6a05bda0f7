//! The Souffleur role end to end: the real binary, a real comms.db, a real "Conductor"
//! process, and stub `kitty`, `claude_export` and `lethe` executables on a scratch PATH
//! that record their argv and start a sleeping child.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::common::{Running, Scratch, event, maestro};

pub(crate) const SESSION: &str = "5f2e1c3a-session";

pub(crate) struct Rig {
    pub(crate) scratch: Scratch,
    pub(crate) home: tempfile::TempDir,
    pub(crate) stubs: PathBuf,
    pub(crate) conductor: Child,
}

pub(crate) const RECORD: &str = r#"{ printf '%s' "$(basename "$0")"; for a in "$@"; do printf '\037%s' "$(printf '%s' "$a" | tr '\n' '\036')"; done; printf '\n'; } >> "$STUB_DIR/calls.log""#;

impl Rig {
    pub(crate) fn new(lethe: Option<&str>) -> Self {
        let scratch = Scratch::new();
        scratch.set_task("task-00", "reviewing");
        scratch.set_task("task-01", "working");
        let home = tempfile::tempdir().unwrap();
        let stubs = home.path().join("bin");
        std::fs::create_dir_all(&stubs).unwrap();
        let transcript_dir = home.path().join(".claude/projects/-work-proj");
        std::fs::create_dir_all(&transcript_dir).unwrap();
        std::fs::write(
            transcript_dir.join(format!("{SESSION}.jsonl")),
            "{\"type\":\"user\"}\n",
        )
        .unwrap();
        std::fs::create_dir_all(home.path().join("exports")).unwrap();
        stub(
            &stubs,
            "kitty",
            &format!(
                "{RECORD}\necho $$ >> \"$STUB_DIR/pids\"\n{}",
                crate::common::RUN_AFTER_DASHES
            ),
        );
        stub(
            &stubs,
            "claude_export",
            &format!("{RECORD}\nprintf 'SUMMARY of %s\\nlast words\\n' \"$1\"\n"),
        );
        // The session the windows run (named claude, as the real one's process is).
        stub(
            &stubs,
            "claude",
            "echo $$ >> \"$STUB_DIR/pids\"\nsleep 300\n",
        );
        if let Some(mode) = lethe {
            let body = match mode {
                "success" => {
                    "sleep 300 >/dev/null 2>&1 &\necho $! >> \"$STUB_DIR/pids\"\necho 'compacting'\necho \"{\\\"status\\\":\\\"success\\\",\\\"relaunch_started\\\":true,\\\"pid\\\":$!,\\\"session_id\\\":null}\"\n"
                }
                _ => "echo 'lethe: compaction failed' >&2\nexit 1\n",
            };
            stub(
                &stubs,
                "lethe",
                &format!(
                    "{RECORD}\nif [ \"$1\" = --version ]; then echo lethe 1.0; exit 0; fi\n{body}"
                ),
            );
        }
        let cfg = format!(
            "[souffleur]\ninitial_wait = \"300ms\"\npoll = \"200ms\"\nteammate_initial_wait = \"2s\"\nteammate_poll = \"1s\"\nkill_grace = \"1s\"\ncompact_timeout = \"5s\"\nclaude_projects_dir = \"{0}/.claude/projects\"\nexport_dir = \"{0}/exports\"\n",
            home.path().display()
        );
        std::fs::write(home.path().join("config.toml"), cfg).unwrap();
        let conductor = Command::new("sleep").arg("300").spawn().unwrap();
        Self {
            scratch,
            home,
            stubs,
            conductor,
        }
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = maestro();
        let path = format!(
            "{}:{}",
            self.stubs.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // The stub kitty needs no display; maestro checks one is named.
        cmd.env("PATH", path)
            .env("DISPLAY", ":99")
            .env("HOME", self.home.path())
            .env("XDG_DATA_HOME", self.home.path().join("data"))
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("STUB_DIR", &self.stubs)
            .arg("--project")
            .arg(self.scratch.root())
            .arg("--config")
            .arg(self.home.path().join("config.toml"))
            .args(args);
        cmd
    }

    pub(crate) fn souffleur(&self, pid: u32) -> Running {
        let invocation = format!("PID:{pid} SESSION_ID:{SESSION}");
        Running::spawn(self.command(&["souffleur", &invocation, "--no-tui", "--json"]))
    }

    /// Each recorded call: program name, then its arguments.
    /// The stubs' complete records (a stub writes its record in several pieces: a last
    /// line without its newline is still being written).
    pub(crate) fn calls(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.stubs.join("calls.log"))
            .unwrap_or_default()
            .split_inclusive('\n')
            .filter_map(|l| l.strip_suffix('\n'))
            .map(|l| {
                // A newline inside an argument was recorded as U+001E (a multi-line prompt).
                let argv: Vec<String> = l
                    .split('\u{1f}')
                    .map(|a| a.replace('\u{1e}', "\n"))
                    .collect();
                crate::common::without_remote_control(&argv)
            })
            .collect()
    }

    /// The recorded calls once `pred` holds for them: a stub writes its record a moment
    /// after the process starts. Fails after the common deadline.
    pub(crate) fn calls_when(
        &self,
        what: &str,
        pred: impl Fn(&[Vec<String>]) -> bool,
    ) -> Vec<Vec<String>> {
        let end = std::time::Instant::now() + crate::common::DEADLINE;
        loop {
            let calls = self.calls();
            if pred(&calls) {
                return calls;
            }
            assert!(
                std::time::Instant::now() < end,
                "timed out waiting for {what}; calls: {calls:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub(crate) fn souffleur_state(&self) -> String {
        self.scratch
            .conn()
            .query_row(
                "SELECT state FROM orchestration_tasks WHERE task_id = 'souffleur'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = self.conductor.kill();
        let _ = self.conductor.wait();
        for pid in std::fs::read_to_string(self.stubs.join("pids"))
            .unwrap_or_default()
            .lines()
        {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

pub(crate) fn stub(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_dead_conductor_is_relaunched_with_title_prompt_and_permission() {
    let mut rig = Rig::new(None);
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);

    rig.conductor.kill().unwrap();
    rig.conductor.wait().unwrap();
    let w = m.wait_json("death noticed", |v| event(v) == "watchdog");
    assert_eq!(w["reason"], "CONDUCTOR_DEAD:pid");
    assert_eq!(w["task_count"], 3);
    let started = m.wait_json("recovery started", |v| event(v) == "recovery");
    assert_eq!(
        (started["provider"].as_str(), started["status"].as_str()),
        (Some("claude_export"), Some("started"))
    );
    let done = m.wait_json("recovery result", |v| {
        event(v) == "recovery" && v["status"] != "started"
    });
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(done["generation"], 2);
    let pid = done["pid"].as_i64().unwrap();

    let calls = rig.calls_when("the window's record", |c| c.iter().any(|c| c[0] == "kitty"));
    let export = calls
        .iter()
        .find(|c| c[0] == "claude_export")
        .expect("claude_export ran");
    assert_eq!(export[1..], [SESSION]);
    let kitty = calls
        .iter()
        .find(|c| c[0] == "kitty")
        .expect("a window was opened");
    let root = std::fs::canonicalize(rig.scratch.root()).unwrap();
    assert_eq!(
        kitty[1..8],
        [
            "--directory",
            root.to_str().unwrap(),
            "--title",
            "Conductor (S2)",
            "--",
            "env",
            "-u"
        ]
    );
    assert_eq!(
        kitty[8..12],
        ["CLAUDECODE", "claude", "--permission-mode", "acceptEdits"]
    );
    // The Souffleur's launch template: the reason, what to read first, the
    // predecessor's session.
    let prompt = &kitty[12];
    assert!(
        prompt.starts_with(
            "/conductor --recovery-bootstrap\n\nYour previous Conductor session crashed or became unresponsive."
        ),
        "{prompt:?}"
    );
    assert!(
        prompt.ends_with(&format!("Your predecessor's session ID was: {SESSION}")),
        "{prompt:?}"
    );
    let export_path = prompt
        .lines()
        .find_map(|l| l.strip_prefix("**Recovery context:** "))
        .expect("the export named");
    assert!(
        std::fs::read_to_string(export_path)
            .unwrap()
            .starts_with("SUMMARY of 5f2e1c3a-session")
    );
    let recorded =
        std::fs::read_to_string(rig.scratch.temp().join("souffleur-conductor.pid")).unwrap();
    assert_eq!(recorded.trim(), pid.to_string());

    // The Conductor finishes: the role shuts down cleanly.
    rig.scratch.set_task("task-00", "complete");
    let w = m.wait_json("complete", |v| event(v) == "watchdog");
    assert_eq!(w["reason"], "CONDUCTOR_COMPLETE");
    assert_eq!(m.wait_exit(), 0);
    assert_eq!(rig.souffleur_state(), "complete");
}

#[test]
fn payload_permission_is_clamped_and_lethe_is_preferred_for_context_recovery() {
    let rig = Rig::new(Some("success"));
    std::fs::create_dir_all(rig.scratch.root().join(".orchestra_configs")).unwrap();
    std::fs::write(
        rig.scratch.root().join(".orchestra_configs/souffleur"),
        "MAX_EXTERNAL_PERMISSION=acceptEdits\n",
    )
    .unwrap();
    rig.scratch
        .conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('souffleur', 'task-00', ?1, 'instruction')",
            ["CONTEXT_RECOVERY_PAYLOAD_V1\npermission_mode: bypassPermissions\nresume_prompt: /conductor --recovery-bootstrap --phase 2\nfuture: ignored"],
        )
        .unwrap();
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    rig.scratch.set_task("task-00", "context_recovery");
    let w = m.wait_json("context recovery", |v| event(v) == "watchdog");
    assert_eq!(w["reason"], "CONTEXT_RECOVERY");
    let done = m.wait_json("lethe result", |v| {
        event(v) == "recovery" && v["status"] != "started"
    });
    assert_eq!(
        (done["provider"].as_str(), done["status"].as_str()),
        (Some("lethe"), Some("success")),
        "{done}"
    );
    assert!(done["pid"].as_i64().is_some());
    let calls = rig.calls();
    let lethe = calls
        .iter()
        .find(|c| c[0] == "lethe" && c[1] == "compact")
        .expect("lethe ran");
    let arg = |flag: &str| {
        lethe
            .iter()
            .position(|a| a == flag)
            .map(|i| lethe[i + 1].clone())
    };
    assert_eq!(
        arg("--permission-mode").as_deref(),
        Some("acceptEdits"),
        "clamped to the ceiling"
    );
    // Every line after `resume_prompt:` is the prompt's (docs: the payload's format).
    assert_eq!(
        arg("--prompt").as_deref(),
        Some("/conductor --recovery-bootstrap --phase 2\nfuture: ignored")
    );
    assert_eq!(arg("--title").as_deref(), Some("Conductor (S2)"));
    assert!(
        !calls.iter().any(|c| c[0] == "claude_export"),
        "no second provider after a relaunch"
    );
    // The clamp is reported to the Conductor.
    let warned: i64 = rig
        .scratch
        .conn()
        .query_row("SELECT count(*) FROM orchestration_messages WHERE from_session = 'souffleur' AND message LIKE '%ceiling%'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(warned, 1);
}

#[test]
fn lethe_failing_twice_falls_back_to_claude_export() {
    let rig = Rig::new(Some("fail"));
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    rig.scratch.set_task("task-00", "context_recovery");
    let mut failures = 0;
    let done = m.wait_json("claude_export result", |v| {
        event(v) == "recovery" && v["provider"] == "claude_export" && v["status"] != "started"
    });
    for line in &m.seen {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if event(&v) == "recovery" && v["provider"] == "lethe" && v["status"] == "failed" {
            failures += 1;
        }
    }
    assert_eq!(failures, 2, "one retry, then fallback");
    assert_eq!(done["status"], "success");
    assert_eq!(
        rig.calls()
            .iter()
            .filter(|c| c[0] == "lethe" && c[1] == "compact")
            .count(),
        2
    );
}

#[test]
fn validation_retries_with_corrected_arguments_from_an_instruction() {
    let rig = Rig::new(None);
    // A PID that is not running.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let mut m = rig.souffleur(dead);
    m.wait_json("error state", |v| {
        event(v) == "task" && v["task_id"] == "souffleur" && v["state"] == "error"
    });
    let msg = m.wait_json("error message", |v| {
        event(v) == "message" && v["from_session"] == "souffleur"
    });
    assert_eq!(msg["message_type"], "error");
    assert!(
        msg["message"].as_str().unwrap().contains("PID check"),
        "{msg}"
    );
    rig.scratch
        .conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('souffleur', 'task-00', ?1, 'instruction')",
            [format!("Retry with PID:{} SESSION_ID:{SESSION}", rig.conductor.id())],
        )
        .unwrap();
    confirmed(&mut m);
}

#[test]
fn three_failed_validations_exit_the_role() {
    let rig = Rig::new(None);
    let mut m = Running::spawn(rig.command(&[
        "souffleur",
        "PID:2147483000",
        "SESSION_ID:nope",
        "--no-tui",
        "--json",
    ]));
    for _ in 0..2 {
        m.wait_json("error message", |v| {
            event(v) == "message"
                && v["from_session"] == "souffleur"
                && v["message_type"] == "error"
        });
        rig.scratch
            .conn()
            .execute(
                "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('souffleur', 'task-00', 'PID:2147483001 SESSION_ID:still-wrong', 'instruction')",
                [],
            )
            .unwrap();
    }
    assert_eq!(m.wait_exit(), 1);
    assert_eq!(rig.souffleur_state(), "exited");
}

#[test]
fn only_one_souffleur_per_project() {
    let rig = Rig::new(None);
    let mut first = rig.souffleur(rig.conductor.id());
    confirmed(&mut first);
    let out = rig
        .command(&[
            "souffleur",
            &format!("PID:{} SESSION_ID:{SESSION}", rig.conductor.id()),
            "--no-tui",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("PID {}", first.child.id())), "{err}");
    // Dashboards may still watch alongside it.
    let mut watcher = Running::spawn(rig.command(&["--no-tui", "--json"]));
    watcher.wait_json("observer runs", |v| event(v) == "task");
}

#[test]
fn conductor_commands_reach_the_running_role() {
    let rig = Rig::new(None);
    let conductor = |args: &[&str]| {
        let out = rig
            .command(&[&["conductor"][..], args].concat())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = conductor(&["recover", "--yes"]);
    assert_eq!(code, 1, "no role yet: {err}");
    assert!(err.contains("no Souffleur role answers"), "{err}");

    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    let (code, out, err) = conductor(&["hold", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], true);
    assert!(v["detail"].as_str().unwrap().contains("held"), "{v}");
    assert_eq!(conductor(&["release"]).0, 0);

    let (code, _, err) = conductor(&["relaunch"]);
    assert_eq!(code, 2, "destructive without a terminal needs --yes: {err}");
    let (code, out, err) = conductor(&["relaunch", "--yes"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("recovery started"), "{out}");
    let done = m.wait_json("manual recovery", |v| {
        event(v) == "recovery" && v["status"] != "started"
    });
    assert_eq!(
        (done["provider"].as_str(), done["status"].as_str()),
        (Some("claude_export"), Some("success"))
    );
    // An unknown word is a usage error.
    assert_eq!(conductor(&["pause"]).0, 2);
}

#[test]
fn a_hold_set_before_the_role_starts_holds_it_until_released() {
    let rig = Rig::new(None);
    let conductor = |args: &[&str]| {
        rig.command(&[&["conductor"][..], args].concat())
            .output()
            .unwrap()
    };
    let out = conductor(&["hold", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["held"].as_bool()),
        (Some(true), Some(true))
    );
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("no Souffleur role is running now"),
        "{v}"
    );

    let mut rig = rig;
    let mut m = rig.souffleur(rig.conductor.id());
    default_settings(&mut m);
    confirmed(&mut m);
    rig.conductor.kill().unwrap();
    rig.conductor.wait().unwrap();
    m.wait_json("the death is seen", |v| {
        event(v) == "watchdog" && v["reason"] == "CONDUCTOR_DEAD:pid"
    });
    // Held: the next watcher cycle reports again instead of a recovery starting.
    let next = m.wait_json("held, no recovery", |v| {
        event(v) == "recovery" || event(v) == "watchdog"
    });
    assert_eq!(event(&next), "watchdog", "{next}");

    let out = rig
        .command(&["conductor", "release", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["held"], false, "{v}");
    m.wait_json("released: the recovery starts", |v| {
        event(v) == "recovery" && v["status"] == "started"
    });
}

#[test]
fn an_export_too_large_escalates_to_standard_compact() {
    let rig = Rig::new(None);
    std::fs::create_dir_all(rig.scratch.root().join(".orchestra_configs")).unwrap();
    std::fs::write(
        rig.scratch.root().join(".orchestra_configs/souffleur"),
        "FORCE_COMPACT=10\n",
    )
    .unwrap();
    // The compact window "compacts": it appends the boundary to the transcript.
    let transcript = rig
        .home
        .path()
        .join(format!(".claude/projects/-work-proj/{SESSION}.jsonl"));
    stub(
        &rig.stubs,
        "kitty",
        &format!(
            "{RECORD}\necho $$ >> \"$STUB_DIR/pids\"\ncase \"$*\" in *\" /compact\"*) echo '{{\"type\":\"system\",\"subtype\":\"compact_boundary\"}}' >> {} ;; esac\n{}",
            transcript.display(),
            crate::common::RUN_AFTER_DASHES
        ),
    );
    stub(
        &rig.stubs,
        "claude_export",
        &format!("{RECORD}\nprintf 'a long export, far above ten tokens of budget\\n'\n"),
    );
    let mut m = rig.souffleur(rig.conductor.id());
    confirmed(&mut m);
    rig.scratch.set_task("task-00", "context_recovery");
    let done = m.wait_json("compact result", |v| {
        event(v) == "recovery" && v["status"] != "started" && v["step"] == "standard_compact"
    });
    assert_eq!(
        (done["provider"].as_str(), done["status"].as_str()),
        (Some("claude_export"), Some("success")),
        "{done}"
    );
    let calls = rig.calls_when("two windows", |c| {
        c.iter().filter(|c| c[0] == "kitty").count() == 2
    });
    let windows: Vec<&Vec<String>> = calls.iter().filter(|c| c[0] == "kitty").collect();
    assert_eq!(windows[0][4], "Compact: Conductor (S2)");
    assert_eq!(
        windows[0][10..],
        [
            "--resume",
            SESSION,
            "--permission-mode",
            "acceptEdits",
            "/compact"
        ]
    );
    assert_eq!(windows[1][4], "Conductor (S2)");
    assert_eq!(windows[1][10..12], ["--resume", SESSION]);
    let prompt = windows[1].last().unwrap();
    assert!(
        prompt.starts_with("/conductor --recovery-bootstrap\n\n"),
        "{prompt:?}"
    );
    assert!(
        prompt.ends_with(&format!("Your predecessor's session ID was: {SESSION}")),
        "{prompt:?}"
    );
}

/// A home 150 characters deep (as on a network home or under a long scratch folder):
/// the role and the pipeline host still start and still answer their commands, with
/// `XDG_RUNTIME_DIR` unset and with one too deep to hold a socket path.
#[test]
fn role_and_pipeline_host_answer_from_a_deep_home() {
    let rig = Rig::new(None);
    let deep = rig
        .home
        .path()
        .join(format!("{}/{}", "h".repeat(70), "o".repeat(70)));
    std::fs::create_dir_all(&deep).unwrap();
    assert!(deep.as_os_str().len() >= 150, "{}", deep.display());
    let sentinels = rig.scratch.root().join(".maestro/sentinels");
    std::fs::create_dir_all(&sentinels).unwrap();
    std::fs::write(
        sentinels.join("probe.json"),
        r#"{"steps": [{"type": "command", "command": "true"}], "safety": {"maxIterations": 1}}"#,
    )
    .unwrap();
    for runtime_dir in [None, Some(deep.join("run"))] {
        let with_env = |mut cmd: Command| {
            cmd.env("HOME", &deep)
                .env("XDG_DATA_HOME", deep.join("data"));
            match &runtime_dir {
                Some(d) => {
                    std::fs::create_dir_all(d).unwrap();
                    cmd.env("XDG_RUNTIME_DIR", d);
                }
                None => {
                    cmd.env_remove("XDG_RUNTIME_DIR");
                }
            }
            cmd
        };
        let invocation = format!("PID:{} SESSION_ID:{SESSION}", rig.conductor.id());
        let mut m = Running::spawn(with_env(rig.command(&[
            "souffleur",
            &invocation,
            "--no-tui",
            "--json",
        ])));
        confirmed(&mut m);
        let out = with_env(rig.command(&["conductor", "hold", "--json"]))
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ok"], true, "{v} {runtime_dir:?}");
        assert!(
            !v["detail"].as_str().unwrap().contains("no Souffleur role"),
            "the running role answered: {v}"
        );
        // The operator's trust lives in the (deep) data dir too.
        let out = with_env(rig.command(&["sentinel", "trust", "probe"]))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let out = with_env(rig.command(&["sentinel", "start", "probe"]))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "the host answered: {out:?}");
        m.signal(nix::sys::signal::Signal::SIGTERM);
        m.wait_exit();
        with_env(rig.command(&["conductor", "release"]))
            .output()
            .unwrap();
    }
}

/// Waits for the role's validation to succeed (the `souffleur` row turns `confirmed`).
pub(crate) fn confirmed(m: &mut Running) {
    m.wait_json("confirmed", |v| {
        event(v) == "task" && v["task_id"] == "souffleur" && v["state"] == "confirmed"
    });
}

/// Waits for the role's settings event and checks it names the defaults.
pub(crate) fn default_settings(m: &mut Running) {
    let settings = m.wait_json("settings", |v| event(v) == "souffleur_settings");
    assert_eq!(
        (
            settings["force_compact"].as_u64(),
            settings["max_external_permission"].as_str(),
            settings["force_compact_from"].as_str()
        ),
        (Some(400_000), Some("acceptEdits"), Some("default")),
        "{settings}"
    );
}
