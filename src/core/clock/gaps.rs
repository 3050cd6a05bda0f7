//! Noticing that maestro's own time stopped: a suspend, a pause, a clock step.
//!
//! An age read from a heartbeat stamp is evidence only of time maestro was there to see.
//! Three readings tell when it was not: `CLOCK_BOOTTIME` running ahead of
//! `CLOCK_MONOTONIC` (the machine slept: Linux stops the monotonic clock), the wall clock
//! moving other than the monotonic one (an NTP step, a faked clock), and the monotonic
//! clock moving far more than the ticker's period between two readings (SIGSTOP, a frozen
//! VM, a starved machine). A thread takes a reading every [`PERIOD`]; every judgement
//! takes one too, so a judgement that runs first after a resume still sees the gap.
//!
//! After a gap, ages are capped at the time since the resume ([`Gaps::evidence`]): the
//! world gets one full interval to speak before anything is called stale or dead.

use std::sync::{LazyLock, Mutex, Once};
use std::time::Duration;

use nix::time::{ClockId, clock_gettime};
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often the ticker thread takes a reading.
pub const PERIOD: Duration = Duration::from_secs(1);
/// How far the clocks may disagree (or a reading come late) before it is a gap: well above
/// scheduling noise on a loaded machine, well below any staleness threshold.
pub const TOLERANCE: Duration = Duration::from_secs(2);

/// What kind of gap it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GapKind {
    /// The machine slept (boot time ran on while monotonic time stood still).
    Suspend,
    /// maestro did not run (SIGSTOP, a frozen VM, a starved machine).
    Pause,
    /// The wall clock was stepped (NTP, the operator, a faked clock).
    Step,
}

impl GapKind {
    pub const ALL: [Self; 3] = [Self::Suspend, Self::Pause, Self::Step];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Suspend => "suspend",
            Self::Pause => "pause",
            Self::Step => "step",
        }
    }
}

/// One gap, as the judgements and the presenters see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    pub kind: GapKind,
    /// How much time went by unseen (for a step: how far the wall clock jumped).
    pub length: Duration,
    /// When maestro noticed it was running again.
    pub resumed_at: Instant,
    /// The same moment on the wall clock (after the step, for a step).
    pub resumed_wall: OffsetDateTime,
    /// Counts the gaps of this process, from 1.
    pub generation: u64,
}

/// The three clocks at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// Wall-clock time, Unix nanoseconds.
    pub wall_ns: i128,
    pub monotonic: Duration,
    pub boottime: Duration,
}

impl Reading {
    /// The system's clocks now (`None` where one cannot be read).
    pub fn now() -> Option<Self> {
        let read = |id| {
            clock_gettime(id)
                .ok()
                .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        };
        let wall = read(ClockId::CLOCK_REALTIME)?;
        Some(Self {
            wall_ns: wall.as_nanos() as i128,
            monotonic: read(ClockId::CLOCK_MONOTONIC)?,
            boottime: read(ClockId::CLOCK_BOOTTIME)?,
        })
    }
}

/// How close (in boot time, which neither stops nor steps) a second gap must follow a
/// first to be the same one seen again: a resume can show in two readings (boot time
/// first, the monotonic clock catching up after), and one jump is said once.
pub const SAME_GAP: Duration = Duration::from_secs(5);

/// The pure part: compares each reading with the one before it.
#[derive(Debug, Default)]
pub struct GapJudge {
    last: Option<Reading>,
    /// Boot time of the last gap seen.
    last_gap: Option<Duration>,
}

impl GapJudge {
    /// The gap between the previous reading and this one, if there was one and it is
    /// not the last gap seen again (within [`SAME_GAP`] of it).
    pub fn observe(&mut self, now: Reading) -> Option<(GapKind, Duration)> {
        let gap = self.compare(now)?;
        let again = self
            .last_gap
            .is_some_and(|at| now.boottime.saturating_sub(at) <= SAME_GAP);
        self.last_gap = Some(now.boottime);
        (!again).then_some(gap)
    }

