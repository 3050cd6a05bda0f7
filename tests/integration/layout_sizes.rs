//! The dashboard at the sizes operators use, with 4 and with 12 Musicians: 80x24 (kitty's
//! default window, the classic terminal), 100x30, 120x40 and 200x60. What matters first
//! stays (every Musician up to the cap, the unread anomalies, a line for every pane
//! that holds something); detail folds.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use crate::dashboard::{busy_snapshot, busy_ui, render, task, text};

/// The busy fixture with `n` Musicians (the fixture's own, then more working ones).
fn with_musicians(n: usize) -> maestro::core::snapshot::Snapshot {
    let mut snap = busy_snapshot();
    let mut musicians = snap.musicians().count();
    let mut k = 10;
    while musicians < n {
        snap.tasks.push(Arc::new(task(
            &format!("task-{k:02}"),
            "working",
            Some(&format!("musician-{k}")),
            Some(15),
            &[5, 9, 14],
        )));
        musicians += 1;
        k += 1;
    }
    snap.tasks.retain(|t| {
        !t.id().starts_with("task-") || t.is_conductor() || {
            let keep = musicians > n;
            if keep {
                musicians -= 1;
            }
            !keep
        }
    });
    snap
}

fn screen(musicians: usize, width: u16, height: u16) -> String {
    let snap = with_musicians(musicians);
    let ui = busy_ui(&snap);
    text(&render(&snap, &ui, width, height))
}

macro_rules! sizes {
    ($($name:ident: $musicians:expr, $w:expr, $h:expr;)*) => {$(
        #[test]
        fn $name() {
            let out = screen($musicians, $w, $h);
            // Every pane says something: no border-only pane.
            for word in ["Tasks", "Anomalies", "Log", "Messages", "Watchdog"] {
                assert!(out.contains(word), "{word} missing at {}x{}:\n{out}", $w, $h);
            }
            insta::assert_snapshot!(out);
        }
    )*};
}

sizes! {
    layout_80x24_4_musicians: 4, 80, 24;
    layout_80x24_12_musicians: 12, 80, 24;
    layout_100x30_4_musicians: 4, 100, 30;
    layout_100x30_12_musicians: 12, 100, 30;
    layout_120x40_4_musicians: 4, 120, 40;
    layout_120x40_12_musicians: 12, 120, 40;
    layout_160x48_4_musicians: 4, 160, 48;
    layout_200x60_4_musicians: 4, 200, 60;
    layout_200x60_12_musicians: 12, 200, 60;
}

/// Where a known text (an anomaly's detail, a message) is on screen, it is whole, folded
/// onto the next line, or ends in `…`: never cut without a mark.
fn cut_without_a_mark(out: &str, known: &str) -> Option<String> {
    let known = maestro::core::text::printable(known).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    let head: String = known.chars().take(20).collect();
    let (row, line) = lines.iter().enumerate().find(|(_, l)| l.contains(&head))?;
    let trim = |s: &str| s.trim_end_matches(['│', '┃', '┘', '┐']).trim().to_owned();
    let rest = trim(&line[line.find(&head)?..]);
    // The next line of the same pane: from the pane's left border on.
    let at: Vec<char> = line[..line.find(&head)?].chars().collect();
    let pane_start = at
        .iter()
        .rposition(|c| matches!(c, '│' | '┃'))
        .map_or(0, |i| i + 1);
    let fine = |shown: &str| {
        shown == known
            || shown
                .strip_suffix('…')
                .is_some_and(|s| known.starts_with(s.trim_end()))
    };
    // A folded text goes on in the rows below it, in the same pane, until it is whole
    // or marked: followed while what is read so far begins the text.
    let mut continued = rest.clone();
    for next in lines.iter().skip(row + 1).take(4) {
        if fine(&continued) || continued.starts_with(&known) || !known.starts_with(&continued) {
            break;
        }
        let next: String = next.chars().skip(pane_start).collect();
        continued = format!("{continued} {}", trim(&next));
    }
    (!fine(&rest) && !fine(&continued) && !continued.starts_with(&known))
        .then(|| format!("{rest:?} (then {continued:?}) for {known:?}"))
}

