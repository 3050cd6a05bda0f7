//! The text is the text: what the dashboard draws from outside text is that text,
//! whole or visibly cut, at 80×24, 120×40 and 200×60.
#![allow(clippy::unwrap_used)]

use maestro::core::domain::AnomalyKind;
use maestro::tui::action::Action;
use maestro::tui::app::Pane;

use crate::common::{Scratch, maestro};
use crate::dashboard::{
    anomaly, busy_snapshot, busy_ui, happening, message, render, render_kept, text,
};

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
    // The Messages pane's own columns (the Log sits beside it, row by row).
    let left = screen
        .lines()
        .find_map(|l| l.find("┌ Messages").map(|at| l[..at].chars().count()))
        .expect("a Messages pane");
    let pane: String = screen
        .lines()
        .map(|l| l.chars().skip(left).collect::<String>() + "\n")
        .collect();
    assert!(ink(&pane).contains(&ink(said)), "{screen}");
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
        let selected = &ui.panes.anomalies.rows[ui.panes.anomalies.selected];
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
    // The dashboard shows the error's words, as the command line does.
    let refusal = maestro::core::actions::describe(&target, &request)
        .unwrap_err()
        .to_string();
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

/// Words that only the generated texts hold (the dashboard's own words never start so).
pub(crate) fn token() -> impl proptest::strategy::Strategy<Value = String> {
    "qz[a-y0-9]{0,150}"
}

/// Every fragment of a generated word drawn on the screen is a piece of that word: the
/// whole word; its start cut where a `…` or `↓` says so, or at the edge of its row (a
/// word longer than the row, broken across rows); or the rest of a broken word at the
/// start of a row (not judged: it does not start with the words' mark). A word cut
/// short with nothing to say so is what the rule forbids.
pub(crate) fn check_screen(
    screen: &str,
    words: &std::collections::HashSet<String>,
) -> Result<(), String> {
    let fragment = regex::Regex::new("qz[a-y0-9]*").unwrap();
    let rows: Vec<&str> = screen.lines().collect();
    for (y, row) in rows.iter().enumerate() {
        for m in fragment.find_iter(row) {
            let f = m.as_str();
            if words.contains(f) {
                continue;
            }
            let Some(word) = words.iter().find(|w| w.starts_with(f)) else {
                return Err(format!("{f:?} is no generated word's start: {row:?}"));
            };
            let after = row[m.end()..].chars().next();
            let marked = matches!(after, Some('…' | '↓'));
            let at_edge = after.is_none_or(|c| ('\u{2500}'..='\u{257f}').contains(&c));
            if !(marked || at_edge) {
                return Err(format!("{word:?} drawn cut as {f:?} with no mark: {row:?}"));
            }
            // Broken at the edge: the rest of the word goes on in the next row.
            if !marked {
                let rest: String = word[f.len()..].chars().take(4).collect();
                if !rows.get(y + 1).is_some_and(|next| next.contains(&rest)) {
                    return Err(format!(
                        "{word:?} broken as {f:?} and the rest {rest:?} is not below: {row:?}"
                    ));
                }
            }
        }
    }
    Ok(())
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    /// The render oracle over the whole dashboard: messages, anomalies and log lines of
    /// generated words, every pane, sizes from 60×12 to 250×80.
    #[test]
    fn every_pane_draws_its_text_whole_or_visibly_cut(
        texts in proptest::collection::vec(proptest::collection::vec(token(), 1..12), 6..14),
        width in 60u16..=250,
        height in 12u16..=80,
        focus in 0usize..6,
    ) {
        let snap = busy_snapshot();
        let mut ui = busy_ui(&snap);
        let mut words = std::collections::HashSet::new();
        for (i, t) in texts.iter().enumerate() {
            words.extend(t.iter().cloned());
            let text = t.join(" ");
            let what = match i % 3 {
                0 => message(20 + i as i64, "task-02", "musician-2", "completion", &text),
                1 => anomaly("task-03", AnomalyKind::SelfCorrection, &text, None),
                _ => crate::dashboard::log("task-05", maestro::core::domain::LogKind::Status, &[&text]),
            };
            ui.ingest(&happening(30 - i as i64, what));
        }
        ui.focus = Pane::ALL[focus];
        let screen = text(&render(&snap, &ui, width, height));
        proptest::prop_assert_eq!(check_screen(&screen, &words), Ok(()), "{}", screen);
    }
}

