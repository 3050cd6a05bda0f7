//! A task's Claude Code session through the hub: usage told at most every 10 s,
//! budgets once each, the forecast from the transcript, a session whose process ended.

use super::*;

/// A session's figures after these transcript lines (Sonnet prices).
fn session(lines: &[String]) -> Box<crate::core::sessions::figures::SessionFigures> {
    let prices = crate::core::sessions::prices::PriceTable::default();
    let mut t = crate::core::sessions::tally::Tally::new();
    for l in lines {
        t.feed(l, &prices);
    }
    Box::new(crate::core::sessions::figures::SessionFigures::of(
        crate::core::sessions::figures::Whose {
            task_id: "task-01",
            session_id: "s1",
            file: std::path::Path::new("/h/.claude/projects/p/s1.jsonl"),
            found_by: "transcript",
        },
        &t,
        &[],
        0,
        &crate::core::sessions::ContextWindows::default(),
    ))
}

/// A response of `output` Sonnet output tokens ($15 per million), ending the turn or
/// calling a tool.
fn response(n: u32, output: u64, tool: bool) -> String {
    let content = if tool {
        r#"[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cargo test"}}]"#
    } else {
        r#"[{"type":"text","text":"done"}]"#
    };
    let stop = if tool { "tool_use" } else { "end_turn" };
    format!(
        r#"{{"type":"assistant","sessionId":"s1","requestId":"r{n}","message":{{"id":"m{n}","model":"claude-sonnet-4-5","content":{content},"stop_reason":"{stop}","usage":{{"input_tokens":0,"output_tokens":{output}}}}}}}"#
    )
}

fn session_events(got: &[What]) -> Vec<(&'static str, Option<f64>)> {
    got.iter()
        .filter_map(|w| match w {
            What::Session {
                status, figures, ..
            } => Some((
                *status,
                // In cents, as shown.
                figures
                    .as_ref()
                    .and_then(|f| f.cost_usd)
                    .map(|c| (c * 100.0).round() / 100.0),
            )),
            _ => None,
        })
        .collect()
}

fn budget_events(got: &[What]) -> Vec<(&'static str, u8)> {
    got.iter()
        .filter_map(|w| match w {
            What::Budget { budget, level, .. } => Some((*budget, *level)),
            _ => None,
        })
        .collect()
}

/// Usage is told at most every 10 s (the last figures always, when the interval is
/// over), a change of activity at once, and each budget level once.
#[tokio::test(start_paused = true)]
async fn session_usage_is_told_at_most_every_ten_seconds_and_budgets_once_each() {
    use crate::core::sessions::figures::SessionReport;
    let mut hub_settings = settings(false);
    hub_settings.rules.budgets.task_usd = Some(1.0);
    let mut r = rig_with(
        vec![CoreEvent::Tasks(vec![row("task-01", "working", START)])],
        hub_settings,
    );
    drain(&mut r.out).await;
    let mut lines = vec![response(1, 30_000, false)];
    r.events
        .send(CoreEvent::Session(SessionReport::Found(session(&lines))))
        .await
        .unwrap();
    let got = drain(&mut r.out).await;
    assert_eq!(session_events(&got), vec![("found", Some(0.45))]);
    assert!(budget_events(&got).is_empty());
    // $0.87: past 80 % of the task's budget; the same activity, so no usage yet.
    lines.push(response(2, 28_000, false));
    r.events
        .send(CoreEvent::Session(SessionReport::Update(session(&lines))))
        .await
        .unwrap();
    let got = drain(&mut r.out).await;
    assert!(session_events(&got).is_empty(), "{got:?}");
    assert_eq!(budget_events(&got), vec![("task_usd", 80)]);
    // The interval over, the last figures are told.
    let (_, what) = next(&mut r.out).await;
    assert_eq!(session_events(&[what]), vec![("usage", Some(0.87))]);
    // A tool call is a change of activity: told at once; $1.02 passes the budget.
    lines.push(response(3, 10_000, true));
    r.events
        .send(CoreEvent::Session(SessionReport::Update(session(&lines))))
        .await
        .unwrap();
    let got = drain(&mut r.out).await;
    assert_eq!(session_events(&got), vec![("activity", Some(1.02))]);
    assert_eq!(budget_events(&got), vec![("task_usd", 100)]);
    lines.push(response(4, 10_000, true));
    r.events
        .send(CoreEvent::Session(SessionReport::Update(session(&lines))))
        .await
        .unwrap();
    assert!(budget_events(&drain(&mut r.out).await).is_empty());
}

