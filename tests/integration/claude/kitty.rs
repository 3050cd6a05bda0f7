//! The operator's world with the real program: `maestro task relaunch` opens the real
//! `claude` in a real kitty window (under Xvfb) with the handoff prompt; its real
//! permission dialog shows on the dashboard (in tmux) and `w` brings its window forward.

use serde_json::json;

use super::{ModelServer, Reply, Usage};
use crate::common::{Scratch, maestro};
use crate::kitty::Display;
use crate::tmux::Tmux;

#[test]
fn a_relaunched_real_claude_in_kitty_asks_on_the_dashboard_and_w_focuses_it() {
    let name = "a_relaunched_real_claude_in_kitty_asks_on_the_dashboard_and_w_focuses_it";
    let Some(claude) = super::claude_and_tmux_or_skip(name) else {
        return;
    };
    let Some(x) = Display::start() else { return };
    let s = Scratch::new();
    s.set_task("task-03", "working");
    let root = std::fs::canonicalize(s.root()).unwrap();
    let home = super::home_for(&root);
    let data = tempfile::tempdir().unwrap();
    crate::common::assert_success(
        &maestro()
            .args(["hooks", "install", "--project"])
            .arg(&root)
            .env("XDG_DATA_HOME", data.path())
            .output()
            .unwrap(),
    );
    // The orchestration's `/musician` command, as a project command of Claude Code.
    let commands = root.join(".claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("musician.md"),
        "You are the Musician of $ARGUMENTS. KITTY-5\n",
    )
    .unwrap();
    let one = Usage {
        input: 80,
        output: 8,
        cache_write: 0,
        cache_read: 0,
    };
    let server = ModelServer::start(vec![(
        "KITTY-5",
        vec![
            Reply::tool(
                "Bash",
                // Not an edit, so `acceptEdits` (the relaunch's mode) asks for it.
                json!({"command": "cargo publish --allow-dirty"}),
                one,
            ),
            Reply::text("done", one),
        ],
    )]);
    // `claude` on the PATH is the real one.
    let (_, path) = super::real_claude_first(&root, &claude);
    let mut env = super::claude_env(home.path(), &server);
    env.extend([
        ("XDG_DATA_HOME", data.path().display().to_string()),
        ("PATH", path),
    ]);

    // The dashboard, in a terminal of its own.
    let exe = env!("CARGO_BIN_EXE_maestro");
    let t = Tmux::start(
        &format!(
            "env -u CLAUDE_CONFIG_DIR {} {exe} --project {}",
            super::assignments(&env),
            shlex::try_quote(&root.to_string_lossy()).unwrap()
        ),
        160,
        45,
    );
    t.wait("the task", |screen| screen.contains("task-03"));

    // maestro relaunches the Musician: the real claude starts in a real kitty window
    // with the handoff prompt and asks to run its command.
    let mut relaunch = x.command(exe);
    relaunch
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CLAUDECODE")
        .args(["task", "relaunch", "task-03", "--yes", "--project"])
        .arg(&root);
    relaunch.envs(env.iter().map(|(k, v)| (k, v)));
    crate::common::assert_success(&relaunch.output().unwrap());
    let musician = x.window("Musician: task-03 (S2)");
    t.wait("the real dialog, as needs you", |screen| {
        screen.contains("⚑ task-03 needs you: permission for Bash `cargo publish --allow-dirty`")
    });
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r["messages"].to_string().contains("Musician of task-03")),
        "the handoff prompt (`/musician task-03`) reached the model"
    );

    // Another window takes the focus; `w` brings the Musician's back.
    let (other, elsewhere) = x.focus_elsewhere();
    t.keys("w");
    x.wait_focus("Musician: task-03 (S2)");

    x.close(&musician);
    x.close(&elsewhere);
    drop(other);
}
