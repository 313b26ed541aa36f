//! Connections: how long a client may take and how many it may hold.
//!
//! `axum::serve` reads request heads without a deadline and accepts every
//! connection, so a client sending a byte a second, or thousands of idle
//! sockets, held the service (and its file descriptors) for as long as it
//! liked. Here every connection is HTTP/1.1 through hyper with:
//!
//! * a **header read timeout** ([`Limits::header_timeout`]): a request's
//!   head (request line and headers) must be complete within it, counted
//!   from when the connection opens or its previous response was sent, so
//!   it is also the **idle keep-alive timeout**; past it the connection is
//!   closed;
//! * a **body read deadline** ([`Limits::body_timeout`], `Bounded`): a body
//!   must arrive whole within it after the head, else `408`;
//! * a **bound on request heads** ([`MAX_HEAD`], `431` beyond);
//! * a **cap on connections** ([`Limits::max_connections`]): beyond it a new
//!   connection is closed as soon as it is accepted (so its descriptor is
//!   freed at once), and the service keeps well within its descriptor
//!   limit;
//! * a **cap per client address** ([`Limits::max_per_client`]), enforced
//!   the same way: the total cap alone let one client (a runaway scheduler
//!   plugin, a script opening sockets in a loop, or anyone at all when the
//!   service listens on loopback without a token) hold every slot, and
//!   every other scheduler was then refused before it could authenticate,
//!   as HAProxy's `maxconn` per source and nginx's `limit_conn` per
//!   `$binary_remote_addr` guard against. Clients behind one NAT or proxy
//!   share an address: raise it (up to `--max-connections`) there;
//! * a **write deadline** ([`Limits::write_timeout`], [`WriteDeadline`]): a
//!   client that stops reading is cut off once a write has waited that
//!   long, so it cannot hold a connection and its answer forever;
//! * a **pause after an accept error** that is not one connection's
//!   (`EMFILE`, `ENFILE`, `ENOBUFS`): [`ACCEPT_PAUSE`], then accepting
//!   resumes; idle connections closing free descriptors, so it recovers.
//!
//! Graceful shutdown is axum's: stop accepting, let requests in flight
//! finish (hyper's `graceful_shutdown` closes idle connections at once),
//! wait for every connection to end.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::serve::Listener;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tracing::{debug, warn};

use super::{App, Problem, MAX_BODY};

/// Bounds on connections and requests (`vclos serve --header-timeout
/// --body-timeout --max-connections`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest a client may take to send a request's head, counted from
    /// when the connection opens or its previous response was sent (so also
    /// how long an idle keep-alive connection stays open).
    pub header_timeout: Duration,
    /// Longest a request's body may take to arrive after its head (`408`).
    pub body_timeout: Duration,
    /// Connections served at once; more are closed as soon as accepted.
    pub max_connections: usize,
    /// Connections served at once from one client address (IP); more from
    /// it are closed as soon as accepted.
    pub max_per_client: usize,
    /// Longest a write to a client may wait for it to read (its socket
    /// buffers full); past it the connection is closed (`WriteDeadline`).
    pub write_timeout: Duration,
}

/// [`Limits::header_timeout`]'s default: hyper's own, and longer than the
/// 15 s a client (ureq) keeps an idle connection for reuse.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// [`Limits::body_timeout`]'s default (a body is at most 16 KiB).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// [`Limits::max_connections`]'s default: half the usual soft descriptor
/// limit (1024), leaving room for device sessions, the state and TLS
/// handshakes.
pub const MAX_CONNECTIONS: usize = 512;

/// [`Limits::max_per_client`]'s default: a quarter of the connections, so
/// one client cannot take them all.
pub const MAX_PER_CLIENT: usize = MAX_CONNECTIONS / 4;

/// [`Limits::write_timeout`]'s default.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest request head (request line and headers) read, bytes: hyper
/// answers a larger one `431` (its default is about 400 KB a connection).
pub const MAX_HEAD: usize = 64 * 1024;

/// Pause after an accept error that is not one connection's (out of
/// descriptors, say) before accepting again.
pub const ACCEPT_PAUSE: Duration = Duration::from_millis(250);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
            max_per_client: MAX_PER_CLIENT,
            write_timeout: WRITE_TIMEOUT,
        }
    }
}

/// A plain TCP listener for [`serve`]: errors of one connection are
/// skipped, others (out of descriptors) pause accepting for
/// [`ACCEPT_PAUSE`].
#[derive(Debug)]
pub(super) struct Plain(pub(super) TcpListener);

