//! Headless text output (docs/cli.md "Headless text output"): each happening as the
//! lines a person or the Conductor reads, through the one sanitizer.

use crate::core::clock::Clock;
use crate::core::event::{Happening, What};
use crate::core::event_json::contract_provider;
use crate::core::text::{one_line, printable};

/// One happening as text (with its newline), or `None` for what headless does not show.
/// Whatever a line kind puts in it, the whole line goes through the one sanitizer
/// ([`printable`]) here, so a new kind cannot skip it.
/// A restatement of what an earlier run told keeps its first time and says so at the
/// end of its first line (a report's header: the Conductor's parser reads what is before).
pub fn text(clock: &Clock, h: &Happening) -> Option<String> {
    let raw = raw_text(clock, h)?;
    let mark = if h.told.as_ref().is_some_and(|t| t.replayed) {
        REPLAYED
    } else {
        ""
    };
    Some(match &h.what {
        // The report's own lines stay lines; what it quotes cannot add any.
        What::Anomaly(_) => {
            let mut lines: Vec<_> = raw
                .trim_end_matches('\n')
                .lines()
                .map(|l| printable(l).into_owned())
                .collect();
            if let Some(first) = lines.first_mut() {
                first.push_str(mark);
            }
            format!("{}\n\n", lines.join("\n"))
        }
        _ => format!("{}{mark}\n", one_line(raw.trim_end_matches('\n'))),
    })
}

/// The mark of a restated event in text output.
pub const REPLAYED: &str = " (replayed)";

fn raw_text(clock: &Clock, h: &Happening) -> Option<String> {
    Some(match &h.what {
        // The report's own lines stay; what it quotes from a log cannot reach the terminal.
        What::Anomaly(a) => anomaly_text(a, &clock.hms(h.at)),
        What::Task {
            task_id,
            state,
            prev_state,
        } => task_text(task_id, state, prev_state.as_deref()),
        What::Stale { task_id, age_s } => {
            format!("STALE: {} heartbeat {age_s}s old\n", printable(task_id))
        }
        What::Message(m) => format!(
            "MESSAGE: #{} {} from {} [{}] {}\n",
            m.id,
            one_line(m.task_id.as_deref().unwrap_or("-")),
            one_line(m.from_session.as_deref().unwrap_or("-")),
            one_line(m.message_type.as_deref().unwrap_or("-")),
            one_line(m.message.as_deref().unwrap_or_default())
        ),
        What::Watchdog { reason, task_count } => {
            format!("WATCHDOG: {reason} (task count {task_count})\n")
        }
        What::Recovery(r) => format!(
            "RECOVERY: {} {} (generation S{}, pid {})\n",
            contract_provider(r.provider),
            r.status.as_str(),
            r.generation,
            r.pid
                .map_or_else(|| "unknown".to_owned(), |p| p.to_string())
        ),
        What::Error { detail, .. } => format!("ERROR: {}\n", one_line(detail)),
        What::Source {
            source: "replay",
            detail,
            ..
        } => format!("REPLAY: {}\n", one_line(detail)),
        What::Source { detail, .. } => format!("SOURCE: {}\n", one_line(detail)),
        What::Forecast {
            task_id,
            threshold,
            at,
        } => format!(
            "FORECAST: {task_id} should reach {threshold}% context in about {} min (at {})\n",
            (*at - h.at).whole_minutes().max(0),
            clock.hms(*at)
        ),
        What::ForecastWithdrawn { task_id, reason } => format!(
            "FORECAST: {} withdrawn: {}\n",
            printable(task_id),
            one_line(reason)
        ),
        What::Watcher {
            task_id,
            mode,
            status,
            pid,
        } => format!("WATCHER: {task_id} {mode} {status} (PID {pid})\n"),
        What::Settings(_) | What::Clock { .. } | What::Link(_) => return own_text(&h.what),
        What::Pipeline(p) => format!(
            "PIPELINE: {} {} iteration {}{}{}\n",
            one_line(&p.name),
            p.status,
            p.iteration,
            p.step.map(|s| format!(" step {s}")).unwrap_or_default(),
            p.outcome
                .as_deref()
                .map(|o| format!(": {}", one_line(o)))
                .unwrap_or_default()
        ),
        What::Session {
            status,
            task_id,
            session_id,
            figures,
            detail,
        } => session_text(
            status,
            task_id,
            session_id.as_deref(),
            figures.as_deref(),
            detail.as_deref(),
        ),
        What::Budget { .. }
        | What::NeedsYou { .. }
        | What::NeedsYouCleared { .. }
        | What::PollerReplaced { .. } => return operator_text(&h.what),
        What::Log { .. } | What::RoleEnded => return None,
    })
}

