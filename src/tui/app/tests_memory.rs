//! The dashboard's memory is set by the number of tasks, not by the lines they log:
//! every task keeps a tail, the task shown keeps a scrollback, and a skimmed history
//! moves positions on without holding its lines.

use std::sync::Arc;

use time::OffsetDateTime;

use super::tests::{log, ready};
use super::*;
use crate::core::domain::{LogKind, TaskId};
use crate::core::event::{Happening, What};
use crate::core::snapshot::Snapshot;
use crate::tui::panes::log::older;
use crate::tui::panes::log::scrollback::{LogView, SCROLLBACK, TAIL_KEPT};

fn lines(n: usize, tag: &str) -> Vec<String> {
    (0..n).map(|i| format!("{tag} {i}")).collect()
}

fn many(ui: &mut UiState, task: &str, n: usize, tag: &str) {
    let text = lines(n, tag);
    let refs: Vec<&str> = text.iter().map(String::as_str).collect();
    log(ui, task, LogKind::Status, &refs);
}

/// What the log source sends of a skimmed history: `counted` lines, then `tail`.
fn skimmed(ui: &mut UiState, counted: u64, tail: Vec<String>) {
    ui.ingest(&Happening {
        told: None,
        at: OffsetDateTime::UNIX_EPOCH,
        what: What::Log {
            task: TaskId::parse("task-01").unwrap(),
            kind: LogKind::Status,
            skipped: counted,
            lines: Arc::from(tail),
            reset: false,
        },
    });
}

/// `task-01-status` in a fresh folder holding `n` lines made by `line`; the dashboard
/// reads older lines back from that folder, and has taken in its skimmed history (all
/// lines counted but the last 256).
fn project_with_log(
    n: usize,
    line: impl Fn(usize) -> String,
) -> (tempfile::TempDir, UiState, Snapshot) {
    let dir = tempfile::tempdir().unwrap();
    let text = (0..n).fold(String::new(), |mut s, i| {
        s.push_str(&line(i));
        s.push('\n');
        s
    });
    std::fs::write(dir.path().join("task-01-status"), &text).unwrap();
    let (mut ui, s) = ready(0);
    ui.panes.log.older = older::OlderLines::read_from(dir.path().to_owned(), reading_4k());
    skimmed(&mut ui, (n - 256) as u64, (n - 256..n).map(&line).collect());
    (dir, ui, s)
}

#[test]
fn a_task_not_shown_keeps_a_tail_and_the_shown_one_a_scrollback() {
    let (mut ui, s) = ready(0);
    many(&mut ui, "task-01", SCROLLBACK + 10, "shown");
    many(&mut ui, "task-02", SCROLLBACK + 10, "other");
    let kept = |ui: &UiState, t: &str| {
        let l = &ui.panes.log.logs[&TaskId::parse(t).unwrap()].status;
        (l.end() - l.start(), l.end())
    };
    assert_eq!(
        kept(&ui, "task-01"),
        (SCROLLBACK as u64, SCROLLBACK as u64 + 10)
    );
    assert_eq!(
        kept(&ui, "task-02"),
        (TAIL_KEPT as u64, SCROLLBACK as u64 + 10)
    );
    // Showing another task trims the one left to a tail; positions stay true counts.
    ui.update(crate::tui::action::Action::Down, &s);
    ui.update(crate::tui::action::Action::Open, &s);
    assert_eq!(
        ui.panes.log.task.as_ref().map(TaskId::as_str),
        Some("task-02")
    );
    assert_eq!(
        kept(&ui, "task-01"),
        (TAIL_KEPT as u64, SCROLLBACK as u64 + 10)
    );
    let first = &ui.panes.log.logs[&TaskId::parse("task-01").unwrap()].status;
    assert_eq!(&*first.get(first.start()).unwrap().text, "shown 9754");
}

#[test]
fn a_skimmed_history_moves_positions_on_without_its_lines() {
    let (mut ui, _s) = ready(3);
    skimmed(&mut ui, 1_000_000, vec!["the last line".to_owned()]);
    let status = &ui.panes.log.logs[&TaskId::parse("task-01").unwrap()].status;
    assert_eq!((status.start(), status.end()), (1_000_003, 1_000_004));
    assert_eq!(&*status.get(1_000_003).unwrap().text, "the last line");
    let merged = ui.current_log().unwrap();
    assert_eq!((merged.start(), merged.end()), (1_000_003, 1_000_004));
}

/// A local project's status view reads its older lines back from the file: a skimmed
/// history is all there, by line, and a search goes through it.
#[test]
fn older_lines_are_read_back_from_the_file() {
    let (_dir, mut ui, s) = project_with_log(5_000, |i| format!("line {i}"));
    ui.panes.log.view = LogView::Status;
    ui.update(crate::tui::action::Action::FocusLog, &s);
    ui.update(crate::tui::action::Action::Top, &s);
    ui.prepare_rows();
    let rows = ui.current_rows().unwrap();
    assert_eq!((rows.start(), rows.end()), (0, 5_000));
    assert_eq!(ui.panes.log.pos.cursor, 0);
    assert_eq!(&*rows.get(0).unwrap().text, "line 0");
    // A page down from the top is still the file's, line by line.
    ui.update(crate::tui::action::Action::PageDown, &s);
    ui.prepare_rows();
    let at = ui.panes.log.pos.cursor;
    let text = ui.current_rows().unwrap().get(at).unwrap().text.to_string();
    assert_eq!(text, format!("line {at}"));
    // Searching back from the end finds a line only the file holds.
    ui.update(crate::tui::action::Action::Bottom, &s);
    ui.panes.log.search = Some("line 1234".into());
    ui.search_step(false);
    assert_eq!(ui.panes.log.pos.cursor, 1_234);
    ui.prepare_rows();
    assert_eq!(
        &*ui.current_rows().unwrap().get(1_234).unwrap().text,
        "line 1234"
    );
    // The merged view reads nothing back.
    ui.panes.log.view = LogView::Merged;
    assert_eq!(ui.current_rows().unwrap().start(), 4_744);
}

