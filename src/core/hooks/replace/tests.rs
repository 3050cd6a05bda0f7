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

/// A project with a real comms.db holding `task-03` (and the session's task).
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    crate::core::schema::init_database(&dir.path().join("comms.db")).expect("init");
    crate::core::schema::seed_task(&dir.path().join("comms.db"), "task-03", "working")
        .expect("the task");
    dir
}

fn with<T>(task: Option<&str>, reporting: bool, f: impl FnOnce(&Context<'_>) -> T) -> T {
    let dir = project();
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
const SENTINEL: &str = "You are the Sentinel \u{2014} a monitoring teammate watching Musicians' progress logs for anomalies.\n**Active tasks to monitor:** task-01";
const SOUFFLEUR_WATCHER: &str = "Poll the Conductor's liveness every ~60 seconds using comms-link.\n\nConductor PID: 4242\nConductor session ID: 7f3c1a2b-0000-4000-8000-00000000abcd\nAwaiting session ID: false\nWatcher mode: normal\n";

#[test]
fn a_musicians_watcher_is_never_refused_for_its_words() {
    // Its prompt is the Musician's own writing: only its deeds tell (guard::deeds).
    for task in [Some("task-03"), None] {
        assert!(with(task, false, |ctx| refusal(&agent(WATCHER, Some(true)), ctx)).is_none());
    }
}

#[test]
fn a_loop_is_stopped_with_the_command_of_the_sessions_role() {
    use crate::core::sessions::deeds::State;
    let r = with(Some("task-03"), false, |ctx| {
        stop_in_loop(
            &[State::Comms],
            Some("surveille la base toutes les 15 s"),
            ctx,
        )
    })
    .expect("stopped");
    assert_eq!(r.replaced.role, "musician-watcher");
    assert_eq!(r.replaced.at, Some(Stage::Loop));
    assert_eq!(
        r.replaced.command.as_deref(),
        Some("maestro musician watch task-03 --join")
    );
    assert!(
        r.reason.contains("`maestro musician watch task-03 --join`"),
        "{}",
        r.reason
    );
    assert!(
        r.reason.contains("switches it off") && r.reason.matches('`').count() == 2,
        "{}",
        r.reason
    );
    // A task the database does not hold, a session with no role, logs read by a
    // Musician: nothing to name, nothing stopped.
    assert!(
        with(Some("task-07"), false, |ctx| stop_in_loop(
            &[State::Comms],
            None,
            ctx
        ))
        .is_none()
    );
    assert!(with(None, false, |ctx| stop_in_loop(&[State::Comms], None, ctx)).is_none());
    assert!(
        with(Some("task-03"), false, |ctx| stop_in_loop(
            &[State::Logs],
            None,
            ctx
        ))
        .is_none()
    );
    // The Conductor's loop over the logs: the Sentinel, only while a maestro reports.
    assert!(
        with(Some("task-00"), false, |ctx| stop_in_loop(
            &[State::Logs],
            None,
            ctx
        ))
        .is_none()
    );
    let r = with(Some("task-00"), true, |ctx| {
        stop_in_loop(&[State::Logs], None, ctx)
    })
    .expect("stopped");
    assert_eq!(r.replaced.role, "sentinel");
    assert_eq!(r.replaced.command, None);
    // The Conductor's loop over the database: its message-watcher, named.
    let r = with(Some("task-00"), false, |ctx| {
        stop_in_loop(&[State::Comms], None, ctx)
    })
    .expect("stopped");
    assert_eq!(r.replaced.role, "conductor-watcher");
    assert_eq!(
        r.replaced.command.as_deref(),
        Some("maestro conductor watch")
    );
}

#[test]
fn nothing_is_refused_whose_duty_would_be_left_undone() {
    // The Sentinel without a reporting maestro runs; with one it is refused.
    assert!(
        with(Some("task-00"), false, |ctx| refusal(
            &agent(SENTINEL, None),
            ctx
        ))
        .is_none()
    );
    let r = with(Some("task-00"), true, |ctx| {
        refusal(&agent(SENTINEL, None), ctx)
    })
    .expect("refused");
    assert_eq!(r.replaced.role, "sentinel");
    assert_eq!(r.replaced.at, Some(Stage::Launch));
    assert!(r.reason.contains("report_to_db"), "{}", r.reason);
    // A damaged database: no refusal, whatever the rest.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("comms.db"), b"not a database").expect("write");
    let project = ProjectKey::of(dir.path());
    let task = TaskId::parse("task-00");
    let ctx = Context {
        project: &project,
        cwd: Some(dir.path()),
        program: "maestro",
        session_task: task.as_ref(),
        reporting: &|| true,
    };
    assert!(refusal(&agent(SENTINEL, None), &ctx).is_none());
    // Other tools, other events.
    let bash = pre_tool_use("Bash", &json!({"command": WATCHER}));
    assert!(with(Some("task-03"), false, |ctx| refusal(&bash, ctx)).is_none());
    let mut post = agent(SENTINEL, None);
    post["hook_event_name"] = json!("PostToolUse");
    assert!(with(Some("task-00"), true, |ctx| refusal(&post, ctx)).is_none());
}

#[test]
fn a_verbatim_prompt_is_refused_only_from_the_session_that_holds_its_role() {
    // Quoted in a review from a Musician's session, or from no session's role: it runs.
    for task in [Some("task-03"), Some("task-00"), None] {
        assert!(
            with(task, true, |ctx| refusal(
                &agent(SOUFFLEUR_WATCHER, Some(true)),
                ctx
            ))
            .is_none(),
            "{task:?}"
        );
    }
    assert!(
        with(Some("task-03"), true, |ctx| refusal(
            &agent(SENTINEL, None),
            ctx
        ))
        .is_none()
    );
}

#[test]
fn the_souffleurs_layers_are_refused_with_the_watcher_command() {
    let r = with(Some("souffleur"), false, |ctx| {
        refusal(&agent(SOUFFLEUR_WATCHER, Some(true)), ctx)
    })
    .expect("refused");
    assert_eq!(
        r.replaced.command.as_deref(),
        Some(
            "maestro souffleur --watcher PID:4242 SESSION_ID:7f3c1a2b-0000-4000-8000-00000000abcd"
        )
    );
    let heartbeat_only = "Poll the Conductor's liveness every ~60 seconds using comms-link.\nConductor session ID: abc-1\nAwaiting session ID: true\nWatcher mode: heartbeat-only (PID unavailable)";
    let r = with(Some("souffleur"), false, |ctx| {
        refusal(&agent(heartbeat_only, Some(true)), ctx)
    })
    .expect("refused");
    assert_eq!(
        r.replaced.command.as_deref(),
        Some("maestro souffleur --watcher --heartbeat-only SESSION_ID:abc-1 --awaiting-session-id")
    );
    let teammate = "You are the Souffleur's self-monitor. Your job is to ensure the\nbackground watcher is alive by checking the Souffleur's heartbeat.";
    let r = with(Some("souffleur"), false, |ctx| {
        refusal(&agent(teammate, None), ctx)
    })
    .expect("refused");
    assert_eq!(r.replaced.role, "souffleur-teammate");
    assert_eq!(r.replaced.command, None);
}

#[test]
fn a_session_in_a_subfolder_is_given_the_project() {
    let dir = project();
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
    let states = [crate::core::sessions::deeds::State::Comms];
    let r = stop_in_loop(&states, None, &ctx).expect("stopped");
    let words = shlex::split(r.replaced.command.as_deref().expect("command")).expect("words");
    assert_eq!(
        words[..5],
        ["maestro", "musician", "watch", "task-03", "--join"]
    );
    assert_eq!(words[5], "--project");
    assert_eq!(std::path::Path::new(&words[6]), project.root);
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
    // A path that holds a role's name is no launch of that role.
    for ordinary in [
        "Fix the flaky test in src/conductor/plan.rs",
        "Update skills/musician/SKILL with the notes from task-03",
        "read skills/souffleur/README",
    ] {
        assert_eq!(task_of_prompt(ordinary), None, "{ordinary}");
    }
}

/// A hook never waits long: with another process holding comms.db exclusively, the
/// duty check gives up within its bound and fails open (nothing is refused), where it
/// used to wait the full 2 s busy timeout.
#[test]
fn a_database_held_by_another_fails_open_at_once() {
    let dir = project();
    let db = dir.path().join("comms.db");
    let task = TaskId::parse("task-03");
    assert!(
        duty_ready(dir.path(), task.as_ref()),
        "the control: free, ready"
    );
    let holder = rusqlite::Connection::open(&db).expect("open");
    holder
        .execute_batch("PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;")
        .expect("lock");
    // A write inside the transaction: the lock is taken, not only asked for.
    holder
        .execute_batch("CREATE TABLE held_by_the_test (x)")
        .expect("hold it");
    let started = std::time::Instant::now();
    assert!(!duty_ready(dir.path(), task.as_ref()), "fails open");
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_millis(1000), "{took:?}");
}

/// A session started with options before its prompt (`claude -p "/souffleur …"`,
/// `claude --permission-mode acceptEdits "/musician task-03"`) is tied by its process's
/// arguments, before its transcript has been written.
#[test]
fn a_prompt_after_options_ties_the_session_by_its_process() {
    // A shell waiting on a builtin (`read`): it never execs into another program.
    let mut session = std::process::Command::new("/bin/sh")
        .args(["-c", "read x", "--permission-mode", "acceptEdits"])
        .arg("/musician task-03 pick up the work")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    let pid = i32::try_from(session.id()).expect("a pid");
    // Until the fork has become the shell, its arguments are the test's.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !crate::core::procs::cmdline(pid)
        .is_some_and(|a| a.iter().any(|w| w.starts_with("/musician")))
    {
        assert!(std::time::Instant::now() < deadline, "the shell never ran");
        std::thread::yield_now();
    }
    let task = session_task(&SessionFacts {
        db: std::path::Path::new("/nonexistent/comms.db"),
        session_id: None,
        claude_pid: Some(pid),
        transcript: None,
    });
    let _ = session.kill();
    let _ = session.wait();
    assert_eq!(task.map(|t| t.to_string()), Some("task-03".to_owned()));
}