/// At every size, the anomalies and messages on screen are read whole, folded, or end
/// in `…`; at 120x40 and wider, all four of the fixture's anomalies are whole at once.
#[test]
fn no_text_is_cut_without_a_mark() {
    for (w, h) in [(80, 24), (100, 30), (120, 40), (160, 48), (200, 60)] {
        let snap = with_musicians(4);
        let ui = busy_ui(&snap);
        let out = text(&render(&snap, &ui, w, h));
        let known: Vec<String> = ui
            .panes
            .anomalies
            .rows
            .iter()
            .map(|a| a.detail.clone())
            .chain(
                ui.panes
                    .messages
                    .rows
                    .iter()
                    .filter_map(|m| m.message.clone()),
            )
            .collect();
        for k in &known {
            if let Some(bad) = cut_without_a_mark(&out, k) {
                panic!("{w}x{h}: cut without a mark: {bad}\n{out}");
            }
        }
        if w >= 120 {
            for a in &ui.panes.anomalies.rows {
                let head: String = a.detail.chars().take(20).collect();
                let row = out.lines().position(|l| l.contains(&head));
                assert!(
                    row.is_some(),
                    "{w}x{h}: {:?} not on screen\n{out}",
                    a.detail
                );
                let shown = cut_without_a_mark(&out, &a.detail);
                assert!(shown.is_none(), "{w}x{h}: {shown:?}");
                let joined = out.replace(['│', '┃'], " ");
                let words: Vec<&str> = a.detail.split_whitespace().collect();
                let last = words.last().copied().unwrap_or_default();
                assert!(
                    joined.contains(last),
                    "{w}x{h}: the end of {:?} is not on screen\n{out}",
                    a.detail
                );
            }
        }
    }
}

/// At 80x24 every unread anomaly of the fixture (up to 3) is readable, and each
/// Musician of four has its row.
#[test]
fn at_80x24_the_anomalies_and_the_musicians_are_readable() {
    let snap = with_musicians(4);
    let ui = busy_ui(&snap);
    let out = text(&render(&snap, &ui, 80, 24));
    let unread = ui.unread_anomalies().min(3);
    let shown = out.lines().filter(|l| l.contains('●')).count();
    assert!(
        shown >= unread,
        "{shown} of {unread} unread anomalies shown:\n{out}"
    );
    for t in snap.musicians() {
        assert!(out.contains(t.id()), "{} has no row:\n{out}", t.id());
    }
}

/// Counts agree with their words: "1 anomaly", "2 anomalies", "1 message".
#[test]
fn the_status_line_says_one_and_many() {
    let mut lines = Vec::new();
    for (anomalies, messages) in [(1, 1), (2, 0)] {
        let mut snap = with_musicians(1);
        snap.anomaly_count = anomalies;
        snap.message_count = messages;
        snap.session_cost_usd = None;
        let ui = busy_ui(&snap);
        let out = text(&render(&snap, &ui, 120, 30));
        lines.push(out.lines().last().unwrap_or_default().to_owned());
    }
    insta::assert_snapshot!(lines.join("\n"));
}

/// The selected anomaly, when its line is cut, is read in full in the focused pane.
#[test]
fn the_selected_anomaly_shows_its_full_text_when_focused() {
    let snap = with_musicians(4);
    let mut ui = busy_ui(&snap);
    let detail = ui.panes.anomalies.rows[0].detail.clone();
    ui.update(maestro::tui::action::Action::FocusAnomalies, &snap);
    let out = text(&render(&snap, &ui, 80, 30));
    let tail: String = detail
        .chars()
        .rev()
        .take(12)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert!(
        out.replace('\n', " ").contains(tail.trim()),
        "the end of {detail:?} is not on screen:\n{out}"
    );
}

/// After a gap in maestro's running the status line says why ages restarted, for ten
/// minutes.
#[test]
fn the_status_line_tells_a_clock_gap_for_a_while() {
    let mut snap = with_musicians(4);
    snap.session_cost_usd = None;
    let ui = busy_ui(&snap);
    let status = |snap: &maestro::core::snapshot::Snapshot| {
        text(&render(snap, &ui, 160, 30))
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned()
    };
    snap.last_gap = Some((
        crate::dashboard::now() - time::Duration::seconds(30),
        "suspend",
        600,
    ));
    let line = status(&snap);
    assert!(
        line.contains("after a suspend (10 minutes): ages restarted"),
        "{line}"
    );
    snap.last_gap = Some((
        crate::dashboard::now() - time::Duration::minutes(20),
        "suspend",
        600,
    ));
    assert!(!status(&snap).contains("ages restarted"));
}

