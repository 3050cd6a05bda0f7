//! The dashboard: a terminal guard, the event loop and the render policy.
//!
//! The loop owns the [`UiState`]; keys become [`Action`]s, `update` returns
//! [`Effect`]s, and the hub's snapshot and happenings come in on their channels. A dirty
//! flag is set by anything visible; frames are drawn at most every [`FRAME`], inside
//! synchronized-update codes, and a 1 s tick runs only while ages are on screen.

pub mod action;
pub mod app;
mod effects;
mod error;
pub mod keymap;
pub mod layout;
pub mod notify;
pub mod pane_kinds;
pub mod panes;
pub mod project_tab;
mod screens;
pub mod svg;
mod terminal;
pub mod theme;

pub use error::TuiError;

use std::io::{Stdout, Write};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, KeyEventKind, MouseButton, MouseEventKind};
use crossterm::{execute, queue};
use ratatui::DefaultTerminal;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::core::clock::Clock;
use crate::core::runtime::RunningCore;
use crate::core::snapshot::Snapshot;
use crate::tui::panes::log::older::OlderLines;
use action::Action;
use app::overlays::Route;
use app::{Effect, Notification, UiState};
pub use effects::{ActionAccess, PipelineAccess};
use effects::{ActionAnswer, pipeline_effect, task_effect};
use keymap::{Keymap, Mode};
use notify::Notifier;
use panes::DrawCtx;
use terminal::{TerminalGuard, spawn_input};
use theme::Theme;

/// Shortest time between two frames (~30 frames/s at most).
pub const FRAME: Duration = Duration::from_millis(33);
/// More notifications than this in one burst become one summary.
const NOTIFY_BURST: usize = 3;

pub struct TuiConfig {
    pub project: String,
    pub theme: Theme,
    pub keymap: Keymap,
    /// What the hub judges by (the heartbeat deadlines colour the ages).
    pub rules: crate::core::hub::Rules,
    pub notifier: Notifier,
    pub clock: Clock,
    /// The project's pipeline definitions and its host's socket.
    pub pipelines: Option<PipelineAccess>,
    /// Commands to the Souffleur role, when this process holds it.
    pub watchdog:
        Option<tokio::sync::mpsc::Sender<crate::core::watchdog::control::WatchdogRequest>>,
    /// Where the task actions act (the project), when the dashboard may act.
    pub actions: Option<ActionAccess>,
    /// How lines are read (`[logs] max_line`): lines read back from a file
    /// are cut as the log source cuts them.
    pub reading: crate::core::sources::Reading,
    /// Fires when what is shown has run its course (the demo's scenario), with the note
    /// the status line says then.
    pub finished: Option<(tokio::sync::oneshot::Receiver<()>, String)>,
}

impl TuiConfig {
    /// Theme, keys and rules from the resolved settings. `NO_COLOR` (set, not empty)
    /// turns colours off.
    pub fn from_settings(
        project: String,
        settings: &crate::settings::Settings,
        clock: Clock,
    ) -> Result<Self, TuiError> {
        let no_color = settings.no_color;
        let themes_dir = directories::ProjectDirs::from("", "", "maestro")
            .map(|d| d.config_dir().join("themes"));
        Ok(Self {
            project,
            theme: Theme::load(&settings.theme, themes_dir.as_deref(), no_color)?,
            keymap: Keymap::new(&settings.keys)?,
            rules: settings.rules,
            notifier: Notifier::from_settings(&settings.notifications, &settings.notify_command),
            reading: settings.reading,
            clock,
            pipelines: None,
            watchdog: None,
            actions: None,
            finished: None,
        })
    }
}

/// What the dashboard shows: a live core's feeds, or a replay's (with its controls).
pub struct Feeds<'a> {
    pub happenings: &'a mut mpsc::Receiver<crate::core::event::Happening>,
    pub snapshots: &'a mut tokio::sync::watch::Receiver<Arc<Snapshot>>,
    pub replay: Option<ReplayAccess>,
}

impl<'a> Feeds<'a> {
    pub fn live(core: &'a mut RunningCore) -> Self {
        Self {
            happenings: &mut core.happenings,
            snapshots: &mut core.snapshots,
            replay: None,
        }
    }
}

