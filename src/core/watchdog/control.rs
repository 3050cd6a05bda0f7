//! The running Souffleur role's control socket: `maestro conductor hold | release |
//! recover | relaunch` (and only from the same user) become [`WatchdogRequest`]s for
//! the role, and the role's answer goes back as one line (`ok: …` or `refused: …`).

use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};

use crate::core::domain::souffleur::RecoveryKind;
use crate::core::ipc;

/// What the operator can ask of a running role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchdogCmd {
    Hold,
    Release,
    Recover(RecoveryKind),
}

impl WatchdogCmd {
    /// The word used on the control socket and the command line.
    pub fn parse(word: &str) -> Option<Self> {
        match word.trim() {
            "hold" => Some(Self::Hold),
            "release" => Some(Self::Release),
            "recover" => Some(Self::Recover(RecoveryKind::ContextRecovery)),
            "relaunch" => Some(Self::Recover(RecoveryKind::Relaunch)),
            _ => None,
        }
    }
}

/// A command with, optionally, where to send whether it was accepted.
#[derive(Debug)]
pub struct WatchdogRequest {
    pub cmd: WatchdogCmd,
    pub reply: Option<tokio::sync::oneshot::Sender<Result<String, Refusal>>>,
}

/// Why the role did not do an operator's command (the `refused: …` line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("unknown command {line:?}; use hold, release, recover or relaunch")]
    Unknown { line: String },
    #[error("the Souffleur role has ended")]
    Ended,
    /// The role's own alert, in its words.
    #[error("{0}")]
    Alert(String),
}

/// Serves the control socket until the listener fails. One line in (`hold`), one line
/// out (`ok: …` or `refused: …`).
pub async fn serve(listener: UnixListener, requests: mpsc::Sender<WatchdogRequest>) {
    // A command is one short word: read no more than a line's worth.
    ipc::serve_lines(listener, 64, move |line| {
        let requests = requests.clone();
        async move {
            let answer = match WatchdogCmd::parse(&line) {
                None => Err(Refusal::Unknown {
                    line: line.trim().to_owned(),
                }),
                Some(cmd) => ask(&requests, cmd).await,
            };
            match answer {
                Ok(t) => format!("ok: {t}"),
                Err(t) => format!("refused: {t}"),
            }
        }
    })
    .await;
}

async fn ask(
    requests: &mpsc::Sender<WatchdogRequest>,
    cmd: WatchdogCmd,
) -> Result<String, Refusal> {
    let (tx, rx) = oneshot::channel();
    let request = WatchdogRequest {
        cmd,
        reply: Some(tx),
    };
    if requests.send(request).await.is_err() {
        return Err(Refusal::Ended);
    }
    rx.await.unwrap_or(Err(Refusal::Ended))
}