impl Listener for Plain {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            match self.0.accept().await {
                Ok(c) => return c,
                Err(e) if per_connection(&e) => {}
                Err(e) => {
                    warn!(error = %e, pause = ?ACCEPT_PAUSE, "accepting a connection failed; pausing");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// Errors of one connection, not of the listener.
pub(super) fn per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Serve `app` on the connections of `listener` within `limits` until
/// `shutdown` completes; then stop accepting, let the requests in flight
/// finish and return once every connection has ended.
pub(super) async fn serve<L>(
    mut listener: L,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) where
    L: Listener<Addr = SocketAddr>,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let clients = Clients::default();
    // `stop` tells connections to finish; every connection holds a `done`
    // receiver, so `done_tx.closed()` is when the last one has ended.
    let (stop_tx, stop_rx) = watch::channel(false);
    let (done_tx, done_rx) = watch::channel(());
    let mut refused = Refused::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (io, peer) = tokio::select! {
            conn = listener.accept() => conn,
            () = &mut shutdown => break,
        };
        let Some(client) = clients.take(peer.ip(), limits.max_per_client.max(1)) else {
            // Closed at once: its descriptor comes back now.
            drop(io);
            refused.note(&peer, limits.max_per_client, "per-client connection cap");
            continue;
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            drop(io);
            refused.note(&peer, limits.max_connections, "connection cap");
            continue;
        };
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop_rx.clone();
        let done = done_rx.clone();
        tokio::spawn(async move {
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(MAX_HEAD);
            let io = WriteDeadline::new(io, limits.write_timeout);
            let conn = builder.serve_connection(TokioIo::new(io), service);
            let mut conn = std::pin::pin!(conn);
            let stopping = async move {
                let _ = stop.wait_for(|s| *s).await;
            };
            let served = tokio::select! {
                r = conn.as_mut() => r,
                () = stopping => {
                    // Idle: closed now; a request in flight finishes first.
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = served {
                debug!(?peer, error = %e, "connection ended");
            }
            drop((slot, client));
            drop(done);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(done_rx);
    done_tx.closed().await;
}

/// A connection whose writes may wait at most `limit` for the client to
/// read: a client that stops reading (its receive window, then our send
/// buffer, full) would otherwise hold its connection, its slot and the
/// answer being written for as long as it liked. A write or flush that is
/// still pending `limit` after it first had to wait fails with `TimedOut`,
/// and hyper then closes the connection. Any progress starts the wait
/// again; reads are untouched (the header and body deadlines bound them).
pub(super) struct WriteDeadline<T> {
    io: T,
    limit: Duration,
    waiting: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<T> WriteDeadline<T> {
    pub(super) fn new(io: T, limit: Duration) -> Self {
        WriteDeadline {
            io,
            limit,
            waiting: None,
        }
    }

    /// A write's or flush's outcome: done ends any wait; pending starts the
    /// wait, or fails it once it has lasted `limit`.
    fn bounded<R>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        polled: std::task::Poll<io::Result<R>>,
    ) -> std::task::Poll<io::Result<R>> {
        if polled.is_ready() {
            self.waiting = None;
            return polled;
        }
        let limit = self.limit;
        let wait = self
            .waiting
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match wait.as_mut().poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client has not read the answer within the write timeout",
            ))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        let polled = std::pin::Pin::new(&mut self.io).poll_write(cx, buf);
        self.bounded(cx, polled)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let polled = std::pin::Pin::new(&mut self.io).poll_flush(cx);
        self.bounded(cx, polled)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Connections open per client address ([`Limits::max_per_client`]).
#[derive(Debug, Default, Clone)]
struct Clients(Arc<std::sync::Mutex<HashMap<IpAddr, usize>>>);

impl Clients {
    /// One more connection from `ip`, unless it has `cap` already.
    fn take(&self, ip: IpAddr, cap: usize) -> Option<ClientSlot> {
        let mut open = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            clients: self.clone(),
            ip,
        })
    }
}

/// One connection counted against its client address until dropped.
#[derive(Debug)]
struct ClientSlot {
    clients: Clients,
    ip: IpAddr,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.clients.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Connections refused at a cap, logged at most once a second.
#[derive(Debug, Default)]
struct Refused {
    since: Option<Instant>,
    count: u64,
}

impl Refused {
    fn note(&mut self, peer: &impl Debug, cap: usize, which: &str) {
        self.count += 1;
        if self
            .since
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
        {
            warn!(
                ?peer,
                refused = self.count,
                cap,
                "{which} reached: closing new connections"
            );
            self.since = Some(Instant::now());
            self.count = 0;
        }
    }
}

/// A request body, read whole within [`Limits::body_timeout`] and at most
/// [`MAX_BODY`] bytes; otherwise a problem: `408` (the body took too long),
/// `413` (too large), `400` (not readable). `408` and `413` close the
/// connection, as the rest of the body is never read.
#[derive(Debug)]
pub(super) struct Bounded(pub(super) Bytes);

impl FromRequest<Arc<App>> for Bounded {
    type Rejection = Response;

    async fn from_request(req: Request, app: &Arc<App>) -> Result<Self, Response> {
        let read = Bytes::from_request(req, app);
        match tokio::time::timeout(app.body_timeout, read).await {
            Ok(Ok(body)) => Ok(Bounded(body)),
            Ok(Err(rejection)) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                let detail = format!("the request body is over the {MAX_BODY}-byte limit");
                Err(closing(Problem::new(StatusCode::PAYLOAD_TOO_LARGE, detail)))
            }
            Ok(Err(rejection)) => {
                let detail = format!("request body: {}", rejection.body_text());
                Err(Problem::new(StatusCode::BAD_REQUEST, detail).into_response())
            }
            Err(_) => {
                let detail = format!(
                    "the request body did not arrive whole within {} s",
                    app.body_timeout.as_secs_f64()
                );
                Err(closing(Problem::new(StatusCode::REQUEST_TIMEOUT, detail)))
            }
        }
    }
}

/// A problem answered with `Connection: close`.
fn closing(p: Problem) -> Response {
    let mut r = p.into_response();
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}