/// The oracle catches the bug it exists for: a word cut inside a row with no mark.
#[test]
fn the_screen_oracle_fails_a_silent_cut() {
    let words: std::collections::HashSet<String> =
        ["qzcheckpoint".to_owned(), "qztokeniser".to_owned()].into();
    assert!(check_screen("┃ qzcheckpoint qztokeniser ┃", &words).is_ok());
    assert!(check_screen("┃ qzcheckp…                ┃", &words).is_ok());
    assert!(
        check_screen("┃ qzcheckpoint qztokeni\n┃    ser and more", &words).is_ok(),
        "broken at the edge, the rest below"
    );
    assert!(
        check_screen("┃ qzcheckpoint qztokeni\n┃    and more", &words).is_err(),
        "broken at the edge, the rest dropped"
    );
    assert!(check_screen("┃ qzcheckpoi qztokenise and ┃", &words).is_err());
}

/// The busiest moment at the three sizes users drive it at: reviewed snapshots.
#[test]
fn the_busiest_moment_at_80x24_120x40_and_200x60() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.ingest(&happening(
        3,
        message(
            9,
            "task-01",
            "musician-1",
            "completion",
            "Report at /srv/orch/temp/task-01-report-final-version.md please",
        ),
    ));
    for (width, height) in [(80, 24), (120, 40), (200, 60)] {
        insta::assert_snapshot!(
            format!("busiest_{width}x{height}"),
            text(&render(&snap, &ui, width, height))
        );
    }
}

/// The help overlay scrolls to its last line and no further: `j` held down never leaves
/// an empty box.
#[test]
fn the_help_stops_at_its_end() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.update(Action::Help, &snap);
    let first = text(&render_kept(&snap, &mut ui, 80, 24));
    assert!(first.contains("↓ more"), "{first}");
    for _ in 0..500 {
        ui.update(Action::Down, &snap);
    }
    let max = ui.overlay_scroll_max;
    assert!(max > 0 && max < 500, "{max}");
    assert_eq!(ui.overlay_scroll, max);
    let last = text(&render(&snap, &ui, 80, 24));
    assert!(!last.contains("↓ more"), "{last}");
    ui.update(Action::Up, &snap);
    assert_eq!(ui.overlay_scroll, max - 1, "one key back up, not hundreds");
}

