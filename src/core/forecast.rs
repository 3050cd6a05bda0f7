//! When a Musician will run out of context: from the `[ctx: XX%]` values and the times
//! maestro saw them arrive, a least-squares rate (percent per second) over the latest
//! entries, extrapolated to 65 % (prepare the handoff) and 75 % (the mandatory exit).
//! Values read at start share the file's mtime and give no rate; a falling or flat
//! context gives no forecast.
//!
//! A trend needs time and points: at least [`MIN_POINTS`] values over at least
//! [`MIN_SPAN`]. A session's first response jumps from nothing to the size of its system
//! prompt and tools (tens of thousands of tokens in seconds, seen with the real Claude
//! Code): that is where the trajectory starts, not a rate, so values of 0 before it are
//! dropped and the first value above 0 is the baseline.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use time::OffsetDateTime;

use crate::core::domain::TaskId;

/// The Musician prepares its handoff here.
pub const HANDOFF_AT: u8 = 65;
/// The Musician must exit here.
pub const EXIT_AT: u8 = 75;
/// Entries the rate is computed over.
pub const WINDOW: usize = 8;
/// The fewest values a rate is computed from.
pub const MIN_POINTS: usize = 3;
/// The shortest time the values must span: longer than a burst of responses (a session
/// answers every few seconds), short enough for the demo's compressed minutes.
pub const MIN_SPAN: Duration = Duration::from_secs(20);

/// The expected crossing moments (UTC), when the trajectory gives one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Forecast {
    /// Percent per minute over the window.
    pub rate_per_min: f64,
    pub handoff_at: Option<OffsetDateTime>,
    pub exit_at: Option<OffsetDateTime>,
}

/// `points`: (when seen, value), oldest first.
pub fn forecast(points: &[(OffsetDateTime, u8)]) -> Option<Forecast> {
    let window = &points[points.len().saturating_sub(WINDOW)..];
    let (&(t0, _), &(t_last, last)) = (window.first()?, window.last()?);
    if window.len() < MIN_POINTS || (t_last - t0) < MIN_SPAN {
        return None;
    }
    let xs: Vec<f64> = window
        .iter()
        .map(|(t, _)| (*t - t0).as_seconds_f64())
        .collect();
    let ys: Vec<f64> = window.iter().map(|(_, v)| f64::from(*v)).collect();
    let n = xs.len() as f64;
    let mean_x = xs.iter().sum::<f64>() / n;
    let mean_y = ys.iter().sum::<f64>() / n;
    let var_x: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
    if var_x <= f64::EPSILON {
        return None;
    }
    let cov: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let per_sec = cov / var_x;
    if per_sec <= 0.0 {
        return None;
    }
    let cross = |threshold: u8| -> Option<OffsetDateTime> {
        if last >= threshold {
            return Some(t_last);
        }
        let secs = f64::from(threshold - last) / per_sec;
        (secs.is_finite() && secs < 86_400.0 * 30.0).then(|| t_last + Duration::from_secs_f64(secs))
    };
    Some(Forecast {
        rate_per_min: per_sec * 60.0,
        handoff_at: cross(HANDOFF_AT),
        exit_at: cross(EXIT_AT),
    })
}

/// Per task: the values seen with their times, the forecast, and which warnings were
/// raised (once per task and threshold, until the log starts over).
#[derive(Debug)]
pub struct ForecastBook {
    lead: Duration,
    points: HashMap<TaskId, VecDeque<(OffsetDateTime, u8)>>,
    forecasts: BTreeMap<String, Forecast>,
    fired: HashSet<(TaskId, u8)>,
    /// (moment the warning falls due, task, threshold) of every crossing not warned of
    /// yet: the first is the next warning, so no wake-up looks at every task.
    due_order: BTreeSet<(OffsetDateTime, TaskId, u8)>,
    /// (moment the trend is too old to speak for, task) of every forecast: a trend whose
    /// newest value is older than the span it was measured over is withdrawn.
    expiry_order: BTreeSet<(OffsetDateTime, TaskId)>,
    expiries: HashMap<TaskId, OffsetDateTime>,
}

