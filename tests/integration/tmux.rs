//! End to end: the real binary in a real terminal (tmux), driven with keys the way a
//! person would, and the terminal checked afterwards. Skips, saying why, without tmux.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

/// One tmux session on a private server socket, so the test neither sees nor disturbs
/// the user's sessions. Killed on drop.
pub(crate) struct Tmux {
    socket: String,
    name: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    pub(crate) fn start(command: &str, width: u16, height: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("tmux.sock").to_str().unwrap().to_owned();
        let name = "maestro-e2e".to_owned();
        let status = Command::new("tmux")
            .args([
                "-S",
                &socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                &name,
            ])
            .args(["-x", &width.to_string(), "-y", &height.to_string(), command])
            .env("TERM", "xterm-256color")
            .status()
            .unwrap();
        assert!(status.success());
        Self {
            socket,
            name,
            _dir: dir,
        }
    }

    pub(crate) fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-S", &self.socket])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", &self.name, keys]);
    }

    /// What the terminal shows now.
    pub(crate) fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", &self.name])
    }

    /// Polls the screen until `pred` holds; fails with the screen after 30 s.
    pub(crate) fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < end,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

#[test]
fn demo_dashboard_help_and_clean_exit() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!("{exe} demo --speed 2; echo MAESTRO-EXITED $?; sleep 600"),
        120,
        40,
    );
    t.wait("task rows", |s| {
        s.contains("task-01") && s.contains("task-04") && s.contains("Tasks (")
    });
    // The Log pane follows the selected task's status file.
    t.wait("log lines", |s| s.contains("S task claimed [ctx:"));
    t.keys("?");
    let help = t.wait("help", |s| {
        s.contains("Help") && s.contains("search the log")
    });
    assert!(help.contains("quit"));
    t.keys("q");
    let after = t.wait("exit", |s| s.contains("MAESTRO-EXITED"));
    assert!(after.contains("MAESTRO-EXITED 0"), "{after}");
    // Back on the normal screen, with the cursor visible.
    let flags = t.run(&[
        "display-message",
        "-p",
        "-t",
        &t.name,
        "#{alternate_on} #{cursor_flag}",
    ]);
    assert_eq!(flags.trim(), "0 1", "alternate screen off, cursor visible");
    assert!(
        !after.contains("Heartbeats"),
        "the dashboard is gone from the screen:\n{after}"
    );
}

/// The operator answers a review and sends an instruction from the dashboard alone:
/// keys from the keymap, a confirmation that says what will happen, the editor for
/// the message, and the database changed as the Conductor would have changed it.
#[test]
fn approve_and_instruct_from_the_dashboard() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let s = crate::common::Scratch::new();
    s.set_task("task-03", "needs_review");
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!("{exe} --project {}; sleep 600", s.root().display()),
        140,
        40,
    );
    t.wait("the task", |s| {
        s.contains("task-03") && s.contains("needs_review")
    });
    t.keys("a");
    let dialog = t.wait("the confirmation", |s| s.contains("Confirm"));
    assert!(
        dialog.contains("needs_review -> review_approved") && dialog.contains("approval"),
        "the dialog says what will happen:\n{dialog}"
    );
    t.keys("y");
    // The dialog itself names the new state: wait for the database instead.
    let end = Instant::now() + Duration::from_secs(30);
    let (state, kind, from): (String, String, String) = loop {
        let row = s.conn().query_row(
            "SELECT t.state, m.message_type, m.from_session FROM orchestration_tasks t, orchestration_messages m WHERE t.task_id = 'task-03' AND m.task_id = 'task-03' ORDER BY m.id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        );
        if let Ok(row) = row {
            break row;
        }
        assert!(Instant::now() < end, "the approval never arrived");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        (state.as_str(), kind.as_str(), from.as_str()),
        ("review_approved", "approval", "task-00")
    );

    // An instruction: the editor, ctrl-s, the confirmation, then the message.
    t.keys("i");
    t.wait("the editor", |s| s.contains("Instruction"));
    t.keys("rebase on main");
    t.keys("C-s");
    t.wait("the confirmation", |s| {
        s.contains("instruction") && s.contains("rebase on main")
    });
    t.keys("y");
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let text: Option<String> = s
            .conn()
            .query_row(
                "SELECT message FROM orchestration_messages WHERE message_type = 'instruction' AND task_id = 'task-03'",
                [],
                |r| r.get(0),
            )
            .ok();
        if let Some(text) = text {
            assert!(text.ends_with("rebase on main"), "{text}");
            break;
        }
        assert!(Instant::now() < end, "the instruction never arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A replay in the dashboard: paused at the start, a step, a seek to the end that
/// shows the Sentinel's verdict, a rewind that forgets it, and no writes.
#[test]
fn replay_in_the_dashboard_steps_seeks_and_rewinds() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let s = crate::common::Scratch::new();
    s.set_task("task-01", "working");
    s.append("task-01-status", "step 1 started [ctx: 10%]\n");
    s.append(
        "task-01-status",
        "step 1 self-correction: rewrote the lexer [ctx: 12%]\n",
    );
    let data = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "XDG_DATA_HOME={} {exe} replay --paused --project {}; echo MAESTRO-EXITED $?; sleep 600",
            data.path().display(),
            s.root().display()
        ),
        180,
        40,
    );
    let first = t.wait("the replay clock", |s| {
        s.contains("REPLAY") && s.contains("❚❚")
    });
    assert!(first.contains(" 0/"), "nothing played yet:\n{first}");
    // A step goes to the next moment (the inputs of one moment go in together).
    t.keys(".");
    t.wait("one step", |s| s.contains("❚❚") && !s.contains(" 0/"));
    t.keys("}");
    let end = t.wait("the end", |s| s.contains("■ end"));
    assert!(
        end.contains("self-correction"),
        "the Sentinel's verdict:\n{end}"
    );
    t.keys("a");
    t.wait("actions refused", |s| {
        s.contains("not available in this view")
    });
    t.keys("{");
    let back = t.wait("the rewind", |s| !s.contains("■ end"));
    assert!(
        !back.contains("self-correction:"),
        "forgotten after the rewind:\n{back}"
    );
    t.keys("q");
    let after = t.wait("exit", |s| s.contains("MAESTRO-EXITED"));
    assert!(after.contains("MAESTRO-EXITED 0"), "{after}");
    let rows: i64 = s
        .conn()
        .query_row("SELECT count(*) FROM orchestration_messages", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(rows, 0, "a replay writes nothing");
}