/// The status line's words at `width`×`height`.
fn status_words(
    snap: &maestro::core::snapshot::Snapshot,
    ui: &maestro::tui::app::UiState,
    (width, height): (u16, u16),
) -> (String, Vec<String>) {
    let screen = text(&render(snap, ui, width, height));
    let line = screen.lines().last().unwrap_or_default().to_owned();
    let words = line.split_whitespace().map(str::to_owned).collect();
    (line, words)
}

/// The status line at 80×24 and 120×40 against the same screen at 200×60: every word
/// drawn is a word of the wide line, or ends in `…`; in a folder that is not a project
/// (no database, no temp/), in a busy project with a task that needs the operator and
/// an error, and in the read-only view.
#[test]
fn the_status_line_drops_whole_words_at_every_width() {
    use maestro::core::snapshot::DatabaseHealth;
    let not_a_project = maestro::core::snapshot::Snapshot {
        database: DatabaseHealth::Absent,
        logs_waiting: Some("no temp/ yet".into()),
        ..Default::default()
    };
    let mut busy = with_musicians(12);
    std::sync::Arc::make_mut(&mut busy.tasks[3]).needs_you = Some((
        "permission for Bash `cargo publish --allow-dirty`".into(),
        crate::dashboard::ago(40),
    ));
    busy.last_error = Some((
        crate::dashboard::ago(5),
        "cannot read temp/task-07-status: permission denied (os error 13)".into(),
    ));
    let read_only = maestro::tui::app::UiState {
        read_only: Some("comms.db is read-only".into()),
        ..Default::default()
    };
    let plain = maestro::tui::app::UiState::default();
    for (name, snap, ui) in [
        ("not a project", &not_a_project, &plain),
        ("busy", &busy, &plain),
        ("read-only", &busy, &read_only),
    ] {
        let (wide_line, wide) = status_words(snap, ui, (200, 60));
        for size in [(60, 12), (80, 24), (100, 30), (120, 40)] {
            let (line, words) = status_words(snap, ui, size);
            for word in words {
                assert!(
                    wide.contains(&word) || word.ends_with('…'),
                    "{name} at {size:?}: {word:?} is cut without a mark:\n{line}\nwide: {wide_line}"
                );
            }
        }
    }
}

/// At 200×60 every `musician-task-NN` reads whole in the Tasks pane: columns are sized
/// by what their cells hold before any of them pads.
#[test]
fn worked_by_reads_whole_at_200x60() {
    let mut snap = with_musicians(12);
    let mut names = Vec::new();
    for t in &mut snap.tasks {
        if t.id().starts_with("task-") && !t.is_conductor() {
            let name = format!("musician-{}", t.id());
            Arc::make_mut(t).row.worked_by = Some(name.clone());
            names.push(name);
        }
    }
    let mut ui = busy_ui(&snap);
    ui.focus = maestro::tui::app::Pane::Tasks;
    let screen = text(&render(&snap, &ui, 200, 60));
    let tasks_pane: Vec<&str> = screen.lines().take(18).collect();
    for name in names {
        assert!(
            tasks_pane.iter().any(|l| l.contains(&format!("{name} "))),
            "{name} is not whole:\n{}",
            tasks_pane.join("\n")
        );
    }
}

/// The text of `rect`'s inner rows (inside its borders) in `buf`.
fn inner_rows(buf: &ratatui::buffer::Buffer, rect: ratatui::layout::Rect) -> Vec<String> {
    (rect.y + 1..rect.y + rect.height.saturating_sub(1))
        .map(|y| {
            (rect.x + 1..rect.x + rect.width.saturating_sub(1))
                .map(|x| buf[(x, y)].symbol().to_owned())
                .collect()
        })
        .collect()
}

