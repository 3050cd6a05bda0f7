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
    pub reply: Option<tokio::sync::oneshot::Sender<Result<String, String>>>,
}

/// Serves the control socket until the listener fails. One line in (`hold`), one line
/// out (`ok: …` or `refused: …`).
pub async fn serve(listener: UnixListener, requests: mpsc::Sender<WatchdogRequest>) {
    // A command is one short word: read no more than a line's worth.
    ipc::serve_lines(listener, 64, move |line| {
        let requests = requests.clone();
        async move {
            let answer = match WatchdogCmd::parse(&line) {
                None => Err(format!(
                    "unknown command {:?}; use hold, release, recover or relaunch",
                    line.trim()
                )),
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

async fn ask(requests: &mpsc::Sender<WatchdogRequest>, cmd: WatchdogCmd) -> Result<String, String> {
    let ended = || "the Souffleur role has ended".to_owned();
    let (tx, rx) = oneshot::channel();
    let request = WatchdogRequest {
        cmd,
        reply: Some(tx),
    };
    if requests.send(request).await.is_err() {
        return Err(ended());
    }
    rx.await.unwrap_or_else(|_| Err(ended()))
}