/// A definition found in the project waits for trust: the pipelines overlay says so,
/// `t` shows its steps in a confirmation, `y` trusts it and it runs.
#[test]
fn an_untrusted_pipeline_is_trusted_from_the_dashboard_after_seeing_its_steps() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let s = crate::common::Scratch::new();
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(s.root().join(".maestro/sentinels")).unwrap();
    std::fs::write(
        s.root().join(".maestro/sentinels/mark.json"),
        r#"{"trigger": {"type": "immediate"}, "steps": [{"type": "command", "command": "touch", "params": {"args": ["trusted-ran"]}}], "safety": {"maxIterations": 1}}"#,
    )
    .unwrap();
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "XDG_DATA_HOME={} {exe} --project {}; sleep 600",
            data.path().display(),
            s.root().display()
        ),
        140,
        40,
    );
    t.wait("the dashboard", |s| s.contains("Tasks ("));
    t.keys("S");
    t.wait("the definition, untrusted", |s| {
        s.contains("mark") && s.contains("untrusted")
    });
    assert!(!s.root().join("trusted-ran").exists());
    t.keys("t");
    let dialog = t.wait("the confirmation with its steps", |s| {
        s.contains("Trust pipeline mark") && s.contains("touch")
    });
    assert!(dialog.contains("trusted-ran"), "{dialog}");
    t.keys("y");
    let end = Instant::now() + Duration::from_secs(30);
    while !s.root().join("trusted-ran").exists() {
        assert!(Instant::now() < end, "the trusted pipeline never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two projects in one dashboard: a projects bar, `alt-2` and `P` to switch, each
/// project's own tasks in the panes, and an anomaly in the project not shown named on
/// the status line.
#[test]
fn two_projects_in_one_dashboard_switch_and_announce() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let parent = tempfile::tempdir().unwrap();
    let alpha = crate::common::Scratch::new_in(parent.path(), "alpha");
    let beta = crate::common::Scratch::new_in(parent.path(), "beta");
    alpha.set_task("task-01", "working");
    beta.set_task("task-07", "needs_review");
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "{exe} --project {} --project {} --stall-after 1h; sleep 600",
            alpha.root().display(),
            beta.root().display()
        ),
        140,
        40,
    );
    let first = t.wait("the projects bar", |s| {
        s.contains("1 alpha") && s.contains("2 beta") && s.contains("task-01")
    });
    assert!(
        !first.contains("task-07"),
        "beta's task is not shown yet:\n{first}"
    );
    t.keys("M-2");
    let second = t.wait("beta shown", |s| s.contains("maestro · beta"));
    assert!(second.contains("task-07"), "{second}");
    assert!(!second.contains("task-01"), "{second}");
    // An anomaly in alpha while beta is shown: said on the status line.
    alpha.append(
        "task-01-status",
        "step 2 self-correction: the tokenizer was wrong [ctx: 20%]\n",
    );
    let told = t.wait("the announcement", |s| {
        s.contains("[alpha]") && s.contains("alt-1")
    });
    assert!(told.contains("task-07"), "beta stays shown:\n{told}");
    // `P` cycles back to alpha, whose anomaly is there.
    t.keys("P");
    let back = t.wait("alpha shown again", |s| s.contains("maestro · alpha"));
    assert!(
        back.contains("Anomalies (1"),
        "alpha's anomaly is in its pane:\n{back}"
    );
    assert!(!back.contains("task-07"), "{back}");
}