/// A Sentinel report in the Conductor's format, then a blank line: the report's own
/// lines stay; what it quotes from a log cannot reach the terminal (a newline in the
/// quoted text would forge a line of its own).
fn anomaly_text(a: &crate::core::domain::Anomaly, hms: &str) -> String {
    let a = crate::core::domain::Anomaly {
        detail: a.detail.replace('\r', "").replace('\n', "\\n"),
        ..a.clone()
    };
    let report = a.report(hms);
    let lines: Vec<_> = report.lines().map(printable).collect();
    format!("{}\n\n", lines.join("\n"))
}

/// `TASK: task-03 working -> needs_review`, or `(first seen)`.
fn task_text(task_id: &str, state: &str, prev: Option<&str>) -> String {
    match prev {
        Some(prev) => format!(
            "TASK: {} {} -> {}\n",
            printable(task_id),
            printable(prev),
            printable(state)
        ),
        None => format!(
            "TASK: {} {} (first seen)\n",
            printable(task_id),
            printable(state)
        ),
    }
}

/// The events about what the operator is asked for or spared (`None` for any other
/// kind: `raw_text` routes only these here).
fn operator_text(what: &What) -> Option<String> {
    Some(match what {
        What::Budget {
            task_id,
            budget,
            level,
            value,
            limit,
        } => {
            let (value, limit) = if *budget == "context_percent" {
                (format!("{value:.1}%"), format!("{limit:.0}%"))
            } else {
                (format!("${value:.2}"), format!("${limit:.2}"))
            };
            format!(
                "BUDGET: {} {budget} at {level}% ({value} of {limit})\n",
                task_id.as_deref().map_or("orchestration", |t| t)
            )
        }
        What::NeedsYou { task_id, text, .. } => {
            format!("NEEDS YOU: {task_id} {}\n", one_line(text))
        }
        What::NeedsYouCleared { task_id, waited_s } => {
            format!("NEEDS YOU: {task_id} went on after {waited_s}s\n")
        }
        What::PollerReplaced {
            task_id,
            session_id,
            role,
            command,
            at,
        } => format!(
            "POLLER: {} {} the LLM {role} of session {}; {}\n",
            task_id
                .as_deref()
                .map_or_else(|| "a session".to_owned(), one_line),
            if *at == "loop" {
                "stopped in its loop"
            } else {
                "refused at launch"
            },
            one_line(session_id),
            command.as_deref().map_or_else(
                || "nothing to run instead".to_owned(),
                |c| format!("named `{}` instead", one_line(c))
            ),
        ),
        _ => return None,
    })
}

/// maestro's own state: the Souffleur role's settings, a gap in its running, a remote
/// link (`None` for any other kind: `raw_text` routes only these here).
fn own_text(what: &What) -> Option<String> {
    Some(match what {
        What::Settings(s) => format!(
            "WATCHDOG: settings FORCE_COMPACT={} ({}), MAX_EXTERNAL_PERMISSION={} ({}){}\n",
            s.force_compact,
            one_line(&s.force_compact_from),
            s.max_permission,
            one_line(&s.max_permission_from),
            s.warnings
                .iter()
                .fold(String::new(), |acc, w| acc + "; " + &one_line(w))
        ),
        What::Clock { kind, seconds } => format!(
            "CLOCK: maestro's time stopped ({kind}, {}); heartbeat and stall ages restart from now\n",
            crate::core::sentinel::human_duration(std::time::Duration::from_secs(*seconds))
        ),
        What::Link(l) => format!(
            "LINK: {} {}{}\n",
            one_line(&l.project),
            l.status,
            if l.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", one_line(&l.detail))
            }
        ),
        _ => return None,
    })
}