/// How long a trend speaks for after its newest value: the span it was measured over
/// (at least [`MIN_SPAN`]).
fn expiry(points: &[(OffsetDateTime, u8)]) -> Option<OffsetDateTime> {
    let window = &points[points.len().saturating_sub(WINDOW)..];
    let (&(t0, _), &(t_last, _)) = (window.first()?, window.last()?);
    let span: Duration = (t_last - t0).try_into().unwrap_or_default();
    Some(t_last + span.max(MIN_SPAN))
}

impl ForecastBook {
    /// Warnings are raised when a crossing is less than `lead` away.
    pub fn new(lead: Duration) -> Self {
        Self {
            lead,
            points: HashMap::new(),
            forecasts: BTreeMap::new(),
            fired: HashSet::new(),
            due_order: BTreeSet::new(),
            expiry_order: BTreeSet::new(),
            expiries: HashMap::new(),
        }
    }

    /// New `[ctx: …]` values of a task's status log, seen at `at`.
    pub fn on_values(&mut self, task: &TaskId, at: OffsetDateTime, values: &[u8]) {
        if values.is_empty() {
            return;
        }
        let points = self.points.entry(task.clone()).or_default();
        for v in values {
            // Until the context is above 0, the session has not answered: the first
            // value above 0 starts the trajectory (the first jump is no trend).
            if points.back().is_none_or(|(_, last)| *last == 0) {
                points.clear();
                if *v == 0 {
                    continue;
                }
            }
            if points.len() == WINDOW {
                points.pop_front();
            }
            points.push_back((at, *v));
        }
        let points: Vec<_> = points.iter().copied().collect();
        self.unindex(task);
        match forecast(&points) {
            Some(f) => {
                for (threshold, at) in crossings(&f) {
                    if !self.fired.contains(&(task.clone(), threshold)) {
                        self.due_order
                            .insert((at - self.lead, task.clone(), threshold));
                    }
                }
                if let Some(until) = expiry(&points) {
                    self.expiry_order.insert((until, task.clone()));
                    self.expiries.insert(task.clone(), until);
                }
                self.forecasts.insert(task.to_string(), f);
            }
            None => {
                self.forecasts.remove(task.as_str());
            }
        }
    }

    /// Takes a task's pending crossings out of the due order, and its expiry.
    fn unindex(&mut self, task: &TaskId) {
        if let Some(f) = self.forecasts.get(task.as_str()) {
            for (threshold, at) in crossings(f) {
                self.due_order
                    .remove(&(at - self.lead, task.clone(), threshold));
            }
        }
        if let Some(until) = self.expiries.remove(task) {
            self.expiry_order.remove(&(until, task.clone()));
        }
    }

    /// Withdraws a task's forecast (its task stopped working); whether it had one.
    /// Its values are kept: a task that works again goes on from them.
    pub fn withdraw(&mut self, task: &TaskId) -> bool {
        if !self.forecasts.contains_key(task.as_str()) {
            return false;
        }
        self.unindex(task);
        self.forecasts.remove(task.as_str());
        true
    }

    /// Withdraws the forecasts whose trend is older than it can speak for: the tasks.
    pub fn withdraw_expired(&mut self, now: OffsetDateTime) -> Vec<TaskId> {
        let mut out = Vec::new();
        while let Some((until, task)) = self.expiry_order.first().cloned() {
            if until > now {
                break;
            }
            self.expiry_order.remove(&(until, task.clone()));
            if self.withdraw(&task) {
                out.push(task);
            }
        }
        out
    }

    /// The next moment a forecast expires.
    pub fn next_expiry(&self) -> Option<OffsetDateTime> {
        self.expiry_order.first().map(|(at, _)| *at)
    }

    /// The status log started over (a new session): forget its trajectory.
    pub fn reset(&mut self, task: &TaskId) {
        self.unindex(task);
        self.points.remove(task);
        self.forecasts.remove(task.as_str());
        for threshold in [HANDOFF_AT, EXIT_AT] {
            self.fired.remove(&(task.clone(), threshold));
        }
    }

    /// maestro's time stopped: rates measured across the gap mean nothing, so every
    /// trajectory starts over (warnings already given stay given).
    pub fn restart_all(&mut self) {
        let tasks: Vec<TaskId> = self.points.keys().cloned().collect();
        for task in &tasks {
            self.unindex(task);
            self.forecasts.remove(task.as_str());
        }
        self.points.clear();
    }

