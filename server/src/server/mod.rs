//! `vclos serve`: the control plane as a long-running HTTP service for
//! cluster schedulers (issue 17). This module is the first part of it: the
//! job API, authentication, problem responses, bounds and shutdown.
//!
//! # Design
//! * **One owner of the state.** The process takes the store's writer lock
//!   (the state directory's `flock`) when it starts (settling any journal
//!   an interrupted run left, as every writer does) and holds it until it
//!   stops, so no CLI writer can interleave with it. With `--store etcd`
//!   the lock (a key on a kept-alive lease, `crate::store::etcd`) is
//!   campaigned for instead and is the leadership among several instances
//!   (`leader`, docs/ha.md): followers answer writes 503 with the
//!   leader's URL and serve reads from the store. Every change goes through one async
//!   read-write lock around the [`Fabric`], held to write: admissions and
//!   releases are applied one at a time, each one device transaction with
//!   the journal discipline of `crate::jobs` — the service adds no
//!   concurrency the state does not already handle. Reads share the lock,
//!   so a read never sees a state being written (it waits for at most the
//!   transaction in flight), and a read that talks to devices (`GET
//!   /v1/status`) holds up no other read: `GET /v1/jobs` never waits on a
//!   device unless a change is in flight or queued.
//! * **Bounded queue.** At most [`Config::max_waiting`] changes wait for
//!   the mutex; beyond that a request is answered `503` with `Retry-After`
//!   at once (a scheduler retries; nothing queues without bound).
//! * **Idempotent by job id** (as a scheduler's retries need): submitting a
//!   job that is held with the same request returns the held decision
//!   (`200`, `"existing": true`); with a different GPU count, `409`.
//!   Releasing a job that is not held is `404`, which the Slurm epilog
//!   treats as done.
//! * **Authentication.** Every `/v1` request carries `Authorization: Bearer
//!   <token>`; the token comes from `--token-file` (never the topology, never
//!   logged; compared in constant time, `subtle`). Without a token file the
//!   service refuses to listen on anything but loopback, and says so.
//!   `/healthz` and `/readyz` answer without a token and reveal nothing.
//! * **Errors** are RFC 9457 problem details (`application/problem+json`:
//!   `type`, `title`, `status`, `detail`, and `field` naming the request
//!   field at fault), never a panic or an HTML page.
//! * **Bounds.** Bodies over [`MAX_BODY`] bytes are refused (`413`); unknown
//!   request fields and anything after the JSON value are refused (`400`,
//!   named); every request that waits or runs longer than
//!   [`Config::request_timeout`] is answered `503`, reads included (the
//!   transaction a change started, if any, still completes or rolls back:
//!   the future holding the fabric is never dropped mid-transaction, see
//!   `App::change`; a read is simply dropped). Connections ([`Limits`],
//!   `conn`): a request head must arrive within the header timeout (also
//!   the idle keep-alive timeout), a body within the body timeout (`408`),
//!   and at most [`Limits::max_connections`] are served at once,
//!   [`Limits::max_per_client`] of them from one client address.
//! * **Shutdown** (SIGTERM, Ctrl-C, or the caller's future): the listener
//!   stops accepting, requests in flight finish — a transaction completes or
//!   rolls back — and the lock is released when the fabric is dropped.
//!
//! * **Observability**: `GET /v1/events` (server-sent events, `events`),
//!   `GET /metrics` (Prometheus text, `metrics`); `POST /v1/plan` (a dry
//!   run with per-device diffs) and `GET /v1/status` (jobs, each device's
//!   reachability and drift, the pending journal) answer what the CLI's
//!   `plan` and `status` do.
//!
//! * **`/openapi.json`**: the OpenAPI 3.1 document, generated from the
//!   handlers' attributes (`openapi`).
//!
//! * **A scheduler's allocation**: `servers` (or `gpus_on`, GPUs by
//!   index per server) in `POST /v1/jobs` (and in `POST /v1/plan`'s
//!   `submit`) names what a scheduler already chose; the policy isolates exactly those or the answer is 409 with
//!   the reason and `suggested_servers`, a set that has a slice now
//!   (`crate::placement::given`). A retry naming other servers is a 409
//!   on `servers`.
//!
//! * **TLS** (`--tls-cert`, `--tls-key`; [`Tls`]): rustls over the same
//!   router and the same graceful shutdown. Without it the bearer token
//!   travels in clear: use it whenever the service listens beyond loopback.
//!   Without a token file, TLS or not, the service listens on loopback only.
//!

mod conn;
mod events;
mod leader;
mod metrics;
mod openapi;
mod problem;
mod tls;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::rejection::PathRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use subtle::ConstantTimeEq;
use thiserror::Error;
use tokio::sync::{RwLock, RwLockReadGuard, Semaphore};
use tracing::{info, info_span, Instrument};

pub use conn::{
    Limits, ACCEPT_PAUSE, BODY_TIMEOUT, HEADER_TIMEOUT, MAX_CONNECTIONS, MAX_HEAD, MAX_PER_CLIENT,
    WRITE_TIMEOUT,
};
pub use problem::Problem;
use problem::ProblemDoc;
pub use tls::{Tls, TlsListener, HANDSHAKE_TIMEOUT, MAX_HANDSHAKES};

use crate::controller::NoProgress;
use crate::decision::Decision;
use crate::jobs::{Fabric, JobsError};
use crate::names::JobId;
use crate::placement::given::{self, Named};
use crate::placement::{PlacementError, Policy};
use crate::topology::Topology;

/// Largest request body accepted, bytes.
pub const MAX_BODY: usize = 16 * 1024;