/// A replay's clock and controls, for the status bar and the `[keys.replay]` keys.
pub struct ReplayAccess {
    pub status: tokio::sync::watch::Receiver<crate::core::replay::player::ReplayStatus>,
    pub control: crate::core::replay::player::ReplayControl,
}

/// Resolves when the replay's status changes; never without a replay.
async fn replay_changed(replay: Option<&mut ReplayAccess>) -> bool {
    match replay {
        Some(r) => r.status.changed().await.is_ok(),
        None => std::future::pending().await,
    }
}

/// Runs the dashboard on one project until the operator quits or `stop` fires.
pub async fn run(core: Feeds<'_>, cfg: TuiConfig, stop: CancellationToken) -> Result<(), TuiError> {
    let screen = Screen {
        name: cfg.project.clone(),
        feeds: core,
        pipelines: cfg.pipelines.clone(),
        actions: cfg.actions.clone(),
    };
    run_screens(vec![screen], cfg, stop).await
}

/// One project the dashboard shows: its feeds and where its actions go.
pub struct Screen<'a> {
    pub name: String,
    pub feeds: Feeds<'a>,
    pub pipelines: Option<PipelineAccess>,
    pub actions: Option<ActionAccess>,
}

/// Runs the dashboard on one or more projects (a projects bar and `alt-N` /
/// `[keys.global]` `next_project` to switch when several).
pub async fn run_screens(
    screens: Vec<Screen<'_>>,
    mut cfg: TuiConfig,
    stop: CancellationToken,
) -> Result<(), TuiError> {
    let mut finished = cfg.finished.take();
    let mut guard = TerminalGuard::enter(&cfg.project)?;
    let (input_tx, mut input) = mpsc::channel(256);
    spawn_input(input_tx);

    let (changed_tx, mut changed) = mpsc::channel::<usize>(64);
    let (mut receivers, mut shown, mut replay) = show_screens(screens, &cfg, &changed_tx);
    let mut current = 0usize;
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut pending_notes: Vec<Notification> = Vec::new();
    let (answer_tx, mut answers) = mpsc::unbounded_channel::<(usize, ActionAnswer)>();

    loop {
        let frame_at = dirty.then(|| last_draw.map_or_else(Instant::now, |t| t + FRAME));
        let shows_ages = shown[current]
            .snap
            .tasks
            .iter()
            .any(|t| t.heartbeat.is_some());
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            () = sleep_until(frame_at), if frame_at.is_some() => {
                flush_notifications(&cfg.notifier, &mut pending_notes);
                let tabs = screens::tabs(&shown);
                let s = &mut shown[current];
                present(&mut guard.terminal, &s.snap, &mut s.ui, &cfg, &tabs, current)?;
                // A large file indexed on its thread: frames go on (saying how far).
                dirty = s.ui.reading_back();
                last_draw = Some(Instant::now());
            }
            Some(ev) = input.recv() => {
                let to = Screens { shown: &mut shown, current: &mut current, replay: replay.as_ref() };
                if take_input(ev, &mut input, to, (&cfg, &mut guard), &answer_tx).await {
                    break;
                }
                dirty = true;
            }
            Some((i, answer)) = answers.recv() => {
                take_answer(&mut shown[i].ui, answer);
                dirty = true;
            }
            (i, h) = screens::next_happening(&mut receivers) => {
                let batch = std::iter::once(h).chain(std::iter::from_fn(|| receivers[i].try_recv().ok()));
                for h in batch.collect::<Vec<_>>() {
                    if let Some(n) = shown[i].ui.ingest(&h) {
                        pending_notes.push(screens::announce(&mut shown, i, current, n));
                    }
                }
                dirty = true;
            }
            Some(i) = changed.recv() => {
                shown[i].refresh();
                dirty = true;
            }
            true = replay_changed(replay.as_mut()) => {
                if let Some(r) = &replay {
                    shown[current].ui.replay = Some(replay_label(&r.status.borrow(), &cfg));
                }
                dirty = true;
            }
            _ = tick.tick(), if shows_ages => dirty = true,
            ended = async { match &mut finished { Some((rx, _)) => rx.await, None => std::future::pending().await } } => {
                // Told once either way (a oneshot is not polled again).
                if let Some((_, note)) = finished.take()
                    && ended.is_ok()
                {
                    shown[current].ui.note = Some(note);
                }
                dirty = true;
            }
        }
    }
    drop(guard);
    Ok(())
}