    fn compare(&mut self, now: Reading) -> Option<(GapKind, Duration)> {
        let last = self.last.replace(now)?;
        let ran = now.monotonic.saturating_sub(last.monotonic);
        let slept = now
            .boottime
            .saturating_sub(last.boottime)
            .saturating_sub(ran);
        if slept > TOLERANCE {
            return Some((GapKind::Suspend, slept));
        }
        let ran_ns = ran.as_nanos() as i128;
        let skew =
            Duration::from_nanos(((now.wall_ns - last.wall_ns) - ran_ns).unsigned_abs() as u64);
        if skew > TOLERANCE {
            return Some((GapKind::Step, skew));
        }
        if ran > PERIOD + TOLERANCE {
            return Some((GapKind::Pause, ran));
        }
        None
    }
}

#[derive(Debug, Default)]
struct State {
    judge: GapJudge,
    latest: Option<Gap>,
    /// Gaps seen, by kind (suspend, pause, step).
    counts: [u64; 3],
}

/// The process's gap detector: shared by every clock that reads the system time.
#[derive(Debug)]
pub struct Gaps {
    state: Mutex<State>,
    /// Whether readings come from the system (`false`: only [`Gaps::declare`] makes gaps).
    live: bool,
    news: watch::Sender<Option<Gap>>,
    ticker: Once,
}

static SYSTEM: LazyLock<Gaps> = LazyLock::new(|| Gaps::new(true));

impl Gaps {
    fn new(live: bool) -> Self {
        Self {
            state: Mutex::new(State::default()),
            live,
            news: watch::channel(None).0,
            ticker: Once::new(),
        }
    }