/// A bearer token. Its `Debug` never shows it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// The token of a token file: its content without surrounding
    /// whitespace; at least 16 characters, printable ASCII.
    pub fn from_file_text(text: &str) -> Result<Token, ServeError> {
        let t = text.trim();
        if t.len() < 16 || !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ServeError::Token(
                "the token must be at least 16 printable ASCII characters without spaces".into(),
            ));
        }
        Ok(Token(t.to_string()))
    }

    fn matches(&self, presented: &str) -> bool {
        self.0.as_bytes().ct_eq(presented.as_bytes()).into()
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// How the service runs.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// `None`: no authentication, loopback only.
    pub token: Option<Token>,
    /// Longest a request may wait and run.
    pub request_timeout: Duration,
    /// Changes that may wait for the one in flight.
    pub max_waiting: usize,
    /// `None`: plain HTTP.
    pub tls: Option<Tls>,
    /// Leader election (`leader`): start as a follower and campaign for
    /// the store's writer lock, advertising `Some(url)` (or, with
    /// `Some(None)`, the listening address) to followers. `None`: the fabric
    /// already holds the lock for the service's life (the state directory).
    pub elect: Option<Option<String>>,
}

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("token file: {0}")]
    Token(String),
    #[error("refusing to listen on {0} without --token-file: the API would be open to the network; give a token file or listen on loopback (127.0.0.1 / ::1)")]
    OpenListener(SocketAddr),
    #[error("{what} {}: {message}", file.display())]
    Tls {
        /// "TLS certificate file" or "TLS key file".
        what: &'static str,
        file: std::path::PathBuf,
        message: String,
    },
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// The service's shared state.
#[derive(Debug)]
struct App {
    /// Changes (and leadership) take it to write; reads share it, so a read
    /// that talks to devices (`GET /v1/status`) holds up no other read.
    fabric: RwLock<Fabric>,
    token: Option<Token>,
    waiting: Arc<Semaphore>,
    timeout: Duration,
    /// [`Limits::body_timeout`].
    body_timeout: Duration,
    /// The jobs as of the last change ([`Listing`]), kept by a single
    /// instance holding the store's lock (no one else changes its state):
    /// renewed by every change before it answers (`Changing`), so
    /// `GET /v1/jobs` and `GET /v1/jobs/{id}` never wait for a change in
    /// flight (its answer has not been sent, so a read is ordered before
    /// it). `None`: not kept (leader election, or a fabric without the
    /// lock), or not renewed (the reads then read the fabric).
    listed: Option<std::sync::Mutex<Option<Arc<Listing>>>>,
    events: events::Events,
    metrics: metrics::Metrics,
    /// Whether writes wait for leadership ([`Config::elect`]).
    elect: bool,
    /// Whether this instance leads right now (always, without election).
    leader: std::sync::atomic::AtomicBool,
    /// Told by a change that found this leader's right to write gone (or
    /// unverifiable): the campaign steps down and starts over, settling the
    /// journal when it leads again.
    resign: tokio::sync::Notify,
}

/// The router of the API over `fabric` (which should hold the state lock),
/// with bodies bounded by [`Limits::default`].
pub fn router(fabric: Fabric, config: &Config) -> Router {
    routes(app(fabric, config, &Limits::default()))
}

fn app(fabric: Fabric, config: &Config, limits: &Limits) -> Arc<App> {
    let metrics = metrics::Metrics::default();
    metrics.leader.set(i64::from(config.elect.is_none()));
    let listed = (config.elect.is_none() && fabric.is_locked())
        .then(|| std::sync::Mutex::new(listing(&fabric)));
    Arc::new(App {
        fabric: RwLock::new(fabric),
        token: config.token.clone(),
        waiting: Arc::new(Semaphore::new(config.max_waiting.max(1))),
        timeout: config.request_timeout,
        body_timeout: limits.body_timeout,
        listed,
        events: events::Events::default(),
        metrics,
        elect: config.elect.is_some(),
        leader: std::sync::atomic::AtomicBool::new(config.elect.is_none()),
        resign: tokio::sync::Notify::new(),
    })
}

fn routes(app: Arc<App>) -> Router {
    let v1 = Router::new()
        .route("/v1/jobs", get(list_jobs).post(submit))
        .route("/v1/jobs/{id}", get(get_job).delete(release))
        .route("/v1/plan", axum::routing::post(plan))
        .route("/v1/status", get(status))
        .route("/v1/events", get(events))
        .route("/v1/leader", get(leader_info))
        .route("/metrics", get(metrics))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            authenticate,
        ));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/leaderz", get(leaderz))
        .route("/openapi.json", get(|| async { Json(openapi::document()) }))
        .merge(v1)
        .fallback(|| async { Problem::new(StatusCode::NOT_FOUND, "no such endpoint") })
        // After every route: it is set on the routes there are.
        .method_not_allowed_fallback(|| async {
            Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "this endpoint does not take this method (`Allow` lists those it takes)",
            )
        })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

/// Serve until `shutdown` completes (or SIGTERM / Ctrl-C), then finish the
/// requests in flight. Refuses a non-loopback listener without a token.
/// Connections are bounded by [`Limits::default`].
pub async fn serve(
    fabric: Fabric,
    config: Config,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    serve_limited(fabric, config, Limits::default(), shutdown).await
}

/// [`serve`] with connections bounded by `limits`.
pub async fn serve_limited(
    fabric: Fabric,
    config: Config,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    if config.token.is_none() && !config.listen.ip().is_loopback() {
        return Err(ServeError::OpenListener(config.listen));
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: config.listen,
            source,
        })?;
    serve_on(listener, fabric, config, limits, shutdown).await
}

