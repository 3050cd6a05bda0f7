//! Plays a [`Timeline`] through the real hub, on a clock of its own.
//!
//! The hub runs on a current-thread runtime whose tokio clock is paused: virtual time.
//! The player moves it to each input's moment and hands the input over, so every rule
//! that sleeps until a deadline (stalls, stale heartbeats, forecasts) fires at the
//! moment it would have fired in the run, however fast the replay goes. Pacing is the
//! only real-time part: at speed N the player waits (for a command, or at most a
//! quarter of a second) in real time, then moves virtual time on by N times as much.
//! While it waits in real time virtual time stands still (a blocking wait holds tokio's
//! auto-advance), and while the hub has work it does not move either.
//!
//! The hub's output goes through an unbounded queue to a forwarding thread, so the hub
//! never waits on a presenter in another runtime (a wait that would let virtual time
//! jump ahead of it).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::core::clock::Clock;
use crate::core::event::{CoreEvent, Happening, What};
use crate::core::event_log::input::{RecordedSettings, TaskTable, event_of};
use crate::core::event_log::timeline::Timeline;
use crate::core::hub::Hub;
use crate::core::snapshot::Snapshot;

/// The longest real-time wait between two moves of the replay clock while playing.
const TICK: Duration = Duration::from_millis(250);
const SPEEDS: [f64; 12] = [
    0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0,
];

/// What the operator can do to a replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayCmd {
    TogglePause,
    /// To the next input's moment (and pause).
    Step,
    /// Seconds forward (positive) or back (negative).
    SeekBy(i64),
    SeekTo(OffsetDateTime),
    Faster,
    Slower,
}

/// Where a replay stands.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayStatus {
    /// The replay clock: the run's time being shown.
    pub at: OffsetDateTime,
    pub start: OffsetDateTime,
    pub end: OffsetDateTime,
    pub paused: bool,
    /// `None`: as fast as the hub goes.
    pub speed: Option<f64>,
    /// Inputs played, of `total`.
    pub played: usize,
    pub total: usize,
    pub finished: bool,
}

#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// Real-time pace (`None`: as fast as possible).
    pub speed: Option<f64>,
    /// Play up to here at once, then pace.
    pub from: Option<OffsetDateTime>,
    /// Start paused (after `from`).
    pub paused: bool,
    /// Leave out what happened before `from` (headless output).
    pub quiet_before_from: bool,
    /// End when the timeline ends (headless); otherwise wait for commands.
    pub exit_at_end: bool,
    /// Pass log lines on (the dashboard shows them).
    pub forward_logs: bool,
    /// Rules for sessions that did not record theirs.
    pub fallback: RecordedSettings,
}

