//! Key handling and ingest, tested on plain values.

use std::collections::VecDeque;

use time::OffsetDateTime;

use super::*;
use crate::core::domain::Anomaly;
use crate::core::domain::{AnomalyKind, LogKind, TaskId};
use crate::core::event::TaskRow;
use crate::core::event::{Happening, MessageRow, What};
use crate::core::snapshot::Snapshot;
use crate::core::snapshot::TaskView;
use crate::tui::action::Action;
use crate::tui::panes::log::scrollback::SCROLLBACK;
use crate::tui::panes::tasks::state::TaskSort;

pub(super) fn snap(ids: &[&str]) -> Snapshot {
    Snapshot {
        tasks: ids
            .iter()
            .map(|id| TaskView {
                row: TaskRow::new(*id, "working"),
                heartbeat: None,
                ctx: VecDeque::new(),
                last_anomaly: None,
                watched: true,
                forecast: None,
                sessions: Vec::new(),
                session_lost: false,
                needs_you: None,
                waiting_since: None,
            })
            .map(std::sync::Arc::new)
            .collect(),
        ..Snapshot::default()
    }
}

fn at() -> OffsetDateTime {
    OffsetDateTime::UNIX_EPOCH
}

pub(super) fn log(ui: &mut UiState, task: &str, kind: LogKind, lines: &[&str]) {
    ui.ingest(&Happening {
        told: None,
        at: at(),
        what: What::Log {
            task: TaskId::parse(task).unwrap(),
            kind,
            skipped: 0,
            lines: lines
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>()
                .into(),
            reset: false,
        },
    });
}

/// An anomaly about the line at `index` among the task's lines of `kind` (as the
/// Sentinel names it), whose text is `text`.
pub(super) fn anomaly(
    ui: &mut UiState,
    task: &str,
    kind: AnomalyKind,
    (log_kind, index, text): (LogKind, u64, &str),
) -> Option<Notification> {
    ui.ingest(&Happening {
        told: None,
        at: at(),
        what: What::Anomaly(Anomaly {
            task_id: TaskId::parse(task).unwrap(),
            kind,
            detail: format!("\"{text}\""),
            spike: None,
            line: Some(crate::core::domain::SourceLine {
                kind: log_kind,
                index,
                offset: None,
                text: text.into(),
            }),
        }),
    })
}

pub(super) fn ready(lines: usize) -> (UiState, Snapshot) {
    let s = snap(&["task-01", "task-02", "task-00"]);
    let mut ui = UiState::default();
    ui.sync_with(&s);
    let text: Vec<String> = (0..lines).map(|i| format!("line {i}")).collect();
    let refs: Vec<&str> = text.iter().map(String::as_str).collect();
    log(&mut ui, "task-01", LogKind::Status, &refs);
    (ui, s)
}

#[test]
fn tab_cycles_focus_and_number_keys_jump() {
    let (mut ui, s) = ready(0);
    let order: Vec<Pane> = (0..6)
        .map(|_| {
            ui.update(Action::FocusNext, &s);
            ui.focus
        })
        .collect();
    assert_eq!(
        order,
        [
            Pane::Log,
            Pane::Anomalies,
            Pane::Messages,
            Pane::Heartbeats,
            Pane::Watchdog,
            Pane::Tasks
        ]
    );
    ui.update(Action::FocusPrev, &s);
    assert_eq!(ui.focus, Pane::Watchdog);
    ui.update(Action::FocusMessages, &s);
    assert_eq!(ui.focus, Pane::Messages);
}

#[test]
fn selecting_a_task_points_the_log_at_it_and_skips_the_conductor() {
    let (mut ui, s) = ready(0);
    assert_eq!(
        ui.panes.log.task.as_ref().map(TaskId::as_str),
        Some("task-01")
    );
    ui.update(Action::Down, &s);
    assert_eq!(
        ui.panes.log.task.as_ref().map(TaskId::as_str),
        Some("task-02")
    );
    ui.update(Action::Down, &s);
    assert_eq!(ui.selected_task, 1, "task-00 is not a Musician row");
    ui.update(Action::Open, &s);
    assert_eq!(ui.focus, Pane::Log);
}

