//! Dashboard cost: frame render time at 200x60 on 100 tasks with a full scrollback, and
//! the idle CPU of the real dashboard on 100 quiet tasks (in tmux, when present).
//! Run with `cargo bench --bench render`.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::VecDeque;
use std::process::Command;
use std::time::{Duration, Instant};

use maestro::core::clock::Clock;
use maestro::core::domain::{Anomaly, AnomalyKind, LogKind, TaskId};
use maestro::core::event::{Happening, MessageRow, TaskRow, What};
use maestro::core::snapshot::{DatabaseHealth, Snapshot, TaskView};
use maestro::tui::app::UiState;
use maestro::tui::keymap::Keymap;
use maestro::tui::panes::{self, DrawCtx};
use maestro::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use time::{OffsetDateTime, UtcOffset};

const TASKS: usize = 100;
const FRAMES: usize = 2_000;

fn main() {
    let now = OffsetDateTime::now_utc();
    let snap = snapshot(now);
    let ui = ui_state(now, &snap);
    let theme = Theme::load("dark", None, false).unwrap();
    let keymap = Keymap::defaults();
    let clock = Clock::system(UtcOffset::UTC);
    // The default settings' deadlines: 540 s a task, 240 s the Conductor, 180 s the Souffleur.
    let rules =
        maestro::settings::Settings::resolve(None, &maestro::settings::Overrides::default())
            .unwrap()
            .rules;
    let ctx = DrawCtx {
        snap: &snap,
        ui: &ui,
        theme: &theme,
        keymap: &keymap,
        project: "bench",
        rules: &rules,
        now,
        clock: &clock,
        projects: &[],
        project_index: 0,
    };
    let mut terminal = Terminal::new(TestBackend::new(200, 60)).unwrap();
    let mut times = Vec::with_capacity(FRAMES);
    for i in 0..FRAMES + 100 {
        let start = Instant::now();
        terminal
            .draw(|f| {
                panes::draw(f, &ctx);
            })
            .unwrap();
        if i >= 100 {
            times.push(start.elapsed());
        }
    }
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "frame render at 200x60, {TASKS} tasks, {} log lines in scrollback: median {:.0} µs, p99 {:.0} µs, max {:.0} µs (n={FRAMES})",
        ui.current_log().map_or(0, |l| l.end() - l.start()),
        us(times[FRAMES / 2]),
        us(times[FRAMES * 99 / 100]),
        us(times[FRAMES - 1]),
    );
    idle_dashboard(1, TASKS);
    idle_dashboard(10, 20);
}

/// A session as the session source reports it, with a full list of recent calls.
fn session(i: usize) -> maestro::core::sessions::figures::SessionFigures {
    let mut main = maestro::core::sessions::tally::Tally::new();
    let prices = maestro::core::sessions::prices::PriceTable::default();
    for n in 0..30 {
        main.feed(
            &format!(
                r#"{{"type":"assistant","sessionId":"s{i}","timestamp":"2026-11-20T14:02:{:02}.000Z","requestId":"r{n}","message":{{"id":"m{n}","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","id":"t{n}","name":"Bash","input":{{"command":"cargo test -q {n}"}}}}],"stop_reason":"tool_use","usage":{{"input_tokens":3,"cache_creation_input_tokens":{},"cache_read_input_tokens":14032,"output_tokens":210}}}}}}"#,
                n % 60,
                1000 * i + n
            ),
            &prices,
        );
    }
    maestro::core::sessions::figures::SessionFigures::of(
        maestro::core::sessions::figures::Whose {
            task_id: &format!("task-{i:02}"),
            session_id: &format!("s{i}"),
            file: std::path::Path::new("/home/ana/.claude/projects/p/s.jsonl"),
            found_by: "transcript",
        },
        &main,
        &[],
        0,
        &maestro::core::sessions::ContextWindows::default(),
    )
}