/// A 45-word status line at 120×40 reads to its last word: Enter on it in the Log
/// shows it whole, folded to the box.
#[test]
fn a_long_log_line_reads_to_its_last_word_on_enter() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    let words: Vec<String> = (1..=45).map(|i| format!("qzword{i:02}")).collect();
    let line = format!("step 4 {} [ctx: 55%]", words.join(" "));
    ui.ingest(&happening(
        1,
        crate::dashboard::log("task-05", maestro::core::domain::LogKind::Status, &[&line]),
    ));
    ui.focus = Pane::Log;
    let before = text(&render(&snap, &ui, 120, 40));
    assert!(
        !before.contains("qzword45"),
        "the pane shows it on one row:\n{before}"
    );
    ui.update(Action::Open, &snap);
    let screen = text(&render(&snap, &ui, 120, 40));
    for w in &words {
        assert!(screen.contains(w.as_str()), "{w} missing:\n{screen}");
    }
    ui.update(Action::Close, &snap);
    assert!(ui.overlay.is_none());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The render oracle over the whole frame, not only the panes' bodies: a generated
    /// project name (the status line), Musicians' names (the Tasks table), what a task
    /// needs you for, the last error and an action's answer (the status line and the box
    /// above it), a message and a log line opened whole (the popups), a confirmation
    /// quoting typed text, the message editor, the session overlay and the headroom
    /// panel, at sizes from 60×12 to 250×80: every generated word drawn is whole or
    /// visibly cut.
    #[test]
    fn the_whole_frame_draws_every_word_whole_or_marked(
        name in token(),
        workers in proptest::collection::vec(token(), 6),
        said in proptest::collection::vec(proptest::collection::vec(token(), 1..10), 3),
        width in 60u16..=250,
        height in 12u16..=80,
        popup in 0usize..8,
    ) {
        let mut snap = busy_snapshot();
        let mut words: std::collections::HashSet<String> = [name.clone()].into();
        words.extend(workers.iter().cloned());
        for (t, w) in snap.tasks.iter_mut().filter(|t| t.id().starts_with("task-0") && !t.is_conductor()).zip(&workers) {
            std::sync::Arc::make_mut(t).row.worked_by = Some(w.clone());
        }
        for s in &said {
            words.extend(s.iter().cloned());
        }
        std::sync::Arc::make_mut(&mut snap.tasks[2]).needs_you =
            Some((said[0].join(" "), crate::dashboard::ago(30)));
        snap.last_error = Some((crate::dashboard::ago(5), said[1].join(" ")));
        let mut ui = busy_ui(&snap);
        ui.ingest(&happening(2, message(30, "task-02", "musician-2", "completion", &said[2].join(" "))));
        ui.ingest(&happening(1, crate::dashboard::log("task-05", maestro::core::domain::LogKind::Status, &[&said[2].join(" ")])));
        match popup {
            1 => ui.note = Some(said[2].join(" ")),
            2 => {
                ui.focus = Pane::Messages;
                ui.update(Action::Open, &snap);
            }
            3 => {
                ui.focus = Pane::Log;
                ui.update(Action::Open, &snap);
            }
            4 => ui.ask_confirmation(
                maestro::core::actions::TaskRequest::Instruct {
                    task: maestro::core::domain::TaskId::parse("task-05").unwrap(),
                    message: said[2].join(" "),
                },
                format!("Send task-05 the instruction \"{}\"?", said[2].join(" ")),
            ),
            5 => {
                ui.focus = Pane::Tasks;
                ui.update(Action::Instruct, &snap);
                if let Some(editor) = ui.compose.as_mut() {
                    editor.insert_str(said[2].join(" "));
                }
            }
            6 => {
                // The session overlay, its last tool call's argument generated.
                let t5 = snap.tasks.iter_mut().find(|t| t.id() == "task-05").unwrap();
                std::sync::Arc::make_mut(t5).sessions = vec![crate::dashboard::session(
                    "task-05",
                    "claude-sonnet-4-5-20250929",
                    136_000,
                    90_000,
                    3,
                    Some(("Bash", &said[2].join(" "))),
                )];
                ui.focus = Pane::Tasks;
                ui.update(Action::Session, &snap);
            }
            7 => ui.show_panel(
                &maestro::core::domain::TaskId::parse("task-05").unwrap(),
                format!("=== Context Headroom: task-05 ===\nCurrent:     62% {}", said[2].join(" ")),
            ),
            _ => {}
        }
        let screen = text(&crate::dashboard::render_named(&snap, &ui, (width, height), &name));
        // What a popup covers is covered, not cut: the panes are judged without it,
        // the popup's own text in the frame with it.
        let mut base_ui = ui.clone();
        base_ui.overlay = None;
        // An answer too long for the status line is a box over the panes too.
        base_ui.note = None;
        let base = text(&crate::dashboard::render_named(&snap, &base_ui, (width, height), &name));
        proptest::prop_assert_eq!(check_screen(&base, &words), Ok(()), "{}", base);
        proptest::prop_assert_eq!(check_covered(&screen, &base, &words), Ok(()), "{}", screen);
    }
}