#[test]
fn scrolling_up_stops_following_and_counts_new_lines() {
    let (mut ui, s) = ready(50);
    ui.panes.log.height = 10;
    ui.update(Action::FocusLog, &s);
    assert!(ui.panes.log.pos.follow);
    ui.update(Action::Up, &s);
    assert!(!ui.panes.log.pos.follow);
    assert_eq!(ui.panes.log.pos.cursor, 48);
    log(&mut ui, "task-01", LogKind::Status, &["new 1", "new 2"]);
    log(&mut ui, "task-02", LogKind::Status, &["elsewhere"]);
    assert_eq!(ui.panes.log.pos.new_lines, 2);
    ui.update(Action::Bottom, &s);
    assert!(ui.panes.log.pos.follow);
    assert_eq!(ui.panes.log.pos.new_lines, 0);
    // Moving down past the end resumes following too.
    ui.update(Action::Up, &s);
    ui.update(Action::Down, &s);
    ui.update(Action::Down, &s);
    assert!(ui.panes.log.pos.follow);
}

#[test]
fn scrollback_is_bounded_and_positions_stay_valid() {
    let (mut ui, s) = ready(SCROLLBACK + 500);
    let log = ui.current_log().unwrap();
    assert_eq!(
        log.end() - log.start(),
        SCROLLBACK as u64 + 500,
        "merged keeps twice as many"
    );
    let status = &ui.panes.log.logs[&TaskId::parse("task-01").unwrap()].status;
    assert_eq!(status.end() - status.start(), SCROLLBACK as u64);
    assert_eq!(&*status.get(status.start()).unwrap().text, "line 500");
    ui.update(Action::FocusLog, &s);
    ui.update(Action::Top, &s);
    assert_eq!(ui.panes.log.pos.cursor, ui.current_log().unwrap().start());
}

#[test]
fn search_finds_newest_first_then_steps() {
    let (mut ui, s) = ready(0);
    log(
        &mut ui,
        "task-01",
        LogKind::Status,
        &["alpha", "needle 1", "beta", "needle 2", "gamma"],
    );
    // From the Tasks pane `/` filters the tasks; from the others it searches the log.
    ui.update(Action::FocusLog, &s);
    ui.update(Action::Search, &s);
    for c in "needle".chars() {
        ui.search_type(Some(c));
    }
    ui.search_finish(true);
    assert_eq!(ui.focus, Pane::Log);
    assert_eq!(ui.panes.log.pos.cursor, 3);
    ui.update(Action::SearchPrev, &s);
    assert_eq!(ui.panes.log.pos.cursor, 1);
    ui.update(Action::SearchPrev, &s);
    assert_eq!(ui.panes.log.pos.cursor, 3, "wraps round to the last match");
    assert_eq!(
        ui.note.as_deref(),
        Some("no more matches · wrapping to the last")
    );
    ui.update(Action::SearchNext, &s);
    assert_eq!(ui.panes.log.pos.cursor, 1, "and forward to the first");
    assert_eq!(
        ui.note.as_deref(),
        Some("no more matches · wrapping to the first")
    );
}

#[test]
fn enter_on_an_anomaly_jumps_to_its_line_and_marks_it_read() {
    let (mut ui, s) = ready(30);
    log(
        &mut ui,
        "task-02",
        LogKind::Status,
        &["a", "step 2 self-correction: x", "b"],
    );
    log(&mut ui, "task-02", LogKind::Deviations, &["High: y"]);
    let n = anomaly(
        &mut ui,
        "task-02",
        AnomalyKind::SelfCorrection,
        (LogKind::Status, 1, "step 2 self-correction: x"),
    );
    assert!(n.unwrap().title.contains("task-02 self-correction"));
    anomaly(
        &mut ui,
        "task-02",
        AnomalyKind::HighDeviation,
        (LogKind::Deviations, 0, "High: y"),
    );
    // A position whose text differs (a line this view never got) links nothing.
    anomaly(
        &mut ui,
        "task-02",
        AnomalyKind::SelfCorrection,
        (LogKind::Status, 2, "not the line at 2"),
    );
    assert_eq!(ui.panes.anomalies.rows.front().map(|a| a.line), Some(None));
    ui.panes.anomalies.rows.pop_front();
    assert_eq!(ui.unread_anomalies(), 2);
    ui.update(Action::FocusAnomalies, &s);
    ui.update(Action::Down, &s); // the older one: the self-correction
    ui.update(Action::Open, &s);
    assert_eq!(ui.focus, Pane::Log);
    assert_eq!(
        ui.panes.log.task.as_ref().map(TaskId::as_str),
        Some("task-02")
    );
    assert_eq!(ui.selected_task, 1);
    assert_eq!(ui.panes.log.pos.cursor, 1);
    assert!(!ui.panes.log.pos.follow);
    assert_eq!(ui.unread_anomalies(), 1);
    // ] and [ move between anomaly lines.
    ui.update(Action::NextAnomaly, &s);
    assert_eq!(
        &*ui.current_log()
            .unwrap()
            .get(ui.panes.log.pos.cursor)
            .unwrap()
            .text,
        "High: y"
    );
    ui.update(Action::PrevAnomaly, &s);
    assert_eq!(ui.panes.log.pos.cursor, 1);
    ui.update(Action::FocusAnomalies, &s);
    ui.update(Action::MarkAllRead, &s);
    assert_eq!(ui.unread_anomalies(), 0);
}

