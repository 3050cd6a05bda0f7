//! Every overlay at the three sizes users drive the dashboard at (80×24, 120×40, 200×60):
//! reviewed snapshots, the render oracle over each (nothing cut without a mark), and the
//! keys people try in them (PgUp/PgDn, ctrl-u/ctrl-d, Home/End), plus Esc on a kept
//! Tasks filter.
#![allow(clippy::unwrap_used)]

use maestro::core::domain::TaskId;
use maestro::core::snapshot::Snapshot;
use maestro::tui::action::Action;
use maestro::tui::app::{Pane, UiState};

use crate::dashboard::{busy_snapshot, busy_ui, happening, message, render, render_kept, text};

use crate::dashboard_text::{check_covered, check_screen};

const SIZES: [(u16, u16); 3] = [(80, 24), (120, 40), (200, 60)];

/// Words the oracle follows: long enough to be cut somewhere at 80 columns.
const WORDS: [&str; 8] = [
    "qzcheckpoint",
    "qzheartbeat",
    "qztokeniser",
    "qzmigration",
    "qzparserexpr",
    "qzintegration",
    "qzregression",
    "qzconductor",
];

fn said() -> String {
    WORDS.repeat(8).join(" ")
}

/// The busy dashboard with one overlay open, by name.
fn with_overlay(name: &str) -> (Snapshot, UiState) {
    let mut snap = busy_snapshot();
    snap.pipelines = vec![maestro::core::snapshot::PipelineView {
        name: "build-fix".into(),
        steps: 3,
        status: "running".into(),
        iteration: 4,
        step: Some(1),
        outcome: Some(format!("exit 101 {}", WORDS[0])),
        history: vec![maestro::core::event::StepRecord {
            pipeline: "build-fix".into(),
            run_started: "2026-11-22T10:00:00Z".into(),
            iteration: 4,
            step: 0,
            step_type: "command".into(),
            started: "2026-11-22T10:04:12.250Z".into(),
            duration_ms: 8210,
            outcome: "exit 101".into(),
            excerpt: said(),
        }],
        trusted: true,
    }];
    if name == "session" {
        let t5 = snap.tasks.iter_mut().find(|t| t.id() == "task-05").unwrap();
        std::sync::Arc::make_mut(t5).sessions = vec![crate::dashboard::session(
            "task-05",
            "claude-sonnet-4-5-20250929",
            136_000,
            90_000,
            3,
            Some(("Bash", &said())),
        )];
    }
    let mut ui = busy_ui(&snap);
    ui.ingest(&happening(
        2,
        message(30, "task-02", "musician-2", "completion", &said()),
    ));
    ui.ingest(&happening(
        1,
        crate::dashboard::log(
            "task-05",
            maestro::core::domain::LogKind::Status,
            &[&said()],
        ),
    ));
    match name {
        "help" => ui.update(Action::Help, &snap),
        "session" => {
            ui.focus = Pane::Tasks;
            ui.update(Action::Session, &snap)
        }
        "headroom" => {
            let report = maestro::core::headroom::analyze(Some(
                "step 1 of 3 started [ctx: 40%]\nstep 1 agent 1 launched [ctx: 45%]\nstep 1 agent 1 returned [ctx: 62%]\n",
            ))
            .render("task-05", "temp/task-05-status");
            ui.show_panel(
                &TaskId::parse("task-05").unwrap(),
                format!("{report}\nNote: {}", said()),
            );
            Vec::new()
        }
        "message" => {
            ui.focus = Pane::Messages;
            ui.update(Action::Open, &snap)
        }
        "log_line" => {
            ui.focus = Pane::Log;
            ui.update(Action::Open, &snap)
        }
        "confirm" => {
            ui.ask_confirmation(
                maestro::core::actions::TaskRequest::Instruct {
                    task: TaskId::parse("task-05").unwrap(),
                    message: said(),
                },
                format!("Send task-05 the instruction \"{}\"?", said()),
            );
            Vec::new()
        }
        "editor" => {
            ui.focus = Pane::Tasks;
            let effects = ui.update(Action::Instruct, &snap);
            ui.compose.as_mut().unwrap().insert_str(said());
            effects
        }
        "pipelines" => {
            ui.update(Action::Sentinels, &snap);
            Vec::new()
        }
        "step_editor" => {
            ui.open_editor(
                "build-fix".into(),
                &format!("[{{\"type\": \"command\", \"run\": \"echo {}\"}}]", said()),
            );
            Vec::new()
        }
        "picker" => {
            ui.overlay = Some(maestro::tui::app::Overlay::Projects(1));
            Vec::new()
        }
        other => panic!("no overlay {other}"),
    };
    assert!(ui.overlay.is_some(), "{name} opened");
    (snap, ui)
}

const OVERLAYS: [&str; 10] = [
    "help",
    "session",
    "headroom",
    "message",
    "log_line",
    "confirm",
    "editor",
    "pipelines",
    "step_editor",
    "picker",
];

