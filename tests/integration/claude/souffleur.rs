//! The Souffleur against a real Conductor: the real `claude` (a real session, a real
//! `/compact`, a real `--resume`) in real kitty windows under Xvfb. Only
//! `claude_export` is a stub (its export is too large, so the Souffleur escalates to
//! Claude Code's own compaction).

use std::os::unix::fs::PermissionsExt;

use super::{ModelServer, Reply, Usage};
use crate::common::{Running, Scratch, event};
use crate::kitty::Display;
use crate::tmux::Tmux;

const SESSION: &str = "0d6f3c2a-5b7e-4c1d-9a8f-3e2b1c0d9f4a";

#[test]
fn standard_compact_compacts_and_resumes_a_real_conductor() {
    let name = "standard_compact_compacts_and_resumes_a_real_conductor";
    let Some(claude) = super::claude_and_tmux_or_skip(name) else {
        return;
    };
    let Some(x) = Display::start() else { return };
    let s = Scratch::new();
    s.set_task("task-00", "reviewing");
    s.conn()
        .execute(
            "UPDATE orchestration_tasks SET session_id = ?1 WHERE task_id = 'task-00'",
            [SESSION],
        )
        .unwrap();
    s.set_task("task-01", "working");
    let root = std::fs::canonicalize(s.root()).unwrap();
    let home = super::home_for(&root);
    let one = Usage {
        input: 120,
        output: 12,
        cache_write: 0,
        cache_read: 0,
    };
    // The Conductor's conversation: its first answer, then the summary `/compact` asks
    // for. The relaunched Conductor's requests get `done`.
    let server = ModelServer::start(vec![(
        "COND-8",
        vec![
            Reply::text("planning the tasks", one),
            Reply::text("Summary: the Conductor was planning the tasks.", one),
        ],
    )]);
    let run = super::print(
        &claude,
        home.path(),
        &server,
        &root,
        "/conductor COND-8",
        &["--session-id", SESSION],
    );
    crate::common::assert_success(&run);
    let transcript = home
        .path()
        .join(".claude/projects")
        .join(root.to_string_lossy().replace(['/', '.'], "-"))
        .join(format!("{SESSION}.jsonl"));
    assert!(transcript.is_file(), "{}", transcript.display());

    // `claude` on the PATH is the real one; `claude_export` a stub whose export is far
    // above the budget.
    let (bin, path) = super::real_claude_first(&root, &claude);
    let export = bin.join("claude_export");
    std::fs::write(
        &export,
        "#!/bin/sh\nprintf 'a long export, far above ten tokens of budget\\n'\n",
    )
    .unwrap();
    std::fs::set_permissions(&export, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The orchestration's `/conductor` command, as a project command of Claude Code.
    std::fs::create_dir_all(root.join(".claude/commands")).unwrap();
    std::fs::write(
        root.join(".claude/commands/conductor.md"),
        "You are the Conductor. $ARGUMENTS\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join(".orchestra_configs")).unwrap();
    std::fs::write(
        root.join(".orchestra_configs/souffleur"),
        "FORCE_COMPACT=10\n",
    )
    .unwrap();
    let config = home.path().join("maestro.toml");
    std::fs::write(
        &config,
        format!(
            "[souffleur]\ninitial_wait = \"3s\"\npoll = \"200ms\"\nkill_grace = \"1s\"\ncompact_timeout = \"60s\"\nclaude_projects_dir = \"{0}/.claude/projects\"\nexport_dir = \"{0}/exports\"\n",
            home.path().display()
        ),
    )
    .unwrap();
    std::fs::create_dir_all(home.path().join("exports")).unwrap();
    let mut env = super::claude_env(home.path(), &server);
    env.extend([
        (
            "XDG_DATA_HOME",
            home.path().join("data").display().to_string(),
        ),
        ("PATH", path),
    ]);

    // The Conductor, live: the real `claude` resumed in a terminal.
    let conductor_terminal = Tmux::start(
        &format!(
            "cd {} && exec env -u CLAUDE_CONFIG_DIR -u CLAUDECODE {} {} --resume {SESSION} --model claude-sonnet-4-5",
            shlex::try_quote(&root.to_string_lossy()).unwrap(),
            super::assignments(&env),
            shlex::try_quote(&claude.to_string_lossy()).unwrap(),
        ),
        120,
        40,
    );
    conductor_terminal.wait("the Conductor", |screen| screen.contains('❯'));
    let conductor = conductor_terminal
        .run(&["display-message", "-p", "#{pane_pid}"])
        .trim()
        .parse::<u32>()
        .unwrap();

    let mut souffleur = x.command(env!("CARGO_BIN_EXE_maestro"));
    souffleur
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CLAUDECODE")
        .args(["--project"])
        .arg(&root)
        .arg("--config")
        .arg(&config)
        .args([
            "souffleur",
            &format!("PID:{conductor} SESSION_ID:{SESSION}"),
            "--no-tui",
            "--json",
        ]);
    souffleur.envs(env.iter().map(|(k, v)| (k, v)));
    let mut m = Running::spawn(souffleur);
    m.wait_json("confirmed", |v| {
        event(v) == "task" && v["task_id"] == "souffleur" && v["state"] == "confirmed"
    });
    s.set_task("task-00", "context_recovery");

    // A real compaction, then a real kitty window proven to run the resumed session:
    // more than the common deadline on a loaded machine.
    let done = m.wait_json_within("the compaction", std::time::Duration::from_secs(90), |v| {
        event(v) == "recovery" && v["status"] != "started" && v["step"] == "standard_compact"
    });
    assert_eq!(done["status"], "success", "{done}");
    // What the relaunched Conductor does first (within the watcher's first wait).
    s.set_task("task-00", "reviewing");
    let compact = x.window("Conductor (S2)");
    let text = std::fs::read_to_string(&transcript).unwrap();
    let boundaries = text
        .lines()
        .filter(|l| l.contains("\"compact_boundary\""))
        .count();
    assert_eq!(boundaries, 1, "one real compaction:\n{text}");
    // Ended: gone, or dead and not yet reaped by the tmux server that started it.
    let ended = || {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(conductor as i32), None).is_err()
            || std::fs::read_to_string(format!("/proc/{conductor}/stat")).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('Z'))
            })
    };
    assert!(ended(), "the old Conductor was ended");
    // The relaunched Conductor resumes the compacted session with the recovery prompt.
    let end = std::time::Instant::now() + crate::common::DEADLINE;
    while !server
        .requests()
        .iter()
        .any(|r| r["messages"].to_string().contains("recovery-bootstrap"))
    {
        assert!(
            std::time::Instant::now() < end,
            "the relaunched Conductor never spoke; requests: {:?}",
            server
                .requests()
                .iter()
                .map(|r| r["messages"]
                    .to_string()
                    .chars()
                    .take(300)
                    .collect::<String>())
                .collect::<Vec<_>>()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // maestro counts that one compaction, and the context starts over after it.
    let usage = super::Rig::usage_of(home.path(), &root);
    let row = usage["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["session_id"] == SESSION)
        .unwrap_or_else(|| panic!("{usage}"));
    assert_eq!(row["compactions"], 1, "{usage}");
    x.close(&compact);
}