/// [`serve_limited`] on a listener already bound (`config.listen` is not
/// used): a caller (a test) learns the port before serving.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    fabric: Fabric,
    config: Config,
    limits: Limits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let addr = listener.local_addr().map_err(|source| ServeError::Listen {
        addr: config.listen,
        source,
    })?;
    if config.token.is_none() && !addr.ip().is_loopback() {
        return Err(ServeError::OpenListener(addr));
    }
    if config.token.is_none() {
        eprintln!("no --token-file: requests are not authenticated; listening on loopback only");
    }
    let state = app(fabric, &config, &limits);
    let campaign = config.elect.as_ref().map(|url| {
        let scheme = if config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let url = url.clone().unwrap_or_else(|| format!("{scheme}://{addr}"));
        tokio::spawn(leader::campaign(Arc::clone(&state), url))
    });
    let campaign = campaign.map(AbortOnDrop);
    let closing = Arc::clone(&state);
    let releasing = Arc::clone(&state);
    let app = routes(state);
    let shutdown = async move {
        tokio::select! {
            () = shutdown => {}
            () = signal() => {}
        }
        info!("shutting down: finishing requests in flight");
        closing.events.close();
    };
    let listen_err = |source| ServeError::Listen { addr, source };
    let served = match &config.tls {
        None => {
            // The one line a supervisor (or a test) waits for.
            println!("vclos serve: listening on http://{addr}");
            info!(%addr, scheme = "http", "listening");
            conn::serve(conn::Plain(listener), app, limits, shutdown).await;
            Ok(())
        }
        Some(tls) => {
            let listener = TlsListener::new(listener, tls).map_err(listen_err)?;
            println!("vclos serve: listening on https://{addr}");
            let cert = tls.cert_file().display();
            info!(%addr, scheme = "https", %cert, "listening");
            conn::serve(listener, app, limits, shutdown).await;
            Ok(())
        }
    };
    // Stopped: no more campaigning, and a leader hands over at once (its
    // lease revoked) rather than after the TTL.
    drop(campaign);
    releasing.fabric.write().await.release_lock().await;
    served
}

/// Ends the campaign with the service (a lock it holds goes with the
/// fabric).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = ctrl_c => {}
            () = term => {}
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}

async fn authenticate(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(token) = &app.token {
        let presented = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token);
        if !presented.is_some_and(|p| token.matches(p)) {
            let mut r = Problem::new(
                StatusCode::UNAUTHORIZED,
                "a valid `Authorization: Bearer <token>` header is required",
            )
            .into_response();
            r.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
            return r;
        }
    }
    next.run(request).await
}

/// The token of an `Authorization` value `Bearer <token>`: the scheme in
/// any case (RFC 9110 Section 11.1), then one or more spaces (11.4).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

#[utoipa::path(get, path = "/readyz", tag = "health", security(()),
    responses((status = 200, description = "Ready: the state is settled"),
              (status = 503, description = "A journal of an interrupted operation is pending", body = ProblemDoc, content_type = "application/problem+json")))]
async fn ready(State(app): State<Arc<App>>) -> Response {
    app.within("readiness", async {
        match app.fabric.try_read() {
            // Busy with a transaction: alive and serving, ready.
            Err(_) => (StatusCode::OK, "ready\n").into_response(),
            // A follower serves reads; a journal it sees is the leader's.
            Ok(f) if app.follows(&f) => (StatusCode::OK, "ready\n").into_response(),
            Ok(f) => match f.pending_journal().await {
                Ok(None) => (StatusCode::OK, "ready\n").into_response(),
                Ok(Some(_)) => Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    if app.elect {
                        "an interrupted operation's journal is pending: the next leader settles it"
                    } else {
                        "an interrupted operation's journal is pending: the next change (or a restart) settles it from the devices first"
                    },
                )
                .into_response(),
                Err(e) => {
                    Problem::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response()
                }
            },
        }
    })
    .await
}

/// `POST /v1/jobs`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct SubmitBody {
    id: String,
    /// GPUs; optional when `servers` or `gpus_on` is given (then all of
    /// those).
    #[serde(default)]
    gpus: Option<u32>,
    /// The servers a scheduler already chose (topology names): vclos
    /// isolates exactly these or refuses with `suggested_servers`.
    #[serde(default)]
    servers: Option<Vec<String>>,
    /// The GPUs a scheduler already chose, by server name (GPU indices,
    /// 0-based); not with `servers`.
    #[serde(default)]
    gpus_on: Option<BTreeMap<String, Vec<u16>>>,
    /// `vclos`, `ocs-vclos` or `titan` (Titan's choice of GPUs, partly used
    /// servers first, isolated by the fabric's own policy; not with
    /// `servers` or `gpus_on`); the fabric's own policy when absent.
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

impl SubmitBody {
    fn named(&self) -> Result<Option<Named>, Problem> {
        named(self.gpus, &self.servers, &self.gpus_on, "")
    }
}

/// A submission's `policy`, parsed (`field`: where it is in the body).
fn policy(policy: &Option<String>, field: &str) -> Result<Option<Policy>, Problem> {
    policy
        .as_deref()
        .map(|p| {
            p.parse::<Policy>().map_err(|e| {
                Problem::new(StatusCode::BAD_REQUEST, format!("request body: {e}")).field(field)
            })
        })
        .transpose()
}

/// What a submission names (`servers` or `gpus_on`), checked: not both,
/// and `gpus` is required without either (`prefix`: where the fields are
/// in the body, e.g. `submit.`).
fn named(
    gpus: Option<u32>,
    servers: &Option<Vec<String>>,
    gpus_on: &Option<BTreeMap<String, Vec<u16>>>,
    prefix: &str,
) -> Result<Option<Named>, Problem> {
    let bad = |why: &str, field: &str| {
        Err(
            Problem::new(StatusCode::BAD_REQUEST, format!("request body: {why}"))
                .field(&format!("{prefix}{field}")),
        )
    };
    match (servers, gpus_on) {
        (Some(_), Some(_)) => bad("give `servers` or `gpus_on`, not both", "gpus_on"),
        (Some(s), None) => Ok(Some(Named::Servers(s.clone()))),
        (None, Some(g)) => Ok(Some(Named::Gpus(g.clone()))),
        (None, None) if gpus.is_none() => bad(
            "`gpus` is required unless `servers` or `gpus_on` is given",
            "gpus",
        ),
        (None, None) => Ok(None),
    }
}

