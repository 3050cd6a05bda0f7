//! A window maestro opens from inside a Claude Code session (a Conductor's Bash call)
//! starts a session of its own: what the real claude puts in its commands' environment
//! to name itself is learned by running it, and none of it reaches the new window.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use super::{ModelServer, Reply, Usage};
use crate::alive_actions::{relaunch_command, stub, working_task_and_a_dying_kitty};
use crate::common::RUN_AFTER_DASHES;

const ONE: Usage = Usage {
    input: 50,
    output: 5,
    cache_write: 0,
    cache_read: 0,
};

fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn a_relaunched_window_inherits_no_claude_session_identity() {
    let Some(claude) =
        super::claude_or_skip("a_relaunched_window_inherits_no_claude_session_identity")
    else {
        return;
    };
    // What claude adds to a command's environment (beyond what it was given).
    let scratch = crate::common::Scratch::new();
    let root = std::fs::canonicalize(scratch.root()).unwrap();
    let home = super::home_for(&root);
    let dump = root.join("env.txt");
    let server = ModelServer::start(vec![(
        "ENV-PROBE",
        vec![
            Reply::bash(&format!("env > '{}'", dump.display()), ONE),
            Reply::text("done", ONE),
        ],
    )]);
    let out = super::print(
        &claude,
        home.path(),
        &server,
        &root,
        "ENV-PROBE",
        &["--allowedTools", "Bash"],
    );
    assert!(out.status.success(), "{out:?}");
    let given: BTreeMap<String, String> = std::env::vars()
        .chain(
            super::claude_env(home.path(), &server)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v)),
        )
        .collect();
    let added: BTreeMap<String, String> = parse_env(&std::fs::read_to_string(&dump).unwrap())
        .into_iter()
        .filter(|(k, v)| given.get(k) != Some(v))
        // The ones that name claude's session (it also sets a few tool preferences,
        // GIT_EDITOR and the like, which a new session may keep).
        .filter(|(k, _)| k.contains("CLAUDE") || k == "AI_AGENT")
        .collect();
    assert!(
        added.contains_key("CLAUDE_CODE_SESSION_ID"),
        "the probe saw claude's own variables: {added:?}"
    );
    // A relaunch run with them, as from that session's Bash call: the new window's
    // claude sees none of them.
    let (s, bin) = working_task_and_a_dying_kitty();
    stub(bin.path(), "kitty", RUN_AFTER_DASHES);
    let seen = s.root().join("window-env.txt");
    stub(
        bin.path(),
        "claude",
        &format!("env > '{}'\nsleep 30\n", seen.display()),
    );
    let out = relaunch_command(&s, bin.path(), Some(":99"))
        .envs(&added)
        .output()
        .unwrap();
    crate::common::assert_success(&out);
    let window = parse_env(&std::fs::read_to_string(&seen).unwrap());
    let leaked: Vec<&String> = added
        .keys()
        .filter(|k| window.get(*k) == added.get(*k))
        .collect();
    assert!(leaked.is_empty(), "leaked into the new window: {leaked:?}");
    if let Ok(pid) = std::fs::read_to_string(s.temp().join("musician-task-03.pid")) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid.trim().parse().unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
