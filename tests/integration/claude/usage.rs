//! Usage, sessions and subagents through the real program: every figure is the script's.

use serde_json::{Value, json};

use super::{ModelServer, Reply, Usage};
use crate::common::{event, maestro};

const PARENT: Usage = Usage {
    input: 1000,
    output: 20,
    cache_write: 500,
    cache_read: 3000,
};
const SUBAGENT: Usage = Usage {
    input: 200,
    output: 7,
    cache_write: 100,
    cache_read: 0,
};

/// Sonnet's list prices (docs/sessions.md), USD.
fn sonnet_cost(u: Usage) -> f64 {
    (u.input as f64 * 3.0
        + u.output as f64 * 15.0
        + u.cache_write as f64 * 3.75
        + u.cache_read as f64 * 0.30)
        / 1e6
}

/// A Musician's session whose model calls the Agent tool: Claude Code 2.1 writes the
/// subagent to `<session>/subagents/`; `usage`, the live figures and ccusage bill both.
#[test]
fn a_session_with_a_subagent_is_billed_whole_in_both_layouts() {
    let Some(claude) =
        super::claude_or_skip("a_session_with_a_subagent_is_billed_whole_in_both_layouts")
    else {
        return;
    };
    let rig = super::Rig::new("task-01");
    let (root, home) = (&rig.root, &rig.home);
    let server = ModelServer::start(vec![
        (
            "PARENT-7Q",
            vec![Reply::tool(
                "Agent",
                json!({"description": "look around", "prompt": "SUB-4K: list the files", "subagent_type": "general-purpose"}),
                PARENT,
            )],
        ),
        ("SUB-4K", vec![Reply::text("found three files", SUBAGENT)]),
    ]);
    // maestro is watching before the session starts: it follows the session, and the
    // subagents folder that appears while it runs.
    let mut m = crate::common::Running::spawn({
        let mut c = maestro();
        c.env("HOME", home.path())
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("XDG_DATA_HOME", crate::common::data_home())
            .args(["--no-tui", "--json", "--project"])
            .arg(root);
        c
    });
    m.wait_json("started", |v| {
        event(v) == "task" && v["task_id"] == "task-01"
    });
    let out = super::print(
        &claude,
        home.path(),
        &server,
        root,
        "/musician task-01 PARENT-7Q",
        &[],
    );
    crate::common::assert_success(&out);

    let total = PARENT.total() + SUBAGENT.total();
    let live = m.wait_json("the live figures with the subagent", |v| {
        event(v) == "session" && v["task_id"] == "task-01" && v["total_tokens"] == total
    });
    assert_eq!(live["found_by"], "transcript", "{live}");

    // The 2.1 layout, as the real program wrote it.
    let projects = home.path().join(".claude/projects");
    let subagents: Vec<_> = crate::common::walk(&projects)
        .into_iter()
        .filter(|p| {
            p.to_string_lossy().contains("/subagents/agent-")
                && p.extension().is_some_and(|e| e == "jsonl")
        })
        .collect();
    assert_eq!(subagents.len(), 1, "{subagents:?}");
    let first_line = std::fs::read_to_string(&subagents[0]).unwrap();
    assert!(
        first_line.contains(&format!("\"version\":\"{}\"", super::CLAUDE_VERSION)),
        "written by another version"
    );

    let check = |v: &Value| {
        let row = &v["sessions"][0];
        assert_eq!(row["task_id"], "task-01", "{v}");
        assert_eq!(row["input_tokens"], PARENT.input + SUBAGENT.input, "{v}");
        assert_eq!(row["output_tokens"], PARENT.output + SUBAGENT.output);
        assert_eq!(
            row["cache_write_tokens"],
            PARENT.cache_write + SUBAGENT.cache_write
        );
        assert_eq!(
            row["cache_read_tokens"],
            PARENT.cache_read + SUBAGENT.cache_read
        );
        assert_eq!(v["total"]["total_tokens"], total);
        let cost = v["total"]["cost_usd"].as_f64().unwrap();
        assert!(
            (cost - sonnet_cost(PARENT) - sonnet_cost(SUBAGENT)).abs() < 1e-9,
            "{v}"
        );
    };
    let v = rig.usage();
    check(&v);
    super::assert_same_as_ccusage(home.path(), &v);
    // The text table's TOTAL row: the same figures.
    let table = maestro()
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .args(["usage", "--wide", "--project"])
        .arg(root)
        .output()
        .unwrap();
    crate::common::assert_success(&table);
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    let total_row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("TOTAL"))
        .unwrap_or_else(|| panic!("{table}"))
        .split_whitespace()
        .collect();
    let want = [
        PARENT.input + SUBAGENT.input,
        PARENT.output + SUBAGENT.output,
        PARENT.cache_write + SUBAGENT.cache_write,
        PARENT.cache_read + SUBAGENT.cache_read,
        total,
    ]
    .map(|n| n.to_string());
    assert!(
        total_row.windows(5).any(|w| w == want),
        "{want:?} in {total_row:?}"
    );
    assert!(total_row.contains(&"$0.01"), "{total_row:?}");

    // `MAESTRO_RECORD_FIXTURES=DIR` keeps what the real program wrote as the fixtures the
    // fast tests read (src/core/sessions/fixtures.rs), without the system prompt's text.
    if let Some(dir) = std::env::var_os("MAESTRO_RECORD_FIXTURES") {
        record(&projects, std::path::Path::new(&dir));
    }

    // The older layout (the subagent's file beside the session's): the same bill.
    let beside = subagents[0]
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join(subagents[0].file_name().unwrap());
    std::fs::rename(&subagents[0], &beside).unwrap();
    check(&rig.usage());
}
/// Copies every transcript under `projects` into `dir` (same relative paths), leaving
/// out the lines that only carry Claude Code's own prompt text and request bodies.
fn record(projects: &std::path::Path, dir: &std::path::Path) {
    let bulky = |v: &Value| {
        matches!(
            v["type"].as_str(),
            Some("api-request-blob" | "api-request-shape")
        ) || matches!(
            v["attachment"]["type"].as_str(),
            Some(
                "prompt_snapshot"
                    | "skill_listing"
                    | "deferred_tools_delta"
                    | "agent_listing_delta"
            )
        )
    };
    for file in crate::common::walk(projects) {
        let rel = file.strip_prefix(projects).unwrap();
        let to = dir.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        let kept = text
            .lines()
            .filter(|l| serde_json::from_str::<Value>(l).map_or(true, |v| !bulky(&v)))
            .fold(String::new(), |mut out, l| {
                out.push_str(l);
                out.push('\n');
                out
            });
        std::fs::write(to, kept).unwrap();
    }
}
