//! Wall-clock time, injected so logic never calls `SystemTime::now()` itself.
//!
//! The real clock reads the system time; the test clock derives wall time from tokio's
//! `Instant`, so `tokio::time::pause` and `advance` move both together.
//!
//! Every age-based judgement (staleness, stalls, the watchdog's deaths) reads its ages
//! through [`Clock::evidence`], which knows when maestro's own time stopped ([`gaps`]).

pub mod gaps;

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use time::{
    OffsetDateTime, PrimitiveDateTime, UtcOffset, format_description::FormatItem,
    macros::format_description,
};
use tokio::time::Instant;

use gaps::{Gap, Gaps};

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// `None`: the system clock. `Some`: wall time = base + (tokio now − instant base).
    derived: Option<(OffsetDateTime, Instant)>,
    /// A replay's clock, published by its player (Unix nanoseconds); wins over the rest.
    replayed: Option<&'static AtomicI64>,
    /// The operator's offset for report stamps, read once at start-up (reading it later,
    /// from a threaded process, is not reliable).
    local_offset: UtcOffset,
    /// Where gaps in maestro's running are noticed (`None`: time never stops, as in a
    /// replay or a paused-time test without one).
    gaps: Option<&'static Gaps>,
}

const SQLITE_FORMAT: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
const SQLITE_FORMAT_FRACTION: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day] [hour]:[minute]:[second].[subsecond]");
const HMS: &[FormatItem<'static>] = format_description!("[hour]:[minute]:[second]");

impl Clock {
    pub fn system(local_offset: UtcOffset) -> Self {
        Self {
            derived: None,
            replayed: None,
            local_offset,
            gaps: Some(Gaps::system()),
        }
    }

    /// This clock's time zone, reading a replay's time (for presenters on another
    /// runtime than the replay's).
    #[must_use]
    pub fn reading(self, cell: &'static AtomicI64) -> Self {
        Self {
            derived: None,
            replayed: Some(cell),
            local_offset: self.local_offset,
            gaps: None,
        }
    }

    /// A clock that follows tokio time from `start` (UTC stamps).
    pub fn following_tokio(start: OffsetDateTime) -> Self {
        Self {
            derived: Some((start, Instant::now())),
            replayed: None,
            local_offset: UtcOffset::UTC,
            gaps: None,
        }
    }

    /// This clock with gaps from `gaps` (tests declare them on a detached detector).
    #[must_use]
    pub fn with_gaps(self, gaps: &'static Gaps) -> Self {
        Self {
            gaps: Some(gaps),
            ..self
        }
    }

    /// The latest gap in maestro's running, after taking a reading now.
    pub fn latest_gap(&self) -> Option<Gap> {
        self.gaps.and_then(Gaps::observe)
    }

    /// Gaps seen so far by kind (none for a clock without a detector).
    pub fn gap_counts(&self) -> Vec<(gaps::GapKind, u64)> {
        self.gaps.map(|g| g.counts().to_vec()).unwrap_or_default()
    }

    /// Wakes on each new gap (`None`: this clock never has one).
    pub fn gap_news(&self) -> Option<tokio::sync::watch::Receiver<Option<Gap>>> {
        self.gaps.map(Gaps::subscribe)
    }

    /// An age as evidence for a judgement: no more than the time since maestro last
    /// resumed after a gap (suspend, pause, clock step).
    pub fn evidence(&self, age: Duration) -> Duration {
        self.gaps.map_or(age, |g| g.evidence(age))
    }

    /// The evidence age of a wall-clock moment.
    pub fn evidence_age(&self, at: OffsetDateTime) -> Duration {
        self.evidence(self.age(at))
    }

    pub fn now_utc(&self) -> OffsetDateTime {
        if let Some(cell) = self.replayed {
            let nanos = i128::from(cell.load(Ordering::Relaxed));
            return OffsetDateTime::from_unix_timestamp_nanos(nanos)
                .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        }
        match self.derived {
            None => OffsetDateTime::now_utc(),
            Some((wall, at)) => wall + Instant::now().saturating_duration_since(at),
        }
    }

    /// `HH:MM:SS` in the operator's time zone, as the Sentinel report shows it.
    pub fn hms(&self, at: OffsetDateTime) -> String {
        at.to_offset(self.local_offset)
            .format(HMS)
            .unwrap_or_default()
    }

    /// How long ago a wall-clock moment was (zero if in the future).
    pub fn age(&self, at: OffsetDateTime) -> Duration {
        (self.now_utc() - at).try_into().unwrap_or_default()
    }

    /// The tokio instant to sleep until for a wall-clock moment, past or future.
    pub fn deadline_of(&self, at: OffsetDateTime) -> Instant {
        let ahead = at - self.now_utc();
        if ahead.is_positive() {
            Instant::now() + ahead.try_into().unwrap_or_default()
        } else {
            self.instant_of(at)
        }
    }

    /// The tokio instant matching a wall-clock moment (clamped to now if in the future).
    pub fn instant_of(&self, at: OffsetDateTime) -> Instant {
        let now = Instant::now();
        now.checked_sub(self.age(at)).unwrap_or(now)
    }
}

/// Parses `SQLite`'s `datetime('now')` text (UTC), tolerating a `T`, fractions and `Z`.
pub fn parse_sqlite_utc(text: &str) -> Option<OffsetDateTime> {
    let t = text.trim().trim_end_matches('Z').replacen('T', " ", 1);
    PrimitiveDateTime::parse(&t, SQLITE_FORMAT)
        .or_else(|_| PrimitiveDateTime::parse(&t, SQLITE_FORMAT_FRACTION))
        .ok()
        .map(PrimitiveDateTime::assume_utc)
}

/// RFC 3339 UTC, for JSON `ts` fields.
pub fn rfc3339(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_stamps_parse() {
        let t = parse_sqlite_utc("2026-11-22 14:35:22").unwrap();
        assert_eq!((t.hour(), t.minute(), t.second()), (14, 35, 22));
        assert!(parse_sqlite_utc("2026-11-22T14:35:22Z").is_some());
        assert!(parse_sqlite_utc("2026-11-22 14:35:22.123").is_some());
        assert!(parse_sqlite_utc("yesterday").is_none());
        assert!(parse_sqlite_utc("").is_none());
    }

    /// A future moment is a future deadline: the hub once woke at once for every
    /// pending context forecast, and spun until it fell due.
    #[tokio::test(start_paused = true)]
    async fn a_future_moment_is_a_future_deadline() {
        let start = parse_sqlite_utc("2026-11-22 14:00:00").unwrap();
        let clock = Clock::following_tokio(start);
        let now = Instant::now();
        let later = start + time::Duration::seconds(90);
        assert_eq!(clock.deadline_of(later), now + Duration::from_secs(90));
        let earlier = start - time::Duration::seconds(30);
        assert_eq!(clock.deadline_of(earlier), now - Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn derived_clock_follows_paused_time() {
        let start = parse_sqlite_utc("2026-11-22 14:00:00").unwrap();
        let clock = Clock::following_tokio(start);
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(clock.hms(clock.now_utc()), "14:01:30");
        assert_eq!(clock.age(start), Duration::from_secs(90));
    }
}