#[test]
fn copy_takes_mark_to_cursor() {
    let (mut ui, s) = ready(5);
    ui.update(Action::FocusLog, &s);
    ui.update(Action::Up, &s); // cursor on line 3
    ui.update(Action::Mark, &s);
    ui.update(Action::Up, &s); // cursor on line 2
    let fx = ui.update(Action::Copy, &s);
    assert_eq!(fx, [Effect::Copy("line 2\nline 3".into())]);
    assert_eq!(ui.note.as_deref(), Some("copied 2 lines"));
}

#[test]
fn messages_filter_and_open_full_text() {
    let (mut ui, s) = ready(0);
    for (id, task, kind) in [
        (1, "task-01", "review_request"),
        (2, "task-02", "error"),
        (3, "task-01", "approval"),
    ] {
        ui.ingest(&Happening {
            told: None,
            at: at(),
            what: What::Message(MessageRow {
                id,
                task_id: Some(task.into()),
                from_session: None,
                message_type: Some(kind.into()),
                message: Some(format!("text {id}")),
                timestamp: None,
            }),
        });
    }
    assert_eq!(
        ui.panes
            .messages
            .filtered()
            .map(|m| m.id)
            .collect::<Vec<_>>(),
        [3, 2, 1]
    );
    ui.update(Action::FocusMessages, &s);
    ui.update(Action::FilterTask, &s);
    assert_eq!(
        ui.panes
            .messages
            .filtered()
            .map(|m| m.id)
            .collect::<Vec<_>>(),
        [3, 1]
    );
    ui.update(Action::FilterType, &s);
    assert_eq!(ui.panes.messages.type_filter.as_deref(), Some("approval"));
    assert_eq!(
        ui.panes
            .messages
            .filtered()
            .map(|m| m.id)
            .collect::<Vec<_>>(),
        [3]
    );
    ui.update(Action::Open, &s);
    assert_eq!(
        ui.overlay_message().and_then(|m| m.message.as_deref()),
        Some("text 3")
    );
    ui.update(Action::Close, &s);
    assert!(ui.overlay.is_none());
}

#[test]
fn recovery_and_quit_ask_first_when_the_role_runs() {
    use crate::core::event::RoleView;
    use crate::core::watchdog::control::WatchdogCmd;
    let (mut ui, mut s) = ready(0);
    assert!(ui.update(Action::RecoverNow, &s).is_empty());
    assert!(ui.note.as_deref().unwrap().contains("no Souffleur role"));
    s.watchdog.role = Some(RoleView {
        phase: "watching".into(),
        mode: "normal".into(),
        generation: 1,
        no_progress: 0,
        held: false,
        conductor_pid: Some(42),
        session_id: "s".into(),
        next_check: None,
        last_provider: None,
        alert: None,
        settings: String::new(),
    });
    assert_eq!(
        ui.update(Action::ToggleHold, &s),
        [Effect::Watchdog(WatchdogCmd::Hold)]
    );
    assert!(ui.update(Action::RecoverNow, &s).is_empty());
    assert_eq!(ui.overlay, Some(Overlay::Confirm(Confirm::Recover)));
    assert!(
        ui.update(Action::Quit, &s).is_empty(),
        "other keys do not answer"
    );
    assert_eq!(
        ui.confirm(Confirm::Recover, true),
        [Effect::Watchdog(WatchdogCmd::Recover(
            crate::core::domain::souffleur::RecoveryKind::Relaunch
        ))]
    );
    assert!(ui.update(Action::Quit, &s).is_empty());
    assert_eq!(ui.overlay, Some(Overlay::Confirm(Confirm::QuitRole)));
    assert!(ui.update(Action::Close, &s).is_empty());
    assert!(ui.overlay.is_none());
    ui.update(Action::Quit, &s);
    assert_eq!(ui.update(Action::Open, &s), [Effect::Quit]);
}

