use super::*;
use serde_json::json;

fn pre_tool_use(tool: &str, input: &Value) -> Value {
    json!({"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": tool, "tool_input": input})
}

fn agent(prompt: &str, background: Option<bool>) -> Value {
    let mut input =
        json!({"description": "d", "prompt": prompt, "subagent_type": "general-purpose"});
    if let Some(b) = background {
        input["run_in_background"] = json!(b);
    }
    pre_tool_use("Agent", &input)
}

fn with<T>(task: Option<&str>, reporting: bool, f: impl FnOnce(&Context<'_>) -> T) -> T {
    let dir = tempfile::tempdir().expect("tempdir");
    let project = ProjectKey::of(dir.path());
    let task = task.and_then(TaskId::parse);
    let report = move || reporting;
    let ctx = Context {
        project: &project,
        cwd: Some(dir.path()),
        program: "maestro",
        session_task: task.as_ref(),
        reporting: &report,
    };
    f(&ctx)
}

const WATCHER: &str = "Background watcher: every 15 seconds query orchestration_messages for new messages to this task; refresh last_heartbeat when older than 60 s; exit when one arrives.";

#[test]
fn a_musicians_watcher_is_refused_with_the_command_for_its_task() {
    let r = with(Some("task-03"), false, |ctx| {
        refusal(&agent(WATCHER, Some(true)), ctx)
    })
    .expect("refused");
    assert_eq!(r.replaced.role, "musician-watcher");
    assert_eq!(r.replaced.task_id.as_deref(), Some("task-03"));
    assert_eq!(
        r.replaced.command.as_deref(),
        Some("maestro musician watch task-03")
    );
    assert!(
        r.reason.contains("`maestro musician watch task-03`"),
        "{}",
        r.reason
    );
    let pause = "Pause watcher: every 10 seconds read the task's state; refresh last_heartbeat when older than 60 s; exit when it is no longer needs_review or error.";
    let r = with(Some("task-03"), false, |ctx| {
        refusal(&agent(pause, None), ctx)
    })
    .expect("refused");
    assert_eq!(r.replaced.role, "musician-pause-watcher");
    assert!(
        r.reason
            .contains("`maestro musician watch task-03 --pause`"),
        "{}",
        r.reason
    );
    // The Task tool's older name, and a task named only in the prompt.
    let named = "Background watcher for task-05: poll orchestration_messages every 15 s and refresh last_heartbeat.";
    let input = json!({"prompt": named, "run_in_background": true});
    let r = with(None, false, |ctx| {
        refusal(&pre_tool_use("Task", &input), ctx)
    })
    .expect("refused");
    assert_eq!(
        r.replaced.command.as_deref(),
        Some("maestro musician watch task-05")
    );
}

#[test]
fn nothing_is_refused_whose_duty_would_be_left_undone() {
    // No task known: no command to name, so the LLM watcher runs.
    assert!(with(None, false, |ctx| refusal(&agent(WATCHER, Some(true)), ctx)).is_none());
    // The Sentinel without a reporting maestro runs; with one it is refused.
    let sentinel = "You are the Sentinel — a monitoring teammate watching Musicians' progress logs for anomalies.\n**Active tasks to monitor:** task-01";
    assert!(
        with(Some("task-00"), false, |ctx| refusal(
            &agent(sentinel, None),
            ctx
        ))
        .is_none()
    );
    let r = with(Some("task-00"), true, |ctx| {
        refusal(&agent(sentinel, None), ctx)
    })
    .expect("refused");
    assert_eq!(r.replaced.role, "sentinel");
    assert!(r.reason.contains("report_to_db"), "{}", r.reason);
    // Ordinary work, other tools, other events.
    let readme = "update the README section on the background watcher: it reads orchestration_messages and refreshes last_heartbeat";
    assert!(
        with(Some("task-03"), false, |ctx| refusal(
            &agent(readme, Some(true)),
            ctx
        ))
        .is_none()
    );
    let bash = pre_tool_use("Bash", &json!({"command": WATCHER}));
    assert!(with(Some("task-03"), false, |ctx| refusal(&bash, ctx)).is_none());
    let mut post = agent(WATCHER, Some(true));
    post["hook_event_name"] = json!("PostToolUse");
    assert!(with(Some("task-03"), false, |ctx| refusal(&post, ctx)).is_none());
}

#[test]
fn the_souffleurs_layers_are_refused_with_the_watcher_command() {
    let watcher = "Poll the Conductor's liveness every ~60 seconds using comms-link.\n\nConductor PID: 4242\nConductor session ID: 7f3c1a2b-0000-4000-8000-00000000abcd\nAwaiting session ID: false\nWatcher mode: normal\n";
    let r = with(Some("souffleur"), false, |ctx| {
        refusal(&agent(watcher, Some(true)), ctx)
    })
    .expect("refused");
    assert_eq!(
        r.replaced.command.as_deref(),
        Some(
            "maestro souffleur --watcher PID:4242 SESSION_ID:7f3c1a2b-0000-4000-8000-00000000abcd"
        )
    );
    let heartbeat_only = "Poll the Conductor's liveness every ~60 seconds using comms-link.\nConductor session ID: abc-1\nAwaiting session ID: true\nWatcher mode: heartbeat-only (PID unavailable)";
    let r = with(None, false, |ctx| {
        refusal(&agent(heartbeat_only, Some(true)), ctx)
    })
    .expect("refused");
    assert_eq!(
        r.replaced.command.as_deref(),
        Some("maestro souffleur --watcher --heartbeat-only SESSION_ID:abc-1 --awaiting-session-id")
    );
    let teammate = "You are the Souffleur's self-monitor. Your job is to ensure the\nbackground watcher is alive by checking the Souffleur's heartbeat.";
    let r = with(None, false, |ctx| refusal(&agent(teammate, None), ctx)).expect("refused");
    assert_eq!(r.replaced.role, "souffleur-teammate");
    assert_eq!(r.replaced.command, None);
}

#[test]
fn a_session_in_a_subfolder_is_given_the_project() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sub = dir.path().join("src");
    std::fs::create_dir(&sub).expect("mkdir");
    let project = ProjectKey::of(dir.path());
    let task = TaskId::parse("task-03");
    let ctx = Context {
        project: &project,
        cwd: Some(&sub),
        program: "maestro",
        session_task: task.as_ref(),
        reporting: &|| false,
    };
    let r = refusal(&agent(WATCHER, Some(true)), &ctx).expect("refused");
    let words = shlex::split(r.replaced.command.as_deref().expect("command")).expect("words");
    assert_eq!(words[..4], ["maestro", "musician", "watch", "task-03"]);
    assert_eq!(words[4], "--project");
    assert_eq!(std::path::Path::new(&words[5]), project.root);
}

#[test]
fn the_session_task_is_read_from_the_first_prompt() {
    assert_eq!(
        task_of_prompt("/musician task-03 go")
            .map(|t| t.to_string())
            .as_deref(),
        Some("task-03")
    );
    let expanded = "<command-message>musician is running…</command-message>\n<command-name>/musician</command-name>\n<command-args>task-12</command-args>";
    assert_eq!(
        task_of_prompt(expanded).map(|t| t.to_string()).as_deref(),
        Some("task-12")
    );
    assert_eq!(
        task_of_prompt("/conductor")
            .map(|t| t.to_string())
            .as_deref(),
        Some("task-00")
    );
    assert_eq!(task_of_prompt("fix the bug in task-03"), None);
}