/// A main-chain response with `context` tokens in use.
fn context_response(n: u32, context: u64) -> String {
    format!(
        r#"{{"type":"assistant","sessionId":"s1","requestId":"c{n}","message":{{"id":"c{n}","model":"claude-sonnet-4-5","content":[],"usage":{{"input_tokens":{context},"output_tokens":1}}}}}}"#
    )
}

/// Once a task's session is known, its forecast follows the transcript's context, not
/// the Musician's own `[ctx]` lines.
#[tokio::test(start_paused = true)]
async fn the_forecast_follows_the_transcript_once_a_session_is_known() {
    use crate::core::sessions::figures::SessionReport;
    let mut r = rig(
        vec![CoreEvent::Tasks(vec![row("task-01", "working", START)])],
        false,
    );
    r.events
        .send(CoreEvent::Session(SessionReport::Found(session(&[
            context_response(1, 40_000),
        ]))))
        .await
        .unwrap();
    drain(&mut r.out).await;
    // The self-report says little and would forecast nothing soon.
    r.events
        .send(lines("task-01", LogKind::Status, &["step [ctx: 5%]"]))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    r.events
        .send(lines("task-01", LogKind::Status, &["step [ctx: 5%]"]))
        .await
        .unwrap();
    // The transcript: 20 % -> 40 % -> 50 % a minute apart: 65 % is soon.
    r.events
        .send(CoreEvent::Session(SessionReport::Update(session(&[
            context_response(1, 40_000),
            context_response(2, 80_000),
        ]))))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    r.events
        .send(CoreEvent::Session(SessionReport::Update(session(&[
            context_response(1, 40_000),
            context_response(2, 80_000),
            context_response(3, 100_000),
        ]))))
        .await
        .unwrap();
    let got = drain(&mut r.out).await;
    assert!(
        got.iter()
            .any(|w| matches!(w, What::Forecast { threshold: 65, .. })),
        "{got:?}"
    );
}

fn activities(got: &[What]) -> Vec<String> {
    got.iter()
        .filter_map(|w| match w {
            What::Session {
                status: "activity",
                figures: Some(f),
                ..
            } => Some(f.activity.clone()),
            _ => None,
        })
        .collect()
}

/// The process of a session ends (killed in the middle of a tool call): the session is
/// `ended`, whatever its transcript's last line says, until a live process speaks for
/// it again.
#[tokio::test(start_paused = true)]
async fn a_session_whose_process_ended_is_ended_until_a_live_one_speaks_for_it() {
    use crate::core::hooks::book::HookInput;
    use crate::core::hooks::event::HookEvent;
    use crate::core::sessions::figures::SessionReport;
    let mut r = rig(
        vec![CoreEvent::Tasks(vec![row("task-01", "working", START)])],
        false,
    );
    drain(&mut r.out).await;
    let lines = vec![response(1, 100, true)];
    r.events
        .send(CoreEvent::Session(SessionReport::Found(session(&lines))))
        .await
        .unwrap();
    drain(&mut r.out).await;
    let hook = |event: HookEvent, alive: bool| {
        CoreEvent::Hooks(vec![HookInput {
            event,
            window_task: None,
            claude_alive: alive,
        }])
    };
    r.events
        .send(hook(
            HookEvent::process_ended("s1", (4242, Some(7)), 0),
            false,
        ))
        .await
        .unwrap();
    assert_eq!(activities(&drain(&mut r.out).await), ["ended"]);
    // The transcript read again says nothing new: still ended.
    r.events
        .send(CoreEvent::Session(SessionReport::Update(session(&lines))))
        .await
        .unwrap();
    assert!(activities(&drain(&mut r.out).await).is_empty());
    // A live process runs the session's hooks again (`claude --resume`).
    let mut resumed = HookEvent::process_ended("s1", (4343, Some(9)), 0);
    resumed.event = "UserPromptSubmit".into();
    r.events.send(hook(resumed, true)).await.unwrap();
    r.events
        .send(CoreEvent::Session(SessionReport::Update(session(&lines))))
        .await
        .unwrap();
    assert_eq!(activities(&drain(&mut r.out).await), ["waiting"]);
}