/// The screens as the loop holds them: each project's, the one shown, the replay.
struct Screens<'a> {
    shown: &'a mut [screens::Shown],
    current: &'a mut usize,
    replay: Option<&'a ReplayAccess>,
}

/// The keys and mouse events waiting, `first` first, in order: a switch of project or
/// replay command, else the shown screen's; true when one of them quits.
async fn take_input(
    first: Event,
    input: &mut mpsc::Receiver<Event>,
    to: Screens<'_>,
    (cfg, guard): (&TuiConfig, &mut TerminalGuard),
    answer_tx: &mpsc::UnboundedSender<(usize, ActionAnswer)>,
) -> bool {
    let mut quit = false;
    for ev in std::iter::once(first).chain(std::iter::from_fn(|| input.try_recv().ok())) {
        if navigate(&ev, to.shown, to.current, cfg, to.replay) {
            continue;
        }
        let rows = to.shown.len();
        let current = *to.current;
        let s = &mut to.shown[current];
        let effects = handle_event(&ev, &mut s.ui, &s.snap, cfg, guard, rows);
        quit |= apply_effects(effects, s, cfg, guard, current, answer_tx).await;
    }
    quit
}

/// Each project's screen: its happenings, its state shown, the replay if one plays; the
/// snapshot changes of each forwarded on `changed`.
fn show_screens<'a>(
    screens: Vec<Screen<'a>>,
    cfg: &TuiConfig,
    changed_tx: &mpsc::Sender<usize>,
) -> (
    Vec<&'a mut mpsc::Receiver<crate::core::event::Happening>>,
    Vec<screens::Shown>,
    Option<ReplayAccess>,
) {
    let mut receivers = Vec::new();
    let mut shown = Vec::new();
    let mut replay = None;
    for (i, screen) in screens.into_iter().enumerate() {
        let Screen {
            name,
            feeds,
            pipelines,
            actions,
        } = screen;
        if replay.is_none() {
            replay = feeds.replay;
        }
        receivers.push(feeds.happenings);
        let mut screen = screens::Shown::new(name, feeds.snapshots, pipelines, actions);
        // A local project's logs can be read back; a remote one's are on its host.
        if let Some(a) = screen.actions.as_ref().filter(|a| a.remote.is_none()) {
            screen.ui.panes.log.older = OlderLines::read_from(a.target.temp.clone(), cfg.reading);
        }
        shown.push(screen);
        screens::forward_changes(i, feeds.snapshots.clone(), changed_tx.clone());
    }
    (receivers, shown, replay)
}

/// A key that moves between projects (the picker, a switch) or steers the replay:
/// taken here (true), or left for the screen's own keys.
fn navigate(
    ev: &Event,
    shown: &mut [screens::Shown],
    current: &mut usize,
    cfg: &TuiConfig,
    replay: Option<&ReplayAccess>,
) -> bool {
    let count = shown.len();
    let switch =
        match screens::picker_key(ev, &mut shown[*current].ui, &cfg.keymap, *current, count) {
            Some(screens::Picked::Switch(n)) => Some(n),
            Some(screens::Picked::Handled) => return true,
            None => screens::switch_key(ev, &shown[*current].ui, &cfg.keymap, *current, count),
        };
    if let Some(n) = switch {
        *current = n;
        shown[n].ui.note = Some(format!("project {}: {}", n + 1, shown[n].name));
        return true;
    }
    if let Some(replay) = replay
        && let Some(cmd) = replay_key(ev, &shown[*current].ui, &cfg.keymap)
    {
        replay.control.send(cmd);
        return true;
    }
    false
}

/// A task action's answer, into its screen: a question to confirm, a refusal, the
/// outcome, or the headroom panel.
fn take_answer(ui: &mut UiState, answer: ActionAnswer) {
    match answer {
        ActionAnswer::Described(request, Ok(question)) => ui.ask_confirmation(request, question),
        ActionAnswer::Described(_, Err(e)) => ui.refused(&e.to_string()),
        ActionAnswer::Done(outcome) => ui.action_done(outcome),
        ActionAnswer::Performed(request, outcome) => {
            // A window frozen (or thawed) by this dashboard is marked on its row once
            // the signal was delivered, not when it was asked for.
            if outcome.is_ok() {
                ui.window_signalled(&request);
            }
            ui.action_done(outcome);
        }
        ActionAnswer::Headroom(task, text) => ui.show_panel(&task, text),
    }
}

