//! Claude Code's hooks, run by the real program.

use serde_json::json;

use super::{ModelServer, Reply, Usage};
use crate::common::event;

/// With maestro's hooks installed, the real `claude` reports its session through them:
/// the session is tied to its task by the hook (`found_by: hook`), and its tool calls
/// arrive as activity.
#[test]
fn the_real_programs_hooks_tie_its_session_to_the_task() {
    let Some(claude) = super::claude_or_skip("the_real_programs_hooks_tie_its_session_to_the_task")
    else {
        return;
    };
    let rig = super::Rig::new("task-03");
    let (root, home) = (&rig.root, &rig.home);
    let data = tempfile::tempdir().unwrap();
    let mut m = super::watch_with_hooks(root, home.path(), data.path(), "task-03");
    let server = ModelServer::start(vec![(
        "HOOKED-3",
        vec![
            Reply::tool(
                "Write",
                json!({"file_path": root.join("notes.txt"), "content": "hello\n"}),
                Usage {
                    input: 50,
                    output: 5,
                    cache_write: 0,
                    cache_read: 0,
                },
            ),
            Reply::text(
                "wrote it",
                Usage {
                    input: 60,
                    output: 3,
                    cache_write: 0,
                    cache_read: 0,
                },
            ),
        ],
    )]);
    let mut cmd = super::claude_command(&claude, home.path(), &server, root);
    cmd.env("XDG_DATA_HOME", data.path()).args([
        "-p",
        "/musician task-03 HOOKED-3",
        "--model",
        "claude-sonnet-4-5",
        "--permission-mode",
        "acceptEdits",
    ]);
    let out = cmd.output().unwrap();
    crate::common::assert_success(&out);
    assert_eq!(
        std::fs::read_to_string(root.join("notes.txt")).unwrap(),
        "hello\n"
    );
    let found = m.wait_json("the session, tied by its hooks", |v| {
        event(v) == "session" && v["task_id"] == "task-03" && v["found_by"] == "hook"
    });
    assert!(found["session_id"].is_string(), "{found}");
    m.wait_json("its whole bill", |v| {
        event(v) == "session" && v["task_id"] == "task-03" && v["total_tokens"] == 118
    });
}