/// Why a replay could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// Its own clock (a paused runtime) could not be built.
    #[error("cannot start the replay's clock: {0}")]
    Clock(#[source] std::io::Error),
    #[error("cannot start the replay: {0}")]
    Thread(#[source] std::io::Error),
}

/// A replay under way on its own thread. Dropping it stops it.
pub struct Replay {
    pub happenings: mpsc::Receiver<Happening>,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    pub status: watch::Receiver<ReplayStatus>,
    /// Reads the replay clock (for presenters that show ages).
    pub clock: Clock,
    control: Option<Sender<ReplayCmd>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Replay {
    /// Starts playing; `clock` lends its time zone to the replay clock presenters read.
    pub fn spawn(
        timeline: Arc<Timeline>,
        config: ReplayConfig,
        clock: Clock,
    ) -> Result<Self, ReplayError> {
        let start = timeline.start().unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let end = timeline.end().unwrap_or(start);
        // The replay clock is read by presenters for as long as they run; one small cell
        // per replay (one per `maestro replay` process) is left to the process's end.
        let cell: &'static AtomicI64 = Box::leak(Box::new(AtomicI64::new(nanos(start))));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .map_err(ReplayError::Clock)?;
        let (out_tx, out_rx) = mpsc::channel(4096);
        let (snap_tx, snap_rx) = watch::channel(Arc::new(Snapshot::default()));
        let status = ReplayStatus {
            at: start,
            start,
            end,
            paused: config.paused,
            speed: config.speed,
            played: 0,
            total: timeline.len(),
            finished: false,
        };
        let (status_tx, status_rx) = watch::channel(status);
        let (control_tx, control_rx) = channel();
        let thread = std::thread::Builder::new()
            .name("maestro-replay".into())
            .spawn(move || {
                let quiet = config.quiet_before_from.then_some(config.from).flatten();
                let (hub_tx, hub_rx) = mpsc::unbounded_channel();
                let forwarder = forward(hub_rx, out_tx, quiet);
                let player = Player {
                    timeline,
                    config,
                    out: hub_tx,
                    snapshots: snap_tx,
                    status: status_tx,
                    cell,
                    control: Some(control_rx),
                    session: 0,
                    entry: 0,
                    played: 0,
                    hub: None,
                };
                runtime.block_on(player.run());
                drop(runtime);
                let _ = forwarder.join();
            })
            .map_err(ReplayError::Thread)?;
        Ok(Self {
            happenings: out_rx,
            snapshots: snap_rx,
            status: status_rx,
            clock: clock.reading(cell),
            control: Some(control_tx),
            thread: Some(thread),
        })
    }

    pub fn send(&self, cmd: ReplayCmd) {
        if let Some(tx) = &self.control {
            let _ = tx.send(cmd);
        }
    }

    /// A handle for sending commands from elsewhere (the dashboard's keys).
    pub fn control(&self) -> ReplayControl {
        ReplayControl(self.control.clone())
    }
}

/// Sends commands to a replay; a replay that has ended ignores them.
#[derive(Debug, Clone)]
pub struct ReplayControl(Option<Sender<ReplayCmd>>);

impl ReplayControl {
    pub fn send(&self, cmd: ReplayCmd) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(cmd);
        }
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        // A closed control channel ends the player; a closed output ends the forwarder.
        self.control = None;
        self.happenings.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn nanos(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos()).unwrap_or(i64::MAX)
}

/// Moves happenings from the hub's unbounded queue to the presenter's bounded one.
fn forward(
    mut from: mpsc::UnboundedReceiver<Happening>,
    to: mpsc::Sender<Happening>,
    quiet_before: Option<OffsetDateTime>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while let Some(h) = from.blocking_recv() {
            if quiet_before.is_some_and(|from| h.at < from) {
                continue;
            }
            if to.blocking_send(h).is_err() {
                break;
            }
        }
    })
}

/// The hub of the session being played.
struct LiveHub {
    events: mpsc::Sender<CoreEvent>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// Moves the hub's output on; ends after the hub does.
    relay: tokio::task::JoinHandle<()>,
    clock: Clock,
    table: TaskTable,
}

struct Player {
    timeline: Arc<Timeline>,
    config: ReplayConfig,
    out: mpsc::UnboundedSender<Happening>,
    snapshots: watch::Sender<Arc<Snapshot>>,
    status: watch::Sender<ReplayStatus>,
    cell: &'static AtomicI64,
    control: Option<Receiver<ReplayCmd>>,
    session: usize,
    entry: usize,
    played: usize,
    hub: Option<LiveHub>,
}

/// What waiting for the operator brought.
enum Waited {
    Command(ReplayCmd),
    TimedOut,
    Gone,
}