    pub fn forecasts(&self) -> &BTreeMap<String, Forecast> {
        &self.forecasts
    }

    /// One task's forecast.
    pub fn of(&self, task: &str) -> Option<&Forecast> {
        self.forecasts.get(task)
    }

    /// Crossings now less than the lead time away that were not warned of yet, for
    /// the tasks `active` says are watched: (task, threshold, when). Marks them warned.
    pub fn due(
        &mut self,
        now: OffsetDateTime,
        active: impl Fn(&TaskId) -> bool,
    ) -> Vec<(TaskId, u8, OffsetDateTime)> {
        let mut out = Vec::new();
        while let Some((due, _, _)) = self.due_order.first() {
            if *due > now {
                break;
            }
            let Some((due, task, threshold)) = self.due_order.pop_first() else {
                break;
            };
            // A task no longer watched is not warned of, but its crossing is spent all
            // the same: `next_due` must not offer it again.
            if self.fired.insert((task.clone(), threshold)) && active(&task) {
                out.push((task, threshold, due + self.lead));
            }
        }
        out
    }

    /// The next moment a warning falls due (the hub sleeps until then).
    pub fn next_due(&self) -> Option<OffsetDateTime> {
        self.due_order.first().map(|(at, _, _)| *at)
    }
}

/// A forecast's crossings: (threshold, moment) for each one it predicts.
fn crossings(f: &Forecast) -> impl Iterator<Item = (u8, OffsetDateTime)> {
    [(HANDOFF_AT, f.handoff_at), (EXIT_AT, f.exit_at)]
        .into_iter()
        .filter_map(|(t, at)| at.map(|at| (t, at)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(secs)
    }

    #[test]
    fn a_steady_rise_is_extrapolated_by_hand() {
        // 3 points a minute apart: 30, 40, 50 %: 10 %/min. 65 % is 1.5 min after
        // the last entry, 75 % 2.5 min after it.
        let f = forecast(&[(at(0), 30), (at(60), 40), (at(120), 50)]).expect("a forecast");
        assert!((f.rate_per_min - 10.0).abs() < 1e-9);
        assert_eq!(f.handoff_at, Some(at(120 + 90)));
        assert_eq!(f.exit_at, Some(at(120 + 150)));
        // Least squares over noisy entries: 20, 24, 29, 32 at 0, 60, 120, 180 s:
        // slope = 4.1 %/min; 75 % is (75-32)/4.1 = 10.49 min after the last.
        let f = forecast(&[(at(0), 20), (at(60), 24), (at(120), 29), (at(180), 32)]).expect("f");
        assert!((f.rate_per_min - 4.1).abs() < 1e-9, "{}", f.rate_per_min);
        let exit = f.exit_at.expect("exit") - at(180);
        assert!((exit.as_seconds_f64() - 43.0 / 4.1 * 60.0).abs() < 0.01);
    }

    #[test]
    fn no_rate_no_forecast_and_a_crossed_threshold_is_now() {
        assert_eq!(forecast(&[]), None);
        assert_eq!(
            forecast(&[(at(0), 10), (at(0), 20)]),
            None,
            "one moment: no rate"
        );
        assert_eq!(
            forecast(&[(at(0), 50), (at(30), 45), (at(60), 40)]),
            None,
            "falling"
        );
        let f = forecast(&[(at(0), 60), (at(30), 65), (at(60), 70)]).expect("f");
        assert_eq!(f.handoff_at, Some(at(60)), "already past 65 %");
    }

    #[test]
    fn a_trend_needs_three_points_over_twenty_seconds() {
        assert_eq!(forecast(&[(at(0), 30), (at(600), 60)]), None, "two points");
        assert_eq!(
            forecast(&[(at(0), 1), (at(1), 5), (at(2), 9)]),
            None,
            "seconds apart"
        );
        assert!(forecast(&[(at(0), 30), (at(30), 35), (at(60), 40)]).is_some());
    }

    /// A fresh session: 0 %, then its first response (the system prompt and tools) in
    /// seconds, then a slow climb. The first jump predicts nothing.
    #[test]
    fn a_fresh_sessions_first_jump_is_no_forecast() {
        let task = TaskId::parse("task-03").expect("id");
        let mut book = ForecastBook::new(Duration::from_secs(600));
        book.on_values(&task, at(0), &[0]);
        book.on_values(&task, at(4), &[18]);
        book.on_values(&task, at(5), &[19]);
        assert!(book.forecasts().is_empty());
        assert!(book.due(at(5), |_| true).is_empty());
        assert_eq!(book.next_due(), None);
        // From the first response on, a real trend over minutes does forecast, at the
        // climb's own rate (1 %/min), not the jump's.
        book.on_values(&task, at(64), &[20]);
        book.on_values(&task, at(124), &[21]);
        let f = book.of("task-03").expect("a trend");
        assert!(f.rate_per_min < 2.0, "{}", f.rate_per_min);
        assert!(
            book.due(at(124), |_| true).is_empty(),
            "65 % is over 40 min away"
        );
    }

    #[test]
    fn a_warning_is_raised_once_when_the_crossing_is_within_the_lead() {
        let task = TaskId::parse("task-03").expect("id");
        let mut book = ForecastBook::new(Duration::from_secs(600));
        // 10 %/min from 30 %: 65 % 1.5 min after the entry at 120 s.
        book.on_values(&task, at(0), &[30]);
        book.on_values(&task, at(60), &[40]);
        book.on_values(&task, at(120), &[50]);
        // Both crossings are within 10 minutes: both warned, once.
        let due = book.due(at(120), |_| true);
        assert_eq!(
            due.iter()
                .map(|(_, th, when)| (*th, *when))
                .collect::<Vec<_>>(),
            [(HANDOFF_AT, at(210)), (EXIT_AT, at(270))]
        );
        assert!(book.due(at(121), |_| true).is_empty(), "once");
        assert_eq!(book.next_due(), None);
        // A new session starts the trajectory over.
        book.reset(&task);
        assert!(book.forecasts().is_empty());
        let mut slow = ForecastBook::new(Duration::from_secs(60));
        slow.on_values(&task, at(0), &[30]);
        slow.on_values(&task, at(300), &[35]);
        slow.on_values(&task, at(600), &[40]);
        // 1 %/min: 65 % at 600 + 25 min; due 1 min before.
        assert!(slow.due(at(600), |_| true).is_empty());
        assert_eq!(slow.next_due(), Some(at(600 + 25 * 60 - 60)));
    }

    /// An idle task keeps no forecast: a trend older than the span it was measured over
    /// is withdrawn (at 38 % it never reads "75 % now"), and so is one whose task stops.
    #[test]
    fn a_forecast_is_withdrawn_when_its_trend_is_old_or_its_task_stops() {
        let task = TaskId::parse("task-03").expect("id");
        let mut book = ForecastBook::new(Duration::from_secs(60));
        book.on_values(&task, at(0), &[30]);
        book.on_values(&task, at(60), &[34]);
        book.on_values(&task, at(120), &[38]);
        assert!(book.of("task-03").is_some());
        // Measured over 120 s: it speaks for 120 s after its newest value.
        assert_eq!(book.next_expiry(), Some(at(240)));
        assert!(book.withdraw_expired(at(239)).is_empty());
        assert_eq!(book.withdraw_expired(at(240)), std::slice::from_ref(&task));
        assert!(book.of("task-03").is_none());
        assert_eq!((book.next_expiry(), book.next_due()), (None, None));
        // A new value brings the trend back, from the values kept.
        book.on_values(&task, at(250), &[40]);
        assert!(book.of("task-03").is_some());
        assert!(book.withdraw(&task));
        assert!(!book.withdraw(&task), "once");
        assert_eq!((book.next_expiry(), book.next_due()), (None, None));
    }

    /// A crossing of a task no longer watched is not warned of, and not offered again
    /// (the hub would otherwise wake for it at once, over and over).
    #[test]
    fn a_crossing_of_an_unwatched_task_is_spent() {
        let task = TaskId::parse("task-03").expect("id");
        let mut book = ForecastBook::new(Duration::from_secs(600));
        book.on_values(&task, at(0), &[30]);
        book.on_values(&task, at(60), &[40]);
        book.on_values(&task, at(120), &[50]);
        assert!(book.due(at(120), |_| false).is_empty());
        assert_eq!(book.next_due(), None);
        assert!(
            book.due(at(61), |_| true).is_empty(),
            "not raised later either"
        );
    }
}