/// Past what the Anomalies pane keeps, its count says how many there were.
#[test]
fn the_anomaly_count_stays_true_past_what_is_kept() {
    let (mut ui, _s) = ready(0);
    for i in 0..1_005 {
        super::tests::anomaly(
            &mut ui,
            "task-01",
            crate::core::domain::AnomalyKind::SelfCorrection,
            (LogKind::Status, i, "x"),
        );
    }
    assert_eq!(ui.panes.anomalies.rows.len(), 1_000);
    assert_eq!(
        crate::tui::panes::ctx::kept_of(ui.panes.anomalies.rows.len(), ui.panes.anomalies.seen),
        "1000 newest of 1005"
    );
    assert_eq!(crate::tui::panes::ctx::kept_of(3, 3), "3");
}

/// A file too large to index in one frame is indexed on a thread of its own, off the
/// frame (it goes on with no frame drawn), the pane saying how far; then the cursor is
/// where it was sent.
#[test]
fn a_large_file_is_read_back_off_the_frame() {
    let (dir, mut ui, s) = project_with_log(1_200_000, |i| format!("entry {i:08} of a large log"));
    let size = std::fs::metadata(dir.path().join("task-01-status"))
        .unwrap()
        .len();
    assert!(size > 32 << 20, "{size}");
    ui.panes.log.view = LogView::Status;
    ui.update(crate::tui::action::Action::FocusLog, &s);
    ui.update(crate::tui::action::Action::Top, &s);
    assert!(
        ui.panes.log.older.indexing().is_some_and(|p| p < 100),
        "said while reading"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    // No frame drawn: the thread goes on alone.
    let first = ui.panes.log.older.indexing();
    while ui.panes.log.older.indexing() == first {
        assert!(
            std::time::Instant::now() < deadline,
            "indexing goes on off the frame"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    while ui.reading_back() {
        ui.prepare_rows();
        assert!(std::time::Instant::now() < deadline, "indexing ends");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    ui.prepare_rows();
    assert_eq!(ui.panes.log.pos.cursor, 0);
    assert_eq!(
        &*ui.current_rows().unwrap().get(0).unwrap().text,
        "entry 00000000 of a large log"
    );
    // Following again while a file is being read lets it go: no frame is asked for.
    ui.panes.log.older = older::OlderLines::read_from(dir.path().to_owned(), reading_4k());
    ui.update(crate::tui::action::Action::Top, &s);
    assert!(ui.reading_back());
    ui.update(crate::tui::action::Action::Bottom, &s);
    ui.prepare_rows();
    assert!(!ui.reading_back());
}

/// An anomaly on a line of a skimmed history: Enter shows it in its log's view, read
/// back from the file, where the merged view holds it no more.
#[test]
fn an_anomaly_on_a_skimmed_line_opens_it_in_the_file() {
    let (_dir, mut ui, s) = project_with_log(5_000, |i| format!("line {i}"));
    super::tests::anomaly(
        &mut ui,
        "task-01",
        crate::core::domain::AnomalyKind::SelfCorrection,
        (LogKind::Status, 1_234, "line 1234"),
    );
    ui.update(crate::tui::action::Action::FocusAnomalies, &s);
    ui.update(crate::tui::action::Action::Open, &s);
    assert_eq!(ui.panes.log.view, LogView::Status);
    assert_eq!(ui.panes.log.pos.cursor, 1_234);
    ui.prepare_rows();
    assert_eq!(
        &*ui.current_rows().unwrap().get(1_234).unwrap().text,
        "line 1234"
    );
    // A line the file does not hold there (rewritten since) is not claimed.
    super::tests::anomaly(
        &mut ui,
        "task-01",
        crate::core::domain::AnomalyKind::SelfCorrection,
        (LogKind::Status, 99, "not what the file says"),
    );
    ui.update(crate::tui::action::Action::FocusAnomalies, &s);
    ui.panes.anomalies.selected = 0;
    ui.update(crate::tui::action::Action::Open, &s);
    assert_eq!(ui.panes.log.view, LogView::Merged);
    assert!(
        ui.note.as_deref().unwrap_or_default().contains("no longer"),
        "{:?}",
        ui.note
    );
}

/// Lines cut at 4 KiB, as a log source with `max_line = 4096` cuts them.
fn reading_4k() -> crate::core::sources::Reading {
    crate::core::sources::Reading {
        max_line: 4096,
        fallback_poll: std::time::Duration::from_secs(1),
    }
}