fn snapshot(now: OffsetDateTime) -> Snapshot {
    let mut tasks: Vec<TaskView> = (1..=TASKS)
        .map(|i| TaskView {
            row: TaskRow {
                task_id: format!("task-{i:02}"),
                state: ["working", "needs_review", "error", "complete"][i % 4].into(),
                worked_by: Some(format!("musician-{i}")),
                session_id: None,
                last_heartbeat: None,
                retry_count: (i % 3) as i64,
                last_error: None,
            },
            heartbeat: Some(now - time::Duration::seconds((i * 7) as i64)),
            ctx: (0..32)
                .map(|v| ((v * 3 + i) % 100) as u8)
                .collect::<VecDeque<u8>>(),
            last_anomaly: (i % 5 == 0).then_some(AnomalyKind::Stalled),
            watched: true,
            forecast: None,
            sessions: vec![std::sync::Arc::new(session(i))],
            session_lost: false,
            needs_you: None,
            waiting_since: None,
        })
        .collect();
    for id in ["task-00", "souffleur"] {
        tasks.push(TaskView {
            row: TaskRow::new(id, "watching"),
            heartbeat: Some(now),
            ctx: VecDeque::new(),
            last_anomaly: None,
            watched: false,
            forecast: None,
            sessions: Vec::new(),
            session_lost: false,
            needs_you: None,
            waiting_since: None,
        });
    }
    Snapshot {
        tasks: tasks.into_iter().map(std::sync::Arc::new).collect(),
        database: DatabaseHealth::Ok,
        ..Snapshot::default()
    }
}

fn ui_state(now: OffsetDateTime, snap: &Snapshot) -> UiState {
    let mut ui = UiState::default();
    ui.sync_with(snap);
    let task = TaskId::parse("task-01").unwrap();
    let lines: Vec<String> = (0..20_000)
        .map(|i| {
            format!(
                "step {i} agent 1 returned: parsed tokens, self-correction maybe [ctx: {}%]",
                i % 100
            )
        })
        .collect();
    ui.ingest(&Happening {
        told: None,
        at: now,
        what: What::Log {
            task: task.clone(),
            kind: LogKind::Status,
            skipped: 0,
            lines: lines.into(),
            reset: false,
        },
    });
    for i in 0..1000 {
        ui.ingest(&Happening {
            told: None,
            at: now,
            what: What::Anomaly(Anomaly {
                task_id: task.clone(),
                kind: AnomalyKind::SelfCorrection,
                detail: format!("\"step {i} self-correction\""),
                spike: None,
                line: None,
            }),
        });
        ui.ingest(&Happening {
            told: None,
            at: now,
            what: What::Message(MessageRow {
                id: i,
                task_id: Some("task-01".into()),
                from_session: Some("musician-1".into()),
                message_type: Some("review_request".into()),
                message: Some(format!("message {i}")),
                timestamp: Some("2026-11-22 10:00:00".into()),
            }),
        });
    }
    ui.panes.log.search = Some("agent".into());
    ui
}

/// The real dashboard on 100 quiet tasks, in tmux at 200x60: CPU over 10 s.
/// The dashboard left alone on `projects` projects of `tasks` quiet tasks each.
fn idle_dashboard(projects: usize, tasks: usize) {
    if Command::new("tmux").arg("-V").output().is_err() {
        println!("idle dashboard: skipped (tmux is not installed)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let exe = support::exe();
    let mut cmd = exe.to_string();
    for p in 0..projects {
        let project = root.join(format!("project-{p}"));
        std::fs::create_dir_all(project.join("temp")).unwrap();
        support::init(&project);
        let conn = rusqlite::Connection::open(project.join("comms.db")).unwrap();
        for i in 1..=tasks {
            let id = format!("task-{i:02}");
            conn.execute(
                "INSERT INTO orchestration_tasks (task_id, state, last_heartbeat) VALUES (?1, 'working', datetime('now'))",
                [&id],
            )
            .unwrap();
            std::fs::write(
                project.join("temp").join(format!("{id}-status")),
                "task claimed [ctx: 5%]\n",
            )
            .unwrap();
        }
        cmd += &format!(" --project {}", project.display());
    }
    let socket = root.join("tmux.sock");
    let socket = socket.to_str().unwrap();
    let ok = Command::new("tmux")
        .args([
            "-S",
            socket,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "bench",
            "-x",
            "200",
            "-y",
            "60",
            &cmd,
        ])
        .env("TERM", "xterm-256color")
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let pid: u32 = String::from_utf8_lossy(
        &Command::new("tmux")
            .args([
                "-S",
                socket,
                "display-message",
                "-p",
                "-t",
                "bench",
                "#{pane_pid}",
            ])
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .parse()
    .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let ticks = || support::cpu_ticks(pid);
    let period = Duration::from_secs(10);
    let before = ticks();
    std::thread::sleep(period);
    let cpu = (ticks() - before) as f64 / 100.0 / period.as_secs_f64() * 100.0;
    let rss = support::vm_kb(pid, "VmRSS:") as f64;
    println!(
        "idle dashboard at 200x60 on {projects} project(s) of {tasks} quiet tasks: CPU {cpu:.2}% of a core over 10 s, RSS {:.1} MB",
        rss / 1024.0
    );
    let _ = Command::new("tmux")
        .args(["-S", socket, "kill-server"])
        .status();
}
