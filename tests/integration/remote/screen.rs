//! A remote and a local project on one dashboard, in a real terminal (tmux): the
//! remote one's tasks, its actions carried out on its host, `w` refused, and a
//! dropped link shown as such.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::Scratch;
use crate::remote::{address, sshd};
use crate::tmux::Tmux;

#[test]
fn a_remote_and_a_local_project_on_one_screen() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!(
            "skipping a_remote_and_a_local_project_on_one_screen: tmux is not installed (.ci/run installs it)"
        );
        return;
    }
    let Some(sshd) = sshd("a_remote_and_a_local_project_on_one_screen") else {
        return;
    };
    let parent = tempfile::tempdir().unwrap();
    let local = Scratch::new_in(parent.path(), "alpha");
    let remote = Scratch::new_in(parent.path(), "beta");
    local.set_task("task-01", "working");
    remote.set_task("task-07", "needs_review");
    let config = sshd.config(None, "ssh_config");
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "{exe} --config {} --project {} --project {} --stall-after 1h; sleep 600",
            config.display(),
            local.root().display(),
            address(&remote)
        ),
        200,
        40,
    );
    t.wait("both projects on the bar", |s| {
        s.contains("1 alpha") && s.contains("2 ssh://devbox") && s.contains("task-01")
    });
    t.keys("M-2");
    let shown = t.wait("the remote project's task", |s| {
        s.contains("task-07") && s.contains("needs_review")
    });
    assert!(!shown.contains("task-01"), "{shown}");
    // `w`: the window is on the other host.
    t.keys("w");
    t.wait("w refused", |s| s.contains("not possible from here"));
    // Approve: the remote maestro describes it, and carries it out on its host.
    t.keys("a");
    let dialog = t.wait("the confirmation", |s| s.contains("Confirm"));
    assert!(
        dialog.contains("needs_review -> review_approved"),
        "the host's own description:\n{dialog}"
    );
    t.keys("y");
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let state: String = remote
            .conn()
            .query_row(
                "SELECT state FROM orchestration_tasks WHERE task_id = 'task-07'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if state == "review_approved" {
            break;
        }
        assert!(Instant::now() < end, "the approval never reached the host");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The change comes back over the link, as any change made on the host.
    t.wait("the new state on screen", |s| s.contains("review_approved"));
    // The link dropped: said on the bar and the status line, the last state kept.
    let killed = Command::new("pkill")
        .args([
            "-KILL",
            "-f",
            &format!("ssh -F {}", sshd.dir().join("ssh_config").display()),
        ])
        .status()
        .unwrap();
    assert!(killed.success());
    let down = t.wait("link down", |s| s.contains("link down since"));
    assert!(down.contains("task-07"), "{down}");
}
