//! `maestro conductor hold | release | recover | relaunch`: asks the process that holds
//! the project's Souffleur role, over its control socket, and reports whether the
//! command was accepted. `hold` and `release` are also recorded in maestro's data
//! directory, so a hold set before a role starts (or before it restarts after a crash)
//! is honoured until released.

pub(crate) mod watch;

use std::time::Duration;

use serde_json::json;

use crate::cli::error::CliError;
use crate::cli::project::{Project, confirm};
use crate::core::ipc::{self, RequestError};
use crate::core::paths::{self, ProjectKey, Service};
use crate::core::watchdog::hold;

/// How long a client waits for the role's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends one command and prints the answer.
pub fn run(project: &Project, word: &str, yes: bool, as_json: bool) -> Result<(), CliError> {
    if matches!(word, "recover" | "relaunch") {
        confirm(
            &format!(
                "{word} the Conductor now? Its window is killed and a new generation launched."
            ),
            yes,
        )?;
    }
    let key = ProjectKey::of(&project.root);
    let recorded = match word {
        "hold" => Some(hold::set(&key, true).map_err(super::error::runtime)?),
        "release" => Some(hold::set(&key, false).map_err(super::error::runtime)?),
        _ => None,
    };
    let socket = paths::socket_path(Service::Souffleur, &key);
    let answer = match &socket {
        Ok(path) => ipc::request_line(path, word, ANSWER_TIMEOUT),
        Err(_) => Err(RequestError::NotListening),
    };
    let (accepted, text) = match answer {
        Ok(line) => match line.trim().split_once(": ") {
            Some(("ok", t)) => (true, t.to_owned()),
            Some((_, t)) => (false, t.to_owned()),
            None => (false, "no answer from the Souffleur".to_owned()),
        },
        // A hold is kept for the next role even when none runs now.
        Err(RequestError::NotListening) if recorded.is_some() => (
            true,
            format!(
                "{}; no Souffleur role is running now, the next one starts {}",
                if word == "hold" { "held" } else { "released" },
                if word == "hold" { "held" } else { "watching" }
            ),
        ),
        Err(RequestError::NotListening) => {
            let why = socket.err().map(|e| format!(" ({e})")).unwrap_or_default();
            return Err(CliError::Runtime(format!(
                "no Souffleur role answers for this project{why}. Start one with `maestro souffleur PID:<pid> SESSION_ID:<id>`."
            )));
        }
        Err(RequestError::Failed(e)) => (false, format!("no answer from the Souffleur: {e}")),
    };
    if as_json {
        println!(
            "{}",
            crate::core::text::json_line(
                &json!({"ok": accepted, "command": word, "detail": text, "held": recorded.map(|_| word == "hold")})
            )
        );
    } else {
        println!("{}: {text}", if accepted { "accepted" } else { "refused" });
    }
    if accepted {
        Ok(())
    } else {
        Err(CliError::Runtime(text))
    }
}