/// Room by need: 12 Musicians, three anomalies and three messages at 120×40: the
/// Heartbeats pane shows at least three task rows, or the Log beside it has no empty
/// rows; and the rows it shows first are the ones nearest their deadline.
#[test]
fn heartbeats_take_the_rows_an_empty_log_does_not_need() {
    let snap = with_musicians(12);
    let mut ui = busy_ui(&snap);
    ui.panes.anomalies.rows.truncate(3);
    ui.panes.messages.rows.truncate(3);
    let area = ratatui::layout::Rect::new(0, 0, 120, 40);
    let rects = ui.layout(area, &snap).expect("fits");
    let buf = render(&snap, &ui, 120, 40);
    let beats = inner_rows(&buf, rects.heartbeats);
    let task_rows = beats
        .iter()
        .filter(|r| r.trim_start().starts_with("task-"))
        .count();
    let empty_log_rows = inner_rows(&buf, rects.log)
        .iter()
        .filter(|r| r.trim().is_empty())
        .count();
    let screen = text(&buf);
    assert!(
        task_rows >= 3 || empty_log_rows == 0,
        "{task_rows} task rows beside {empty_log_rows} empty Log rows:\n{screen}"
    );
    // task-04 is past its limit: never the one hidden.
    assert!(beats.iter().any(|r| r.starts_with("task-04")), "{screen}");
}

/// Of one pane on a drawn screen: whether it says rows are hidden ("↓ N more" on its
/// border) and how many of its inner rows are empty.
fn hidden_and_empty(buf: &ratatui::buffer::Buffer, r: ratatui::layout::Rect) -> (bool, u16) {
    let row = |y: u16, from: u16, to: u16| -> String {
        (from..to)
            .map(|x| buf[(x, y)].symbol().to_owned())
            .collect()
    };
    if r.height < maestro::tui::layout::SUMMARY_BELOW {
        return (false, 0);
    }
    let border = row(r.y, r.x, r.x + r.width) + &row(r.y + r.height - 1, r.x, r.x + r.width);
    let hidden = border.contains("more") && border.contains('↓');
    let empty = (r.y + 1..r.y + r.height - 1)
        .filter(|y| row(*y, r.x + 1, r.x + r.width - 1).trim().is_empty())
        .count() as u16;
    (hidden, empty)
}

/// Room by need: at every size, with few and many Musicians, anomalies and messages, no
/// pane says "↓ more" while a pane of the same stack (one it could trade rows with)
/// leaves rows empty.
#[test]
fn no_pane_hides_rows_while_another_leaves_rows_empty() {
    use maestro::tui::app::Pane;
    for (musicians, projects) in [(2, 1), (4, 1), (12, 1), (4, 2)] {
        for (w, h) in [(80, 24), (100, 30), (120, 40), (200, 60)] {
            let snap = with_musicians(musicians);
            let ui = busy_ui(&snap);
            let tabs: Vec<maestro::tui::project_tab::ProjectTab> = (0..projects)
                .map(|i| maestro::tui::project_tab::ProjectTab::of(&format!("p{i}"), &snap, 0))
                .collect();
            let tabs = if projects > 1 { tabs } else { Vec::new() };
            let buf = crate::dashboard::render_projects(&snap, &ui, w, h, &tabs, 0);
            let area =
                maestro::tui::panes::panes_area(ratatui::layout::Rect::new(0, 0, w, h), tabs.len());
            let rects = ui.layout(area, &snap).unwrap();
            // Panes that share a column, top to bottom: the whole stack when narrow;
            // Tasks and the anomalies' band when wide (below them the Log sits beside
            // a column of its own).
            let stacks: Vec<Vec<Pane>> = if w >= 110 {
                vec![
                    vec![Pane::Tasks, Pane::Anomalies],
                    vec![Pane::Heartbeats, Pane::Watchdog, Pane::Messages],
                ]
            } else {
                vec![vec![
                    Pane::Tasks,
                    Pane::Anomalies,
                    Pane::Log,
                    Pane::Messages,
                ]]
            };
            for stack in stacks {
                let seen: Vec<(Pane, bool, u16)> = stack
                    .iter()
                    .map(|p| {
                        let (hidden, empty) = hidden_and_empty(&buf, rects.get(*p));
                        (*p, hidden, empty)
                    })
                    .collect();
                let hiding: Vec<Pane> = seen.iter().filter(|s| s.1).map(|s| s.0).collect();
                let room: Vec<(Pane, u16)> = seen
                    .iter()
                    .filter(|s| s.2 > 0)
                    .map(|s| (s.0, s.2))
                    .collect();
                assert!(
                    hiding.is_empty() || room.is_empty(),
                    "{musicians} Musicians at {w}x{h}: {hiding:?} hide rows while {room:?} leave rows empty\n{}",
                    text(&buf)
                );
            }
        }
    }
}
