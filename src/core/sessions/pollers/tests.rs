use super::*;

fn musician(task: &str) -> TaskId {
    TaskId::parse(task).expect("a task id")
}

fn role(prompt: &str, background: Option<bool>, task: Option<&TaskId>) -> Option<&'static str> {
    recognise(&Launch {
        prompt,
        background,
        session_task: task,
    })
    .map(|p| p.role())
}

#[test]
fn the_launch_prompts_are_recognised_by_their_fixed_phrases() {
    let sentinel = "You are the Sentinel — a monitoring teammate watching Musicians'\n  progress logs for anomalies.\n\n**Active tasks to monitor:** task-03, task-07";
    assert_eq!(role_of(sentinel), Some(SENTINEL));
    let watcher = "Poll the Conductor's liveness every ~60 seconds using comms-link.\n\nConductor PID: 4242\nWatcher mode: heartbeat-only (PID unavailable)";
    assert_eq!(role_of(watcher), Some(SOUFFLEUR_WATCHER));
    let teammate = "You are the Souffleur's self-monitor. Your job is to ensure the\nbackground watcher is alive by checking the Souffleur's heartbeat.";
    assert_eq!(role_of(teammate), Some(SOUFFLEUR_TEAMMATE));
    let pause = "You are task-03's pause watcher: every 10 s read its state; refresh last_heartbeat when older than 60 s; exit when it is no longer error or needs_review.";
    assert_eq!(role_of(pause), Some(MUSICIAN_PAUSE_WATCHER));
    let background = "Background watcher for task-03: poll orchestration_messages for id > 12 every 15 s and refresh last_heartbeat.";
    assert_eq!(role_of(background), Some(MUSICIAN_WATCHER));
    for ordinary in [
        "SUB-4K: list the files",
        "Add a unit test for the empty input edge case of extractContent()",
        "You are the Sentinel of this codebase: review it",
    ] {
        assert!(role_of(ordinary).is_none(), "{ordinary}");
    }
}

#[test]
fn writing_about_a_watcher_is_ordinary_work() {
    let t = musician("task-03");
    for near_miss in [
        "update the README section on the background watcher: it reads orchestration_messages and refreshes last_heartbeat",
        "Document in the docs folder how the background watcher polls orchestration_messages every 15 s and refreshes last_heartbeat",
        "Explain why the pause watcher checks needs_review every 10 seconds and refreshes the heartbeat",
        "Read orchestration_messages once and summarise the last heartbeat",
    ] {
        assert_eq!(role(near_miss, Some(true), Some(&t)), None, "{near_miss}");
        assert_eq!(role_of(near_miss), None, "{near_miss}");
    }
}

#[test]
fn typography_and_wrapping_do_not_hide_a_poller() {
    let curly = "You are the Sentinel \u{2014} a monitoring teammate watching Musicians\u{2019}\nprogress   logs for anomalies.";
    assert_eq!(role_of(curly), Some(SENTINEL));
    let blocks = serde_json::json!([
        {"type": "text", "text": "Poll the Conductor\u{2019}s liveness every ~60 seconds using comms-link."},
        {"type": "text", "text": "Conductor PID: 4242\nConductor session ID: 7f3c-AB_1\nAwaiting session ID: true\nWatcher mode: normal"},
    ]);
    let text = crate::core::text::prompt_text(&blocks).expect("text blocks");
    let found = recognise(&Launch {
        prompt: &text,
        ..Launch::default()
    });
    assert_eq!(
        found,
        Some(Poller::SouffleurWatcher {
            mode: WatcherMode::Normal,
            pid: Some(4242),
            session_id: Some("7f3c-AB_1".into()),
            awaiting_session_id: true,
        })
    );
}

#[test]
fn a_musicians_watcher_takes_its_task_from_the_session_then_the_prompt() {
    let prompt = "Every 15 seconds: query orchestration_messages for new messages to this task with id > 4; refresh last_heartbeat when older than 60 seconds; exit when one arrives.";
    let t = musician("task-07");
    assert_eq!(
        recognise(&Launch {
            prompt,
            background: Some(true),
            session_task: Some(&t),
        }),
        Some(Poller::MusicianWatcher {
            task: Some(t.clone()),
            pause: false
        })
    );
    let named = "Background watcher for task-05: poll orchestration_messages every 15 s, refresh last_heartbeat.";
    assert_eq!(
        recognise(&Launch {
            prompt: named,
            background: Some(true),
            session_task: None,
        }),
        Some(Poller::MusicianWatcher {
            task: Some(musician("task-05")),
            pause: false
        })
    );
    // The Conductor's session launches no Musician watcher.
    let conductor = musician("task-00");
    assert_eq!(role(named, Some(true), Some(&conductor)), None);
    // In the foreground, waiting for the state: the pause watcher.
    let pause = "Pause watcher: every 10 seconds read task-05's state from orchestration_tasks; refresh last_heartbeat when older than 60 s; exit when it is no longer needs_review or error.";
    assert_eq!(role(pause, Some(false), None), Some(MUSICIAN_PAUSE_WATCHER));
}

/// `maestro usage` names a loop's role as the guard does when it stops one: the
/// Conductor's inbox (with its logs or not) is its watcher's, its logs alone the
/// Sentinel's; a Musician's reads of the database its watcher's.
#[test]
fn a_loops_role_is_the_one_the_guard_names() {
    use crate::core::sessions::deeds::State;
    let conductor = TaskId::parse("task-00");
    let musician = TaskId::parse("task-03");
    let role = |states: &[State], task: &Option<TaskId>| role_of_loop(states, task.as_ref());
    assert_eq!(
        role(&[State::Logs, State::Comms], &conductor),
        CONDUCTOR_WATCHER
    );
    assert_eq!(role(&[State::Comms], &conductor), CONDUCTOR_WATCHER);
    assert_eq!(role(&[State::Logs], &conductor), SENTINEL);
    assert_eq!(role(&[State::Comms], &musician), MUSICIAN_WATCHER);
    assert_eq!(role(&[State::Logs], &None), SENTINEL);
}