/// What a key asked for, carried out; true when it asks to quit.
async fn apply_effects(
    effects: Vec<Effect>,
    s: &mut screens::Shown,
    cfg: &TuiConfig,
    guard: &mut TerminalGuard,
    current: usize,
    answer_tx: &mpsc::UnboundedSender<(usize, ActionAnswer)>,
) -> bool {
    let mut quit = false;
    for effect in effects {
        match effect {
            Effect::Quit => quit = true,
            Effect::Copy(text) => {
                let mut out = std::io::stdout();
                let _ = out.write_all(notify::clipboard_sequence(&text).as_bytes());
                let _ = out.flush();
            }
            Effect::Suspend => guard.suspend(),
            fx @ (Effect::Pipeline { .. }
            | Effect::EditSteps(_)
            | Effect::SaveSteps { .. }
            | Effect::DescribeTrust(_)
            | Effect::Trust { .. }) => {
                pipeline_effect(fx, &mut s.ui, s.pipelines.as_ref()).await;
            }
            fx @ (Effect::DescribeTask(_)
            | Effect::Task(_)
            | Effect::Headroom(_)
            | Effect::Focus(_)) => {
                task_effect(fx, s.actions.as_ref(), current, answer_tx);
            }
            Effect::Watchdog(cmd) => match &cfg.watchdog {
                Some(tx) => {
                    let request =
                        crate::core::watchdog::control::WatchdogRequest { cmd, reply: None };
                    let _ = tx.try_send(request);
                }
                None => s.ui.note = Some("no Souffleur role in this process".into()),
            },
        }
    }
    quit
}

/// The replay command a key stands for (`[keys.replay]`), outside overlays.
fn replay_key(
    ev: &Event,
    ui: &UiState,
    keymap: &Keymap,
) -> Option<crate::core::replay::player::ReplayCmd> {
    use crate::core::replay::player::ReplayCmd;
    let Event::Key(key) = ev else { return None };
    if key.kind == KeyEventKind::Release || ui.overlay.is_some() || ui.search_input.is_some() {
        return None;
    }
    Some(match keymap.only(Mode::Replay, key)? {
        Action::ReplayPause => ReplayCmd::TogglePause,
        Action::ReplayStep => ReplayCmd::Step,
        Action::ReplayBack => ReplayCmd::SeekBy(-60),
        Action::ReplayForward => ReplayCmd::SeekBy(60),
        Action::ReplayBackFar => ReplayCmd::SeekBy(-600),
        Action::ReplayForwardFar => ReplayCmd::SeekBy(600),
        Action::ReplayFaster => ReplayCmd::Faster,
        Action::ReplaySlower => ReplayCmd::Slower,
        _ => return None,
    })
}

/// `REPLAY 14:35:22 ▶ ×10 1234/10000`, for the status bar (the keys are in help).
fn replay_label(s: &crate::core::replay::player::ReplayStatus, cfg: &TuiConfig) -> String {
    let state = if s.finished {
        "■ end"
    } else if s.paused {
        "❚❚"
    } else {
        "▶"
    };
    let speed = s
        .speed
        .map_or_else(|| "max".to_owned(), |v| format!("×{v}"));
    format!(
        "REPLAY {} {state} {speed} {}/{}",
        cfg.clock.hms(s.at),
        s.played,
        s.total
    )
}

fn flush_notifications(notifier: &Notifier, pending: &mut Vec<Notification>) {
    if pending.is_empty() {
        return;
    }
    let mut out = std::io::stdout();
    if pending.len() > NOTIFY_BURST {
        notifier.notify(
            &format!("maestro: {} new events", pending.len()),
            &format!("{} and more — press 3 for anomalies", pending[0].title),
            &mut out,
        );
    } else {
        for n in pending.iter() {
            notifier.notify(&n.title, &n.body, &mut out);
        }
    }
    pending.clear();
}

