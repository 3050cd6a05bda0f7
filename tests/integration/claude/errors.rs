//! What the real program writes when the API fails, a tool fails, or it is killed.

use serde_json::json;

use super::model_server::Say;
use super::{ModelServer, Reply, Usage};

/// An overloaded API answer is retried by Claude Code and bills nothing; a failing tool
/// call is the session's last error; the bill is the answered responses only.
#[test]
fn api_errors_bill_nothing_and_a_failed_tool_is_the_last_error() {
    let Some(claude) =
        super::claude_or_skip("api_errors_bill_nothing_and_a_failed_tool_is_the_last_error")
    else {
        return;
    };
    let rig = super::Rig::new("task-04");
    let (root, home) = (&rig.root, &rig.home);
    let one = Usage {
        input: 40,
        output: 4,
        cache_write: 0,
        cache_read: 0,
    };
    let server = ModelServer::start(vec![(
        "ERRS-9",
        vec![
            Reply {
                say: Say::Error {
                    status: 529,
                    kind: "overloaded_error".into(),
                },
                usage: Usage::default(),
            },
            Reply::tool(
                "Read",
                json!({"file_path": root.join("no-such-file.txt")}),
                one,
            ),
            Reply::text("that file is missing", one),
        ],
    )]);
    let out = super::print(
        &claude,
        home.path(),
        &server,
        root,
        "/musician task-04 ERRS-9",
        &[],
    );
    crate::common::assert_success(&out);
    // The overloaded answer was retried: one more request than replies billed.
    assert!(server.requests().len() >= 3, "{}", server.requests().len());
    let v = rig.usage();
    let row = &v["sessions"][0];
    assert_eq!(row["task_id"], "task-04", "{v}");
    assert_eq!(row["total_tokens"], 2 * one.total(), "{row}");
    assert!(row["last_error"].is_string(), "the failed Read: {row}");
}

/// A request the API refuses (a 400 at once; a 500 until Claude Code gives up, with
/// one retry) leaves the session in `api_error`, the API's text as its last error,
/// where before it read as `working`.
#[test]
fn a_session_the_api_refused_is_in_api_error_with_the_apis_text() {
    let Some(claude) =
        super::claude_or_skip("a_session_the_api_refused_is_in_api_error_with_the_apis_text")
    else {
        return;
    };
    for (status, kind) in [(400, "invalid_request_error"), (500, "api_error")] {
        let rig = super::Rig::new("task-05");
        let (root, home) = (&rig.root, &rig.home);
        let refusal = || Reply {
            say: Say::Error {
                status,
                kind: kind.into(),
            },
            usage: Usage::default(),
        };
        let server = ModelServer::start(vec![("REFUSE-4", (0..6).map(|_| refusal()).collect())]);
        let mut c = super::claude_command(&claude, home.path(), &server, root);
        let out = c
            .env("CLAUDE_CODE_MAX_RETRIES", "1")
            .args([
                "-p",
                "/musician task-05 REFUSE-4",
                "--model",
                "claude-sonnet-4-5",
            ])
            .output()
            .unwrap();
        let v = rig.usage();
        let row = &v["sessions"][0];
        assert_eq!(row["task_id"], "task-05", "{v}\n{out:?}");
        assert_eq!(row["activity"], "api_error", "{status}: {row}");
        let text = row["last_error"].as_str().unwrap_or_default();
        assert!(
            text.contains(&format!("API Error: {status}"))
                && text.contains(&format!("scripted {kind}")),
            "{status}: the API's own text: {row}"
        );
        assert_eq!(row["total_tokens"], 0, "a refusal bills nothing: {row}");
    }
}
