//! The control sockets' plumbing, shared by the Souffleur role and the pipeline host:
//! bind a socket only its owner can use, refuse a peer of another uid, and the
//! one-line request/answer client the subcommands use.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use tokio::net::UnixListener;

use crate::core::paths::PathError;

/// Binds a control socket with owner-only permissions. The caller holds the service's
/// lock, so a socket file already there is a stale one from a crashed process.
pub fn bind_owner_only(path: &Path) -> Result<UnixListener, PathError> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(|source| PathError::Listen {
        path: path.to_path_buf(),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        PathError::SocketPrivate {
            path: path.to_path_buf(),
            source,
        }
    })?;
    Ok(listener)
}

/// Whether the process at the other end runs as the same user as this one.
pub fn peer_is_owner(stream: &tokio::net::UnixStream) -> bool {
    let me = rustix::process::getuid().as_raw();
    stream.peer_cred().is_ok_and(|c| c.uid() == me)
}

/// Serves a control socket until the listener fails: for each connection from this
/// user, reads one line (at most `limit` bytes), and writes back `answer(line)` and a
/// newline. Each connection is served on its own task.
pub async fn serve_lines<F, Fut>(listener: UnixListener, limit: u64, answer: F)
where
    F: Fn(String) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = String> + Send,
{
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    while let Ok((stream, _)) = listener.accept().await {
        if !peer_is_owner(&stream) {
            continue;
        }
        let answer = answer.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut line = String::new();
            let _ = tokio::io::BufReader::new(read.take(limit))
                .read_line(&mut line)
                .await;
            let text = answer(line).await;
            let _ = write.write_all(format!("{text}\n").as_bytes()).await;
        });
    }
}

/// Why a request got no answer.
#[derive(Debug)]
pub enum RequestError {
    /// Nothing listens at the path: the service is not running (or has no socket).
    NotListening,
    /// It listens but the exchange failed.
    Failed(String),
}

/// Sends one line and reads one line back, waiting at most `timeout` for the answer.
pub fn request_line(socket: &Path, line: &str, timeout: Duration) -> Result<String, RequestError> {
    // A request may carry a pipeline's steps: only to a server of this user, at a
    // socket file of this user (a folder left open to others could hold a planted one).
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let me = rustix::process::getuid().as_raw();
    let meta = std::fs::symlink_metadata(socket).map_err(|_| RequestError::NotListening)?;
    if !meta.file_type().is_socket() || meta.uid() != me {
        return Err(RequestError::Failed(format!(
            "{} is not a socket of yours (uid {me}); remove it, it was not made by maestro",
            socket.display()
        )));
    }
    let mut stream = UnixStream::connect(socket).map_err(|_| RequestError::NotListening)?;
    let server = nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials)
        .map(|c| c.uid());
    if server != Ok(me) {
        return Err(RequestError::Failed(format!(
            "the process listening on {} does not run as you (uid {me}); nothing was sent",
            socket.display()
        )));
    }
    let _ = stream.set_read_timeout(Some(timeout));
    stream
        .write_all(format!("{line}\n").as_bytes())
        .map_err(|e| RequestError::Failed(e.to_string()))?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(|e| RequestError::Failed(e.to_string()))?;
    if answer.is_empty() {
        return Err(RequestError::Failed(
            "the connection closed without an answer".into(),
        ));
    }
    Ok(answer)
}

#[cfg(test)]
mod client_tests {
    use super::*;

    #[test]
    fn a_socket_planted_by_another_user_is_not_spoken_to() {
        if rustix::process::getuid().as_raw() != 0 {
            eprintln!("skipped: needs root to give a socket to another user");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pipelines.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
        let err =
            request_line(&path, "{\"op\":\"list\"}", Duration::from_secs(1)).expect_err("refused");
        assert!(
            matches!(&err, RequestError::Failed(e) if e.contains("not a socket of yours")),
            "{err:?}"
        );
        // Nothing was sent: no connection is waiting.
        listener.set_nonblocking(true).expect("nonblocking");
        assert!(listener.accept().is_err());
    }
}