/// Place a job (on what the scheduler named, when it did) and plan its
/// admission.
fn plan_admission(
    f: &Fabric,
    id: &JobId,
    gpus: Option<u32>,
    named: Option<&Named>,
    policy: Option<Policy>,
) -> Result<crate::plan::Plan, JobsError> {
    let policy = policy.unwrap_or(f.policy());
    match named {
        Some(named) => f.plan_submit_on_by(id, gpus, named, policy),
        None => f.plan_submit_by(id, gpus.unwrap_or_default(), policy),
    }
}

/// A held job's answer.
#[derive(Debug, Serialize)]
struct JobAnswer<'a> {
    job: &'a JobId,
    /// Held before this request (an idempotent retry).
    existing: bool,
    decision: &'a Decision,
}

#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    responses((status = 200, description = "Every held decision (docs/decisions.md)", body = Vec<Object>),
              (status = 401, description = "No or wrong bearer token", body = ProblemDoc, content_type = "application/problem+json")))]
async fn list_jobs(State(app): State<Arc<App>>) -> Response {
    app.within("listing the jobs", list_jobs_now(&app)).await
}

async fn list_jobs_now(app: &App) -> Response {
    // As of the last change, without waiting for one in flight (its answer
    // has not been sent, so the listing is ordered before it).
    // Otherwise serialised from the state into one buffer, nothing cloned;
    // the lock is shared and held for the serialisation only (10,000 jobs:
    // docs/performance.md).
    let body = match app.kept() {
        Some(l) => Ok(l.body.clone()),
        None => {
            let f = match app.read().await {
                Ok(f) => f,
                Err(e) => return jobs_problem(&e).into_response(),
            };
            serde_json::to_vec(&f.state().decisions()).map(axum::body::Bytes::from)
        }
    };
    match body {
        Ok(body) => json(body),
        Err(e) => Problem::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// A JSON document already serialised.
fn json(body: axum::body::Bytes) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, description = "The job's decision", body = Object),
              (status = 404, description = "Not held", body = ProblemDoc, content_type = "application/problem+json"), (status = 422, description = "Invalid job id", body = ProblemDoc, content_type = "application/problem+json")))]
async fn get_job(State(app): State<Arc<App>>, id: Result<Path<String>, PathRejection>) -> Response {
    let id = match path_id(id) {
        Ok(id) => id,
        Err(p) => return p.into_response(),
    };
    if let Some(l) = app.kept() {
        return match l.at.get(&id) {
            Some(at) => json(l.body.slice(at.clone())),
            None => not_held(&id).into_response(),
        };
    }
    app.within("reading the job", async {
        let f = match app.read().await {
            Ok(f) => f,
            Err(e) => return jobs_problem(&e).into_response(),
        };
        match f.state().decision(&id) {
            Some(d) => Json(d).into_response(),
            None => not_held(&id).into_response(),
        }
    })
    .await
}

/// The job id of a path (`/v1/jobs/{id}`), or a problem naming `id` (one
/// that is not UTF-8 once decoded, or not a valid job id).
fn path_id(id: Result<Path<String>, PathRejection>) -> Result<JobId, Problem> {
    match id {
        Ok(Path(id)) => job_id(&id),
        Err(e) => Err(Problem::new(StatusCode::BAD_REQUEST, e.body_text()).field("id")),
    }
}

fn job_id(id: &str) -> Result<JobId, Problem> {
    JobId::new(id)
        .map_err(|e| Problem::new(StatusCode::UNPROCESSABLE_ENTITY, e.to_string()).field("id"))
}

fn not_held(id: &JobId) -> Problem {
    Problem::new(StatusCode::NOT_FOUND, format!("job `{id}` is not held"))
}

#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", request_body = SubmitBody,
    responses((status = 201, description = "Committed on every device: job, action, committed, decision, devices (the transaction report), timings", body = Object),
              (status = 200, description = "Already held with this request (`existing`: true), or a dry run (`plan`)", body = Object),
              (status = 400, description = "Bad body (`field` names it)", body = ProblemDoc, content_type = "application/problem+json"), (status = 409, description = "Held with another size, or no slice free now", body = ProblemDoc, content_type = "application/problem+json"), (status = 413, description = "Body over 16 KiB", body = ProblemDoc, content_type = "application/problem+json"), (status = 422, description = "Invalid id, size or policy (a simulation baseline; titan with `servers` or `gpus_on`)", body = ProblemDoc, content_type = "application/problem+json"), (status = 502, description = "The devices refused; every device as it was (`devices`: the report)", body = ProblemDoc, content_type = "application/problem+json"), (status = 503, description = "Busy (Retry-After) or a pending journal", body = ProblemDoc, content_type = "application/problem+json")))]