/// `SESSION: task-03 found 7f3c1a2b (transcript) claude-sonnet-4-5: 19.4k tokens, $0.03, ctx 9.6%, waiting on Bash cargo test`
fn session_text(
    status: &str,
    task_id: &str,
    session_id: Option<&str>,
    figures: Option<&crate::core::sessions::figures::SessionFigures>,
    detail: Option<&str>,
) -> String {
    use crate::core::sessions::figures::{dollars, short_tokens};
    let sid: String = session_id.unwrap_or("-").chars().take(8).collect();
    let mut line = format!("SESSION: {} {status} {}", one_line(task_id), one_line(&sid));
    if let Some(f) = figures {
        if status == "found" {
            line += &format!(" ({})", f.found_by);
        }
        line += &format!(
            " {}: {} tokens, {} at list prices, ctx {:.1}% of {}, {}",
            one_line(f.model.as_deref().unwrap_or("unknown model")),
            short_tokens(f.total_tokens),
            dollars(f.cost_usd),
            f.context_percent,
            short_tokens(f.context_window),
            one_line(&f.doing())
        );
        if f.compactions > 0 {
            line += &format!(", {} compaction(s)", f.compactions);
        }
    }
    if let Some(d) = detail {
        line += &format!(": {}", one_line(d));
    }
    line + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::domain::souffleur::WatchdogReason;
    use crate::core::domain::{Anomaly, AnomalyKind, TaskId};
    use crate::core::event::MessageRow;
    use crate::core::event_json::output_line;

    #[test]
    fn escape_codes_from_logs_never_reach_the_terminal() {
        let clock = Clock::system(time::UtcOffset::UTC);
        let at = time::OffsetDateTime::UNIX_EPOCH;
        let anomaly = Happening {
            told: None,
            at,
            what: What::Anomaly(Anomaly {
                task_id: TaskId::parse("task-03").expect("id"),
                kind: AnomalyKind::SelfCorrection,
                detail: "\"step 2 self-correction \u{1b}]0;pwned\u{7}\u{1b}[2J\"".into(),
                spike: None,
                line: None,
            }),
        };
        let out = text(&clock, &anomaly).expect("shown");
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert!(
            out.starts_with("SENTINEL: [00:00:00] task-03\nAnomaly: self-correction\nDetail: ")
        );
        assert!(out.contains("·]0;pwned··[2J"), "{out:?}");

        let message = Happening {
            told: None,
            at,
            what: What::Message(MessageRow {
                id: 1,
                task_id: Some("task-03".into()),
                from_session: Some("x\u{1b}]52;c;aGk=\u{7}".into()),
                message_type: Some("instruction".into()),
                message: Some("two\nlines \u{9b}31m".into()),
                timestamp: None,
            }),
        };
        let out = text(&clock, &message).expect("shown");
        assert_eq!(out.matches('\n').count(), 1, "{out:?}");
        assert!(!out.trim_end().chars().any(char::is_control), "{out:?}");
        assert!(out.contains("two\\nlines ·31m"), "{out:?}");
    }

    #[test]
    fn a_clock_gap_is_one_line_in_each_format() {
        let clock = Clock::system(time::UtcOffset::UTC);
        let gap = Happening {
            told: None,
            at: time::OffsetDateTime::UNIX_EPOCH,
            what: What::Clock {
                kind: "suspend",
                seconds: 600,
            },
        };
        assert_eq!(
            text(&clock, &gap).expect("shown"),
            "CLOCK: maestro's time stopped (suspend, 10 minutes); heartbeat and stall ages restart from now\n"
        );
        let v: serde_json::Value =
            serde_json::from_str(&output_line(&gap, None).expect("shown")).expect("json");
        assert_eq!(
            v,
            // Not in a journal: its cursor is null (there is no place to resume from).
            serde_json::json!({"ts": "1970-01-01T00:00:00Z", "event": "clock", "kind": "suspend", "seconds": 600, "cursor": null})
        );
    }

    /// Every kind of happening, each carrying `id` as its task id (where it has one) and
    /// `text` wherever it carries text from outside.
    fn every_kind(id: &str, text: &str) -> Vec<What> {
        use crate::core::domain::souffleur::Provider;
        use crate::core::event::{PipelineReport, RecoveryStatus, RecoveryStep, SouffleurSettings};
        let at = time::OffsetDateTime::UNIX_EPOCH;
        vec![
            What::Anomaly(Anomaly {
                task_id: TaskId::parse("task-03").expect("id"),
                kind: AnomalyKind::SelfCorrection,
                detail: text.into(),
                spike: None,
                line: None,
            }),
            What::Task {
                task_id: id.into(),
                state: text.into(),
                prev_state: Some(text.into()),
            },
            What::Task {
                task_id: id.into(),
                state: text.into(),
                prev_state: None,
            },
            What::Stale {
                task_id: id.into(),
                age_s: 9,
            },
            What::Message(MessageRow {
                id: 1,
                task_id: Some(id.into()),
                from_session: Some(text.into()),
                message_type: Some(text.into()),
                message: Some(text.into()),
                timestamp: Some(text.into()),
            }),
            What::Watchdog {
                reason: WatchdogReason::SessionIdFound(text.into()),
                task_count: 1,
            },
            What::Recovery(RecoveryStep {
                provider: Provider::ClaudeExport,
                status: RecoveryStatus::Started,
                generation: 2,
                pid: None,
            }),
            What::Error {
                task_id: Some(id.into()),
                detail: text.into(),
            },
            What::Settings(SouffleurSettings {
                force_compact: 1,
                force_compact_from: text.into(),
                max_permission: text.into(),
                max_permission_from: text.into(),
                source: Some(text.into()),
                warnings: vec![text.into()],
            }),
            What::Source {
                source: "temp",
                status: "appeared",
                detail: text.into(),
            },
            What::Source {
                source: "replay",
                status: "appeared",
                detail: text.into(),
            },
            What::Forecast {
                task_id: id.into(),
                threshold: 65,
                at,
            },
            What::ForecastWithdrawn {
                task_id: id.into(),
                reason: text.into(),
            },
            What::Watcher {
                task_id: id.into(),
                mode: "pause",
                status: "attached",
                pid: 7,
            },
            What::RoleEnded,
            What::Pipeline(PipelineReport {
                name: text.into(),
                status: "step",
                iteration: 1,
                step: Some(0),
                outcome: Some(text.into()),
                trace: None,
            }),
            What::Session {
                status: "missing",
                task_id: id.into(),
                session_id: Some(text.into()),
                figures: None,
                detail: Some(text.into()),
            },
            What::Budget {
                task_id: Some(id.into()),
                budget: "task_usd",
                level: 80,
                value: 1.0,
                limit: 2.0,
            },
            What::NeedsYou {
                task_id: id.into(),
                session_id: text.into(),
                reason: "permission",
                tool: Some(text.into()),
                detail: Some(text.into()),
                text: text.into(),
            },
            What::NeedsYouCleared {
                task_id: id.into(),
                waited_s: 3,
            },
            What::PollerReplaced {
                task_id: Some(id.into()),
                session_id: text.into(),
                role: "musician-watcher",
                command: Some(text.into()),
                at: "loop",
            },
            What::Clock {
                kind: "suspend",
                seconds: 60,
            },
            What::Link(crate::core::event::LinkReport {
                project: text.into(),
                status: "down",
                detail: text.into(),
            }),
            What::Log {
                task: TaskId::parse("task-03").expect("id"),
                kind: crate::core::domain::LogKind::Status,
                skipped: 0,
                lines: vec![text.to_owned()].into(),
                reset: false,
            },
        ]
    }

    /// Which kind a happening is: no wildcard, so a new kind fails to build here until
    /// [`every_kind`] holds one of it.
    fn kind_index(w: &What) -> usize {
        match w {
            What::Anomaly(_) => 0,
            What::Task { .. } => 1,
            What::Stale { .. } => 2,
            What::Message(_) => 3,
            What::Watchdog { .. } => 4,
            What::Recovery(_) => 5,
            What::Error { .. } => 6,
            What::Settings(_) => 7,
            What::Source { .. } => 8,
            What::Forecast { .. } => 9,
            What::Watcher { .. } => 10,
            What::RoleEnded => 11,
            What::Pipeline(_) => 12,
            What::Session { .. } => 13,
            What::Budget { .. } => 14,
            What::NeedsYou { .. } => 15,
            What::NeedsYouCleared { .. } => 16,
            What::Clock { .. } => 17,
            What::Log { .. } => 18,
            What::Link(_) => 19,
            What::ForecastWithdrawn { .. } => 20,
            What::PollerReplaced { .. } => 21,
        }
    }

    #[test]
    fn no_line_kind_lets_hostile_text_reach_the_terminal() {
        let clock = Clock::system(time::UtcOffset::UTC);
        let id = "task-1\u{1b}]0;owned\u{7}\u{202e}\u{2066}\u{200b}\u{feff}\n";
        let hostile =
            "x\u{1b}[2J\u{9b}31m\u{7}\u{202e}gnp.exe\u{2066}\u{200b}\u{feff}\r\nFAKE: line";
        let kinds = every_kind(id, hostile);
        let mut covered: Vec<usize> = kinds.iter().map(kind_index).collect();
        covered.sort_unstable();
        covered.dedup();
        assert_eq!(
            covered,
            (0..=21).collect::<Vec<_>>(),
            "every kind is walked"
        );
        for what in kinds {
            let h = Happening {
                told: None,
                at: time::OffsetDateTime::UNIX_EPOCH,
                what,
            };
            if let Some(line) = text(&clock, &h) {
                let body = line.trim_end_matches('\n');
                assert!(
                    !body.chars().any(|c| (c.is_control() && c != '\n')
                        || crate::core::text::is_invisible_format(c)),
                    "{:?}: {line:?}",
                    h.what
                );
                if !matches!(h.what, What::Anomaly(_)) {
                    assert!(!body.contains('\n'), "one line: {line:?}");
                }
                assert!(!line.contains("\nFAKE:"), "a forged line: {line:?}");
            }
            if let Some(line) = output_line(&h, Some(hostile)) {
                let line = line.strip_suffix('\n').expect("one line");
                assert!(
                    !line
                        .chars()
                        .any(|c| c.is_control() || crate::core::text::is_invisible_format(c)),
                    "{line}"
                );
            }
        }
    }
}
