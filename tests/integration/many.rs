//! Several projects in one headless maestro.
#![allow(clippy::unwrap_used)]

use crate::common::{Running, Scratch, event, maestro};

#[test]
fn two_projects_in_one_run_each_event_names_its_project() {
    let parent = tempfile::tempdir().unwrap();
    let a = Scratch::new_in(parent.path(), "alpha");
    let b = Scratch::new_in(parent.path(), "beta");
    for s in [&a, &b] {
        s.set_task("task-01", "working");
    }
    let mut cmd = maestro();
    cmd.current_dir(parent.path()).args([
        "--no-tui",
        "--json",
        "--project",
        "alpha",
        "--project",
        "beta",
    ]);
    let mut m = Running::spawn(cmd);
    for name in ["alpha", "beta"] {
        m.wait_json("each project's task", |v| {
            event(v) == "task" && v["task_id"] == "task-01" && v["project"] == name
        });
    }
    a.append("task-01-status", "step 2 self-correction: in alpha\n");
    let one = m.wait_json("alpha's anomaly", |v| event(v) == "anomaly");
    assert_eq!(one["project"], "alpha", "{one}");
    b.set_task("task-02", "working");
    m.wait_json("beta's new task", |v| {
        event(v) == "task" && v["task_id"] == "task-02" && v["project"] == "beta"
    });
    b.append("task-02-deviations", "High: in beta\n");
    let two = m.wait_json("beta's anomaly", |v| event(v) == "anomaly");
    assert_eq!(two["project"], "beta", "{two}");
    assert!(
        m.seen.iter().all(|l| l.contains("\"project\":")),
        "every line names its project"
    );
}

#[test]
fn text_lines_carry_the_project_and_one_project_is_unchanged() {
    let parent = tempfile::tempdir().unwrap();
    let a = Scratch::new_in(parent.path(), "alpha");
    let b = Scratch::new_in(parent.path(), "beta");
    a.set_task("task-01", "working");
    a.append("task-01-status", "step 1 self-correction: at start\n");
    let mut cmd = maestro();
    cmd.current_dir(parent.path())
        .args(["--no-tui", "--project", "alpha", "--project", "beta"]);
    let mut m = Running::spawn(cmd);
    m.wait_line("alpha's report, prefixed", |l| {
        l == "[alpha] Anomaly: self-correction"
    });
    // A subcommand takes one project.
    let out = maestro()
        .current_dir(parent.path())
        .args(["doctor", "--project", "alpha", "--project", "beta"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // One project: no project field, exactly as before.
    let mut one = b.headless(&[]);
    let v = one.wait_json("a task", |v| event(v) == "task");
    assert!(v.get("project").is_none(), "{v}");
}

/// `[projects]` in the configuration names the projects watched when no `--project`
/// is given; events carry those names.
#[test]
fn the_configuration_names_the_projects() {
    let parent = tempfile::tempdir().unwrap();
    let a = Scratch::new_in(parent.path(), "alpha");
    let b = Scratch::new_in(parent.path(), "beta");
    a.set_task("task-01", "working");
    b.set_task("task-02", "working");
    let config = parent.path().join("maestro.toml");
    std::fs::write(
        &config,
        format!(
            "[projects]\nparser = {:?}\napi = {:?}\n",
            a.root().display().to_string(),
            b.root().display().to_string()
        ),
    )
    .unwrap();
    let mut cmd = maestro();
    cmd.current_dir(parent.path())
        .args(["--no-tui", "--json", "--config"])
        .arg(&config);
    let mut m = Running::spawn(cmd);
    m.wait_all(
        "each project's task, by its configured name",
        &[
            &|v| event(v) == "task" && v["task_id"] == "task-01" && v["project"] == "parser",
            &|v| event(v) == "task" && v["task_id"] == "task-02" && v["project"] == "api",
        ],
    );
}

/// Two projects' JSON escapes what one project's does: a message holding U+202E, U+009B,
/// DEL and U+200B reaches stdout as `\u` escapes on both paths, the same line otherwise.
#[test]
fn two_projects_escape_what_one_project_escapes() {
    let parent = tempfile::tempdir().unwrap();
    let a = Scratch::new_in(parent.path(), "alpha");
    let b = Scratch::new_in(parent.path(), "beta");
    let hostile = "ok \u{202e}gnp.exe \u{9b}31m \u{7f} zero\u{200b}width";
    for s in [&a, &b] {
        s.conn()
            .execute(
                "INSERT INTO orchestration_messages (task_id, from_session, message, message_type) VALUES ('task-01', 'x', ?1, 'instruction')",
                [hostile],
            )
            .unwrap();
    }
    let line_of = |args: &[&str]| {
        let mut cmd = maestro();
        cmd.current_dir(parent.path())
            .args(["--no-tui", "--json"])
            .args(args);
        let mut m = Running::spawn(cmd);
        let line = m.wait_line("the message", |l| l.contains("\"event\":\"message\""));
        m.signal(nix::sys::signal::Signal::SIGTERM);
        m.wait_exit();
        line
    };
    let one = line_of(&["--project", "alpha"]);
    let two = line_of(&["--project", "alpha", "--project", "beta"]);
    for (path, line) in [("one project", &one), ("two projects", &two)] {
        assert!(
            !line
                .chars()
                .any(|c| c.is_control() || maestro::core::text::is_invisible_format(c)),
            "{path}: {line:?}"
        );
        for escaped in ["\\u202e", "\\u009b", "\\u007f", "\\u200b"] {
            assert!(line.contains(escaped), "{path} escapes {escaped}: {line}");
        }
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["message"], hostile, "{path}: the data is kept");
    }
}