#[test]
fn the_pipelines_overlay_and_the_step_editor() {
    use crate::core::snapshot::PipelineView;
    let (mut ui, mut s) = ready(0);
    let view = |name: &str, status: &str| PipelineView {
        name: name.into(),
        steps: 1,
        status: status.into(),
        iteration: 0,
        step: None,
        outcome: None,
        history: Vec::new(),
        trusted: true,
    };
    s.pipelines = vec![view("build", "running"), view("lint", "paused")];
    ui.update(Action::Sentinels, &s);
    assert_eq!(ui.overlay, Some(Overlay::Sentinels));
    assert_eq!(
        ui.update(Action::PipelineStop, &s),
        [Effect::Pipeline {
            op: "stop",
            name: "build".into()
        }]
    );
    ui.update(Action::Down, &s);
    ui.update(Action::Down, &s);
    assert_eq!(ui.selected_pipeline, 1, "stays on the last row");
    assert_eq!(
        ui.update(Action::PipelinePause, &s),
        [Effect::Pipeline {
            op: "resume",
            name: "lint".into()
        }]
    );
    assert_eq!(
        ui.update(Action::EditSteps, &s),
        [Effect::EditSteps("lint".into())]
    );
    ui.open_editor("lint".into(), "[\n  {}\n]");
    assert_eq!(ui.overlay, Some(Overlay::Editor("lint".into())));
    assert_eq!(
        ui.update(Action::SaveEdit, &s),
        [Effect::SaveSteps {
            name: "lint".into(),
            steps: "[\n  {}\n]".into()
        }]
    );
    assert!(ui.editor.is_some(), "open until the save is accepted");
    assert!(ui.update(Action::Close, &s).is_empty());
    assert_eq!(ui.overlay, Some(Overlay::Sentinels));
    ui.update(Action::Close, &s);
    assert!(ui.overlay.is_none());
}

#[test]
fn help_overlay_takes_keys_until_closed_and_q_always_quits() {
    let (mut ui, s) = ready(0);
    ui.update(Action::Help, &s);
    assert_eq!(ui.overlay, Some(Overlay::Help));
    ui.update(Action::FocusNext, &s);
    assert_eq!(
        ui.focus,
        Pane::Tasks,
        "keys do not reach the panes under an overlay"
    );
    ui.update(Action::Help, &s);
    assert!(ui.overlay.is_none());
    ui.update(Action::Help, &s);
    assert_eq!(ui.update(Action::Quit, &s), [Effect::Quit]);
}

#[test]
fn zoom_shows_the_focused_pane_alone_and_comes_back() {
    let s = snap(&["task-01"]);
    let mut ui = UiState::default();
    ui.update(Action::FocusAnomalies, &s);
    ui.update(Action::Zoom, &s);
    assert_eq!(ui.zoomed, Some(Pane::Anomalies));
    ui.update(Action::Zoom, &s);
    assert_eq!(ui.zoomed, None);
}

