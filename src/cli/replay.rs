//! `maestro replay`: a run played again through the same hub, Sentinel and dashboard,
//! from maestro's event log of the project or rebuilt from `comms.db` and `temp/`.

use std::process::ExitCode;
use std::sync::Arc;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::cli::args::{GlobalArgs, ReplayArgs, ReplaySource};
use crate::cli::error::CliError;
use crate::cli::life::Life;
use crate::cli::project::Project;
use crate::cli::{dashboard, headless};
use crate::core::clock::{Clock, parse_sqlite_utc, rfc3339};
use crate::core::event_log::input::RecordedSettings;
use crate::core::event_log::timeline::Timeline;
use crate::core::paths::{self, ProjectKey};
use crate::core::replay::player::{Replay, ReplayConfig};
use crate::core::replay::reconstruct;
use crate::core::replay::rules::{self, millis};
use crate::core::runtime;
use crate::settings::Settings;
use crate::tui::{Feeds, ReplayAccess, TuiConfig};

pub fn run(
    project: &Project,
    settings: &Settings,
    args: &ReplayArgs,
    global: &GlobalArgs,
    clock: Clock,
) -> Result<ExitCode, CliError> {
    if global.report_to_db {
        return Err(CliError::Usage(
            "a replay writes nothing: drop --report-to-db (the run's own reports are in its messages).".into(),
        ));
    }
    let fallback = fallback_settings(project, settings);
    let mut timeline = load(project, args.source, &fallback)?;
    rejudge(&mut timeline, global);
    let (Some(start), Some(end)) = (timeline.start(), timeline.end()) else {
        return Err(nothing_found(project, &timeline));
    };
    if timeline.is_empty() {
        return Err(nothing_found(project, &timeline));
    }
    let from = args
        .from
        .as_deref()
        .map(|text| parse_from(text, start, end))
        .transpose()
        .map_err(crate::cli::error::usage)?;
    let config = ReplayConfig {
        speed: if global.no_tui {
            args.speed
        } else {
            Some(args.speed.unwrap_or(1.0))
        },
        from,
        paused: args.paused && !global.no_tui,
        quiet_before_from: global.no_tui,
        exit_at_end: global.no_tui,
        forward_logs: !global.no_tui,
        fallback,
    };
    let timeline = Arc::new(timeline);
    if global.no_tui {
        play_on_stdout(timeline, config, global, clock)?;
    } else {
        play_on_screen(timeline, config, (project, settings), clock)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The replay's happenings printed as `--no-tui` prints them, to its end or a signal.
fn play_on_stdout(
    timeline: Arc<Timeline>,
    config: ReplayConfig,
    global: &GlobalArgs,
    clock: Clock,
) -> Result<(), CliError> {
    crate::cli::life::runtime()?.block_on(async {
        let replay = Replay::spawn(timeline, config, clock).map_err(crate::cli::error::runtime)?;
        let mut life = Life::replay(replay)?;
        let stop = life.stop.clone();
        if let Some(replay) = life.replay.as_mut() {
            headless::present_on_stdout(
                &mut replay.happenings,
                global.json,
                clock,
                global.until_complete,
                None,
                stop,
            )
            .await;
        }
        life.shutdown().await;
        Ok(())
    })
}

/// The replay on the dashboard, with its clock and keys (no desktop notifications:
/// what happened then is no news now).
fn play_on_screen(
    timeline: Arc<Timeline>,
    config: ReplayConfig,
    (project, settings): (&Project, &Settings),
    clock: Clock,
) -> Result<(), CliError> {
    dashboard::require_terminal()?;
    // Built before the replay starts: a bad theme or key table is a usage error.
    let mut tui =
        TuiConfig::from_settings(format!("replay of {}", project.name()), settings, clock)
            .map_err(crate::cli::error::usage)?;
    tui.notifier = crate::tui::notify::Notifier::Off;
    crate::cli::life::runtime()?.block_on(async {
        let replay = Replay::spawn(timeline, config, clock).map_err(crate::cli::error::runtime)?;
        tui.clock = replay.clock;
        let mut life = Life::replay(replay)?;
        let stop = life.stop.clone();
        let result = match life.replay.as_mut() {
            Some(replay) => {
                let feeds = Feeds {
                    replay: Some(ReplayAccess {
                        status: replay.status.clone(),
                        control: replay.control(),
                    }),
                    happenings: &mut replay.happenings,
                    snapshots: &mut replay.snapshots,
                };
                crate::tui::run(feeds, tui, stop).await
            }
            None => Ok(()),
        };
        life.shutdown().await;
        result.map_err(crate::cli::error::runtime)
    })
}

/// The rules a run that did not record its own is judged by: this configuration's.
fn fallback_settings(project: &Project, settings: &Settings) -> RecordedSettings {
    let config = project.core_config(settings);
    rules::recorded(&runtime::hub_settings(
        &config,
        runtime::database_exists(&project.db),
    ))
}

/// Thresholds given on the command line judge the replay instead of the recorded ones
/// ("what if the stall threshold had been 2 minutes?"). A rebuilt run keeps the time
/// rules off: its moments are estimates.
fn rejudge(timeline: &mut Timeline, global: &GlobalArgs) {
    let rebuilt = timeline.origin == crate::core::event_log::timeline::Origin::Files;
    for session in &mut timeline.sessions {
        let Some(s) = &mut session.settings else {
            continue;
        };
        if let Some(points) = global.spike_threshold {
            s.spike_threshold = points;
        }
        if rebuilt {
            continue;
        }
        let pairs = [
            (global.stall_after, &mut s.stall_after_ms),
            (global.task_stale_after, &mut s.task_stale_after_ms),
            (
                global.conductor_stale_after,
                &mut s.conductor_stale_after_ms,
            ),
        ];
        for (given, ms) in pairs {
            if let Some(d) = given {
                *ms = millis(d);
            }
        }
    }
}

fn load(
    project: &Project,
    source: ReplaySource,
    fallback: &RecordedSettings,
) -> Result<Timeline, CliError> {
    let files = paths::event_log(&ProjectKey::of(&project.root))
        .map_err(|e| CliError::Runtime(e.to_string()))?;
    if source != ReplaySource::Files {
        match Timeline::from_event_log(&files).map_err(crate::cli::error::runtime)? {
            Some(timeline) => return Ok(timeline),
            None if source == ReplaySource::Log => {
                return Err(CliError::Usage(format!(
                    "there is no event log for {} (looked for {}): maestro records a project while it watches it, unless [logs] event_log_mib = 0. Use --source files to rebuild the run from comms.db and temp/.",
                    project.root.display(),
                    files.current.display()
                )));
            }
            None => {}
        }
    }
    Ok(reconstruct::from_files(
        &project.db,
        &project.temp,
        fallback,
    ))
}

fn nothing_found(project: &Project, timeline: &Timeline) -> CliError {
    let mut text = format!(
        "nothing to replay for {}: no event log, and comms.db and temp/ hold no task, message or log line.",
        project.root.display()
    );
    for note in &timeline.notes {
        text.push_str("\n  ");
        text.push_str(&crate::core::text::printable(note));
    }
    CliError::Runtime(text)
}

/// A `--from` that names no moment of the run.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FromError {
    #[error(
        "--from {text:?} is not a time: write 2026-11-22T14:35:00Z, \"2026-11-22 14:35:00\" (UTC), 14:35:00 (UTC, on the run's first day) or an offset like +5m"
    )]
    NotATime { text: String },
    #[error("--from {text} is after the run's end ({end}): it runs from {start} to {end}")]
    AfterTheEnd {
        text: String,
        start: String,
        end: String,
    },
}

