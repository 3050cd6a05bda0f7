//! The text is the text: what the dashboard draws from outside text is that text,
//! whole or visibly cut, at 80×24, 120×40 and 200×60.
#![allow(clippy::unwrap_used)]

use maestro::core::domain::AnomalyKind;
use maestro::tui::action::Action;
use maestro::tui::app::Pane;

use crate::common::{Scratch, maestro};
use crate::dashboard::{anomaly, busy_snapshot, busy_ui, happening, message, render, text};

/// The characters a screen shows, without spaces, line ends and borders: a text drawn
/// across rows is found in it whole.
fn ink(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && !('\u{2500}'..='\u{257f}').contains(c))
        .collect()
}

#[test]
fn a_message_holding_a_long_path_reads_whole_at_120x40() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    let said = "Report at /srv/orch/temp/task-01-report-final-version.md please";
    ui.ingest(&happening(
        5,
        message(9, "task-01", "musician-1", "completion", said),
    ));
    let screen = text(&render(&snap, &ui, 120, 40));
    assert!(ink(&screen).contains(&ink(said)), "{screen}");
    // No piece of it is another text: the path is never cut inside a row without a mark.
    assert!(!screen.contains("/srv/orc please"), "{screen}");
}

#[test]
fn the_focused_anomalies_pane_shows_its_anomalies_at_80x24() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    let long = "step 4 self-correction: the tokenizer dropped the trailing newline of every heredoc, so the parser rewrote the grammar twice before the tests said so";
    ui.ingest(&happening(
        20,
        anomaly("task-02", AnomalyKind::SelfCorrection, long, None),
    ));
    ui.ingest(&happening(
        10,
        anomaly("task-03", AnomalyKind::HighDeviation, long, None),
    ));
    ui.focus = Pane::Anomalies;
    for step in [
        None,
        Some(Action::Down),
        Some(Action::Up),
        Some(Action::Down),
    ] {
        if let Some(a) = step {
            ui.update(a, &snap);
        }
        let screen = text(&render(&snap, &ui, 80, 24));
        let selected = &ui.anomalies[ui.selected_anomaly];
        assert!(
            screen.contains(selected.task.as_str()),
            "the selected anomaly ({}) is drawn:\n{screen}",
            selected.task
        );
    }
}

/// The dashboard's refusal of an approve reads whole at 80 columns, in the words the
/// command line uses for the same request.
#[test]
fn a_refusal_reads_whole_in_the_clis_words_at_80x24() {
    let project = Scratch::new();
    project.set_task("task-01", "working");
    let cli = maestro()
        .args(["task", "approve", "task-01", "--yes", "--project"])
        .arg(project.root())
        .output()
        .unwrap();
    assert_ne!(cli.status.code(), Some(0));
    let said = String::from_utf8_lossy(&cli.stderr);
    let said = said
        .trim()
        .trim_start_matches("maestro: ")
        .trim_start_matches("error: ");
    let target = maestro::core::actions::Target {
        root: project.root().to_path_buf(),
        db: project.db(),
        temp: project.temp(),
        window_programs: Vec::new(),
    };
    let request = maestro::core::actions::TaskRequest::Approve {
        task: maestro::core::domain::TaskId::parse("task-01").unwrap(),
        message: None,
    };
    let refusal = maestro::core::actions::describe(&target, &request).unwrap_err();
    assert!(
        said.contains(&refusal),
        "the CLI says {said:?}; the dashboard {refusal:?}"
    );
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.actions_in_flight = 1;
    ui.action_done(Err(refusal.clone()));
    let screen = text(&render(&snap, &ui, 80, 24));
    assert!(ink(&screen).contains(&ink(&refusal)), "{refusal}\n{screen}");
}
