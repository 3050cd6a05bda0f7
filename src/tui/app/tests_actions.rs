//! Task actions from the keyboard: asked first, sent once confirmed, and nothing typed
//! lost on the way.

use super::tests::snap;
use super::*;
use crate::core::domain::TaskId;
use crate::tui::action::Action;

#[test]
fn task_action_keys_ask_first_and_send_what_was_confirmed() {
    use crate::core::actions::TaskRequest;
    let s = snap(&["task-01", "task-02", "task-00"]);
    let mut ui = UiState::default();
    ui.sync_with(&s);
    let task = |id: &str| TaskId::parse(id).unwrap();
    // A plain action first finds out what it will do…
    assert_eq!(
        ui.update(Action::Approve, &s),
        [Effect::DescribeTask(TaskRequest::Approve {
            task: task("task-01"),
            message: None
        })]
    );
    // …then asks; only `yes` sends it, and the status line says so.
    let request = TaskRequest::Kill {
        task: task("task-01"),
    };
    ui.ask_confirmation(
        request.clone(),
        "task-01's window, PID 42, gets SIGTERM".into(),
    );
    assert!(matches!(&ui.overlay, Some(Overlay::Confirm(c)) if c.question().contains("PID 42")));
    assert!(
        ui.update(Action::Down, &s).is_empty(),
        "other keys do nothing"
    );
    assert_eq!(ui.update(Action::Yes, &s), [Effect::Task(request.clone())]);
    assert_eq!(ui.actions_in_flight, 1);
    ui.action_done(Err::<String, _>(
        "task-01's window (PID 42) is not running.",
    ));
    assert_eq!(ui.actions_in_flight, 0);
    assert!(ui.note.as_deref().unwrap().starts_with("refused:"));
    ui.ask_confirmation(request, "again".into());
    assert!(ui.update(Action::No, &s).is_empty());
    assert_eq!(ui.overlay, None);

    // A message action opens the editor; an empty message is refused, text is sent on.
    ui.update(Action::Down, &s);
    assert!(ui.update(Action::Instruct, &s).is_empty());
    assert!(matches!(&ui.overlay, Some(Overlay::Compose(c)) if c.task == task("task-02")));
    assert!(ui.update(Action::SaveEdit, &s).is_empty());
    assert!(ui.note.as_deref().unwrap().contains("empty"));
    ui.compose.as_mut().unwrap().insert_str("rebase on main");
    assert_eq!(
        ui.update(Action::SaveEdit, &s),
        [Effect::DescribeTask(TaskRequest::Instruct {
            task: task("task-02"),
            message: "rebase on main".into()
        })]
    );
    assert_eq!(ui.overlay, None);
    // Esc discards.
    ui.update(Action::Reject, &s);
    assert!(ui.update(Action::Close, &s).is_empty());
    assert!(ui.compose.is_none());
    assert_eq!(
        ui.update(Action::Headroom, &s),
        [Effect::Headroom(task("task-02"))]
    );
}

/// Nothing typed is lost: the fix editor does not open on a task that cannot take a
/// fix (and says why); a message whose action is refused, or not confirmed, comes back
/// to the editor; Escape asks once before it drops more than a line.
#[test]
fn nothing_typed_is_lost() {
    let s = snap(&["task-01"]);
    let mut ui = UiState::default();
    ui.sync_with(&s);
    assert!(ui.update(Action::ProposeFix, &s).is_empty());
    assert_eq!(ui.overlay, None, "task-01 is working, not in error");
    let note = ui.note.clone().unwrap();
    assert!(note.starts_with("task-01 is working, not error"), "{note}");

    ui.update(Action::Instruct, &s);
    ui.compose.as_mut().unwrap().insert_str("rebase on main");
    ui.compose.as_mut().unwrap().insert_newline();
    ui.compose
        .as_mut()
        .unwrap()
        .insert_str("then run the tests");
    // Escape with two lines typed: asked first, kept.
    assert!(ui.update(Action::Close, &s).is_empty());
    assert!(ui.compose.is_some(), "{:?}", ui.note);
    assert!(
        ui.note
            .as_deref()
            .unwrap()
            .contains("Esc again discards these 2 lines")
    );
    let sent = ui.update(Action::SaveEdit, &s);
    assert_eq!(sent.len(), 1);
    // Refused before the confirmation: the refusal whole, the text back in the editor.
    ui.refused("task-01 is not in orchestration_tasks.");
    assert!(
        ui.note
            .as_deref()
            .unwrap()
            .starts_with("refused: task-01 is not in orchestration_tasks.")
    );
    assert!(matches!(ui.overlay, Some(Overlay::Compose(_))));
    assert_eq!(
        ui.compose.as_ref().unwrap().lines(),
        ["rebase on main", "then run the tests"]
    );
    // Sent again, confirmation declined: back in the editor too.
    let Effect::DescribeTask(request) = ui.update(Action::SaveEdit, &s).remove(0) else {
        panic!("a request");
    };
    ui.ask_confirmation(request, "send it?".into());
    ui.update(Action::No, &s);
    assert!(matches!(ui.overlay, Some(Overlay::Compose(_))));
    assert_eq!(ui.compose.as_ref().unwrap().lines().len(), 2);
    // Escape twice drops it.
    ui.update(Action::Close, &s);
    ui.update(Action::Close, &s);
    assert!(ui.compose.is_none() && ui.overlay.is_none());
}

/// On a quiet project (no snapshot comes after the key), a filter or a sort leaves the
/// Log on the selected row's task (▶), which is the task the action keys act on.
#[test]
fn after_a_filter_or_a_sort_the_log_is_the_selected_row_without_a_new_snapshot() {
    let s = snap(&["task-02", "task-05", "task-07"]);
    let mut ui = UiState::default();
    ui.sync_with(&s);
    ui.update(Action::Down, &s);
    assert_eq!(
        ui.panes.log.task.as_ref().map(TaskId::as_str),
        Some("task-05")
    );
    let selected = |ui: &UiState| {
        ui.shown_tasks(&s)
            .get(ui.selected_task)
            .map(|t| t.id().to_owned())
    };
    // A filter that hides the shown task: typed, then kept; no sync_with in between.
    ui.update(Action::Search, &s);
    for c in "07".chars() {
        ui.search_type(Some(c));
        ui.log_follows_selection(&s);
    }
    ui.search_finish(true);
    ui.log_follows_selection(&s);
    assert_eq!(selected(&ui).as_deref(), Some("task-07"));
    assert_eq!(
        ui.panes.log.task.as_ref().map(TaskId::as_str),
        Some("task-07")
    );
    // Esc drops it; a sort moves the rows; the Log stays the selected row's.
    ui.update(Action::Search, &s);
    ui.search_finish(false);
    ui.log_follows_selection(&s);
    ui.update(Action::SortTasks, &s);
    assert_eq!(
        ui.panes.log.task.as_ref().map(TaskId::as_str),
        selected(&ui).as_deref()
    );
}

/// Every action of the global scope has its arm in `global`: none falls through the
/// catch-all meant for the other scopes.
#[test]
fn every_global_action_is_answered() {
    use crate::tui::action::Scope;
    let s = snap(&["task-01", "task-00"]);
    for action in Action::ALL
        .into_iter()
        .filter(|a| a.scope() == Scope::Global)
    {
        let mut ui = UiState::default();
        ui.sync_with(&s);
        assert!(ui.global(action, &s).is_some(), "{action:?} has no arm");
    }
}
