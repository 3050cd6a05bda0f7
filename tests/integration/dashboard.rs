//! Snapshot tests of the dashboard: every pane and overlay rendered from fixed state
//! through ratatui's `TestBackend` (normal, empty, error, narrow, too small), plus the
//! picture in `assets/` that the README shows.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;

use maestro::core::clock::{Clock, parse_sqlite_utc};
use maestro::core::domain::souffleur::WatchdogReason;
use maestro::core::domain::{Anomaly, AnomalyKind, LogKind, TaskId};
use maestro::core::event::{Happening, MessageRow, TaskRow, What};
use maestro::core::snapshot::{DatabaseHealth, Snapshot, TaskView, WatchdogView};
use maestro::tui::action::Action;
use maestro::tui::app::UiState;
use maestro::tui::keymap::Keymap;
use maestro::tui::panes::{self, DrawCtx};
use maestro::tui::project_tab::ProjectTab;
use maestro::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use time::{OffsetDateTime, UtcOffset};

const NOW: &str = "2026-11-22 14:40:00";

pub(crate) fn now() -> OffsetDateTime {
    parse_sqlite_utc(NOW).unwrap()
}

pub(crate) fn ago(secs: i64) -> OffsetDateTime {
    now() - time::Duration::seconds(secs)
}

pub(crate) fn task(
    id: &str,
    state: &str,
    by: Option<&str>,
    beat_ago: Option<i64>,
    ctx: &[u8],
) -> TaskView {
    TaskView {
        row: TaskRow {
            worked_by: by.map(Into::into),
            retry_count: i64::from(state == "fix_proposed"),
            ..TaskRow::new(id, state)
        },
        heartbeat: beat_ago.map(ago),
        ctx: ctx.iter().copied().collect::<VecDeque<u8>>(),
        last_anomaly: None,
        watched: true,
        forecast: None,
        sessions: Vec::new(),
        session_lost: false,
        needs_you: None,
        waiting_since: None,
    }
}