fn handle_event(
    ev: &Event,
    ui: &mut UiState,
    snap: &Snapshot,
    cfg: &TuiConfig,
    guard: &TerminalGuard,
    projects: usize,
) -> Vec<Effect> {
    match ev {
        // The answer box's keys are its own: any key closes it, and only it.
        Event::Key(key)
            if key.kind != KeyEventKind::Release && ui.note_boxed && ui.note.is_some() =>
        {
            ui.note = None;
            ui.note_boxed = false;
            vec![]
        }
        Event::Key(key) if key.kind != KeyEventKind::Release => {
            let action = match app::overlays::route(ui, &cfg.keymap, key) {
                Route::Action(action) => action,
                Route::Text => {
                    app::overlays::type_text(ui, *key);
                    return vec![];
                }
                Route::Prompt => {
                    ui.prompt_key(key.code);
                    ui.log_follows_selection(snap);
                    return vec![];
                }
                Route::Nowhere => return vec![],
            };
            if matches!(action, Action::FocusNext | Action::FocusPrev)
                && let Ok(size) = guard.terminal.size()
            {
                // Tab follows the screen as it is laid out now.
                let area = panes::panes_area(
                    ratatui::layout::Rect::new(0, 0, size.width, size.height),
                    projects,
                );
                ui.tab_order = ui
                    .layout(area, snap)
                    .map(|rects| rects.reading_order())
                    .unwrap_or_default();
            }
            ui.update(action, snap)
        }
        Event::Mouse(m) => {
            let Ok(size) = guard.terminal.size() else {
                return vec![];
            };
            let area = panes::panes_area(
                ratatui::layout::Rect::new(0, 0, size.width, size.height),
                projects,
            );
            let Some(rects) = ui.layout(area, snap) else {
                return vec![];
            };
            let Some(pane) = rects.pane_at(m.column, m.row) else {
                return vec![];
            };
            let step = match m.kind {
                MouseEventKind::ScrollUp => Some(Action::Up),
                MouseEventKind::ScrollDown => Some(Action::Down),
                MouseEventKind::Down(MouseButton::Left) => {
                    ui.focus = pane;
                    None
                }
                _ => None,
            };
            if let Some(step) = step {
                ui.focus = pane;
                let mut fx = Vec::new();
                for _ in 0..3 {
                    fx.extend(ui.update(step, snap));
                }
                return fx;
            }
            vec![]
        }
        _ => vec![],
    }
}

/// One frame: the Log's height and the rows it shows prepared from the layout, the
/// dashboard drawn (which reads the state and writes none), then what the frame
/// measured kept for the next keys.
fn present(
    terminal: &mut DefaultTerminal,
    snap: &Snapshot,
    ui: &mut UiState,
    cfg: &TuiConfig,
    projects: &[project_tab::ProjectTab],
    project_index: usize,
) -> Result<(), TuiError> {
    let size = terminal.size().map_err(TuiError::Draw)?;
    let area = panes::panes_area(
        ratatui::layout::Rect::new(0, 0, size.width, size.height),
        projects.len(),
    );
    if let Some(rects) = ui.layout(area, snap) {
        ui.panes.log.height = rects.log.height.saturating_sub(2).max(1);
    }
    ui.prepare_rows();
    let ctx = DrawCtx {
        snap,
        ui,
        theme: &cfg.theme,
        keymap: &cfg.keymap,
        project: projects
            .get(project_index)
            .map_or(cfg.project.as_str(), |t| t.name.as_str()),
        rules: &cfg.rules,
        now: cfg.clock.now_utc(),
        clock: &cfg.clock,
        projects,
        project_index,
    };
    // Known before the draw, as the Log's height is: the next key closes the box.
    let note_boxed = panes::status_bar::note_boxed(&ctx, size.width);
    let out: &mut Stdout = &mut std::io::stdout();
    let _ = queue!(out, crossterm::terminal::BeginSynchronizedUpdate);
    let mut reader = None;
    let result = terminal
        .draw(|f| reader = panes::draw(f, &ctx))
        .map(|_| ())
        .map_err(TuiError::Draw);
    let _ = execute!(out, crossterm::terminal::EndSynchronizedUpdate);
    ui.note_boxed = note_boxed;
    ui.drawn(reader);
    result
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
