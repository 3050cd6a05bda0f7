//! The project given the ways people type it: relative, `.`, `..`, through a symlink,
//! with spaces and non-ASCII in its name. Every form must hear lines appended after
//! start (the kernel names files by absolute paths; a relative root never matched them).
#![allow(clippy::unwrap_used)]

use std::path::Path;

use crate::common::{Running, Scratch, assert_success, event, maestro, walk};

/// Starts headless maestro from `cwd` with `--project project_arg`, then appends a
/// self-correction after start and waits for its report.
fn hears_appended_lines(s: &Scratch, cwd: &Path, project_arg: &str) {
    s.set_task("task-01", "working");
    s.append("task-01-status", "step 1 started [ctx: 10%]\n");
    let mut cmd = maestro();
    cmd.current_dir(cwd)
        .args(["--no-tui", "--json", "--project", project_arg]);
    let mut m = Running::spawn(cmd);
    m.wait_json("the task from the database", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    // The temp source is following once it says so (or its history was read).
    s.append(
        "task-01-status",
        "step 2 self-correction: fixed the parser [ctx: 12%]\n",
    );
    let a = m.wait_json("the appended self-correction", |v| event(v) == "anomaly");
    assert_eq!(
        a["task_id"],
        "task-01",
        "{project_arg} from {}",
        cwd.display()
    );
    assert_eq!(a["anomaly"], "self-correction");
}

#[test]
fn a_relative_project_hears_appended_lines() {
    let parent = tempfile::tempdir().unwrap();
    let s = Scratch::new_in(parent.path(), "rel");
    hears_appended_lines(&s, parent.path(), "rel");
}

#[test]
fn dot_from_inside_the_project_hears_appended_lines() {
    let s = Scratch::new();
    hears_appended_lines(&s, s.root(), ".");
}

#[test]
fn dot_dot_from_a_subfolder_hears_appended_lines() {
    let s = Scratch::new();
    let sub = s.root().join("src");
    std::fs::create_dir(&sub).unwrap();
    hears_appended_lines(&s, &sub, "..");
}

#[test]
fn a_symlinked_project_hears_appended_lines() {
    let parent = tempfile::tempdir().unwrap();
    let s = Scratch::new_in(parent.path(), "real");
    std::os::unix::fs::symlink(s.root(), parent.path().join("link")).unwrap();
    hears_appended_lines(&s, parent.path(), "link");
}

#[test]
fn a_folder_with_spaces_and_non_ascii_hears_appended_lines() {
    let parent = tempfile::tempdir().unwrap();
    let s = Scratch::new_in(parent.path(), "my projet été");
    hears_appended_lines(&s, parent.path(), "my projet été");
}

#[test]
fn task_and_doctor_commands_accept_a_relative_project() {
    let parent = tempfile::tempdir().unwrap();
    let s = Scratch::new_in(parent.path(), "rel");
    s.set_task("task-01", "working");
    s.append("task-01-status", "step 1 started [ctx: 20%]\n");
    let out = maestro()
        .current_dir(parent.path())
        .args(["task", "headroom", "task-01", "--json", "--project", "rel"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(v["task_id"], "task-01", "{v}");
    let out = maestro()
        .current_dir(s.root())
        .args(["doctor", "--json", "--project", "."])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    // doctor names the canonical project, never the "." it was given.
    let canonical = std::fs::canonicalize(s.root()).unwrap();
    assert!(text.contains(canonical.to_str().unwrap()), "{text}");
}

#[test]
fn a_musician_watcher_started_with_dot_hears_its_message() {
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let data = tempfile::tempdir().unwrap();
    let mut cmd = maestro();
    cmd.current_dir(s.root())
        .env("XDG_DATA_HOME", data.path())
        .args(["musician", "watch", "task-03", "--json", "--project", "."]);
    let mut w = Running::spawn(cmd);
    // The watcher claims its slot before it listens: wait for the claim file.
    let end = std::time::Instant::now() + crate::common::DEADLINE;
    while !walk(data.path())
        .iter()
        .any(|p| p.extension().is_some_and(|e| e == "background"))
    {
        assert!(std::time::Instant::now() < end, "the watcher never claimed");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    s.conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-03', 'task-00', 'go on', 'instruction')",
            [],
        )
        .unwrap();
    let v = w.wait_json("the message", |v| v["event"] == "message");
    assert_eq!(v["message"]["message"], "go on");
}

#[test]
fn the_dashboard_started_with_dot_shows_an_appended_anomaly() {
    if std::process::Command::new("tmux")
        .arg("-V")
        .output()
        .is_err()
    {
        eprintln!("skipping: tmux is not installed (.ci/run installs it)");
        return;
    }
    let s = Scratch::new();
    s.set_task("task-01", "working");
    s.append("task-01-status", "step 1 started [ctx: 10%]\n");
    let data = tempfile::tempdir().unwrap();
    let socket = data.path().join("tmux.sock");
    let exe = env!("CARGO_BIN_EXE_maestro");
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(args)
            .output()
            .unwrap()
    };
    let command = format!(
        "cd {} && XDG_DATA_HOME={} {exe} --project .; sleep 600",
        s.root().display(),
        data.path().display()
    );
    let started = std::process::Command::new("tmux")
        .arg("-S")
        .arg(&socket)
        .args([
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "dot",
            "-x",
            "140",
            "-y",
            "40",
        ])
        .arg(&command)
        .env("TERM", "xterm-256color")
        .status()
        .unwrap();
    assert!(started.success());
    let screen =
        || String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "dot"]).stdout).into_owned();
    let wait = |what: &str, pred: &dyn Fn(&str) -> bool| {
        let end = std::time::Instant::now() + crate::common::DEADLINE;
        loop {
            let now = screen();
            if pred(&now) {
                return now;
            }
            assert!(
                std::time::Instant::now() < end,
                "timed out waiting for {what}:\n{now}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    wait("the task", &|sc| sc.contains("task-01"));
    s.append(
        "task-01-status",
        "step 2 self-correction: rewrote it [ctx: 12%]\n",
    );
    wait("the anomaly", &|sc| sc.contains("self-correction"));
    tmux(&["kill-server"]);
}

#[test]
fn replay_of_a_relative_project_rebuilds_its_run() {
    let parent = tempfile::tempdir().unwrap();
    let s = Scratch::new_in(parent.path(), "rel");
    s.set_task("task-01", "working");
    s.append(
        "task-01-status",
        "step 1 started [ctx: 10%]\nstep 2 self-correction: rewrote it [ctx: 12%]\n",
    );
    let data = tempfile::tempdir().unwrap();
    let out = maestro()
        .current_dir(parent.path())
        .env("XDG_DATA_HOME", data.path())
        .args(["replay", "--no-tui", "--json", "--project", "rel"])
        .output()
        .unwrap();
    assert_success(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("\"anomaly\":\"self-correction\"")),
        "{text}"
    );
}