/// `/` in the Tasks pane filters the tasks as one types, Enter keeps the filter, Esc
/// drops it; `o` cycles the order; task actions act on the row shown selected.
#[test]
fn tasks_filter_and_sort_and_the_selection_follows_what_is_shown() {
    let mut s = snap(&["task-01", "task-02", "task-12"]);
    let mut rows: Vec<TaskView> = s.tasks.iter().map(|t| (**t).clone()).collect();
    rows[0].row.state = "needs_review".into();
    rows[0].ctx = VecDeque::from([10]);
    rows[1].ctx = VecDeque::from([70]);
    rows[2].ctx = VecDeque::from([40]);
    s.tasks = rows.into_iter().map(std::sync::Arc::new).collect();
    let mut ui = UiState::default();
    ui.update(Action::Search, &s);
    assert!(ui.panes.tasks.filtering);
    for c in "ask-1".chars() {
        ui.search_type(Some(c));
    }
    let ids = |ui: &UiState| {
        ui.shown_tasks(&s)
            .iter()
            .map(|t| t.id().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&ui), ["task-12"], "live, while typing");
    ui.search_finish(true);
    assert_eq!(ui.panes.tasks.filter.as_deref(), Some("ask-1"));
    assert_eq!(ui.panes.log.search, None, "the log search is untouched");
    // The selection is the shown row: the session overlay opens for task-12.
    ui.update(Action::Session, &s);
    assert_eq!(ui.overlay, Some(Overlay::Session("task-12".into())));
    ui.overlay = None;
    ui.update(Action::Search, &s);
    ui.search_finish(false);
    assert_eq!(
        ids(&ui),
        ["task-01", "task-02", "task-12"],
        "Esc drops the filter"
    );
    let selected = |ui: &UiState| ids(ui)[ui.selected_task].clone();
    ui.selected_task = 1;
    assert_eq!(selected(&ui), "task-02");
    ui.update(Action::SortTasks, &s);
    assert_eq!(ui.panes.tasks.sort, TaskSort::State);
    assert_eq!(ids(&ui)[0], "task-01", "needs_review before working");
    assert_eq!(selected(&ui), "task-02", "the selection follows its task");
    ui.update(Action::SortTasks, &s);
    assert_eq!(
        ids(&ui),
        ["task-02", "task-12", "task-01"],
        "by context, highest first"
    );
    assert_eq!(selected(&ui), "task-02");
}

/// A task that starts waiting for the operator moves to the top of the Tasks pane; the
/// selection stays on the task it was on.
#[test]
fn a_task_that_needs_you_comes_first_and_the_selection_stays_put() {
    let s = snap(&["task-01", "task-02", "task-03"]);
    let mut ui = UiState::default();
    ui.sync_with(&s);
    ui.update(Action::Down, &s);
    assert_eq!(
        ui.panes.log.task.as_ref().map(TaskId::as_str),
        Some("task-02")
    );
    let mut rows: Vec<TaskView> = s.tasks.iter().map(|t| (**t).clone()).collect();
    rows[2].needs_you = Some(("permission for Bash `cargo publish`".into(), at()));
    let s2 = Snapshot {
        tasks: rows.into_iter().map(std::sync::Arc::new).collect(),
        ..Snapshot::default()
    };
    ui.sync_with(&s2);
    let order: Vec<String> = ui
        .shown_tasks(&s2)
        .iter()
        .map(|t| t.id().to_owned())
        .collect();
    assert_eq!(order, ["task-03", "task-01", "task-02"]);
    assert_eq!(ui.shown_tasks(&s2)[ui.selected_task].id(), "task-02");
}

/// `w` builds a window PID file's path from the task id: an id from the database that is
/// not a task id (`task-1/../../x`) reaches no path; the operator is told why.
#[test]
fn go_to_window_on_a_task_id_that_climbs_out_of_temp_builds_no_path() {
    let s = snap(&["task-1/../../../etc/passwd"]);
    let mut ui = UiState::default();
    ui.sync_with(&s);
    let effects = ui.update(Action::GoToWindow, &s);
    assert!(effects.is_empty(), "{effects:?}");
    let note = ui.note.clone().unwrap_or_default();
    assert!(note.contains("not a task id"), "{note}");
    let s = snap(&["task-03"]);
    ui.sync_with(&s);
    let effects = ui.update(Action::GoToWindow, &s);
    assert!(
        matches!(effects.as_slice(), [Effect::Focus(t)] if t.window_pid_file() == "musician-task-03.pid"),
        "{effects:?}"
    );
}