impl Player {
    async fn run(mut self) {
        self.say(
            "loaded",
            format!(
                "{} inputs from the {}",
                self.timeline.len(),
                self.timeline.origin.as_str()
            ),
        );
        for note in self.timeline.notes.clone() {
            self.say("incomplete", note);
        }
        if let Some(from) = self.config.from {
            self.run_to(from).await;
        }
        let mut paused = self.config.paused;
        let mut speed = self.config.speed;
        loop {
            if self.out.is_closed() {
                // Nobody is listening any more (the presenter stopped).
                break;
            }
            let next = self.next_moment();
            self.publish(paused, speed, next.is_none());
            let target = match next {
                Some(target) if !paused => target,
                None if self.config.exit_at_end => break,
                // Paused, or at the end of the run: only a command moves things.
                _ => {
                    match self.wait(None).await {
                        Waited::Command(cmd) => self.command(cmd, &mut paused, &mut speed).await,
                        Waited::TimedOut => {}
                        Waited::Gone => break,
                    }
                    continue;
                }
            };
            let Some(speed_now) = speed else {
                self.run_to(target).await;
                continue;
            };
            let gap: Duration = (target - self.now()).try_into().unwrap_or_default();
            let real = gap.div_f64(speed_now).min(TICK);
            if !real.is_zero() {
                match self.wait(Some(real)).await {
                    Waited::Command(cmd) => {
                        self.command(cmd, &mut paused, &mut speed).await;
                        continue;
                    }
                    Waited::Gone => break,
                    Waited::TimedOut => {}
                }
            }
            let step = real.mul_f64(speed_now).min(gap);
            let to = self.now() + step;
            self.run_to(if step == gap { target } else { to }).await;
        }
        self.stop_hub().await;
        self.publish(paused, speed, true);
    }

    async fn command(&mut self, cmd: ReplayCmd, paused: &mut bool, speed: &mut Option<f64>) {
        match cmd {
            ReplayCmd::TogglePause => *paused = !*paused,
            ReplayCmd::Step => {
                *paused = true;
                let next_input = self.next_input_moment();
                if let Some(at) = next_input {
                    self.run_to(at).await;
                }
            }
            ReplayCmd::SeekBy(secs) => {
                let to = self.now() + time::Duration::seconds(secs);
                self.seek(to).await;
            }
            ReplayCmd::SeekTo(to) => self.seek(to).await,
            ReplayCmd::Faster => *speed = speed.map(|s| step_speed(s, true)),
            ReplayCmd::Slower => *speed = Some(speed.map_or(1000.0, |s| step_speed(s, false))),
        }
    }

    /// Jumps to `to` (clamped to the recording): forward at once, backward by playing
    /// again from the start (the dashboard is told to forget what it showed).
    async fn seek(&mut self, to: OffsetDateTime) {
        let (Some(start), Some(end)) = (self.timeline.start(), self.timeline.end()) else {
            return;
        };
        let to = to.clamp(start, end);
        if to < self.now() {
            self.stop_hub().await;
            self.session = 0;
            self.entry = 0;
            self.played = 0;
            self.say("rewound", format!("to {}", crate::core::clock::rfc3339(to)));
        }
        self.run_to(to).await;
    }

    /// The replay clock: the session hub's clock, or where the timeline stands.
    fn now(&self) -> OffsetDateTime {
        match &self.hub {
            Some(hub) => hub.clock.now_utc(),
            None => self.timeline.sessions.get(self.session).map_or_else(
                || self.timeline.end().unwrap_or(OffsetDateTime::UNIX_EPOCH),
                |s| s.start,
            ),
        }
    }

    /// The next moment the player must stop at: an input, or a session's end.
    fn next_moment(&self) -> Option<OffsetDateTime> {
        let session = self.timeline.sessions.get(self.session)?;
        Some(
            session
                .entries
                .get(self.entry)
                .map_or(session.end, |e| e.at),
        )
    }

    fn next_input_moment(&self) -> Option<OffsetDateTime> {
        let mut session = self.session;
        let mut entry = self.entry;
        loop {
            let s = self.timeline.sessions.get(session)?;
            if let Some(e) = s.entries.get(entry) {
                return Some(e.at);
            }
            session += 1;
            entry = 0;
        }
    }