async fn submit(State(app): State<Arc<App>>, conn::Bounded(body): conn::Bounded) -> Response {
    let parsed = problem::parse_body(&body).and_then(|r: SubmitBody| {
        let n = r.named()?;
        let p = policy(&r.policy, "policy")?;
        Ok((r, n, p))
    });
    let (req, named, policy) = match parsed {
        Ok(r) => r,
        Err(p) => return p.into_response(),
    };
    let id = match job_id(&req.id) {
        Ok(id) => id,
        Err(p) => return p.into_response(),
    };
    let span = info_span!("api.submit", job = %id, gpus = ?req.gpus, named = named.is_some(), policy = ?policy);
    let app2 = Arc::clone(&app);
    app.change(
        async move {
            let mut f = app2.changing().await;
            if !req.dry_run && app2.follows(&f) {
                return not_leader(&f).await;
            }
            if let Err(e) = f.refresh().await {
                return jobs_problem(&e).into_response();
            }
            if !req.dry_run {
                if let Err(answer) = f.settle_first().await {
                    return answer;
                }
            }
            if let Some(held) = f.state().decision(&id) {
                return existing(held, &req, named.as_ref(), f.topology());
            }
            if req.dry_run {
                return match plan_admission(&f, &id, req.gpus, named.as_ref(), policy) {
                    Ok(plan) => {
                        Json(json!({ "job": id, "dry_run": true, "plan": plan })).into_response()
                    }
                    Err(e) => jobs_problem(&e).into_response(),
                };
            }
            let started = Instant::now();
            let r = match plan_admission(&f, &id, req.gpus, named.as_ref(), policy) {
                Ok(plan) => {
                    f.touched = true;
                    f.apply_plan(plan, &NoProgress).await
                }
                Err(e) => Err(e),
            };
            app2.record("admit", &id, &r, started, f.state().job_count());
            match r {
                Ok(done) => applied(&done, started, StatusCode::CREATED),
                Err(e) => jobs_problem(&e).into_response(),
            }
        }
        .instrument(span),
    )
    .await
}

/// A retry of a held job: the held decision, or 409 if it asks otherwise.
fn existing(held: &Decision, req: &SubmitBody, named: Option<&Named>, topo: &Topology) -> Response {
    if let Some(p) = conflict(held, req, named, topo) {
        return p.into_response();
    }
    Json(JobAnswer {
        job: &held.job,
        existing: true,
        decision: held,
    })
    .into_response()
}

/// How a retry asks otherwise than the held decision: another size, or
/// (for a scheduler's allocation) other servers or GPUs.
fn conflict(
    held: &Decision,
    req: &SubmitBody,
    named: Option<&Named>,
    topo: &Topology,
) -> Option<Problem> {
    let asked = held.requested_gpus.unwrap_or(held.gpus.len() as u32);
    if let Some(named) = named {
        let (field, want, have) = match named {
            Named::Servers(s) => {
                let have = given::decision_servers(topo, held).into_iter();
                (
                    "servers",
                    s.clone(),
                    have.map(|s| topo.server(s).name.to_string()).collect(),
                )
            }
            Named::Gpus(g) => {
                let want = g
                    .iter()
                    .flat_map(|(s, gs)| gs.iter().map(move |i| format!("{s}:{i}")));
                let have = held.gpus.iter().map(|g| format!("{}:{}", g.server, g.gpu));
                ("gpus_on", want.collect(), have.collect())
            }
        };
        let (mut want, mut have): (Vec<String>, Vec<String>) = (want, have);
        want.sort_unstable();
        have.sort_unstable();
        if want != have {
            let why = format!(
                "job `{}` is held on {}; this request names {}",
                held.job,
                have.join(","),
                want.join(",")
            );
            return Some(Problem::new(StatusCode::CONFLICT, why).field(field));
        }
    }
    let gpus = req
        .gpus
        .or_else(|| Some(named?.resolve(topo, &held.job).ok()?.gpus(topo)));
    (gpus != Some(asked)).then(|| {
        Problem::new(
            StatusCode::CONFLICT,
            format!(
                "job `{}` is held with {asked} GPUs; this request asks for {}",
                held.job,
                gpus.map_or_else(|| "another size".into(), |g| g.to_string())
            ),
        )
        .field("gpus")
    })
}

/// The answer to an applied change: the plan, the transaction's report and
/// its timing; committed -> `ok`, otherwise a problem carrying the report.
fn applied(done: &crate::jobs::Applied, started: Instant, ok: StatusCode) -> Response {
    let ms = started.elapsed().as_secs_f64() * 1e3;
    // The device transaction, and everything around it the service did
    // (placement, per-device diffs, journal, state.json).
    let tx = done.report.duration.as_secs_f64() * 1e3;
    if done.report.is_committed() {
        let body = json!({
            "job": done.plan.job,
            "action": done.plan.action,
            "committed": true,
            "decision": done.plan.decision,
            "devices": done.report,
            "timings": {"total_ms": ms, "transaction_ms": tx, "outside_transaction_ms": ms - tx},
        });
        return (ok, Json(body)).into_response();
    }
    if let crate::controller::Outcome::Abandoned { cause, .. } = &done.report.outcome {
        let detail = format!("this instance lost its leadership during the change ({cause}); the new leader settles it from the journal: ask for the job again");
        return Problem::new(StatusCode::SERVICE_UNAVAILABLE, detail)
            .with("devices", json!(done.report))
            .into_response();
    }
    let detail = if done.report.is_unchanged() {
        "the devices refused the change; every device is as it was and the state is unchanged"
    } else {
        "the change failed and some devices could not be put back; the journal is kept for `vclos reconcile`"
    };
    Problem::new(StatusCode::BAD_GATEWAY, detail)
        .with("devices", json!(done.report))
        .into_response()
}

#[utoipa::path(delete, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, description = "Released on every device", body = Object),
              (status = 404, description = "Not held", body = ProblemDoc, content_type = "application/problem+json"), (status = 502, description = "The devices refused; every device as it was", body = ProblemDoc, content_type = "application/problem+json"), (status = 503, description = "Busy", body = ProblemDoc, content_type = "application/problem+json")))]
