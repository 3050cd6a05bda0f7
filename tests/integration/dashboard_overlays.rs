//! Dashboard overlays and dialogs rendered through ratatui's test backend: the
//! Souffleur's watchdog pane and its confirmation, the pipelines overlay, task action
//! dialogs, the session overlay and the projects bar.
#![allow(clippy::unwrap_used)]

use crate::dashboard::{busy_snapshot, busy_ui, now, render, render_projects, text};
use maestro::core::domain::TaskId;
use maestro::core::snapshot::Snapshot;
use maestro::tui::action::Action;
use maestro::tui::project_tab::ProjectTab;

#[test]
fn souffleur_role_in_the_watchdog_pane_and_a_confirmation() {
    let mut snap = busy_snapshot();
    snap.watchdog.role = Some(maestro::core::event::RoleView {
        phase: "watching".into(),
        mode: "heartbeat-only".into(),
        generation: 3,
        no_progress: 1,
        held: true,
        conductor_pid: None,
        session_id: "5f2e".into(),
        next_check: Some(now() + time::Duration::seconds(42)),
        last_provider: Some(("lethe".into(), "success".into())),
        alert: Some("automatic recovery held".into()),
        settings: String::new(),
    });
    let mut ui = busy_ui(&snap);
    // The Watchdog pane says the role (the dialog, drawn over the middle, may hide it).
    let pane = text(&render(&snap, &ui, 140, 40));
    for needle in ["HELD", "S3", "heartbeat-only", "in 42s", "lethe success"] {
        assert!(pane.contains(needle), "missing {needle:?}:\n{pane}");
    }
    ui.update(Action::RecoverNow, &snap);
    let out = text(&render(&snap, &ui, 140, 40));
    assert!(
        out.contains("Recover the Conductor now?"),
        "no dialog:\n{out}"
    );
    insta::assert_snapshot!(out);
}

#[test]
fn the_pipelines_overlay() {
    let mut snap = busy_snapshot();
    snap.pipelines = vec![maestro::core::snapshot::PipelineView {
        name: "build-fix".into(),
        steps: 3,
        status: "running".into(),
        iteration: 4,
        step: Some(1),
        outcome: Some("exit 101".into()),
        history: vec![maestro::core::event::StepRecord {
            pipeline: "build-fix".into(),
            run_started: "2026-11-22T10:00:00Z".into(),
            iteration: 4,
            step: 0,
            step_type: "command".into(),
            started: "2026-11-22T10:04:12.250Z".into(),
            duration_ms: 8210,
            outcome: "exit 101".into(),
            excerpt: "error[E0308]: mismatched types".into(),
        }],
        trusted: true,
    }];
    let mut ui = busy_ui(&snap);
    ui.update(Action::Sentinels, &snap);
    let out = text(&render(&snap, &ui, 140, 40));
    assert!(
        out.contains("build-fix") && out.contains("running") && out.contains("exit 101"),
        "{out}"
    );
    assert!(
        out.contains("Recent steps of build-fix")
            && out.contains("8210 ms")
            && out.contains("mismatched types"),
        "the selected pipeline's history: {out}"
    );
    insta::assert_snapshot!(out);
}

#[test]
fn task_action_dialogs_the_message_editor_the_headroom_panel_and_zoom() {
    use maestro::core::actions::TaskRequest;
    let snap = busy_snapshot();
    let task = TaskId::parse("task-05").unwrap();

    let mut ui = busy_ui(&snap);
    ui.ask_confirmation(
        TaskRequest::Relaunch { task: task.clone() },
        "Relaunch task-05 after a crash handoff (no HANDOFF)? PID 4242 gets SIGTERM (SIGKILL after the grace period) and its PID file is removed; the task moves working -> fix_proposed with a `handoff` message; window \"Musician: task-05 (S2)\" opens for musician-task-05-S2.".into(),
    );
    let dialog = text(&render(&snap, &ui, 140, 40));
    assert!(
        dialog.contains("PID 4242 gets SIGTERM") && dialog.contains("(S2)"),
        "{dialog}"
    );
    insta::assert_snapshot!("relaunch_confirmation", dialog);

    let mut ui = busy_ui(&snap);
    ui.update(Action::FocusTasks, &snap);
    ui.update(Action::Instruct, &snap);
    ui.compose
        .as_mut()
        .unwrap()
        .insert_str("Rebase on main, then rerun the parser tests.");
    let editor = text(&render(&snap, &ui, 140, 40));
    assert!(
        editor.contains("Instruction · task-05 · ctrl-s send · esc discard"),
        "{editor}"
    );
    insta::assert_snapshot!("instruction_editor", editor);

    let mut ui = busy_ui(&snap);
    let report = maestro::core::headroom::analyze(Some("step 1 of 3 started [ctx: 40%]\nstep 1 agent 1 launched [ctx: 45%]\nstep 1 agent 1 returned [ctx: 62%]\n"))
        .render("task-05", "temp/task-05-status");
    ui.show_panel(&task, report);
    let panel = text(&render(&snap, &ui, 140, 40));
    assert!(
        panel.contains("Headroom · task-05") && panel.contains("CAUTION (context at 62%)"),
        "{panel}"
    );
    insta::assert_snapshot!("headroom_panel", panel);

    let mut ui = busy_ui(&snap);
    ui.update(Action::FocusMessages, &snap);
    ui.update(Action::Zoom, &snap);
    let zoomed = text(&render(&snap, &ui, 80, 24));
    assert!(
        zoomed.contains("Messages") && !zoomed.contains("Heartbeats"),
        "{zoomed}"
    );
    insta::assert_snapshot!("zoomed_messages_80x24", zoomed);
}