/// A session whose latest response was `secs_ago` seconds ago, with `context` tokens
/// in use and, if given, a tool call (name, argument) still waiting for its result.
pub(crate) fn session(
    task: &str,
    model: &str,
    context: u64,
    output: u64,
    secs_ago: i64,
    tool: Option<(&str, &str)>,
) -> std::sync::Arc<maestro::core::sessions::figures::SessionFigures> {
    use maestro::core::sessions::{figures, prices::PriceTable, tally::Tally};
    let ts = |ago_s: i64| {
        ago(ago_s)
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let prices = PriceTable::default();
    let mut t = Tally::new();
    // Earlier calls, with one error among them.
    for (n, (name, arg, error)) in [
        ("Read", "docs/tasks/spec.md", false),
        ("Grep", "fn parse_", false),
        ("Bash", "cargo test -q", true),
        ("Edit", "src/parser.rs", false),
    ]
    .into_iter()
    .enumerate()
    {
        t.feed(&serde_json::json!({"type": "assistant", "sessionId": task, "timestamp": ts(secs_ago + 300 - 60 * n as i64), "requestId": format!("e{n}"),
            "message": {"id": format!("e{n}"), "model": model, "stop_reason": "tool_use",
                "content": [{"type": "tool_use", "id": format!("te{n}"), "name": name, "input": {"file_path": arg, "pattern": arg, "command": arg}}],
                "usage": {"input_tokens": 10, "output_tokens": output / 8, "cache_read_input_tokens": context / 2}}}).to_string(), &prices);
        t.feed(&serde_json::json!({"type": "user", "sessionId": task, "timestamp": ts(secs_ago + 290 - 60 * n as i64),
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("te{n}"), "is_error": error, "content": if error { "2 tests failed" } else { "ok" }}]}}).to_string(), &prices);
    }
    let content = match tool {
        Some((name, arg)) => {
            serde_json::json!([{"type": "tool_use", "id": "t-last", "name": name, "input": {"command": arg, "file_path": arg}}])
        }
        None => serde_json::json!([{"type": "text", "text": "Done for now."}]),
    };
    t.feed(&serde_json::json!({"type": "assistant", "sessionId": task, "timestamp": ts(secs_ago), "requestId": "r-last",
        "message": {"id": "m-last", "model": model, "content": content, "stop_reason": if tool.is_some() { "tool_use" } else { "end_turn" },
            "usage": {"input_tokens": 10, "output_tokens": output / 2, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": context - 2010}}}).to_string(), &prices);
    std::sync::Arc::new(figures::SessionFigures::of(
        figures::Whose {
            task_id: task,
            session_id: &format!("7f3c{}-5e0b", &task[5..]),
            file: std::path::Path::new(
                "/home/ana/.claude/projects/-home-ana-work-parser/7f3c.jsonl",
            ),
            found_by: "transcript",
        },
        &t,
        &[],
        (now().unix_timestamp_nanos() / 1_000_000) as i64,
        &maestro::core::sessions::ContextWindows::default(),
    ))
}

pub(crate) fn busy_snapshot() -> Snapshot {
    let mut t3 = task(
        "task-03",
        "working",
        Some("musician-3"),
        Some(20),
        &[6, 10, 18, 27, 35],
    );
    t3.last_anomaly = Some(AnomalyKind::HighDeviation);
    t3.sessions = vec![session(
        "task-03",
        "claude-sonnet-4-5-20250929",
        72_000,
        48_000,
        40,
        Some(("Bash", "cargo test -q parser")),
    )];
    let mut t5 = task(
        "task-05",
        "working",
        Some("musician-5"),
        Some(12),
        &[5, 12, 29, 51],
    );
    t5.last_anomaly = Some(AnomalyKind::ContextSpike);
    // The transcript says more than the Musician's own estimate: marked.
    t5.sessions = vec![session(
        "task-05",
        "claude-sonnet-4-5-20250929",
        136_000,
        90_000,
        3,
        Some(("Edit", "src/parser/expr.rs")),
    )];
    t5.forecast = Some(maestro::core::forecast::Forecast {
        rate_per_min: 2.0,
        handoff_at: Some(ago(-210)),
        exit_at: Some(ago(-510)),
    });
    // A finished task's forecast is not shown (its column reads "—").
    let mut t1 = task(
        "task-01",
        "complete",
        Some("musician-1"),
        Some(900),
        &[5, 21, 29, 55, 66, 68],
    );
    t1.forecast = Some(maestro::core::forecast::Forecast {
        rate_per_min: 1.0,
        handoff_at: None,
        exit_at: Some(ago(-60)),
    });
    let mut t4 = task(
        "task-04",
        "working",
        Some("musician-4"),
        Some(610),
        &[5, 9, 12],
    );
    t4.last_anomaly = Some(AnomalyKind::Stalled);
    let mut t2 = task(
        "task-02",
        "needs_review",
        Some("musician-2"),
        Some(40),
        &[4, 22, 34, 44],
    );
    t2.sessions = vec![session(
        "task-02",
        "claude-sonnet-4-5-20250929",
        90_000,
        30_000,
        130,
        None,
    )];
    let mut conductor = task("task-00", "reviewing", Some("conductor"), Some(35), &[]);
    conductor.sessions = vec![session(
        "task-00",
        "claude-opus-4-5-20251101",
        310_000,
        60_000,
        20,
        None,
    )];
    let tasks: Vec<TaskView> = vec![
        t1,
        t2,
        t3,
        t4,
        t5,
        task(
            "task-06",
            "fix_proposed",
            Some("musician-6"),
            Some(300),
            &[8, 15],
        ),
        conductor,
        task("souffleur", "confirmed", None, Some(50), &[]),
    ];
    let cost = tasks.iter().filter_map(TaskView::cost_usd).sum::<f64>();
    Snapshot {
        version: 7,
        tasks: vec![]
            .into_iter()
            .chain(tasks)
            .map(std::sync::Arc::new)
            .collect(),
        database: DatabaseHealth::Ok,
        last_error: None,
        last_gap: None,
        watchdog: WatchdogView {
            conductor_heartbeat: Some(ago(35)),
            conductor_state: Some("reviewing".into()),
            last_reason: Some((ago(600), WatchdogReason::ConductorDeadHeartbeat)),
            task_count: 8,
            role: None,
        },
        anomaly_count: 4,
        message_count: 4,
        pipelines: vec![],
        logs_waiting: None,
        watchers: std::collections::BTreeMap::from([("task-03".into(), "background".into())]),
        counts: maestro::core::snapshot::Counts::default(),
        session_cost_usd: Some(cost),
        session_cost_unknown: false,
        unpriced_models: Vec::new(),
        link: None,
        sessions_waiting: None,
        budgets: std::collections::BTreeMap::new(),
    }
}

pub(crate) fn happening(secs_ago: i64, what: What) -> Happening {
    Happening {
        told: None,
        at: ago(secs_ago),
        what,
    }
}

pub(crate) fn log(task: &str, kind: LogKind, lines: &[&str]) -> What {
    What::Log {
        task: TaskId::parse(task).unwrap(),
        kind,
        skipped: 0,
        lines: lines
            .iter()
            .map(|s| (*s).to_owned())
            .collect::<Vec<_>>()
            .into(),
        reset: false,
    }
}

/// An anomaly as the Sentinel sends it: `line` names the log kind, the line's index
/// among that kind's lines and its text.
pub(crate) fn anomaly(
    task: &str,
    kind: AnomalyKind,
    detail: &str,
    line: Option<(LogKind, u64, &str)>,
) -> What {
    What::Anomaly(Anomaly {
        task_id: TaskId::parse(task).unwrap(),
        kind,
        detail: detail.into(),
        spike: (kind == AnomalyKind::ContextSpike).then_some((29, 51)),
        line: line.map(|(kind, index, text)| maestro::core::domain::SourceLine {
            kind,
            index,
            offset: None,
            text: text.into(),
        }),
    })
}

pub(crate) fn message(id: i64, task: &str, from: &str, kind: &str, text: &str) -> What {
    What::Message(MessageRow {
        id,
        task_id: Some(task.into()),
        from_session: Some(from.into()),
        message_type: Some(kind.into()),
        message: Some(text.into()),
        timestamp: Some(format!("2026-11-22 14:3{id}:00")),
    })
}

pub(crate) fn busy_ui(snap: &Snapshot) -> UiState {
    let mut ui = UiState::default();
    ui.sync_with(snap);
    let feed = [
        happening(
            400,
            log(
                "task-05",
                LogKind::Status,
                &[
                    "bootstrap started [ctx: 2%]",
                    "task claimed [ctx: 5%]",
                    "step 1 started [ctx: 12%]",
                    "step 2 started [ctx: 29%]",
                ],
            ),
        ),
        happening(
            300,
            log(
                "task-05",
                LogKind::Deviations,
                &["Low: renamed parse_expr for consistency"],
            ),
        ),
        happening(
            200,
            log(
                "task-05",
                LogKind::Status,
                &["step 2 self-correction: test failure in parser, rewrote tokenizer [ctx: 34%]"],
            ),
        ),
        happening(
            200,
            anomaly(
                "task-05",
                AnomalyKind::SelfCorrection,
                "\"step 2 self-correction: test failure in parser, rewrote tokenizer [ctx: 34%]\"",
                Some((
                    LogKind::Status,
                    4,
                    "step 2 self-correction: test failure in parser, rewrote tokenizer [ctx: 34%]",
                )),
            ),
        ),
        happening(
            100,
            log(
                "task-05",
                LogKind::Status,
                &[
                    "step 3 started [ctx: 51%]",
                    "step 3 agent 1 launched [ctx: 52%]",
                ],
            ),
        ),
        happening(
            100,
            anomaly(
                "task-05",
                AnomalyKind::ContextSpike,
                "Context jumped from 34% to 51% between step 2 and step 3 (+17%)",
                Some((LogKind::Status, 5, "step 3 started [ctx: 51%]")),
            ),
        ),
        happening(
            90,
            log(
                "task-03",
                LogKind::Deviations,
                &["High: changed the public Config API without a migration"],
            ),
        ),
        happening(
            90,
            anomaly(
                "task-03",
                AnomalyKind::HighDeviation,
                "\"High: changed the public Config API without a migration\"",
                Some((
                    LogKind::Deviations,
                    0,
                    "High: changed the public Config API without a migration",
                )),
            ),
        ),
        happening(
            30,
            anomaly(
                "task-04",
                AnomalyKind::Stalled,
                "No new entries in temp/task-04-status for 7 minutes. Last entry: \"step 1 agent 1 launched [ctx: 12%]\"",
                None,
            ),
        ),
        happening(
            500,
            message(
                1,
                "task-00",
                "task-00",
                "instruction",
                "Phase 2 started: tasks 01-06 are ready to claim.",
            ),
        ),
        happening(
            200,
            message(
                2,
                "task-02",
                "musician-2",
                "review_request",
                "Checkpoint 2: tokenizer and parser done, 48 tests green.\nPlease review temp/task-02-report.",
            ),
        ),
        happening(
            150,
            message(
                3,
                "task-06",
                "task-00",
                "fix_proposal",
                "The tokenizer drops the trailing newline; restore it.",
            ),
        ),
        happening(
            60,
            message(
                4,
                "task-01",
                "musician-1",
                "completion",
                "task-01 complete.",
            ),
        ),
    ];
    for h in &feed {
        ui.ingest(h);
    }
    // Show task-05 (the fifth row).
    for _ in 0..4 {
        ui.update(Action::Down, snap);
    }
    ui
}

pub(crate) fn render(snap: &Snapshot, ui: &UiState, width: u16, height: u16) -> Buffer {
    render_projects(snap, ui, width, height, &[], 0)
}

/// Draws as the dashboard's loop does: what the frame measured (how far the open reader
/// scrolls) is kept in `ui` for the next keys.
pub(crate) fn render_kept(snap: &Snapshot, ui: &mut UiState, width: u16, height: u16) -> Buffer {
    let (buffer, reader) = draw_measured(snap, ui, (width, height), &[], 0, "parser-rewrite");
    ui.drawn(reader);
    buffer
}

/// The dashboard of a project named `project`.
pub(crate) fn render_named(
    snap: &Snapshot,
    ui: &UiState,
    (width, height): (u16, u16),
    project: &str,
) -> Buffer {
    draw_measured(snap, ui, (width, height), &[], 0, project).0
}

pub(crate) fn render_projects(
    snap: &Snapshot,
    ui: &UiState,
    width: u16,
    height: u16,
    projects: &[ProjectTab],
    project_index: usize,
) -> Buffer {
    draw_measured(
        snap,
        ui,
        (width, height),
        projects,
        project_index,
        "parser-rewrite",
    )
    .0
}

fn draw_measured(
    snap: &Snapshot,
    ui: &UiState,
    (width, height): (u16, u16),
    projects: &[ProjectTab],
    project_index: usize,
    project: &str,
) -> (Buffer, Option<maestro::tui::panes::reader::Extent>) {
    let theme = Theme::load("dark", None, false).unwrap();
    let keymap = Keymap::defaults();
    let clock = Clock::system(UtcOffset::UTC);
    // The default settings' deadlines: 540 s a task, 240 s the Conductor, 180 s the Souffleur.
    let rules =
        maestro::settings::Settings::resolve(None, &maestro::settings::Overrides::default())
            .unwrap()
            .rules;
    let ctx = DrawCtx {
        snap,
        ui,
        theme: &theme,
        keymap: &keymap,
        project,
        rules: &rules,
        now: now(),
        clock: &clock,
        projects,
        project_index,
    };
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    let mut reader = None;
    terminal.draw(|f| reader = panes::draw(f, &ctx)).unwrap();
    (terminal.backend().buffer().clone(), reader)
}

pub(crate) fn text(buf: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[test]
fn busy_dashboard_wide() {
    let snap = busy_snapshot();
    let ui = busy_ui(&snap);
    insta::assert_snapshot!(text(&render(&snap, &ui, 140, 40)));
}

#[test]
fn busy_dashboard_narrow() {
    let snap = busy_snapshot();
    let ui = busy_ui(&snap);
    insta::assert_snapshot!(text(&render(&snap, &ui, 80, 30)));
}

#[test]
fn empty_dashboard() {
    let snap = Snapshot::default();
    let ui = UiState::default();
    insta::assert_snapshot!(text(&render(&snap, &ui, 120, 30)));
}

#[test]
fn failing_database_and_last_error() {
    let mut snap = busy_snapshot();
    snap.database = DatabaseHealth::Failing("database busy".into());
    snap.last_error = Some((ago(5), "database: database busy (retrying in 50ms)".into()));
    let ui = UiState::default();
    let out = text(&render(&snap, &ui, 140, 40));
    let status = out.lines().nth(39).unwrap();
    assert!(status.contains("db failing"), "{status}");
    assert!(status.contains("database: database busy"), "{status}");
    insta::assert_snapshot!(out);
}

#[test]
fn too_small_terminal() {
    let snap = busy_snapshot();
    let ui = UiState::default();
    let out = text(&render(&snap, &ui, 50, 12));
    assert!(out.contains("Terminal too small: 50x12"));
    insta::assert_snapshot!(out);
}

#[test]
fn help_overlay_lists_every_binding() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.update(Action::Help, &snap);
    let out = text(&render(&snap, &ui, 120, 100));
    for needle in [
        "quit",
        "search the log",
        "next anomaly line in the log",
        "messages: cycle the message-type filter",
        "approve the task's review",
        "relaunch its Musician by the handoff procedure",
        "zoom the focused pane",
        "yes: do what the dialog says",
    ] {
        assert!(out.contains(needle), "help lacks {needle:?}");
    }
    insta::assert_snapshot!(out);
}

#[test]
fn message_overlay_shows_the_full_text() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.update(Action::FocusMessages, &snap);
    ui.update(Action::Down, &snap);
    ui.update(Action::Down, &snap); // #2, the two-line review request
    ui.update(Action::Open, &snap);
    let out = text(&render(&snap, &ui, 120, 40));
    assert!(out.contains("Please review temp/task-02-report."));
    insta::assert_snapshot!(out);
}

#[test]
fn log_jump_to_anomaly_and_search() {
    let snap = busy_snapshot();
    let mut ui = busy_ui(&snap);
    ui.update(Action::FocusAnomalies, &snap);
    ui.update(Action::Down, &snap);
    ui.update(Action::Down, &snap);
    ui.update(Action::Down, &snap); // the self-correction
    ui.update(Action::Open, &snap);
    ui.update(Action::Search, &snap);
    for c in "step".chars() {
        ui.search_type(Some(c));
    }
    ui.search_finish(true);
    let out = text(&render(&snap, &ui, 140, 40));
    assert!(out.contains("/step"));
    insta::assert_snapshot!(out);
}

/// The picture in README.md: the busy dashboard as SVG, generated by this test.
/// Set `MAESTRO_UPDATE_ASSETS=1` to rewrite it after a deliberate change.
#[test]
fn readme_picture_is_current() {
    let snap = busy_snapshot();
    let ui = busy_ui(&snap);
    // The size of the kitty windows maestro opens (120x40), and kitty's default (80x24).
    for (file, width, height) in [("dashboard.svg", 120, 40), ("dashboard-80x24.svg", 80, 24)] {
        let svg = maestro::tui::svg::render(&render(&snap, &ui, width, height));
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets")
            .join(file);
        if std::env::var_os("MAESTRO_UPDATE_ASSETS").is_some() {
            std::fs::write(&path, &svg).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == svg,
            "assets/{file} is stale: run MAESTRO_UPDATE_ASSETS=1 cargo test --test integration readme_picture"
        );
    }
}
