//! A remote project watched over its link: events as from a local one, actions on its
//! host, a dropped connection caught up with nothing lost or doubled.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::common::{Scratch, event, maestro};
use crate::metrics::{free_port, scrape_until, value};
use crate::remote::{address, sshd, watch, watch_with};

fn linked(v: &serde_json::Value, status: &str) -> bool {
    event(v) == "link" && v["status"] == status
}

#[test]
fn an_anomaly_on_the_remote_host_is_reported_within_a_second() {
    let Some(sshd) = sshd("an_anomaly_on_the_remote_host_is_reported_within_a_second") else {
        return;
    };
    let project = Scratch::new();
    project.set_task("task-01", "working");
    project.append("task-01-status", "step 1 started [ctx: 10%]\n");
    let mut m = watch(&sshd.config(None, "ssh_config"), &project);
    let up = m.wait_json("the link up", |v| linked(v, "up"));
    assert_eq!(up["project"], address(&project), "{up}");
    m.wait_json("the remote task", |v| {
        event(v) == "task" && v["task_id"] == "task-01" && v["state"] == "working"
    });
    // The first line is through the link: the next one is timed.
    m.wait_json("a quiet start", |v| {
        event(v) == "session" || event(v) == "source"
    });
    project.append(
        "task-01-status",
        "step 2 self-correction: redo [ctx: 12%]\n",
    );
    let anomaly = m.wait_json_within("the remote anomaly", Duration::from_secs(1), |v| {
        event(v) == "anomaly"
    });
    assert_eq!(anomaly["task_id"], "task-01", "{anomaly}");
    assert_eq!(anomaly["anomaly"], "self-correction");
    assert_eq!(anomaly["project"], address(&project));
}

/// The ssh process killed: the project is `down`, then `retrying`, then `up`; what
/// happened meanwhile (an anomaly, a message, a state change) is told once, and what
/// was told before is not told again.
#[test]
fn a_killed_ssh_is_reconnected_and_caught_up_without_loss_or_doubles() {
    let Some(sshd) = sshd("a_killed_ssh_is_reconnected_and_caught_up") else {
        return;
    };
    let project = Scratch::new();
    project.set_task("task-01", "working");
    project.append(
        "task-01-status",
        "step 1 self-correction: before [ctx: 10%]\n",
    );
    project.append("task-01-deviations", "High: before the drop\n");
    let mut m = watch(&sshd.config(None, "ssh_config"), &project);
    m.wait_json("the link up", |v| linked(v, "up"));
    m.wait_all(
        "the anomalies already in the files",
        &[
            &|v| event(v) == "anomaly" && v["anomaly"] == "self-correction",
            &|v| event(v) == "anomaly" && v["anomaly"] == "high-deviation",
        ],
    );
    insert_message(&project, "before");
    m.wait_json("the first message", |v| event(v) == "message");

    kill_ssh(&m);
    let down = m.wait_json("the link down", |v| linked(v, "down"));
    assert!(
        down["detail"].as_str().unwrap().contains("signal 9"),
        "{down}"
    );
    // While it is down: new trouble on the host.
    project.append(
        "task-01-status",
        "step 2 self-correction: during the drop [ctx: 12%]\n",
    );
    project.append("task-01-deviations", "High: during the drop\n");
    insert_message(&project, "during");
    project.set_task("task-01", "needs_review");

    m.wait_json("retrying", |v| linked(v, "retrying"));
    m.wait_json("the link up again", |v| linked(v, "up"));
    m.wait_all(
        "what happened while it was down",
        &[
            &|v| {
                event(v) == "anomaly"
                    && v["detail"].as_str().unwrap().contains("during the drop")
                    && v["anomaly"] == "self-correction"
            },
            &|v| {
                event(v) == "anomaly"
                    && v["detail"].as_str().unwrap().contains("during the drop")
                    && v["anomaly"] == "high-deviation"
            },
            &|v| event(v) == "message" && v["message"] == "during",
            &|v| event(v) == "task" && v["state"] == "needs_review" && v["prev_state"] == "working",
        ],
    );
    // A line after the catch-up marks the end: everything before it has been printed.
    project.append("task-01-deviations", "High: the end marker\n");
    m.wait_json("the marker", |v| {
        event(v) == "anomaly" && v["detail"].as_str().unwrap().contains("end marker")
    });
    let count = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        m.seen
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| pred(v))
            .count()
    };
    assert_eq!(count(&|v| event(v) == "anomaly"), 5, "{:#?}", m.seen);
    assert_eq!(count(&|v| event(v) == "message"), 2, "{:#?}", m.seen);
    assert_eq!(
        count(&|v| event(v) == "task" && v["task_id"] == "task-01"),
        2,
        "first seen, then the change made while down: {:#?}",
        m.seen
    );
    assert_eq!(count(&|v| event(v) == "stale"), 0);
}

