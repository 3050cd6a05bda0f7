//! The real `claude` as a person runs it: interactive, in a terminal (tmux), answered
//! with keys. What maestro learns from its hooks is checked against what is on screen.

use std::path::Path;

use serde_json::json;

use super::{ModelServer, Reply, Usage};
use crate::common::event;
use crate::tmux::Tmux;

/// A shell script that records its own PID as task `task`'s window (as `kitty` does for a
/// Musician's window), then becomes `claude` in the test's environment. Written into
/// the test's data folder.
pub(super) fn launcher(
    claude: &Path,
    home: &Path,
    data: &Path,
    server: &ModelServer,
    root: &Path,
    task: &str,
    args: &str,
) -> std::path::PathBuf {
    let q = |p: &Path| format!("'{}'", p.display());
    let mut env = super::claude_env(home, server);
    env.push(("XDG_DATA_HOME", data.display().to_string()));
    let script = format!(
        "#!/bin/sh\n\
         echo $$ > {pid}\n\
         cd {root} || exit 1\n\
         unset CLAUDE_CONFIG_DIR CLAUDECODE\n\
         export {env}\n\
         exec {claude} --model claude-sonnet-4-5 {args}\n",
        pid = q(&root.join("temp").join(format!("musician-{task}.pid"))),
        root = q(root),
        env = super::assignments(&env),
        claude = q(claude),
    );
    let path = data.join("launch.sh");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path
}

/// Answers the permission dialog with `1` (Yes). The dialog ignores keys for a moment
/// after it opens (against approving by accident), so the key is pressed again until
/// the dialog is gone, for at most 30 s.
pub(super) fn answer_yes(tmux: &Tmux) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let open = |tmux: &Tmux| tmux.screen().contains("Do you want to proceed");
    while open(tmux) {
        assert!(
            std::time::Instant::now() < end,
            "the dialog took no answer:\n{}",
            tmux.screen()
        );
        tmux.keys("1");
        let pressed = std::time::Instant::now();
        while open(tmux) && pressed.elapsed() < std::time::Duration::from_millis(500) {
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }
}

/// One interactive session, from start to idle:
/// - its window ties it to its task from its first report on (the prompt names none);
/// - the real permission dialog for a Bash call is `needs_you` (permission, Bash), and
///   answering it on the keyboard clears it;
/// - waiting at the prompt afterwards (`idle_prompt`, its threshold set to one second)
///   is `needs_you` with the reason `input`.
#[test]
fn an_interactive_session_needs_you_for_a_permission_and_for_input() {
    let name = "an_interactive_session_needs_you_for_a_permission_and_for_input";
    let Some(claude) = super::claude_and_tmux_or_skip(name) else {
        return;
    };
    let scratch = crate::common::Scratch::new();
    scratch.set_task("task-05", "working");
    let root = std::fs::canonicalize(scratch.root()).unwrap();
    let home = super::home_with(&root, &json!({"messageIdleNotifThresholdMs": 1000}));
    let data = tempfile::tempdir().unwrap();
    let mut m = super::watch_with_hooks(&root, home.path(), data.path(), "task-05");
    let marker = root.join("approved.txt");
    let one = Usage {
        input: 70,
        output: 7,
        cache_write: 0,
        cache_read: 0,
    };
    let two = Usage {
        input: 200,
        output: 20,
        cache_write: 0,
        cache_read: 0,
    };
    let server = ModelServer::start(vec![
        (
            "PERM-7",
            vec![
                Reply::tool(
                    "Bash",
                    json!({"command": format!("touch '{}'", marker.display()), "description": "Mark it approved"}),
                    one,
                ),
                Reply::text("marked", one),
            ],
        ),
        ("CLEAR-2", vec![Reply::text("a fresh start", two)]),
    ]);
    let launch = launcher(
        &claude,
        home.path(),
        data.path(),
        &server,
        &root,
        "task-05",
        "",
    );
    let tmux = Tmux::start(launch.to_str().unwrap(), 120, 40);

    tmux.wait("the prompt", |s| s.contains('❯'));
    // The prompt does not name the task: only the window (known from `SessionStart`
    // on) ties the session to it.
    tmux.keys("PERM-7: mark it approved");
    tmux.keys("Enter");
    let asked = m.wait_json("the permission, as needs_you", |v| {
        event(v) == "needs_you" && v["task_id"] == "task-05" && v["reason"] == "permission"
    });
    assert_eq!(asked["tool"], "Bash", "{asked}");
    let session = asked["session_id"].as_str().unwrap().to_owned();
    assert!(!marker.exists(), "nothing ran before the answer");
    tmux.wait("the real dialog", |s| s.contains("Do you want to proceed"));
    answer_yes(&tmux);
    m.wait_json("answered", |v| {
        event(v) == "needs_you_cleared" && v["task_id"] == "task-05"
    });
    tmux.wait("the answer", |s| s.contains("marked"));
    assert!(marker.exists(), "the approved command ran");
    // Either may come first: the bill with the answer, the idle notice a second later.
    m.wait_all(
        "waiting at the prompt, as input, and the whole bill",
        &[
            &|v: &serde_json::Value| {
                event(v) == "needs_you" && v["task_id"] == "task-05" && v["reason"] == "input"
            },
            &|v: &serde_json::Value| {
                event(v) == "session"
                    && v["task_id"] == "task-05"
                    && v["total_tokens"] == 2 * one.total()
            },
        ],
    );
    // From its first report on, the session was the task's, found by its hooks.
    let first: serde_json::Value = m
        .seen
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| event(v) == "session" && v["session_id"] == session.as_str())
        .unwrap();
    assert_eq!(first["task_id"], "task-05", "{first}");
    assert_eq!(first["found_by"], "hook", "{first}");
    // `/clear` starts a new session in the same window: the task follows it, and its
    // figures start over.
    tmux.keys("/clear");
    // Enter only once the command is on screen (under load, an Enter sent sooner can
    // reach the prompt before its menu does).
    tmux.wait("the command typed", |s| s.contains("/clear"));
    tmux.keys("Enter");
    tmux.wait("cleared", |s| !s.contains("PERM-7"));
    tmux.keys("CLEAR-2: again");
    tmux.keys("Enter");
    let fresh = m.wait_json("the session after /clear", |v| {
        event(v) == "session"
            && v["task_id"] == "task-05"
            && v["session_id"] != session.as_str()
            && v["total_tokens"] == two.total()
    });
    assert_eq!(fresh["found_by"], "hook", "{fresh}");
    assert_eq!(fresh["context_tokens"], two.input, "{fresh}");
    drop(tmux);
}

