//! Prometheus metrics: `--metrics ADDR` (or `[metrics] listen`) serves `GET /metrics`
//! from the latest published snapshot, written with `prometheus-client` (`OpenMetrics`
//! text; Prometheus scrapes it either way). A scrape never waits on the hub: it reads
//! the snapshot the hub last published. Read-only; labels are bounded by what exists
//! (projects, tasks, anomaly kinds, message types, providers, pipelines): no log text,
//! no message id ever becomes a label.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::core::clock::Clock;
use crate::core::snapshot::Snapshot;

mod render;
pub use render::render;

/// One project's feed: its name (the `project` label) and its snapshots.
#[derive(Clone)]
pub struct ProjectFeed {
    pub name: String,
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// Heartbeat age past which the Conductor counts as down.
    pub conductor_stale_after: Duration,
}

/// Where to listen: `HOST:PORT`, or a port alone on the loopback address.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| {
        format!("{text:?} is not an address to serve metrics on; write it like 127.0.0.1:9464 (or a port alone for the loopback address).")
    })
}

/// Connections served at once: a scrape takes one; more than this many open at a time
/// is someone holding them, and they must not take the descriptors the sources need.
pub const MAX_CONNECTIONS: usize = 32;
/// A request whose headers have not all come after this is dropped.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest one connection may stay open.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// Binds `addr` and serves `/metrics` until `cancel`. Binding errors come back at once.
pub async fn serve(
    addr: SocketAddr,
    feeds: Vec<ProjectFeed>,
    clock: Clock,
    cancel: CancellationToken,
) -> Result<SocketAddr, String> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        format!("cannot serve metrics on {addr} ({e}); pick another --metrics address.")
    })?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    let feeds = Arc::new(feeds);
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = cancel.cancelled() => return,
                a = listener.accept() => a,
            };
            let Ok((stream, _)) = accepted else {
                // Out of descriptors (or another passing failure): wait instead of
                // spinning on a queue that cannot be emptied now.
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                }
            };
            // Past the cap, a connection is closed at once: its descriptor is given
            // back and the sources keep theirs.
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let feeds = Arc::clone(&feeds);
            tokio::spawn(async move {
                let _slot = slot;
                let service = hyper::service::service_fn(
                    move |req: Request<hyper::body::Incoming>| {
                        let feeds = Arc::clone(&feeds);
                        async move { Ok::<_, std::convert::Infallible>(answer(&req, &feeds, clock)) }
                    },
                );
                let io = hyper_util::rt::TokioIo::new(stream);
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(io, service);
                let _ = tokio::time::timeout(CONNECTION_LIFETIME, served).await;
            });
        }
    });
    Ok(bound)
}

fn answer(
    req: &Request<hyper::body::Incoming>,
    feeds: &[ProjectFeed],
    clock: Clock,
) -> Response<Full<Bytes>> {
    let reply = |status, kind: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = hyper::header::HeaderValue::from_str(kind) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    if req.method() != hyper::Method::GET || req.uri().path() != "/metrics" {
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "maestro serves GET /metrics only\n".into(),
        );
    }
    let openmetrics = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let kind = if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    reply(StatusCode::OK, kind, render(feeds, clock))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_alone_listens_on_loopback() {
        assert_eq!(
            parse_listen("9464").expect("port").to_string(),
            "127.0.0.1:9464"
        );
        assert_eq!(
            parse_listen("0.0.0.0:1").expect("addr").to_string(),
            "0.0.0.0:1"
        );
        assert!(parse_listen("nowhere").is_err());
    }
}
