//! When a scheduled pipeline runs (the seed's `{ type: 'schedule'; cronExpression }`, or
//! maestro's `intervalMs`): the next run's distance from now.

use std::time::Duration;

/// When a scheduled pipeline runs: every interval, or at the times a cron expression
/// names (the usual five fields, local time as cron reads them).
#[derive(Debug, Clone)]
pub enum Schedule {
    Every(Duration),
    Cron {
        expression: String,
        cron: Box<croner::Cron>,
    },
}

impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Every(a), Self::Every(b)) => a == b,
            (Self::Cron { expression: a, .. }, Self::Cron { expression: b, .. }) => a == b,
            _ => false,
        }
    }
}

impl Schedule {
    /// How long from now until the next run.
    pub fn next_in(&self) -> Duration {
        match self {
            Self::Every(every) => *every,
            Self::Cron { cron, .. } => {
                let now = chrono::Local::now();
                cron.find_next_occurrence(&now, false)
                    .ok()
                    .and_then(|next| (next - now).to_std().ok())
                    // No next time (a date that never comes): look again in a day.
                    .unwrap_or(Duration::from_secs(24 * 3600))
            }
        }
    }
}

/// A cron expression of the usual five fields (minute hour day-of-month month
/// day-of-week), or what is wrong with it and the fix (the definition's parser says
/// where).
pub(super) fn cron_expression(expression: &str) -> Result<Schedule, CronProblem> {
    use croner::parser::{CronParser, Seconds, Year};
    let parser = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build();
    match parser.parse(expression.trim()) {
        Ok(cron) => Ok(Schedule::Cron {
            expression: expression.trim().to_owned(),
            cron: Box::new(cron),
        }),
        Err(source) => Err(CronProblem {
            expression: expression.to_owned(),
            source,
        }),
    }
}

/// A cron expression that is not one, with the fix.
#[derive(Debug, thiserror::Error)]
#[error(
    "{expression:?} is not a cron expression ({source}): use the usual five fields, minute hour day-of-month month day-of-week, as \"*/5 * * * *\""
)]
pub struct CronProblem {
    expression: String,
    source: croner::errors::CronError,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_fields_give_the_next_time_and_anything_else_is_refused() {
        let every_minute = cron_expression("* * * * *").expect("valid");
        let next = every_minute.next_in();
        assert!(
            next <= Duration::from_secs(60) && next > Duration::ZERO,
            "{next:?}"
        );
        let hourly = cron_expression("0 * * * *").expect("valid");
        assert!(hourly.next_in() <= Duration::from_secs(3600));
        for bad in [
            "* * *",
            "61 * * * *",
            "0 0 * * * *",
            "* * * * * 2030",
            "every day",
        ] {
            // Where it is (`trigger.cronExpression:`) is the definition's to say: spec's
            // table of refusals.
            let err = cron_expression(bad).expect_err(bad).to_string();
            assert!(err.contains("five fields"), "{err}");
        }
        assert_eq!(every_minute, cron_expression(" * * * * * ").expect("valid"));
        assert_ne!(every_minute, Schedule::Every(Duration::from_secs(60)));
    }
}