/// The projects a picker lists (it is drawn only with several).
fn tabs(snap: &Snapshot, ui: &UiState) -> Vec<maestro::tui::project_tab::ProjectTab> {
    vec![
        maestro::tui::project_tab::ProjectTab::of("parser-rewrite", snap, ui.unread_anomalies()),
        maestro::tui::project_tab::ProjectTab::of(
            &format!("api-{}", WORDS[1]),
            &Snapshot::default(),
            2,
        ),
        maestro::tui::project_tab::ProjectTab::of("billing", &Snapshot::default(), 0),
    ]
}

#[test]
fn every_overlay_at_80x24_120x40_and_200x60_cuts_nothing_silently() {
    let words: std::collections::HashSet<String> = WORDS.iter().map(|w| (*w).to_owned()).collect();
    for name in OVERLAYS {
        for (w, h) in SIZES {
            let (snap, ui) = with_overlay(name);
            let projects = if name == "picker" {
                tabs(&snap, &ui)
            } else {
                Vec::new()
            };
            let draw = |ui: &UiState| {
                text(&crate::dashboard::render_projects(
                    &snap, ui, w, h, &projects, 0,
                ))
            };
            let screen = draw(&ui);
            let mut base_ui = ui.clone();
            base_ui.overlay = None;
            base_ui.compose = None;
            base_ui.editor = None;
            let base = draw(&base_ui);
            assert_eq!(
                check_screen(&base, &words),
                Ok(()),
                "{name} {w}x{h}\n{base}"
            );
            assert_eq!(
                check_covered(&screen, &base, &words),
                Ok(()),
                "{name} {w}x{h}\n{screen}"
            );
            insta::assert_snapshot!(format!("overlay_{name}_{w}x{h}"), screen);
        }
    }
}

/// What a reading overlay shows, row by row, between its borders.
fn scroll_of(ui: &UiState) -> u16 {
    ui.overlay_scroll
}

#[test]
fn the_keys_people_try_scroll_every_reading_overlay() {
    for name in ["help", "session", "headroom", "message", "log_line"] {
        let (snap, mut ui) = with_overlay(name);
        // Small enough that each has more rows than the box.
        let _ = render_kept(&snap, &mut ui, 80, 14);
        let max = ui.overlay_scroll_max;
        assert!(
            max > 0,
            "{name} overflows at 80x14\n{}",
            text(&render(&snap, &ui, 80, 14))
        );
        let page = ui.overlay_page;
        ui.update(Action::PageDown, &snap);
        assert_eq!(
            scroll_of(&ui),
            (page.saturating_sub(1).max(1)).min(max),
            "{name}: PgDn is a page"
        );
        ui.update(Action::PageUp, &snap);
        assert_eq!(scroll_of(&ui), 0, "{name}: PgUp back");
        ui.update(Action::Bottom, &snap);
        assert_eq!(scroll_of(&ui), max, "{name}: End to the last row");
        let last = text(&render(&snap, &ui, 80, 14));
        assert!(!last.contains("↓ more"), "{name}: nothing below\n{last}");
        ui.update(Action::Down, &snap);
        assert_eq!(scroll_of(&ui), max, "{name}: no further than the end");
        ui.update(Action::Top, &snap);
        assert_eq!(scroll_of(&ui), 0, "{name}: Home to the top");
        let first = text(&render(&snap, &ui, 80, 14));
        assert!(first.contains("↓ more"), "{name}: says more waits\n{first}");
        ui.update(Action::Close, &snap);
        assert!(ui.overlay.is_none());
        assert_eq!(scroll_of(&ui), 0, "the next overlay starts at its top");
    }
}

/// The default keymap binds ctrl-d/ctrl-u and pagedown/pageup to those actions.
#[test]
fn ctrl_d_and_pagedown_are_page_keys() {
    let keymap = maestro::tui::keymap::Keymap::defaults();
    let help = keymap.help();
    let everywhere: Vec<&(String, Action)> =
        help.iter().flat_map(|(_, rows)| rows.iter()).collect();
    let keys_of = |a: Action| {
        everywhere
            .iter()
            .filter(|(_, act)| *act == a)
            .map(|(k, _)| k.clone())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let down = keys_of(Action::PageDown);
    assert!(
        down.contains("ctrl-d") && down.contains("pagedown"),
        "{down}"
    );
    let up = keys_of(Action::PageUp);
    assert!(up.contains("ctrl-u") && up.contains("pageup"), "{up}");
    let home = keys_of(Action::Top);
    assert!(home.contains("home"), "{home}");
}

#[test]
fn esc_clears_a_filter_kept_with_enter() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.update(Action::FocusTasks, &snap);
    let all = ui.shown_tasks(&snap).len();
    ui.update(Action::Search, &snap);
    for c in "task-05".chars() {
        ui.search_type(Some(c));
    }
    ui.search_finish(true);
    assert!(ui.shown_tasks(&snap).len() < all, "Enter keeps the filter");
    ui.update(Action::Close, &snap);
    assert_eq!(ui.panes.tasks.filter, None);
    assert_eq!(
        ui.shown_tasks(&snap).len(),
        all,
        "Esc shows every task again"
    );
}