/// A session killed while a response streams in (`kill -9` of its window's `claude`):
/// the session is `ended` at once (its process's pidfd), no longer `working`; what it
/// wrote before is billed as ccusage bills it (the cut response is in no file).
#[test]
fn a_session_killed_mid_response() {
    let name = "a_session_killed_mid_response";
    let Some(claude) = super::claude_and_tmux_or_skip(name) else {
        return;
    };
    let scratch = crate::common::Scratch::new();
    scratch.set_task("task-06", "working");
    let root = std::fs::canonicalize(scratch.root()).unwrap();
    let home = super::home_for(&root);
    // The orchestration's `/musician` command, as a Musician's session has it installed:
    // typed, it expands (a real slash command, which is what ties the session).
    let commands = home.path().join(".claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("musician.md"),
        "Work on the task: $ARGUMENTS\n",
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut m = super::watch_with_hooks(&root, home.path(), data.path(), "task-06");
    let first = Usage {
        input: 90,
        output: 9,
        cache_write: 0,
        cache_read: 0,
    };
    let server = ModelServer::start(vec![(
        "KILL-4",
        vec![
            Reply::tool("Bash", json!({"command": "true"}), first),
            Reply {
                say: super::model_server::Say::Cut("half an answ".into()),
                usage: Usage {
                    input: 300,
                    output: 1,
                    cache_write: 0,
                    cache_read: 0,
                },
            },
        ],
    )]);
    let launch = launcher(
        &claude,
        home.path(),
        data.path(),
        &server,
        &root,
        "task-06",
        "--allowedTools 'Bash(true)'",
    );
    let tmux = Tmux::start(launch.to_str().unwrap(), 120, 40);
    tmux.wait("the prompt", |s| s.contains('❯'));
    tmux.keys("/musician task-06 KILL-4");
    tmux.keys("Enter");
    m.wait_json("working on it", |v| {
        event(v) == "session" && v["task_id"] == "task-06" && v["total_tokens"] == first.total()
    });
    // The second request is the one whose answer never ends.
    let asked = || {
        server
            .requests()
            .iter()
            .filter(|r| r["messages"].to_string().contains("KILL-4"))
            .count()
    };
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while asked() < 2 {
        assert!(std::time::Instant::now() < end, "claude never asked twice");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let pid_file = root.join("temp/musician-task-06.pid");
    let pid: i32 = std::fs::read_to_string(pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let gone = m.wait_json("the session, no longer working", |v| {
        event(v) == "session"
            && v["task_id"] == "task-06"
            && v["activity"] != "working"
            && v["activity"] != "waiting"
    });
    eprintln!("{gone}");
    drop(tmux);
    let v = super::Rig::usage_of(home.path(), &root);
    assert_eq!(v["total"]["total_tokens"], first.total(), "{v}");
    super::assert_same_as_ccusage(home.path(), &v);
}