/// `maestro task approve --project ssh://…` is carried out on the host, with the
/// same result and refusal as locally; a dashboard's request over the link too.
#[test]
fn approve_on_a_remote_task_changes_the_remote_database() {
    let Some(sshd) = sshd("approve_on_a_remote_task_changes_the_remote_database") else {
        return;
    };
    let project = Scratch::new();
    project.set_task("task-02", "needs_review");
    project.set_task("task-03", "working");
    let config = sshd.config(None, "ssh_config");
    let remote = address(&project);
    let run = |args: &[&str]| {
        maestro()
            .args(args)
            .arg("--config")
            .arg(&config)
            .args(["--project", &remote])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[
        "task",
        "approve",
        "task-02",
        "--message",
        "ship it; rm -rf ~ $(x)",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let done: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["state"], "review_approved", "{done}");
    let (state, message): (String, String) = project
        .conn()
        .query_row(
            "SELECT t.state, m.message FROM orchestration_tasks t JOIN orchestration_messages m ON m.task_id = t.task_id WHERE t.task_id = 'task-02'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(state, "review_approved");
    // The message reached the database as written (as a local approve writes it): no
    // shell read it on the way.
    assert_eq!(message, "[operator via maestro] ship it; rm -rf ~ $(x)");
    // The same refusal as locally, with its exit status.
    let refused = run(&["task", "approve", "task-03"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("task-03"),
        "{refused:?}"
    );
    // A kill refused there as it is here: the same words, the same status.
    let kill = run(&["task", "kill", "task-03"]);
    let here = maestro()
        .args(["task", "kill", "task-03", "--project"])
        .arg(project.root())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(kill.status.code(), here.status.code(), "{kill:?}");
    assert_eq!(kill.stderr, here.stderr);
}

/// `maestro_remote_up{project}` follows the link; while it is down the heartbeat ages
/// are left out (unknown), not shown growing.
#[test]
fn the_link_is_a_metric() {
    let Some(sshd) = sshd("the_link_is_a_metric") else {
        return;
    };
    let project = Scratch::new();
    project.set_task("task-01", "working");
    let port = free_port();
    let mut m = watch_with(
        &sshd.config(None, "ssh_config"),
        &project,
        &["--metrics", &port.to_string()],
    );
    m.wait_json("the link up", |v| linked(v, "up"));
    let remote = address(&project);
    let labels = [("project", remote.as_str())];
    scrape_until(port, "remote up", |s| {
        value(s, "maestro_remote_up", &labels) == Some(1.0)
            && value(
                s,
                "maestro_task_heartbeat_age_seconds",
                &[("task", "task-01")],
            )
            .is_some()
    });
    kill_ssh(&m);
    m.wait_json("the link down", |v| linked(v, "down"));
    scrape_until(port, "remote down, ages unknown", |s| {
        value(s, "maestro_remote_up", &labels) == Some(0.0)
            && value(
                s,
                "maestro_task_heartbeat_age_seconds",
                &[("task", "task-01")],
            )
            .is_none()
    });
}

/// Kills the link's ssh (a child of maestro), not the remote maestro.
fn kill_ssh(m: &crate::common::Running) {
    let ssh = children(m.child.id())
        .into_iter()
        .find(|pid| comm(*pid) == "ssh")
        .expect("maestro runs ssh");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ssh as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

fn insert_message(project: &Scratch, text: &str) {
    project
        .conn()
        .execute(
            "INSERT INTO orchestration_messages (task_id, from_session, message_type, message) VALUES ('task-01', 'S1', 'instruction', ?1)",
            [text],
        )
        .unwrap();
}

/// The child processes of `pid`, from /proc.
fn children(pid: u32) -> Vec<u32> {
    let dir = format!("/proc/{pid}/task");
    let mut out = Vec::new();
    for task in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A message longer than a command line to a host carries: from a file it goes on ssh's
/// standard input and reaches the host's database whole; as `--message` it is refused
/// with the way that works.
#[test]
fn a_long_message_file_goes_on_standard_input() {
    let Some(sshd) = sshd("a_long_message_file_goes_on_standard_input") else {
        return;
    };
    let project = Scratch::new();
    project.set_task("task-03", "working");
    let config = sshd.config(None, "ssh_config");
    let text = (0..4000).fold(String::new(), |mut s, i| {
        s.push_str(&format!("line {i} of a long instruction; $(no) `shell`\n"));
        s
    });
    assert!(text.len() > 150 * 1024, "longer than one argument may be");
    let file = project.root().join("long-instruction");
    std::fs::write(&file, &text).unwrap();
    let run = |args: &[&str]| {
        maestro()
            .args(["task", "instruct", "task-03"])
            .args(args)
            .arg("--config")
            .arg(&config)
            .args(["--project", &address(&project)])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&["--message-file", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let message: String = project
        .conn()
        .query_row(
            "SELECT message FROM orchestration_messages WHERE task_id = 'task-03'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        message.ends_with(&text),
        "{} bytes arrived, {} sent",
        message.len(),
        text.len()
    );
    // Long for a host, yet short enough for this machine to start maestro with.
    let refused = run(&["--message", &text[..100_000]]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("--message-file F"), "{said}");
}
