//! `maestro conductor hold | release | recover | relaunch`: asks the process that holds
//! the project's Souffleur role, over its control socket, and reports whether the
//! command was accepted. The role listens on a Unix socket next to its lock.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;
use tokio::sync::{mpsc, oneshot};

use crate::core::watchdog::role::{WatchdogCmd, WatchdogRequest};
use crate::project::{CommandError, confirm};

/// How long a client waits for the role's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves the control socket until the listener fails or the role's queue closes.
/// One line in (`hold`), one line out (`ok: …` or `refused: …`).
pub async fn serve(listener: UnixListener, requests: mpsc::Sender<WatchdogRequest>) {
    while let Ok((stream, _)) = listener.accept().await {
        let requests = requests.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut line = String::new();
            // A command is one short word: read no more than a line's worth.
            let _ = tokio::io::BufReader::new(read.take(64))
                .read_line(&mut line)
                .await;
            let answer = match WatchdogCmd::parse(&line) {
                None => Err(format!(
                    "unknown command {:?}; use hold, release, recover or relaunch",
                    line.trim()
                )),
                Some(cmd) => {
                    let (tx, rx) = oneshot::channel();
                    if requests
                        .send(WatchdogRequest {
                            cmd,
                            reply: Some(tx),
                        })
                        .await
                        .is_err()
                    {
                        Err("the Souffleur role has ended".into())
                    } else {
                        rx.await
                            .unwrap_or_else(|_| Err("the Souffleur role has ended".into()))
                    }
                }
            };
            let text = match answer {
                Ok(t) => format!("ok: {t}\n"),
                Err(t) => format!("refused: {t}\n"),
            };
            let _ = write.write_all(text.as_bytes()).await;
        });
    }
}

/// Binds the control socket (the caller holds the role's lock, so a file left there
/// is stale) with owner-only permissions.
pub fn bind(path: &Path) -> Result<UnixListener, String> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
    Ok(listener)
}

/// Sends one command and prints the answer.
pub fn run(socket: &Path, word: &str, yes: bool, as_json: bool) -> Result<(), CommandError> {
    if matches!(word, "recover" | "relaunch") {
        confirm(
            &format!(
                "{word} the Conductor now? Its window is killed and a new generation launched."
            ),
            yes,
        )?;
    }
    let mut stream = UnixStream::connect(socket).map_err(|_| {
        CommandError::Runtime(
            "no Souffleur role is running for this project. Start one with `maestro souffleur PID:<pid> SESSION_ID:<id>`.".into(),
        )
    })?;
    let _ = stream.set_read_timeout(Some(ANSWER_TIMEOUT));
    stream
        .write_all(format!("{word}\n").as_bytes())
        .map_err(|e| CommandError::Runtime(format!("cannot reach the Souffleur: {e}")))?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(|e| CommandError::Runtime(format!("no answer from the Souffleur: {e}")))?;
    let (accepted, text) = match line.trim().split_once(": ") {
        Some(("ok", t)) => (true, t.to_owned()),
        Some((_, t)) => (false, t.to_owned()),
        None => (false, "no answer from the Souffleur".to_owned()),
    };
    if as_json {
        println!(
            "{}",
            json!({"ok": accepted, "command": word, "detail": text})
        );
    } else {
        println!("{}: {text}", if accepted { "accepted" } else { "refused" });
    }
    if accepted {
        Ok(())
    } else {
        Err(CommandError::Runtime(text))
    }
}