/// `s` on the selected task: its session's figures, its context against the
/// Musician's own estimate, and its last tool calls with their results.
#[test]
fn the_session_overlay() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.update(Action::Session, &snap);
    let out = text(&render(&snap, &ui, 140, 40));
    for needle in [
        "Session · task-05",
        "found by transcript",
        "claude-sonnet-4-5-20250929",
        "68.0% of 200.0k · self-report 51%",
        "waits 3s Edit src/parser/expr.rs",
        "last error  2 tests failed",
        "error   Bash cargo test -q",
        "Read docs/tasks/spec.md",
    ] {
        assert!(out.contains(needle), "{needle:?} not in\n{out}");
    }
    insta::assert_snapshot!(out);
}

/// The session overlay's transcript path, longer than a row, is folded after a `/`:
/// every row a whole run of folders, none marked cut, the rows together the path.
#[test]
fn the_session_overlays_path_is_folded_whole() {
    let mut snap = busy_snapshot();
    let path = "/home/ana-maria/.claude/projects/-home-ana-maria-work-clients-parser-rewrite-main/7f3c2a7d-1e5b-4c60-9f3c-2a7d1e5b4c60.jsonl";
    let t5 = snap.tasks.iter_mut().find(|t| t.id() == "task-05").unwrap();
    let t5 = std::sync::Arc::make_mut(t5);
    let mut figures = (*t5.sessions[0]).clone();
    figures.file = path.to_owned();
    t5.sessions[0] = std::sync::Arc::new(figures);
    for (width, height) in [(80, 24), (120, 40)] {
        let mut ui = busy_ui(&snap);
        ui.update(Action::Session, &snap);
        let out = text(&render(&snap, &ui, width, height));
        let rows: Vec<Vec<char>> = out.lines().map(|r| r.chars().collect()).collect();
        let (first, col) = rows
            .iter()
            .enumerate()
            .find_map(|(y, r)| {
                let text: String = r.iter().collect();
                let at = text.find("file        /home/")?;
                Some((y, text[..at].chars().count() + 12))
            })
            .unwrap_or_else(|| panic!("no file row in\n{out}"));
        // The value column, row by row, while the label column is blank.
        let mut pieces = String::new();
        for (n, row) in rows[first..].iter().enumerate() {
            let label: String = row[col - 12..col].iter().collect();
            if n > 0 && !label.trim().is_empty() {
                break;
            }
            let value: String = row[col..].iter().take_while(|c| **c != '┃').collect();
            assert!(!value.contains('…'), "a piece marked cut:\n{out}");
            pieces.push_str(value.trim_end());
        }
        assert_eq!(pieces, path, "at {width}x{height}:\n{out}");
    }
}

/// Several projects: a bar above the panes with each project's figures (the shown one
/// highlighted), the panes below it; at a narrow width each tab keeps its number, name
/// and unread count.
#[test]
fn the_projects_bar() {
    let snap = busy_snapshot();
    let ui = busy_ui(&snap);
    let tabs = vec![
        ProjectTab::of("parser-rewrite", &snap, ui.unread_anomalies()),
        ProjectTab::of("api", &Snapshot::default(), 2),
        ProjectTab::of("billing", &Snapshot::default(), 0),
    ];
    let wide = text(&render_projects(&snap, &ui, 140, 40, &tabs, 0));
    let bar = wide.lines().next().unwrap();
    assert!(
        bar.contains("1 parser-rewrite") && bar.contains("3w 1r 1d 1!") && bar.contains("●4"),
        "{bar}"
    );
    assert!(
        bar.contains("C:reviewing") && bar.contains("2 api") && bar.contains("●2"),
        "{bar}"
    );
    assert!(
        wide.lines().nth(1).unwrap().starts_with("┏ Tasks"),
        "{wide}"
    );
    let narrow = text(&render_projects(&snap, &ui, 80, 30, &tabs, 1));
    let bar = narrow.lines().next().unwrap();
    assert_eq!(
        bar.trim_end(),
        " 1 parser-rewrite  ●4  2 api  ●2  3 billing",
        "{narrow}"
    );
    insta::assert_snapshot!(wide);
}

/// `ctrl-p` or `:` lists every project with its figures; the highlighted one is marked.
#[test]
fn the_project_picker() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    let tabs = vec![
        ProjectTab::of("parser-rewrite", &snap, ui.unread_anomalies()),
        ProjectTab::of("api", &Snapshot::default(), 2),
        ProjectTab::of("billing", &Snapshot::default(), 0),
    ];
    ui.overlay = Some(maestro::tui::app::Overlay::Projects(1));
    let out = text(&render_projects(&snap, &ui, 120, 30, &tabs, 0));
    assert!(out.contains("Projects · j/k move · Enter show"), "{out}");
    assert!(
        out.contains("1 parser-rewrite") && out.contains("(shown)"),
        "{out}"
    );
    assert!(out.contains("2 api") && out.contains("●2 unread"), "{out}");
    insta::assert_snapshot!(out);
}

/// The editor folds a long line (soft wrap): the first line stays in view and what is
/// typed last reads to its end, at 80×24.
#[test]
fn the_editor_folds_a_long_line() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.update(Action::FocusTasks, &snap);
    ui.update(Action::Instruct, &snap);
    let editor = ui.compose.as_mut().unwrap();
    editor.insert_str("First line.");
    editor.insert_newline();
    let words: Vec<String> = (1..=30).map(|i| format!("qzpart{i:02}")).collect();
    editor.insert_str(words.join(" "));
    let screen = text(&render(&snap, &ui, 80, 24));
    assert!(screen.contains("First line."), "{screen}");
    for w in &words {
        assert!(screen.contains(w.as_str()), "{w} out of view:\n{screen}");
    }
}