/// `--from`: a moment of the run (see the flag's help).
fn parse_from(
    text: &str,
    start: OffsetDateTime,
    end: OffsetDateTime,
) -> Result<OffsetDateTime, FromError> {
    let bad = || FromError::NotATime {
        text: text.to_owned(),
    };
    let at = if let Some(offset) = text.strip_prefix('+') {
        let d = humantime::parse_duration(offset).map_err(|_| bad())?;
        start + d
    } else if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        at
    } else if let Some(at) = parse_sqlite_utc(text) {
        at
    } else {
        let f = time::macros::format_description!("[hour]:[minute]:[second]");
        let t = time::Time::parse(text, f).map_err(|_| bad())?;
        start.replace_time(t)
    };
    if at > end {
        return Err(FromError::AfterTheEnd {
            text: text.to_owned(),
            start: rfc3339(start),
            end: rfc3339(end),
        });
    }
    Ok(at.max(start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_reads_every_documented_form() {
        let start = parse_sqlite_utc("2026-11-22 14:00:00").expect("time");
        let end = parse_sqlite_utc("2026-11-22 16:00:00").expect("time");
        let at = |t| parse_from(t, start, end).map(rfc3339);
        assert_eq!(at("+5m").as_deref(), Ok("2026-11-22T14:05:00Z"));
        assert_eq!(at("14:30:00").as_deref(), Ok("2026-11-22T14:30:00Z"));
        assert_eq!(
            at("2026-11-22 15:00:00").as_deref(),
            Ok("2026-11-22T15:00:00Z")
        );
        assert_eq!(
            at("2026-11-22T15:00:01Z").as_deref(),
            Ok("2026-11-22T15:00:01Z")
        );
        assert_eq!(
            at("13:00:00").as_deref(),
            Ok("2026-11-22T14:00:00Z"),
            "before: the start"
        );
        assert!(at("17:00:00").is_err_and(|e| e.to_string().contains("after the run's end")));
        assert!(at("soon").is_err_and(|e| e.to_string().contains("+5m")));
    }
}
