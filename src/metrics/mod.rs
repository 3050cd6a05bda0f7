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
    /// What the hub judges by (the Conductor counts as down past its deadline).
    pub rules: crate::core::hub::Rules,
}

/// Why `/metrics` cannot be served where it was asked.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(
        "{text:?} is not an address to serve metrics on; write it like 127.0.0.1:9464 (or a port alone for the loopback address)."
    )]
    NotAnAddress { text: String },
    #[error("cannot serve metrics on {addr} ({source}); pick another --metrics address.")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Where to listen: `HOST:PORT`, or a port alone on the loopback address.
pub fn parse_listen(text: &str) -> Result<SocketAddr, MetricsError> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| MetricsError::NotAnAddress {
        text: text.to_owned(),
    })
}

/// Connections served at once: a scrape takes one; more than this many open at a time
/// is someone holding them, and they must not take the descriptors the sources need.
/// At the cap, a new connection takes the place of the oldest one that is not being
/// answered: one who holds idle connections cannot keep a real scrape out, however many
/// they open or renew.
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
) -> Result<SocketAddr, MetricsError> {
    let bind = |source| MetricsError::Bind { addr, source };
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(bind)?;
    let bound = listener.local_addr().map_err(bind)?;
    let feeds = Arc::new(feeds);
    let open = Arc::new(std::sync::Mutex::new(OpenConnections::default()));
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
            // Past the cap, the oldest idle connection is closed for this one; when
            // every one is being answered, this one is closed at once. Either way
            // the descriptors stay bounded and the sources keep theirs.
            let Some(conn) = open.lock().map_or(None, |mut o| o.admit()) else {
                drop(stream);
                continue;
            };
            let feeds = Arc::clone(&feeds);
            let open = Arc::clone(&open);
            tokio::spawn(async move {
                let answering = Arc::clone(&conn.answering);
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let feeds = Arc::clone(&feeds);
                        let answering = Arc::clone(&answering);
                        async move {
                            answering.store(true, std::sync::atomic::Ordering::SeqCst);
                            let reply = answer(&req, &feeds, clock);
                            Ok::<_, std::convert::Infallible>(reply)
                        }
                    });
                let io = hyper_util::rt::TokioIo::new(stream);
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .keep_alive(false)
                    .serve_connection(io, service);
                tokio::select! {
                    _ = tokio::time::timeout(CONNECTION_LIFETIME, served) => {}
                    () = conn.evicted.cancelled() => {}
                }
                if let Ok(mut o) = open.lock() {
                    o.forget(conn.id);
                }
            });
        }
    });
    Ok(bound)
}

/// One open connection: whether a whole request came (it is being answered, and then
/// closed), and the token that closes it early.
struct Connection {
    id: u64,
    answering: Arc<std::sync::atomic::AtomicBool>,
    evicted: CancellationToken,
}

/// The open connections, oldest first.
#[derive(Default)]
struct OpenConnections {
    next_id: u64,
    open: std::collections::VecDeque<Connection>,
}

impl OpenConnections {
    /// Room for a new connection: below the cap, or by closing the oldest one that has
    /// not sent a whole request. `None`: every connection is being answered.
    fn admit(&mut self) -> Option<Connection> {
        if self.open.len() >= MAX_CONNECTIONS {
            let idle = self
                .open
                .iter()
                .position(|c| !c.answering.load(std::sync::atomic::Ordering::SeqCst))?;
            if let Some(old) = self.open.remove(idle) {
                old.evicted.cancel();
            }
        }
        self.next_id += 1;
        let conn = Connection {
            id: self.next_id,
            answering: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            evicted: CancellationToken::new(),
        };
        self.open.push_back(Connection {
            id: conn.id,
            answering: Arc::clone(&conn.answering),
            evicted: conn.evicted.clone(),
        });
        Some(conn)
    }

    fn forget(&mut self, id: u64) {
        self.open.retain(|c| c.id != id);
    }
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
    fn at_the_cap_the_oldest_idle_connection_makes_room_never_the_newest() {
        let mut open = OpenConnections::default();
        let first: Vec<Connection> = (0..MAX_CONNECTIONS)
            .map(|_| open.admit().expect("room"))
            .collect();
        first[0]
            .answering
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let newest = open.admit().expect("an idle one makes room");
        assert!(!first[0].evicted.is_cancelled(), "being answered");
        assert!(first[1].evicted.is_cancelled(), "the oldest idle one goes");
        assert!(!newest.evicted.is_cancelled());
        assert_eq!(open.open.len(), MAX_CONNECTIONS);
        for c in &open.open {
            c.answering.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        assert!(
            open.admit().is_none(),
            "all being answered: the new one waits its turn"
        );
    }

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