    /// The detector for the system clocks; its ticker thread starts on first use.
    pub fn system() -> &'static Self {
        let gaps: &'static Self = &SYSTEM;
        gaps.ticker.call_once(|| {
            gaps.observe();
            let spawned = std::thread::Builder::new()
                .name("maestro-clock".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(PERIOD);
                        gaps.observe();
                    }
                });
            // Without the thread, judgements still take readings; only a pause between
            // two of them that is shorter than their spacing goes unnoticed.
            drop(spawned);
        });
        gaps
    }

    /// A detector that reads no clock: tests declare its gaps.
    pub fn detached() -> &'static Self {
        Box::leak(Box::new(Self::new(false)))
    }

    /// Takes a reading, and returns the latest gap (new or old).
    pub fn observe(&self) -> Option<Gap> {
        let reading = if self.live { Reading::now() } else { None };
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((kind, length)) = reading.and_then(|r| state.judge.observe(r)) {
            let (at, wall) = (Instant::now(), OffsetDateTime::now_utc());
            Self::record(&mut state, &self.news, kind, length, at, wall);
        }
        state.latest
    }

    fn record(
        state: &mut State,
        news: &watch::Sender<Option<Gap>>,
        kind: GapKind,
        length: Duration,
        resumed_at: Instant,
        resumed_wall: OffsetDateTime,
    ) -> Gap {
        let gap = Gap {
            kind,
            length,
            resumed_at,
            resumed_wall,
            generation: state.latest.map_or(1, |g| g.generation + 1),
        };
        state.latest = Some(gap);
        state.counts[kind as usize] += 1;
        news.send_replace(Some(gap));
        gap
    }

    /// Gaps seen so far, by kind.
    pub fn counts(&self) -> [(GapKind, u64); 3] {
        let state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        GapKind::ALL.map(|k| (k, state.counts[k as usize]))
    }

    /// Records a gap as if it had been seen, ending at `resumed_at` (tests).
    pub fn declare(
        &self,
        kind: GapKind,
        length: Duration,
        resumed_at: Instant,
        resumed_wall: OffsetDateTime,
    ) -> Gap {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Self::record(
            &mut state,
            &self.news,
            kind,
            length,
            resumed_at,
            resumed_wall,
        )
    }

    /// Wakes on every new gap (the hub announces it).
    pub fn subscribe(&self) -> watch::Receiver<Option<Gap>> {
        self.news.subscribe()
    }

    /// An age as evidence: no more than the time since maestro last resumed.
    pub fn evidence(&self, age: Duration) -> Duration {
        match self.observe() {
            Some(gap) => age.min(Instant::now().saturating_duration_since(gap.resumed_at)),
            None => age,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(wall_s: f64, mono_s: f64, boot_s: f64) -> Reading {
        Reading {
            wall_ns: (wall_s * 1e9) as i128,
            monotonic: Duration::from_secs_f64(mono_s),
            boottime: Duration::from_secs_f64(boot_s),
        }
    }

    /// (what happened, readings after a first one at 1000/10/10, the gap expected)
    type Case = (&'static str, Reading, Option<(GapKind, u64)>);

    #[test]
    fn each_kind_of_gap_is_told_apart_and_ordinary_running_is_none() {
        let cases: &[Case] = &[
            ("a tick on time", at(1001.0, 11.0, 11.0), None),
            ("a late tick within tolerance", at(1002.9, 12.9, 12.9), None),
            (
                "a 10-minute suspend",
                at(1601.0, 11.0, 611.0),
                Some((GapKind::Suspend, 600)),
            ),
            (
                "SIGSTOP for 9 s",
                at(1009.0, 19.0, 19.0),
                Some((GapKind::Pause, 9)),
            ),
            (
                "an NTP step forward",
                at(1301.0, 11.0, 11.0),
                Some((GapKind::Step, 300)),
            ),
            (
                "an NTP step back",
                at(941.0, 11.0, 11.0),
                Some((GapKind::Step, 60)),
            ),
            // libfaketime with FAKETIME_DONT_FAKE_MONOTONIC: wall and boot time jump.
            (
                "a faked suspend",
                at(1601.0, 11.0, 611.0),
                Some((GapKind::Suspend, 600)),
            ),
        ];
        for (what, next, want) in cases {
            let mut judge = GapJudge::default();
            assert_eq!(judge.observe(at(1000.0, 10.0, 10.0)), None, "{what}: first");
            let got = judge.observe(*next).map(|(k, d)| (k, d.as_secs()));
            assert_eq!(got, *want, "{what}");
        }
    }

    /// A resume seen in two readings (boot time first, then the monotonic clock
    /// catching up) is one gap; a gap well after it is another.
    #[test]
    fn one_jump_seen_in_two_readings_is_said_once() {
        let mut judge = GapJudge::default();
        judge.observe(at(1000.0, 10.0, 10.0));
        let first = judge.observe(at(1601.0, 11.0, 611.0));
        assert_eq!(first.map(|(k, _)| k), Some(GapKind::Suspend));
        assert_eq!(
            judge.observe(at(1602.0, 612.0, 612.0)),
            None,
            "the same jump"
        );
        judge.observe(at(1603.0, 613.0, 613.0));
        assert_eq!(
            judge.observe(at(1633.0, 643.0, 643.0)).map(|(k, _)| k),
            Some(GapKind::Pause),
            "a later gap is its own"
        );
    }

    #[test]
    fn a_gap_is_reported_once_and_running_goes_on_from_it() {
        let mut judge = GapJudge::default();
        judge.observe(at(0.0, 0.0, 0.0));
        assert!(judge.observe(at(700.0, 1.0, 700.0)).is_some());
        assert_eq!(judge.observe(at(701.0, 2.0, 701.0)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn evidence_is_capped_at_the_time_since_the_resume() {
        let gaps = Gaps::detached();
        let age = Duration::from_secs(600);
        assert_eq!(gaps.evidence(age), age, "no gap: an age is an age");
        let mut news = gaps.subscribe();
        let gap = gaps.declare(
            GapKind::Suspend,
            age,
            Instant::now(),
            OffsetDateTime::UNIX_EPOCH,
        );
        assert!(news.has_changed().unwrap());
        assert_eq!(news.borrow_and_update().map(|g| g.generation), Some(1));
        assert_eq!(gaps.evidence(age), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(gaps.evidence(age), Duration::from_secs(3));
        assert_eq!(
            gaps.evidence(Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        assert_eq!(gaps.observe(), Some(gap));
    }

    /// The real clocks, read twice in a row, show no gap.
    #[test]
    fn the_system_clocks_read_and_agree() {
        let mut judge = GapJudge::default();
        judge.observe(Reading::now().unwrap());
        assert_eq!(judge.observe(Reading::now().unwrap()), None);
    }
}
