//! The watcher's and teammate's checks as pure functions, and the parsing of the
//! Souffleur's invocation (`PID:<pid> SESSION_ID:<id>`), which also arrives in
//! `instruction` messages from the Conductor.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;

use crate::core::domain::souffleur::{
    ConductorView, WatchdogReason, WatcherMode, valid_session_id,
};
use crate::core::domain::state;

/// One watcher cycle: the first exit reason that holds, in docs/orchestration.md's order.
pub fn watcher_check(
    view: &ConductorView,
    mode: WatcherMode,
    pid_alive: bool,
    awaiting_session_id: bool,
    known_session: &str,
    stale_after: Duration,
) -> Option<WatchdogReason> {
    if mode == WatcherMode::Normal && !pid_alive {
        return Some(WatchdogReason::ConductorDeadPid);
    }
    if view.heartbeat_age.is_some_and(|age| age > stale_after) {
        return Some(WatchdogReason::ConductorDeadHeartbeat);
    }
    if awaiting_session_id
        && let Some(id) = &view.session_id
        && id != known_session
        && valid_session_id(id)
    {
        return Some(WatchdogReason::SessionIdFound(id.clone()));
    }
    match view.state.as_str() {
        state::COMPLETE => Some(WatchdogReason::ConductorComplete),
        state::CONTEXT_RECOVERY => Some(WatchdogReason::ContextRecovery),
        _ => None,
    }
}

/// The teammate's check: the Souffleur heartbeat is older than allowed.
pub fn watcher_is_dead(souffleur_heartbeat_age: Option<Duration>, stale_after: Duration) -> bool {
    souffleur_heartbeat_age.is_none_or(|age| age > stale_after)
}

static PID_ARG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bPID:(\S+)").expect("static regex"));
static SESSION_ARG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bSESSION_ID:(\S+)").expect("static regex"));

/// Parses `PID:<pid> SESSION_ID:<id>` from free text (the arguments joined, or a
/// message). Names the part that is wrong.
pub fn parse_invocation(text: &str) -> Result<(i32, String), InvocationError> {
    let pid = PID_ARG
        .captures(text)
        .ok_or(InvocationError::NoPid)?
        .get(1)
        .map_or("", |m| m.as_str());
    let pid: i32 = pid
        .parse()
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| InvocationError::BadPid {
            pid: pid.to_owned(),
        })?;
    let session = SESSION_ARG
        .captures(text)
        .ok_or(InvocationError::NoSession)?
        .get(1)
        .map_or("", |m| m.as_str());
    if !valid_session_id(session) {
        return Err(InvocationError::BadSession {
            session: session.to_owned(),
        });
    }
    Ok((pid, session.to_owned()))
}

/// The part of `PID:<pid> SESSION_ID:<id>` that is missing or wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvocationError {
    #[error("no PID:<pid> given")]
    NoPid,
    #[error("PID:{pid} is not a process id")]
    BadPid { pid: String },
    #[error("no SESSION_ID:<id> given")]
    NoSession,
    #[error("SESSION_ID:{session} is not a session id (letters, digits, - and _)")]
    BadSession { session: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(age: u64, state: &str, session: Option<&str>) -> ConductorView {
        ConductorView {
            heartbeat_age: Some(Duration::from_secs(age)),
            state: state.into(),
            session_id: session.map(Into::into),
            task_count: 4,
        }
    }

    #[test]
    fn exit_reasons_in_protocol_order() {
        let stale = Duration::from_secs(240);
        let n = WatcherMode::Normal;
        let h = WatcherMode::HeartbeatOnly;
        let table: &[(
            ConductorView,
            WatcherMode,
            bool,
            bool,
            Option<WatchdogReason>,
        )] = &[
            (view(10, "reviewing", Some("s1")), n, true, false, None),
            // Everything wrong at once: the PID comes first.
            (
                view(999, "complete", Some("s2")),
                n,
                false,
                true,
                Some(WatchdogReason::ConductorDeadPid),
            ),
            // Heartbeat-only mode never checks the PID.
            (
                view(999, "complete", Some("s2")),
                h,
                false,
                true,
                Some(WatchdogReason::ConductorDeadHeartbeat),
            ),
            (view(240, "reviewing", None), n, true, false, None),
            (
                view(241, "reviewing", None),
                n,
                true,
                false,
                Some(WatchdogReason::ConductorDeadHeartbeat),
            ),
            (
                view(10, "complete", Some("s2")),
                n,
                true,
                true,
                Some(WatchdogReason::SessionIdFound("s2".into())),
            ),
            (
                view(10, "complete", Some("s2")),
                n,
                true,
                false,
                Some(WatchdogReason::ConductorComplete),
            ),
            (
                view(10, "complete", Some("s1")),
                n,
                true,
                true,
                Some(WatchdogReason::ConductorComplete),
            ),
            (
                view(10, "context_recovery", Some("../x")),
                n,
                true,
                true,
                Some(WatchdogReason::ContextRecovery),
            ),
        ];
        for (v, mode, alive, awaiting, expected) in table {
            assert_eq!(
                &watcher_check(v, *mode, *alive, *awaiting, "s1", stale),
                expected,
                "{v:?} {mode:?}"
            );
        }
    }

    #[test]
    fn teammate_threshold_is_strict() {
        let limit = Duration::from_secs(180);
        assert!(!watcher_is_dead(Some(Duration::from_secs(180)), limit));
        assert!(watcher_is_dead(Some(Duration::from_secs(181)), limit));
        assert!(watcher_is_dead(None, limit));
    }

    #[test]
    fn invocation_parsing() {
        assert_eq!(
            parse_invocation("PID:4242 SESSION_ID:abc-123_x"),
            Ok((4242, "abc-123_x".into()))
        );
        assert_eq!(
            parse_invocation("Corrected: PID:77 SESSION_ID:5f2e-aa please retry"),
            Ok((77, "5f2e-aa".into()))
        );
        assert!(
            parse_invocation("SESSION_ID:x")
                .unwrap_err()
                .to_string()
                .contains("PID")
        );
        assert!(
            parse_invocation("PID:abc SESSION_ID:x")
                .unwrap_err()
                .to_string()
                .contains("PID:abc")
        );
        assert!(
            parse_invocation("PID:1 SESSION_ID:x").is_err(),
            "never init"
        );
        assert!(
            parse_invocation("PID:42 SESSION_ID:../../etc")
                .unwrap_err()
                .to_string()
                .contains("SESSION_ID")
        );
        assert!(parse_invocation("PID:42 SESSION_ID:*").is_err());
    }
}