/// [`check_screen`] of a frame with a popup over `base`: a word the popup's border cuts
/// is one `base` shows whole at the same place.
pub(crate) fn check_covered(
    screen: &str,
    base: &str,
    words: &std::collections::HashSet<String>,
) -> Result<(), String> {
    let fragment = regex::Regex::new("qz[a-y0-9]*").unwrap();
    let base_rows: Vec<Vec<char>> = base.lines().map(|l| l.chars().collect()).collect();
    let mut kept = String::new();
    for (y, row) in screen.lines().enumerate() {
        let mut out = row.to_owned();
        for m in fragment
            .find_iter(row)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            let col = row[..m.start()].chars().count();
            let len = m.as_str().chars().count();
            let under: String = base_rows
                .get(y)
                .map(|r| r.iter().skip(col).take(len + 1).collect())
                .unwrap_or_default();
            // The same letters in the frame below: drawn there too (judged with it), or
            // going on (or marked cut) past the popup's edge.
            let next = row[m.end()..].chars().next();
            let covered = under.starts_with(m.as_str())
                && under.chars().nth(len).is_some_and(|c| {
                    Some(c) == next || c.is_ascii_alphanumeric() || matches!(c, '…' | '↓')
                });
            if covered {
                out.replace_range(m.range(), &" ".repeat(m.len()));
            }
        }
        kept.push_str(&out);
        kept.push('\n');
    }
    check_screen(&kept, words)
}