async fn release(State(app): State<Arc<App>>, id: Result<Path<String>, PathRejection>) -> Response {
    let id = match path_id(id) {
        Ok(id) => id,
        Err(p) => return p.into_response(),
    };
    let span = info_span!("api.release", job = %id);
    let app2 = Arc::clone(&app);
    app.change(
        async move {
            let mut f = app2.changing().await;
            if app2.follows(&f) {
                return not_leader(&f).await;
            }
            if let Err(answer) = f.settle_first().await {
                return answer;
            }
            if f.state().decision(&id).is_none() {
                return not_held(&id).into_response();
            }
            let started = Instant::now();
            f.touched = true;
            let r = f.release(&id, &NoProgress).await;
            app2.record("release", &id, &r, started, f.state().job_count());
            match r {
                Ok(done) => applied(&done, started, StatusCode::OK),
                Err(e) => jobs_problem(&e).into_response(),
            }
        }
        .instrument(span),
    )
    .await
}

#[utoipa::path(get, path = "/v1/events", tag = "events",
    responses((status = 200, description = "Server-sent events: admitted, released, failed, drift, leader (data: seq, kind, job, device, detail, at_ms)", content_type = "text/event-stream")))]
async fn events(State(app): State<Arc<App>>) -> Response {
    app.events.subscribe().into_response()
}

#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus / OpenMetrics text", content_type = "application/openmetrics-text")))]
async fn metrics(State(app): State<Arc<App>>) -> Response {
    let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    (
        [(axum::http::header::CONTENT_TYPE, kind)],
        app.metrics.render(),
    )
        .into_response()
}

impl App {
    /// Count a change, time it and publish its event.
    fn record(
        &self,
        action: &'static str,
        job: &JobId,
        r: &Result<crate::jobs::Applied, JobsError>,
        started: Instant,
        held: usize,
    ) {
        if self.elect && must_resign(r) {
            self.resign.notify_one();
        }
        let m = &self.metrics;
        m.took(action, started.elapsed().as_secs_f64());
        m.jobs.set(held as i64);
        let job = Some(job.to_string());
        match r {
            Ok(done) if done.report.is_committed() => {
                m.change(action, "committed");
                let kind = if action == "admit" {
                    "admitted"
                } else {
                    "released"
                };
                self.events.publish(kind, job, None, None);
            }
            Ok(done) => {
                let outcome = if done.report.is_unchanged() {
                    "rolled_back"
                } else {
                    "partial"
                };
                m.change(action, outcome);
                m.failure("devices");
                for d in done.report.devices.iter().filter(|d| d.error.is_some()) {
                    m.device_error(&d.device);
                }
                let detail = format!("{action}: {outcome}");
                self.events.publish("failed", job, None, Some(detail));
            }
            Err(e) => {
                m.change(action, "refused");
                m.failure(cause(jobs_problem(e).status()));
                self.events
                    .publish("failed", job, None, Some(format!("{action}: {e}")));
            }
        }
    }

    /// Run a change: refused at once when [`Config::max_waiting`] already
    /// wait; answered 503 after the request timeout, while the change itself
    /// runs on in its own task so a transaction is never cut short.
    async fn change(
        &self,
        work: impl std::future::Future<Output = Response> + Send + 'static,
    ) -> Response {
        let Ok(permit) = Arc::clone(&self.waiting).try_acquire_owned() else {
            return busy("too many changes are waiting; retry later");
        };
        // The permit lives as long as the change, not the request.
        let task = tokio::spawn(async move {
            let r = work.await;
            drop(permit);
            r
        });
        match tokio::time::timeout(self.timeout, task).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Problem::new(StatusCode::INTERNAL_SERVER_ERROR, format!("the change failed: {e}"))
                .into_response(),
            Err(_) => busy("the change did not finish within the request timeout; it completes or rolls back on its own: ask for the job again"),
        }
    }
}

fn busy(detail: &str) -> Response {
    Problem::new(StatusCode::SERVICE_UNAVAILABLE, detail)
        .retry_soon()
        .into_response()
}

/// The failure cause a status stands for (`vclos_failures_total`).
fn cause(status: StatusCode) -> &'static str {
    match status {
        StatusCode::CONFLICT => "no_slice",
        StatusCode::UNPROCESSABLE_ENTITY => "invalid",
        StatusCode::SERVICE_UNAVAILABLE => "busy",
        _ => "internal",
    }
}

/// `POST /v1/plan`: exactly one of `submit` and `release`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct PlanBody {
    submit: Option<PlanSubmit>,
    release: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
struct PlanSubmit {
    id: String,
    #[serde(default)]
    gpus: Option<u32>,
    /// As in `POST /v1/jobs`: the servers a scheduler chose.
    #[serde(default)]
    servers: Option<Vec<String>>,
    /// As in `POST /v1/jobs`: the GPUs a scheduler chose.
    #[serde(default)]
    gpus_on: Option<BTreeMap<String, Vec<u16>>>,
    /// As in `POST /v1/jobs`: `vclos`, `ocs-vclos` or `titan`.
    #[serde(default)]
    policy: Option<String>,
}

#[utoipa::path(post, path = "/v1/plan", tag = "jobs", request_body = PlanBody,
    responses((status = 200, description = "The dry run: job, action, decision, per-device diffs and commands", body = Object),
              (status = 400, description = "Bad body, or not exactly one of submit and release", body = ProblemDoc, content_type = "application/problem+json"), (status = 404, description = "Release of a job not held", body = ProblemDoc, content_type = "application/problem+json"), (status = 409, description = "No slice free now", body = ProblemDoc, content_type = "application/problem+json"), (status = 422, description = "Invalid id, size or policy (a simulation baseline; titan with `servers` or `gpus_on`)", body = ProblemDoc, content_type = "application/problem+json")))]
async fn plan(State(app): State<Arc<App>>, conn::Bounded(body): conn::Bounded) -> Response {
    let req: PlanBody = match problem::parse_body(&body) {
        Ok(r) => r,
        Err(p) => return p.into_response(),
    };
    app.within("planning", plan_now(&app, req)).await
}