    /// Plays everything up to `to` as fast as the hub goes: virtual time moves to each
    /// input's moment (rules falling due on the way fire at theirs), the input goes in.
    async fn run_to(&mut self, to: OffsetDateTime) {
        let timeline = self.timeline.clone();
        while let Some(session) = timeline.sessions.get(self.session) {
            if self.hub.is_none() {
                self.start_hub();
            }
            let next = session.entries.get(self.entry).map(|e| e.at);
            let until = next.unwrap_or(session.end).min(to);
            self.sleep_until(until).await;
            match next {
                Some(at) if at <= to => {
                    let input = &session.entries[self.entry].input;
                    self.entry += 1;
                    self.played += 1;
                    if let Some(hub) = &mut self.hub
                        && let Some(event) = event_of(input, &mut hub.table)
                    {
                        let _ = hub.events.send(event).await;
                    }
                }
                None if session.end <= to => {
                    // This session is over: its hub goes, the next one starts fresh.
                    self.stop_hub().await;
                    self.session += 1;
                    self.entry = 0;
                }
                _ => break,
            }
        }
        // Let the hub take in what was just handed over before anyone looks.
        tokio::task::yield_now().await;
        self.cell.store(nanos(self.now()), Ordering::Relaxed);
    }

    async fn sleep_until(&mut self, at: OffsetDateTime) {
        let gap: Duration = (at - self.now()).try_into().unwrap_or_default();
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        self.cell.store(nanos(self.now()), Ordering::Relaxed);
    }

    fn start_hub(&mut self) {
        let Some(session) = self.timeline.sessions.get(self.session) else {
            return;
        };
        let recorded = session.settings.as_ref().unwrap_or(&self.config.fallback);
        let settings = crate::core::replay::rules::for_replay(recorded, self.config.forward_logs);
        let clock = Clock::following_tokio(session.start);
        let (events, events_rx) = mpsc::channel(64);
        let (out, mut hub_out) = mpsc::channel(4096);
        let forward_to = self.out.clone();
        // The hub's own queue drains at once into the unbounded one (see module docs).
        let relay = tokio::spawn(async move {
            while let Some(h) = hub_out.recv().await {
                if forward_to.send(h).is_err() {
                    break;
                }
            }
        });
        let hub = Hub::new(settings, clock, out, self.snapshots.clone(), None);
        let cancel = CancellationToken::new();
        let task = tokio::spawn(hub.run(Vec::new(), events_rx, cancel.clone()));
        self.hub = Some(LiveHub {
            events,
            cancel,
            task,
            relay,
            clock,
            table: TaskTable::default(),
        });
    }

    async fn stop_hub(&mut self) {
        if let Some(hub) = self.hub.take() {
            drop(hub.events);
            let _ = hub.task.await;
            hub.cancel.cancel();
            // Everything the hub said is passed on before anything said after it.
            let _ = hub.relay.await;
        }
    }

    /// Waits in real time for a command (`None`: for as long as it takes). Virtual
    /// time stands still meanwhile.
    async fn wait(&mut self, timeout: Option<Duration>) -> Waited {
        let Some(rx) = self.control.take() else {
            return Waited::Gone;
        };
        let joined = tokio::task::spawn_blocking(move || {
            let got = match timeout {
                Some(t) => rx.recv_timeout(t),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            (rx, got)
        })
        .await;
        let Ok((rx, got)) = joined else {
            return Waited::Gone;
        };
        self.control = Some(rx);
        match got {
            Ok(cmd) => Waited::Command(cmd),
            Err(RecvTimeoutError::Timeout) => Waited::TimedOut,
            Err(RecvTimeoutError::Disconnected) => Waited::Gone,
        }
    }

    fn publish(&self, paused: bool, speed: Option<f64>, finished: bool) {
        let at = self.now();
        self.cell.store(nanos(at), Ordering::Relaxed);
        self.status.send_modify(|s| {
            s.at = at;
            s.paused = paused;
            s.speed = speed;
            s.played = self.played;
            s.finished = finished;
        });
    }

    /// A `source` happening from the replay itself (loaded, incomplete, rewound).
    fn say(&self, status: &'static str, detail: String) {
        let _ = self.out.send(Happening {
            told: None,
            at: self.now(),
            what: What::Source {
                source: "replay",
                status,
                detail,
            },
        });
    }
}

fn step_speed(speed: f64, faster: bool) -> f64 {
    if faster {
        SPEEDS.into_iter().find(|s| *s > speed).unwrap_or(speed)
    } else {
        SPEEDS
            .into_iter()
            .rev()
            .find(|s| *s < speed)
            .unwrap_or(speed)
    }
}

#[cfg(test)]
mod tests;
