//! `maestro task …` on a real database and real processes.
#![allow(clippy::unwrap_used)]

use crate::common::{Relauncher, Scratch, maestro};

fn run(s: &Scratch, args: &[&str]) -> (i32, String, String) {
    let out = maestro()
        .args(args)
        .arg("--project")
        .arg(s.root())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn state(s: &Scratch, id: &str) -> String {
    s.conn()
        .query_row(
            "SELECT state FROM orchestration_tasks WHERE task_id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
}

/// The newest message's task, type and text; it must read as the Conductor's, as the
/// Musicians' documented queries (`from_session = 'task-00'`) expect. The operator's
/// mark is taken off the text.
fn last_message(s: &Scratch) -> (String, String, String) {
    let (task, kind, from, text): (String, String, String, String) = s
        .conn()
        .query_row(
            "SELECT task_id, message_type, from_session, message FROM orchestration_messages ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        from, "task-00",
        "an operator message is written as the Conductor's"
    );
    let text = text
        .strip_prefix(maestro::core::store::OPERATOR_MARK)
        .unwrap_or_else(|| panic!("the text says it came from the operator: {text:?}"))
        .to_owned();
    (task, kind, text)
}

#[test]
fn review_answers_move_the_state_and_leave_a_message() {
    let s = Scratch::new();
    s.set_task("task-03", "needs_review");
    let (code, out, err) = run(&s, &["task", "approve", "task-03", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["state"].as_str(), v["prev_state"].as_str()),
        (Some("review_approved"), Some("needs_review"))
    );
    assert_eq!(state(&s, "task-03"), "review_approved");
    assert_eq!(
        last_message(&s),
        ("task-03".into(), "approval".into(), "Approved.".into())
    );

    // Not in needs_review any more: refused, nothing written.
    let (code, _, err) = run(&s, &["task", "reject", "task-03", "--message", "no"]);
    assert_eq!(code, 1);
    assert!(err.contains("review_approved"), "{err}");
    assert_eq!(state(&s, "task-03"), "review_approved");

    s.set_task("task-04", "needs_review");
    let file = s.root().join("why.txt");
    std::fs::write(&file, "Add a migration path.\nThen resubmit.").unwrap();
    let (code, _, err) = run(
        &s,
        &[
            "task",
            "reject",
            "task-04",
            "--message-file",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(state(&s, "task-04"), "review_failed");
    assert_eq!(last_message(&s).2, "Add a migration path.\nThen resubmit.");

    s.set_task("task-05", "error");
    assert_eq!(
        run(
            &s,
            &["task", "fix", "task-05", "--message", "restore the newline"]
        )
        .0,
        0
    );
    assert_eq!(state(&s, "task-05"), "fix_proposed");
    assert_eq!(last_message(&s).1, "fix_proposal");

    assert_eq!(
        run(
            &s,
            &[
                "task",
                "instruct",
                "task-05",
                "--message",
                "also update the docs"
            ]
        )
        .0,
        0
    );
    assert_eq!(last_message(&s).1, "instruction");
    assert_eq!(state(&s, "task-05"), "fix_proposed");
}

#[test]
fn bad_task_commands_are_refused_clearly() {
    let s = Scratch::new();
    s.set_task("task-03", "needs_review");
    for (args, code, needle) in [
        (&["task", "reject", "task-03"][..], 2, "--message"),
        (&["task", "approve", "../etc"], 2, "not a Musician task id"),
        (&["task", "approve", "task-00"], 2, "not a Musician task id"),
        (
            &["task", "approve", "task-99"],
            1,
            "not in orchestration_tasks",
        ),
        (
            &["task", "reject", "task-03", "--message", "  "],
            2,
            "empty",
        ),
    ] {
        let (got, _, err) = run(&s, args);
        assert_eq!(got, code, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(state(&s, "task-03"), "needs_review");
}

#[test]
fn headroom_exit_codes_follow_the_last_context_value() {
    let s = Scratch::new();
    assert_eq!(run(&s, &["task", "headroom", "task-01"]).0, 1, "no data");
    for (line, code) in [
        ("step 1 [ctx: 20%]\n", 0),
        ("step 2 [ctx: 65%]\nno value\n", 1),
        ("step 3 [ctx: 85%]\n", 2),
    ] {
        s.append("task-01-status", line);
        let (got, out, _) = run(&s, &["task", "headroom", "task-01", "--json"]);
        assert_eq!(got, code, "{line}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert!(v["context"].is_u64());
        assert_eq!(v["current"], v["context"]);
    }
}

/// The report of `check-context-headroom.sh`, figure for figure, through the binary.
#[test]
fn headroom_prints_the_ecosystem_scripts_report() {
    let s = Scratch::new();
    s.append(
        "task-03-status",
        "bootstrap started [ctx: 5%]\ntask claimed [ctx: 8%]\nstep 1 of 4 started [ctx: 10%]\n\
         step 1 agent 1 launched [ctx: 12%]\nstep 1 agent 1 returned [ctx: 25%]\n\
         step 1 agent 2 launched [ctx: 26%]\nstep 1 completed [ctx: 30%]\nstep 2 started [ctx: 31%]\n\
         step 2 agent 1 launched [ctx: 40%]\nstep 2 agent 1 returned [ctx: 62%]\n",
    );
    let (code, out, _) = run(&s, &["task", "headroom", "task-03"]);
    assert_eq!(code, 1, "62 %: caution");
    // Hand computed: 10 values from 5 to 62: 57*10/9 = 63 -> 6.3 per entry; 2 agents
    // returned: 285 -> 28.5 per agent; headroom 18; 180/285 = 0 agents left.
    assert_eq!(
        out,
        "=== Context Headroom: task-03 ===\n\
         Current:     62% (entry 10 of status file)\n\
         Trajectory:  +6.3% per entry avg\n\
         Headroom:    18% remaining to 80% ceiling\n\
         Agents:      2 completed, 1 in-flight (~28.5% per agent avg)\n\
         Est. Agents Left: ~0 agents fit in remaining budget\n\
         Steps:       1 of 4 completed, step 2 in progress\n\
         Self-Correction: NO\n\
         === RESULT: CAUTION (context at 62%) ===\n"
    );
    let (code, out, _) = run(&s, &["task", "headroom", "task-03", "--json"]);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (
            v["current"].as_i64(),
            v["headroom"].as_i64(),
            v["per_entry"].as_f64(),
            v["per_agent"].as_f64()
        ),
        (Some(62), Some(18), Some(6.3), Some(28.5))
    );
    assert_eq!(
        (
            v["agents_completed"].as_u64(),
            v["agents_in_flight"].as_u64(),
            v["agents_left"].as_i64()
        ),
        (Some(2), Some(1), Some(0))
    );
    assert_eq!(v["level"], "caution");
}

/// A stand-in for a kitty window the Conductor launched: `sleep` run under the name
/// `kitty` (the program name a window is recognised by).
fn kitty_window(s: &Scratch) -> std::process::Child {
    let bin = s.root().join("window-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .unwrap();
    let _ = std::os::unix::fs::symlink(sleep, bin.join("kitty"));
    std::process::Command::new(bin.join("kitty"))
        .arg("60")
        .spawn()
        .unwrap()
}

#[test]
fn freeze_thaw_and_kill_act_on_the_recorded_window() {
    let s = Scratch::new();
    s.set_task("task-02", "working");
    let mut window = kitty_window(&s);
    std::fs::write(
        s.temp().join("musician-task-02.pid"),
        format!("{}\n", window.id()),
    )
    .unwrap();
    let proc_state = |pid: u32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap()
    };
    // Stopping a process asks like killing it.
    assert_eq!(run(&s, &["task", "freeze", "task-02"]).0, 2);
    assert_eq!(run(&s, &["task", "freeze", "task-02", "--yes"]).0, 0);
    // The signal is sent when the command returns; the kernel stops the process soon after.
    let end = std::time::Instant::now() + crate::common::DEADLINE;
    while proc_state(window.id()) != 'T' && std::time::Instant::now() < end {
        std::thread::yield_now();
    }
    assert_eq!(proc_state(window.id()), 'T');
    assert_eq!(run(&s, &["task", "thaw", "task-02"]).0, 0);
    assert_ne!(proc_state(window.id()), 'T');
    // Destructive without a terminal: needs --yes.
    let (code, _, err) = run(&s, &["task", "kill", "task-02"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--yes"));
    assert!(window.try_wait().unwrap().is_none(), "still running");
    assert_eq!(run(&s, &["task", "kill", "task-02", "--yes"]).0, 0);
    assert!(window.wait().unwrap().code().is_none(), "ended by a signal");
    assert_eq!(run(&s, &["task", "freeze", "task-09"]).0, 1, "no PID file");
}

#[test]
fn a_crashed_musician_is_relaunched_by_the_handoff_procedure() {
    let r = Relauncher::new();
    r.s.set_task("task-02", "working");
    r.s.conn()
        .execute(
            "UPDATE orchestration_tasks SET worked_by = 'musician-task-02', last_heartbeat = datetime('now', '-20 minutes') WHERE task_id = 'task-02'",
            [],
        )
        .unwrap();
    r.s.append(
        "task-02-status",
        "step 1 started [ctx: 10%]\nstep 1 completed [ctx: 30%]\nstep 2 started [ctx: 41%]\n",
    );
    r.s.append("task-02-deviations", "Low: renamed a helper\n");
    // The window is alive but stuck: the PID is checked and the window killed.
    let mut old = kitty_window(&r.s);
    std::fs::write(
        r.s.temp().join("musician-task-02.pid"),
        old.id().to_string(),
    )
    .unwrap();

    let v = r.relaunch("task-02");
    assert!(
        old.wait().unwrap().code().is_none(),
        "the old window was ended by a signal"
    );
    assert_eq!(
        (
            v["handoff"].as_str(),
            v["previous"].as_str(),
            v["next"].as_str(),
            v["prev_state"].as_str()
        ),
        (
            Some("crash"),
            Some("musician-task-02"),
            Some("musician-task-02-S2"),
            Some("working")
        )
    );
    // The whole row: fix_proposed, the next session, a fresh heartbeat.
    assert_eq!(
        r.row("task-02"),
        ("fix_proposed".into(), Some("musician-task-02-S2".into()), 1)
    );
    let (kind, from, text) = r.last_message();
    assert_eq!((kind.as_str(), from.as_str()), ("handoff", "task-00"));
    assert!(text.contains("CRASH DETECTED"), "{text}");
    assert!(text.contains("Last completed: step 1 completed"), "{text}");
    assert!(
        text.contains("Context at crash: 41%") && text.contains("Deviations logged: 1"),
        "{text}"
    );
    // A fresh session in a window named for it; its PID recorded.
    let argv = r.argv();
    assert_eq!(argv[2..4], ["--title", "Musician: task-02 (S2)"]);
    assert!(
        !argv.contains(&"--resume".to_owned()),
        "a handoff starts a fresh session: {argv:?}"
    );
    let prompt = argv.last().unwrap();
    assert!(prompt.starts_with("/musician task-02\n"), "{prompt}");
    assert!(
        prompt.contains("New session will be: musician-task-02-S2"),
        "{prompt}"
    );
    let recorded = std::fs::read_to_string(r.s.temp().join("musician-task-02.pid")).unwrap();
    assert_eq!(recorded.trim(), v["pid"].as_i64().unwrap().to_string());
    Relauncher::end_window(&v);
}

#[test]
fn clean_and_dirty_handoffs_and_the_succession_over_three_relaunches() {
    let r = Relauncher::new();
    r.s.set_task("task-05", "exited");
    r.s.conn()
        .execute("UPDATE orchestration_tasks SET worked_by = 'musician-task-05' WHERE task_id = 'task-05'", [])
        .unwrap();
    std::fs::write(r.s.temp().join("task-05-HANDOFF"), "where I stopped\n").unwrap();
    r.s.append(
        "task-05-status",
        "step 3 started [ctx: 72%]\nHANDOFF written [ctx: 78%]\n",
    );

    // Clean: HANDOFF and 78 %; no window is running (nothing to kill).
    let v = r.relaunch("task-05");
    assert_eq!(
        (v["handoff"].as_str(), v["old_pid"].as_i64()),
        (Some("clean"), None)
    );
    assert_eq!(
        r.row("task-05"),
        ("fix_proposed".into(), Some("musician-task-05-S2".into()), 1)
    );
    let (kind, _, text) = r.last_message();
    assert_eq!(kind, "handoff");
    assert!(
        text.contains("HANDOFF RECEIVED") && text.contains("Context usage: 78%"),
        "{text}"
    );
    assert!(!text.contains("Re-run"), "{text}");
    assert_eq!(r.argv()[3], "Musician: task-05 (S2)");
    Relauncher::end_window(&v);

    // Dirty: the context went above 80 % before the next exit.
    r.s.append("task-05-status", "step 4 started [ctx: 86%]\n");
    r.s.set_task("task-05", "exited");
    let v = r.relaunch("task-05");
    assert_eq!(v["handoff"], "dirty");
    assert_eq!(r.row("task-05").1.as_deref(), Some("musician-task-05-S3"));
    let (_, _, text) = r.last_message();
    assert!(text.contains("Re-run ALL verification tests"), "{text}");
    Relauncher::end_window(&v);

    // A third one: S4.
    let v = r.relaunch("task-05");
    assert_eq!(v["next"], "musician-task-05-S4");
    assert_eq!(r.argv()[3], "Musician: task-05 (S4)");
    Relauncher::end_window(&v);
}

/// Another process holds the write lock for 2 s: the approval waits for it (one
/// `BEGIN IMMEDIATE` with a busy timeout) instead of failing with "database is locked".
#[test]
fn an_action_under_another_process_write_lock_waits_and_succeeds() {
    let s = Scratch::new();
    s.set_task("task-03", "needs_review");
    let mut holder = s.conn();
    let tx = holder
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    tx.execute(
        "UPDATE orchestration_tasks SET last_error = 'held' WHERE task_id = 'task-00'",
        [],
    )
    .unwrap();
    let approve = std::thread::spawn({
        let root = s.root().to_owned();
        move || {
            maestro()
                .args(["task", "approve", "task-03", "--json", "--project"])
                .arg(root)
                .output()
                .unwrap()
        }
    });
    std::thread::sleep(std::time::Duration::from_secs(2));
    tx.commit().unwrap();
    let out = approve.join().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(state(&s, "task-03"), "review_approved");
}

#[test]
fn a_pid_file_naming_a_foreign_process_is_refused_and_the_process_left_alone() {
    let s = Scratch::new();
    s.set_task("task-02", "working");
    let mut foreign = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(
        s.temp().join("musician-task-02.pid"),
        format!("{}\n", foreign.id()),
    )
    .unwrap();
    for action in ["kill", "freeze", "thaw"] {
        let (code, _, err) = run(&s, &["task", action, "task-02", "--yes"]);
        assert_eq!(code, 1, "{action}: {err}");
        assert!(
            err.contains("is not acted on") && err.contains("sleep 60"),
            "{action}: {err}"
        );
    }
    assert!(foreign.try_wait().unwrap().is_none(), "still running");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", foreign.id())).unwrap();
    assert_ne!(
        stat[stat.rfind(')').unwrap() + 2..].chars().next(),
        Some('T')
    );
    // maestro's own parent (the shell or terminal it runs in) is refused too.
    std::fs::write(
        s.temp().join("musician-task-02.pid"),
        format!("{}\n", std::process::id()),
    )
    .unwrap();
    let (code, _, err) = run(&s, &["task", "kill", "task-02", "--yes"]);
    assert_eq!(code, 1, "{err}");
    foreign.kill().unwrap();
    let _ = foreign.wait();
}

#[test]
fn a_symlinked_or_fifo_pid_file_is_not_followed() {
    let s = Scratch::new();
    s.set_task("task-02", "working");
    let secret = s.root().join("secret");
    std::fs::write(&secret, "12345\n").unwrap();
    std::os::unix::fs::symlink(&secret, s.temp().join("musician-task-02.pid")).unwrap();
    let (code, _, err) = run(&s, &["task", "kill", "task-02", "--yes"]);
    assert_eq!(code, 1);
    assert!(err.contains("symbolic link"), "{err}");
    std::fs::remove_file(s.temp().join("musician-task-02.pid")).unwrap();
    nix::unistd::mkfifo(
        &s.temp().join("musician-task-02.pid"),
        nix::sys::stat::Mode::S_IRWXU,
    )
    .unwrap();
    // Answers at once instead of waiting for a writer.
    let (code, _, err) = run(&s, &["task", "freeze", "task-02", "--yes"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a regular file"), "{err}");
}