async fn plan_now(app: &App, req: PlanBody) -> Response {
    let f = match app.read().await {
        Ok(f) => f,
        Err(e) => return jobs_problem(&e).into_response(),
    };
    let r = match (&req.submit, &req.release) {
        (Some(s), None) => match (
            job_id(&s.id),
            named(s.gpus, &s.servers, &s.gpus_on, "submit."),
            policy(&s.policy, "submit.policy"),
        ) {
            (Ok(id), Ok(n), Ok(p)) => plan_admission(&f, &id, s.gpus, n.as_ref(), p),
            (Err(p), _, _) => return p.field("submit.id").into_response(),
            (_, Err(p), _) | (_, _, Err(p)) => return p.into_response(),
        },
        (None, Some(r)) => match job_id(r) {
            Ok(id) if f.state().decision(&id).is_none() => return not_held(&id).into_response(),
            Ok(id) => f.plan_release(&id),
            Err(p) => return p.field("release").into_response(),
        },
        _ => {
            let why =
                "give exactly one of `submit` ({id, gpus?, servers? | gpus_on?, policy?}) and `release` (a job id)";
            return Problem::new(StatusCode::BAD_REQUEST, why).into_response();
        }
    };
    match r {
        Ok(plan) => Json(plan).into_response(),
        Err(e) => jobs_problem(&e).into_response(),
    }
}

/// `GET /v1/status`: reads every device (each bounded by the fabric's read
/// timeout); a drifted device is also published as a `drift` event.
#[utoipa::path(get, path = "/v1/status", tag = "jobs",
    responses((status = 200, description = "Jobs, each device's reachability and drift, a pending journal", body = Object)))]
async fn status(State(app): State<Arc<App>>) -> Response {
    app.within("reading the devices' status", status_now(&app))
        .await
}

async fn status_now(app: &App) -> Response {
    let f = match app.read().await {
        Ok(f) => f,
        Err(e) => return jobs_problem(&e).into_response(),
    };
    let st = match f.status().await {
        Ok(st) => st,
        Err(e) => return jobs_problem(&e).into_response(),
    };
    for d in &st.devices {
        if let Some(drift) = d.drift.as_ref().filter(|x| !x.is_empty()) {
            let detail = format!(
                "{} missing, {} unexpected, {} foreign",
                drift.missing.len(),
                drift.extra.len(),
                drift.foreign.len()
            );
            let device = Some(d.device.clone());
            app.events.publish("drift", None, device, Some(detail));
        }
    }
    Json(st).into_response()
}

impl App {
    /// Whether this instance is a follower right now (under the fabric's
    /// lock: leadership changes only with it held to write).
    fn follows(&self, f: &Fabric) -> bool {
        self.elect && !f.is_locked()
    }

    /// The fabric for a read, shared with other reads. Holding the store's
    /// writer lock its state is the committed one; without it (a follower)
    /// the committed state is re-read first, under the lock held to write.
    async fn read(&self) -> Result<RwLockReadGuard<'_, Fabric>, JobsError> {
        let f = self.fabric.read().await;
        if f.is_locked() {
            return Ok(f);
        }
        drop(f);
        let mut f = self.fabric.write().await;
        f.refresh().await?;
        Ok(f.downgrade())
    }

    /// The jobs as of the last change, when this instance keeps them
    /// ([`App::listed`]).
    fn kept(&self) -> Option<Arc<Listing>> {
        let l = self.listed.as_ref()?;
        l.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The fabric held for a change (to write).
    async fn changing(&self) -> Changing<'_> {
        Changing {
            app: self,
            fabric: self.fabric.write().await,
            touched: false,
        }
    }

    /// Run a read within the request timeout, else answer 503 (a read
    /// changes nothing, so it is dropped where it is: waiting for the
    /// fabric, or for a device that does not answer).
    async fn within(
        &self,
        what: &str,
        read: impl std::future::Future<Output = Response>,
    ) -> Response {
        match tokio::time::timeout(self.timeout, read).await {
            Ok(r) => r,
            Err(_) => busy(&format!(
                "{what} did not finish within the request timeout ({} s): a change in flight, or a device that does not answer; retry later",
                self.timeout.as_secs_f64()
            )),
        }
    }
}

/// The fabric held to write by a change. Released, a change that went to
/// the devices (`touched`, set before it starts) renews the jobs' listing
/// ([`App::listed`]) first, so no answer is sent before the listing shows
/// the change.
struct Changing<'a> {
    app: &'a App,
    fabric: tokio::sync::RwLockWriteGuard<'a, Fabric>,
    touched: bool,
}

impl std::ops::Deref for Changing<'_> {
    type Target = Fabric;
    fn deref(&self) -> &Fabric {
        &self.fabric
    }
}

impl std::ops::DerefMut for Changing<'_> {
    fn deref_mut(&mut self) -> &mut Fabric {
        &mut self.fabric
    }
}

impl Changing<'_> {
    /// A single instance (no election) settles a journal its own earlier
    /// change left (its state could not be saved, or a device could not be
    /// put back) before the next change, as opening the fabric again would
    /// (`Fabric::recover`: adopt the new state if every device holds it,
    /// else roll the devices back). Nobody else can while it holds the
    /// state lock: `vclos reconcile` is refused by the lock, and the
    /// service stayed `503 pending journal` until restarted. A leader
    /// elected on etcd steps down instead (`must_resign`), and its
    /// successor settles the journal. A recovery that fails (a device still
    /// unreachable, the state still not writable) keeps the journal and is
    /// the change's answer; the next change tries again.
    async fn settle_first(&mut self) -> Result<(), Response> {
        if self.app.elect {
            return Ok(());
        }
        // `recover` looks for a journal first and does nothing without one.
        match self.fabric.recover(&NoProgress).await {
            Ok(None) => Ok(()),
            Ok(Some(r)) => {
                self.touched = true;
                info!("settled the journal of an earlier change: {r}");
                Ok(())
            }
            Err(e) => Err(jobs_problem(&e).into_response()),
        }
    }
}

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        if let (true, Some(listed)) = (self.touched, &self.app.listed) {
            let body = listing(&self.fabric);
            *listed.lock().unwrap_or_else(|e| e.into_inner()) = body;
        }
    }
}

