//! Compaction and resume through the real program.

use serde_json::Value;

use super::{ModelServer, Reply, Usage};

/// The one session's row of `maestro usage`.
fn usage_row(rig: &super::Rig) -> Value {
    let v = rig.usage();
    assert_eq!(v["sessions"].as_array().map(Vec::len), Some(1), "{v}");
    v["sessions"][0].clone()
}

/// `claude --resume ID /compact` is one compaction: the context starts over, the bill
/// keeps everything, and the resumed session is still its task's; so is the session
/// `--continue` goes on with.
#[test]
fn a_real_compact_of_a_resumed_session_is_one_compaction_and_keeps_its_task() {
    let Some(claude) = super::claude_or_skip(
        "a_real_compact_of_a_resumed_session_is_one_compaction_and_keeps_its_task",
    ) else {
        return;
    };
    let rig = super::Rig::new("task-02");
    let (root, home) = (&rig.root, &rig.home);
    let big = Usage {
        input: 10,
        output: 5,
        cache_write: 0,
        cache_read: 150_000,
    };
    let more = Usage {
        input: 40,
        output: 4,
        cache_write: 0,
        cache_read: 0,
    };
    let server = ModelServer::start(vec![
        (
            "PARENT-C1",
            vec![
                Reply::text("read the whole crate", big),
                Reply::text("Summary: the crate was read.", Usage::default()),
            ],
        ),
        ("CONT-9", vec![Reply::text("carrying on", more)]),
    ]);
    let out = super::print(
        &claude,
        home.path(),
        &server,
        root,
        "/musician task-02 PARENT-C1",
        &[],
    );
    crate::common::assert_success(&out);
    let before = usage_row(&rig);
    assert_eq!(before["task_id"], "task-02");
    assert_eq!(before["context_tokens"], 150_010, "{before}");
    assert_eq!(before["context_percent"], 75.0);
    assert_eq!(before["compactions"], 0);
    let session = before["session_id"].as_str().unwrap().to_owned();

    let out = super::print(
        &claude,
        home.path(),
        &server,
        root,
        "/compact",
        &["--resume", &session],
    );
    crate::common::assert_success(&out);
    let after = usage_row(&rig);
    assert_eq!(
        after["session_id"],
        session.as_str(),
        "the same session, resumed"
    );
    assert_eq!(after["task_id"], "task-02", "{after}");
    assert_eq!(after["compactions"], 1, "{after}");
    assert_eq!(
        after["context_tokens"], 0,
        "the context starts over: {after}"
    );
    assert_eq!(
        after["total_tokens"],
        big.total(),
        "the bill keeps everything: {after}"
    );

    // `--continue` (the newest session of the folder) goes on in the same session, still
    // the task's, with the context of what came after the compaction.
    let out = super::print(
        &claude,
        home.path(),
        &server,
        root,
        "CONT-9: carry on",
        &["--continue"],
    );
    crate::common::assert_success(&out);
    let continued = usage_row(&rig);
    assert_eq!(continued["task_id"], "task-02", "{continued}");
    assert_eq!(continued["compactions"], 1, "{continued}");
    assert_eq!(
        continued["total_tokens"],
        big.total() + more.total(),
        "{continued}"
    );
}
