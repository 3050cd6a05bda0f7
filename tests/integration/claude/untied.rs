//! A session tied to its task only by its transcript (no window PID file: started by
//! hand in a terminal, its first prompt naming `task-05` but not as `/musician task-05`,
//! which its prompt hook would tie at once): its permission prompt
//! comes by hook before the transcript line that names the task is read, and must wait
//! for that tie, not be dropped. Twenty sessions, each asked once.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{ModelServer, Reply, Usage};
use crate::common::event;
use crate::tmux::Tmux;

const RUNS: usize = 20;

#[test]
fn a_permission_in_a_session_tied_by_its_transcript_is_needs_you_every_time() {
    let name = "a_permission_in_a_session_tied_by_its_transcript_is_needs_you_every_time";
    let Some(claude) = super::claude_and_tmux_or_skip(name) else {
        return;
    };
    let scratch = crate::common::Scratch::new();
    scratch.set_task("task-05", "working");
    let root = std::fs::canonicalize(scratch.root()).unwrap();
    let home = super::home_with(&root, &json!({}));
    let data = tempfile::tempdir().unwrap();
    let mut m = super::watch_with_hooks(&root, home.path(), data.path(), "task-05");
    let one = Usage {
        input: 50,
        output: 5,
        cache_write: 0,
        cache_read: 0,
    };
    let keys: Vec<String> = (1..=RUNS).map(|i| format!("TIE-{i:02}")).collect();
    let script = keys
        .iter()
        .map(|k| {
            (
                k.as_str(),
                vec![
                    Reply::tool(
                        "Bash",
                        json!({"command": format!("touch '{}'", root.join(k).display()), "description": "Touch"}),
                        one,
                    ),
                    Reply::text("touched", one),
                ],
            )
        })
        .collect();
    let server = ModelServer::start(script);
    let launch = super::interactive::launcher(
        &claude,
        home.path(),
        data.path(),
        &server,
        &root,
        "task-05",
        "",
    );
    // No window: the launcher records no PID file.
    let text = std::fs::read_to_string(&launch).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("echo $$"))
        .flat_map(|l| [l, "\n"])
        .collect();
    std::fs::write(&launch, text).unwrap();
    let mut sessions = std::collections::HashSet::new();
    for key in &keys {
        // A new `claude` each run: a new session, found by its transcript alone.
        let tmux = Tmux::start(launch.to_str().unwrap(), 120, 40);
        tmux.wait("the prompt", |s| s.contains('❯'));
        tmux.keys(&format!("{key}: for task-05, touch it"));
        tmux.keys("Enter");
        tmux.wait("the real dialog", |s| s.contains("Do you want to proceed"));
        let shown = Instant::now();
        let asked = m.wait_json_within(
            &format!("{key}: the permission as needs_you, with the tool"),
            Duration::from_secs(1),
            |v| {
                event(v) == "needs_you"
                    && v["task_id"] == "task-05"
                    && v["reason"] == "permission"
                    && v["tool"] == "Bash"
            },
        );
        assert!(shown.elapsed() <= Duration::from_secs(1));
        sessions.insert(asked["session_id"].as_str().unwrap().to_owned());
        super::interactive::answer_yes(&tmux);
        m.wait_json("answered", |v| {
            event(v) == "needs_you_cleared" && v["task_id"] == "task-05"
        });
        tmux.wait("the answer", |s| s.contains("touched"));
    }
    assert_eq!(sessions.len(), RUNS, "each run its own session");
}