/// A window this dashboard froze is marked on its row (its state stays what the
/// database says) once the freeze is delivered, and the mark goes when it is thawed.
#[test]
fn a_frozen_task_is_marked_until_thawed() {
    use maestro::core::actions::TaskRequest;
    use maestro::core::domain::TaskId;
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.focus = Pane::Tasks;
    let task = TaskId::parse("task-05").unwrap();
    let row = |ui: &maestro::tui::app::UiState| {
        text(&render(&snap, ui, 120, 40))
            .lines()
            .find(|l| l.contains("task-05") && l.contains("working"))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(!row(&ui).contains('❄'), "{}", row(&ui));
    ui.window_signalled(&TaskRequest::Freeze { task: task.clone() });
    assert!(row(&ui).contains("❄task-05"), "{}", row(&ui));
    let screen = text(&render(&snap, &ui, 120, 40));
    assert!(screen.contains("frozen (u thaws)"), "{screen}");
    ui.window_signalled(&TaskRequest::Thaw { task });
    assert!(!row(&ui).contains('❄'), "{}", row(&ui));
}

/// A frozen window whose session was waiting on the operator still shows the freeze
/// the guide names, beside the wait (the wait's ⚑ alone hid it).
#[test]
fn a_frozen_task_that_needs_you_shows_both_marks() {
    use maestro::core::actions::TaskRequest;
    use maestro::core::domain::TaskId;
    let mut snap = busy_snapshot();
    for t in &mut snap.tasks {
        if t.id() == "task-05" {
            std::sync::Arc::make_mut(t).needs_you = Some((
                "permission for Bash".into(),
                time::OffsetDateTime::now_utc(),
            ));
        }
    }
    let mut ui = busy_ui(&snap);
    let row = |ui: &maestro::tui::app::UiState| {
        text(&render(&snap, ui, 120, 40))
            .lines()
            .find(|l| l.contains("task-05") && l.contains("working"))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(row(&ui).contains("⚑task-05"), "{}", row(&ui));
    ui.window_signalled(&TaskRequest::Freeze {
        task: TaskId::parse("task-05").unwrap(),
    });
    assert!(row(&ui).contains("❄⚑task-05"), "{}", row(&ui));
}

/// An operator's message shows who wrote it in a short mark ("you"), not the store's
/// "[operator via maestro]" prefix eating the row; and a lone message on a fresh project
/// folds into the rows the pane has, instead of one cut row above empty ones.
#[test]
fn an_operators_message_reads_as_yours_and_a_lone_message_folds() {
    let snap = maestro::core::snapshot::Snapshot::default();
    let mut ui = maestro::tui::app::UiState::default();
    ui.sync_with(&snap);
    ui.ingest(&happening(
        1,
        message(
            1,
            "task-03",
            "task-00",
            "instruction",
            "[operator via maestro] Check the Conductor's plan before you start the parser rewrite, and say when the tokenizer tests pass again",
        ),
    ));
    for (w, h) in [(80, 24), (120, 40)] {
        let screen = text(&render(&snap, &ui, w, h));
        assert!(!screen.contains("[operator via"), "{w}x{h}\n{screen}");
        assert!(screen.contains("you: "), "{w}x{h}\n{screen}");
        assert!(
            screen.contains("tokenizer"),
            "the message folds to its end where there is room ({w}x{h})\n{screen}"
        );
    }
}

/// Words a user can read: the CTX mark names the Musician's own figure (and `?` says
/// what it is), the Conductor's queue says who waits for whom.
#[test]
fn marks_and_queues_explain_themselves() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    let screen = text(&render(&snap, &ui, 120, 40));
    assert!(screen.contains("1 waits for the Conductor"), "{screen}");
    // Where the column is narrower than the mark, the mark is cut with `…`.
    assert!(
        screen.contains("68%…") || screen.contains("68%≠51"),
        "{screen}"
    );
    let wide = text(&render(&snap, &ui, 200, 60));
    assert!(wide.contains("68%≠51"), "{wide}");
    assert!(!screen.contains("wait for it"), "{screen}");
    ui.update(Action::Help, &snap);
    let help = text(&render(&snap, &ui, 200, 60));
    assert!(
        help.contains("68%≠51 is the transcript's context"),
        "{help}"
    );
}

/// `fix_proposed` is the Musician's turn (the skill: "Musician applies proposed fix"):
/// neither counted in the Conductor's queue nor said to wait for it.
#[test]
fn a_proposed_fix_is_the_musicians_turn() {
    let mut snap = busy_snapshot();
    let before = text(&render(&snap, &busy_ui(&snap), 200, 60));
    assert!(before.contains("1 waits for the Conductor"), "{before}");
    for t in &mut snap.tasks {
        if t.id() == "task-02" {
            std::sync::Arc::make_mut(t).row.state = "fix_proposed".into();
        }
    }
    let ui = busy_ui(&snap);
    let screen = text(&render(&snap, &ui, 200, 60));
    assert!(screen.contains("fix_proposed"), "{screen}");
    assert!(!screen.contains("for the Conductor"), "{screen}");
    assert!(!screen.contains("Conductor's turn"), "{screen}");
}

/// A pane's title is one text, cut with `…` where the pane is narrower (never silently
/// at the border): the Log's, paused with a search, at every size.
#[test]
fn the_log_title_is_cut_with_a_mark_at_every_size() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.panes.log.pos.follow = false;
    ui.panes.log.search = Some("step".into());
    for (w, h) in [(80, 24), (120, 40), (200, 60)] {
        let screen = text(&render(&snap, &ui, w, h));
        let line = screen
            .lines()
            .find(|l| l.contains("Log:"))
            .unwrap_or_else(|| panic!("{w}x{h}: no Log title\n{screen}"));
        let title = &line[line.find("Log:").unwrap()..];
        assert!(
            title.contains("/step") || title.contains('…'),
            "{w}x{h}: the title's end is lost without a mark: {line}"
        );
    }
}

/// Room by importance at 120 columns: an attached watcher's column is kept before a
/// wider one (it was the first dropped).
#[test]
fn an_attached_watcher_keeps_its_column_at_120() {
    let mut snap = busy_snapshot();
    snap.watchers.insert("task-03".into(), "background".into());
    let ui = busy_ui(&snap);
    let screen = text(&render(&snap, &ui, 120, 40));
    let header = screen
        .lines()
        .find(|l| l.contains("ID") && l.contains("STATE"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(header.contains("WATCH"), "{header}");
    let row = screen
        .lines()
        .find(|l| l.contains("task-03") && l.contains("working"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(row.contains(" bg "), "{row}");
}