/// The demo says on screen when its scenario is over and how to leave.
#[test]
fn the_demo_says_when_it_is_over() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!("{exe} demo --speed 25; echo MAESTRO-EXITED $?; sleep 600"),
        160,
        40,
    );
    t.wait("the end of the scenario", |s| {
        s.contains("the demo is over: q quits")
    });
    t.keys("q");
    let after = t.wait("exit", |s| s.contains("MAESTRO-EXITED"));
    assert!(after.contains("MAESTRO-EXITED 0"), "{after}");
}

/// A long status log on the real dashboard: its history is skimmed at start, yet the
/// status view scrolls to the file's first line, read back from the file, and says so.
#[test]
fn the_status_view_reaches_the_first_line_of_a_long_log() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let s = crate::common::Scratch::new();
    s.set_task("task-01", "working");
    let text = (0..20_000).fold(String::new(), |mut t, i| {
        t.push_str(&format!(
            "entry {i:05} of a long history, read back on demand\n"
        ));
        t
    });
    std::fs::write(s.temp().join("task-01-status"), &text).unwrap();
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "XDG_DATA_HOME={} {exe} --project {} --stall-after 1h; sleep 600",
            s.root().join("data").display(),
            s.root().display()
        ),
        160,
        45,
    );
    t.wait("the last line", |sc| sc.contains("entry 19999"));
    t.keys("2");
    t.keys("v");
    t.keys("g");
    let top = t.wait("the first line, from the file", |sc| {
        sc.contains("entry 00000") && sc.contains("read back from the file")
    });
    assert!(top.contains("line 1 of 20000"), "{top}");
    t.keys("G");
    t.wait("following the end again", |sc| {
        sc.contains("entry 19999") && !sc.contains("read back from the file")
    });
}

/// A subagent caught polling, as `maestro hook --replace-pollers` sees its calls (wait,
/// read of comms.db, wait again, from a Musician's session): the dashboard says so in its
/// status line, with the count, without a key pressed.
#[test]
fn a_stopped_poller_shows_on_the_dashboard() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let s = crate::common::Scratch::new();
    s.set_task("task-03", "working");
    let data = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "XDG_DATA_HOME={} {exe} --project {}; sleep 600",
            data.path().display(),
            s.root().display()
        ),
        160,
        40,
    );
    t.wait("the task", |s| s.contains("task-03"));
    // The session's transcript: its first prompt ties it to task-03.
    let transcript = s.root().join("session-g1.jsonl");
    std::fs::write(
        &transcript,
        "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"/musician task-03\"}}\n",
    )
    .unwrap();
    // Pre and post of each call, as Claude Code sends them; a call's `duration_ms` is
    // the time its look spans.
    let event = |name: &str, command: &str, stdout: &str| {
        serde_json::json!({
            "session_id": "guard-g1", "transcript_path": transcript, "cwd": s.root(),
            "hook_event_name": name, "agent_id": "a1b2c3", "agent_type": "general-purpose",
            "tool_name": "Bash", "tool_input": {"command": command},
            "tool_response": {"stdout": stdout, "stderr": ""}, "duration_ms": 5000,
        })
    };
    let hook = |event: serde_json::Value| {
        let mut child = Command::new(exe)
            .env("XDG_DATA_HOME", data.path())
            .args(["hook", "--replace-pollers", "--project"])
            .arg(s.root())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(
            &mut child.stdin.take().unwrap(),
            event.to_string().as_bytes(),
        )
        .unwrap();
        let out = child.wait_with_output().unwrap();
        crate::common::assert_success(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let read = "sqlite3 comms.db 'SELECT message FROM orchestration_messages'";
    let mut answers = Vec::new();
    for command in [("sleep 5", ""), (read, "")].repeat(3) {
        let answer = hook(event("PreToolUse", command.0, command.1));
        if answer.is_empty() {
            hook(event("PostToolUse", command.0, command.1));
        }
        answers.push(answer);
    }
    assert!(answers[..5].iter().all(String::is_empty), "{answers:?}");
    assert!(answers[5].contains("\"deny\""), "{answers:?}");
    let screen = t.wait("the stop in the status line", |s| {
        s.contains("1 LLM poller replaced")
    });
    assert!(
        screen.contains("musician-watcher of task-03 stopped in its loop"),
        "{screen}"
    );
}

/// A box titled "answer (any key closes)" closes on any key, and only the box: `q` in it
/// leaves the dashboard running; the next `q` quits.
#[test]
fn q_in_the_answer_box_closes_the_box_not_the_dashboard() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let s = crate::common::Scratch::new();
    s.set_task("task-03", "working");
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "{exe} --project {}; echo MAESTRO-ENDED; sleep 600",
            s.root().display()
        ),
        60,
        20,
    );
    t.wait("the task", |s| s.contains("task-03"));
    // Approve a task that is not in review: the refusal is longer than the line.
    t.keys("a");
    t.wait("the answer box", |s| s.contains("any key closes"));
    t.keys("q");
    let screen = t.wait("the box closed", |s| !s.contains("any key closes"));
    assert!(
        !screen.contains("MAESTRO-ENDED"),
        "q closed the box only:\n{screen}"
    );
    assert!(screen.contains("task-03"), "{screen}");
    t.keys("q");
    t.wait("the dashboard quit", |s| s.contains("MAESTRO-ENDED"));
}
