//! The accept loop: every connection gets deadlines, and only so many get the full service.
//!
//! `axum::serve` keeps a connection for as long as the client likes, so slow or idle clients
//! could hold every file descriptor. Here:
//!
//! - a new connection must deliver its first request's headers within
//!   `gateway.header_timeout_seconds`, or it is closed;
//! - after a response, the next request's headers must arrive within
//!   `gateway.idle_timeout_seconds` (hyper's header-read timer, which starts when the
//!   connection turns idle), so an idle keep-alive connection closes then;
//! - a request body gets `gateway.body_timeout_seconds` in all ([`super::body_deadline`]);
//! - at most `gateway.max_connections` connections get the full service. Over the cap, a
//!   connection is still accepted, from a spare pool kept for this, and served only
//!   `/healthz`, `/readyz` and the platforms' webhooks (`/hooks/...`; everything else: 503
//!   with `Retry-After`), one request with a short header deadline, then closed: however many
//!   event streams and idle clients fill the cap, a health check keeps answering and a
//!   platform's webhook (and its retry) is taken. An idle client in the spare pool holds its
//!   place for that short deadline only. When the spare pool is full too, a new connection is
//!   sent a 503 with `Retry-After` without its request being read, then closed.
//!
//! HTTP/1.1 only: the clients are platforms' webhooks, reverse proxies, scripts and MCP
//! clients, and no route upgrades a connection, so neither HTTP/2 (which bypasses the header
//! deadline) nor upgrades are offered.
//!
//! Every connection, served fully or from the spare pool, counts in [`OpenConnections`] for
//! as long as its task runs (`baton_http_connections_open` in `/metrics`).
//!
//! A route may close its own connection at once ([`CloseConnection`], in each request's
//! extensions): `/api/events` does, for a reader that stopped reading, whose connection would
//! otherwise stay open for as long as its unread bytes wait in the socket.
//!
//! Stopping: the loop stops accepting when `stop` fires; each connection then finishes the
//! request in progress and closes. Connections run in a [`JoinSet`] owned by the loop, so
//! aborting the server task (the gateway does, after its drain period) ends them all.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower_service::Service;

/// Connections over the cap that may still ask `/healthz`, `/readyz` or a webhook at the same
/// time.
pub const SPARE_CONNECTIONS: usize = 32;
/// What a connection gets when the spare pool is full too: written at once, without reading
/// the request (a new socket's send buffer always takes it), then the connection is closed.
const FULL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\n\
    Content-Type: text/plain; charset=utf-8\r\nContent-Length: 62\r\nConnection: close\r\n\r\n\
    the gateway is at its connection cap (gateway.max_connections)";
/// How long a connection over the cap has to send its request's headers.
const SPARE_HEADER_DEADLINE: Duration = Duration::from_secs(2);
/// After a failed `accept` (out of file descriptors, say), a pause before the next one, so the
/// loop does not spin while nothing can be accepted.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// At most one warning per this period about the cap being reached.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The connection deadlines and cap, from `[gateway]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// For the first request's headers.
    pub(super) header: Duration,
    /// For the next request's headers on a kept-alive connection.
    pub(super) idle: Duration,
    /// Connections with the full service.
    pub(super) max_connections: usize,
}

/// How many connections are open right now, for `/metrics`.
#[derive(Debug, Default)]
pub(super) struct OpenConnections(AtomicUsize);

impl OpenConnections {
    /// The count now.
    pub(super) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn count(self: &Arc<Self>) -> Counted {
        self.0.fetch_add(1, Ordering::Relaxed);
        Counted(Arc::clone(self))
    }
}

/// One open connection, counted until dropped.
struct Counted(Arc<OpenConnections>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Closes the connection a request came on, at once, whatever it was writing.
#[derive(Debug, Clone)]
pub(super) struct CloseConnection(CancellationToken);

impl CloseConnection {
    /// Close it.
    pub(super) fn close(&self) {
        self.0.cancel();
    }
}

/// What a connection is served.
struct Slot {
    app: Router,
    header_deadline: Duration,
    keep_alive: bool,
    _permit: OwnedSemaphorePermit,
    _counted: Counted,
}

/// Accept until `stop` fires; `app` for connections within the cap, `spare` over it. Every
/// connection counts in `open` while it lasts.
pub(super) async fn run(
    listener: TcpListener,
    app: Router,
    spare: Router,
    limits: Limits,
    open: Arc<OpenConnections>,
    stop: CancellationToken,
) {
    let full = Arc::new(Semaphore::new(limits.max_connections));
    let spares = Arc::new(Semaphore::new(SPARE_CONNECTIONS));
    let mut connections = JoinSet::new();
    let mut warned: Option<Instant> = None;
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    tracing::warn!(%err, "could not accept a connection; retrying shortly");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let slot = if let Ok(permit) = Arc::clone(&full).try_acquire_owned() {
            Slot {
                app: app.clone(),
                header_deadline: limits.header,
                keep_alive: true,
                _permit: permit,
                _counted: open.count(),
            }
        } else {
            if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                warned = Some(Instant::now());
                tracing::warn!(
                    max = limits.max_connections,
                    "connection cap reached (gateway.max_connections): new connections get \
                     only /healthz, /readyz and webhooks until some close"
                );
            }
            match Arc::clone(&spares).try_acquire_owned() {
                Ok(permit) => Slot {
                    app: spare.clone(),
                    header_deadline: SPARE_HEADER_DEADLINE.min(limits.header),
                    keep_alive: false,
                    _permit: permit,
                    _counted: open.count(),
                },
                Err(_) => {
                    // A client whose request is already in flight may see a reset instead.
                    let _ = stream.try_write(FULL);
                    continue; // dropping the stream closes it
                }
            }
        };
        connections.spawn(serve(stream, peer, slot, limits.idle, stop.clone()));
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

/// Everything but the health checks and webhooks, over the cap.
pub(super) async fn busy() -> Response {
    let message = "the gateway is serving as many connections as it may \
                   (gateway.max_connections); only /healthz, /readyz and webhooks are answered \
                   until some close; retry shortly";
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::RETRY_AFTER, "5")],
        message,
    )
        .into_response()
}

/// One connection, until the client closes it, a deadline passes, or `stop` lets its request
/// in progress finish.
async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    slot: Slot,
    idle: Duration,
    stop: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let first = Arc::new(Notify::new());
    let close = CancellationToken::new();
    let service = {
        let first = Arc::clone(&first);
        let close = CloseConnection(close.clone());
        let app = slot.app;
        hyper::service::service_fn(move |mut request: Request<Incoming>| {
            first.notify_one();
            request.extensions_mut().insert(ConnectInfo(peer));
            request.extensions_mut().insert(close.clone());
            let mut app = app.clone();
            async move { Ok::<_, Infallible>(app.call(request).await.unwrap_or_else(|e| match e {})) }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(idle)
        .keep_alive(slot.keep_alive);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    let mut connection = std::pin::pin!(connection);
    let first_deadline = tokio::time::sleep(slot.header_deadline);
    let mut first_deadline = std::pin::pin!(first_deadline);
    let mut waiting_first = true;
    let mut stopping = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(%peer, %err, "connection ended with an error");
                }
                return;
            }
            () = first.notified(), if waiting_first => waiting_first = false,
            () = &mut first_deadline, if waiting_first => {
                tracing::debug!(%peer, "no request headers in time; closing the connection");
                return;
            }
            () = close.cancelled() => {
                tracing::debug!(%peer, "connection closed by its route");
                return;
            }
            () = stop.cancelled(), if !stopping => {
                connection.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    }
}