/// One selection, as a state machine over what moves it: j/k, Enter on an anomaly, a
/// filter typed and kept or dropped, Enter on a row, a task disappearing. After every
/// input the selected row, the Log's task and what the action keys act on are the same
/// task (the case: an anomaly jump to task-03, then a filter to task-02).
#[test]
fn one_selection_whatever_moves_it() {
    let full = snap(&["task-01", "task-02", "task-03"]);
    let mut ui = UiState::default();
    ui.sync_with(&full);
    for t in ["task-01", "task-02", "task-03"] {
        log(
            &mut ui,
            t,
            LogKind::Status,
            &["a", "step 2 self-correction: x"],
        );
    }
    anomaly(
        &mut ui,
        "task-03",
        AnomalyKind::SelfCorrection,
        (LogKind::Status, 1, "step 2 self-correction: x"),
    );
    let selected = |ui: &UiState, s: &Snapshot| {
        ui.shown_tasks(s)
            .get(ui.selected_task)
            .map(|t| t.id().to_owned())
    };
    let check = |ui: &UiState, s: &Snapshot, want: &str, after: &str| {
        assert_eq!(selected(ui, s).as_deref(), Some(want), "row, after {after}");
        assert_eq!(
            ui.panes.log.task.as_ref().map(TaskId::as_str),
            Some(want),
            "Log, after {after}"
        );
    };
    let step = |ui: &mut UiState, s: &Snapshot, action: Action| {
        ui.update(action, s);
        ui.sync_with(s);
    };
    // Enter on the anomaly: the Log and the row go to task-03.
    step(&mut ui, &full, Action::FocusAnomalies);
    step(&mut ui, &full, Action::Open);
    check(&ui, &full, "task-03", "Enter on an anomaly");
    // A filter to task-02: the only row, and the Log follows it.
    step(&mut ui, &full, Action::FocusTasks);
    step(&mut ui, &full, Action::Search);
    for c in "task-02".chars() {
        ui.search_type(Some(c));
        ui.sync_with(&full);
    }
    ui.search_finish(true);
    ui.sync_with(&full);
    check(&ui, &full, "task-02", "a filter");
    step(&mut ui, &full, Action::Open);
    check(&ui, &full, "task-02", "Enter on the row");
    step(&mut ui, &full, Action::FocusTasks);
    // Esc drops the filter: the selection stays on task-02.
    step(&mut ui, &full, Action::Search);
    ui.search_finish(false);
    ui.sync_with(&full);
    check(&ui, &full, "task-02", "Esc");
    // j and k move both.
    step(&mut ui, &full, Action::Down);
    check(&ui, &full, "task-03", "j");
    step(&mut ui, &full, Action::Up);
    step(&mut ui, &full, Action::Up);
    check(&ui, &full, "task-01", "k");
    // The selected task disappears: the selection and the Log land on a listed task.
    let fewer = snap(&["task-02", "task-03"]);
    ui.sync_with(&fewer);
    let now = selected(&ui, &fewer).expect("a row");
    check(&ui, &fewer, &now, "the task disappearing");
    // Enter on an anomaly of a task the filter hides: the filter goes, the row is it.
    step(&mut ui, &full, Action::Search);
    for c in "task-01".chars() {
        ui.search_type(Some(c));
    }
    ui.search_finish(true);
    ui.sync_with(&full);
    check(&ui, &full, "task-01", "a filter again");
    step(&mut ui, &full, Action::FocusAnomalies);
    step(&mut ui, &full, Action::Open);
    check(
        &ui,
        &full,
        "task-03",
        "Enter on an anomaly of a hidden task",
    );
    assert_eq!(ui.panes.tasks.filter, None);
}

/// After a restart, restated anomalies keep their first time and go where it puts
/// them: the list stays newest first.
#[test]
fn anomalies_stay_newest_first_when_a_restatement_is_older() {
    let mut ui = UiState::default();
    let told = |ui: &mut UiState, minute: i64| {
        ui.ingest(&Happening {
            told: None,
            at: at() + time::Duration::minutes(minute),
            what: What::Anomaly(Anomaly {
                task_id: TaskId::parse("task-01").unwrap(),
                kind: AnomalyKind::SelfCorrection,
                detail: format!("minute {minute}"),
                spike: None,
                line: None,
            }),
        });
    };
    for minute in [0, 71, 4, 2, 90] {
        told(&mut ui, minute);
    }
    let order: Vec<&str> = ui
        .panes
        .anomalies
        .rows
        .iter()
        .map(|a| a.detail.as_str())
        .collect();
    assert_eq!(
        order,
        ["minute 90", "minute 71", "minute 4", "minute 2", "minute 0"]
    );
}