/// The held jobs as of one change: `GET /v1/jobs`'s body (every held
/// decision, as `serde_json` writes the list) and where each job's
/// decision sits in it, the body of its `GET /v1/jobs/{id}`, answered as a
/// slice of the same buffer.
#[derive(Debug)]
struct Listing {
    body: axum::body::Bytes,
    at: HashMap<JobId, std::ops::Range<usize>>,
}

/// The [`Listing`] of `f` (`None` if a decision cannot be serialised; the
/// reads then read the fabric and say why).
fn listing(f: &Fabric) -> Option<Arc<Listing>> {
    let decisions = f.state().decisions();
    let mut body = Vec::with_capacity(256 * decisions.len() + 2);
    let mut at = HashMap::with_capacity(decisions.len());
    body.push(b'[');
    for (i, d) in decisions.into_iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        let start = body.len();
        serde_json::to_writer(&mut body, d).ok()?;
        at.insert(d.job.clone(), start..body.len());
    }
    body.push(b']');
    Some(Arc::new(Listing {
        body: body.into(),
        at,
    }))
}

/// Whether a change ended because this writer's lock is gone or could not
/// be verified (abandoned mid-transaction, fenced, or committed on the
/// devices without the state saved), or because a journal is pending that
/// taking over did not settle (devices unreachable then): the leader steps
/// down, and whoever leads next settles the journal first.
fn must_resign(r: &Result<crate::jobs::Applied, JobsError>) -> bool {
    match r {
        Ok(done) => matches!(
            done.report.outcome,
            crate::controller::Outcome::Abandoned { .. }
        ),
        Err(JobsError::Remote(crate::store::RemoteError::LockLost { .. }))
        | Err(JobsError::NotSaved { .. })
        | Err(JobsError::PendingJournal(_)) => true,
        Err(_) => false,
    }
}

/// A follower's answer to a write: 503, `Retry-After: 1`, and the leader's
/// URL from the lock's holder record when one is elected.
async fn not_leader(f: &Fabric) -> Response {
    let leader = leader_url(f).await;
    let detail = match &leader {
        Some(url) => format!("this instance is a follower: send writes to the leader, {url}"),
        None => "this instance is a follower and no leader is elected right now; retry shortly"
            .to_string(),
    };
    Problem::new(StatusCode::SERVICE_UNAVAILABLE, detail)
        .with("leader", json!(leader))
        .retry_soon()
        .into_response()
}

/// The leader's advertised URL, as its lock record says.
async fn leader_url(f: &Fabric) -> Option<String> {
    f.writer().await.ok().flatten()?.holder?.url
}

#[utoipa::path(get, path = "/v1/leader", tag = "health",
    responses((status = 200, description = "This instance's role (`leader` or `follower`) and the leader's URL when one is elected", body = Object)))]
async fn leader_info(State(app): State<Arc<App>>) -> Response {
    app.within("reading the leadership", async {
        let f = app.fabric.read().await;
        let leads = !app.follows(&f);
        let url = if leads { None } else { leader_url(&f).await };
        Json(json!({
            "role": if leads { "leader" } else { "follower" },
            "leader": url,
        }))
        .into_response()
    })
    .await
}

/// `GET /leaderz`, without a token (for a load balancer that sends writes
/// to the leader): 200 on the leader, 503 on a follower; nothing else.
#[utoipa::path(get, path = "/leaderz", tag = "health", security(()),
    responses((status = 200, description = "This instance leads: it accepts writes"),
              (status = 503, description = "A follower: reads only")))]
async fn leaderz(State(app): State<Arc<App>>) -> Response {
    match app.leader.load(std::sync::atomic::Ordering::SeqCst) {
        true => (StatusCode::OK, "leader\n").into_response(),
        false => (StatusCode::SERVICE_UNAVAILABLE, "follower\n").into_response(),
    }
}

/// The HTTP status of a lifecycle error.
fn jobs_problem(e: &JobsError) -> Problem {
    let status = match e {
        JobsError::Blocked { .. } | JobsError::NotOnServers { .. } => StatusCode::CONFLICT,
        JobsError::Placement(_) | JobsError::Name(_) | JobsError::Intent(_) => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        JobsError::Lock(_)
        | JobsError::PendingJournal(_)
        | JobsError::Stale(_)
        | JobsError::Remote(_) => StatusCode::SERVICE_UNAVAILABLE,
        JobsError::BusyLink { .. }
        | JobsError::ForeignSteering(_)
        | JobsError::Refused { .. }
        | JobsError::ChangeSet(_) => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    let p = Problem::new(status, e.to_string());
    match e {
        JobsError::NotOnServers { suggested, .. } => p
            .field("servers")
            .with("suggested_servers", json!(suggested)),
        JobsError::Placement(PlacementError::Given { field, .. }) => {
            p.field(field.as_deref().unwrap_or("servers"))
        }
        JobsError::Placement(PlacementError::NotOnFabric(_)) => p.field("policy"),
        // The store (etcd) briefly unavailable, or this leader deposed:
        // nothing changed, and a retry soon (at the new leader) may work.
        JobsError::Remote(_) => p.retry_soon(),
        _ => p,
    }
}

#[cfg(test)]
mod tests;
