//! A typed, blocking client of `vclos serve`'s v1 API ([`crate::server`]):
//! what `vclos job ... --server URL`, `vclos status --server URL` and the
//! Slurm prolog/epilog use.
//!
//! # Design
//! * **Blocking, on `ureq` 3.** The callers are short-lived commands that
//!   make one or two requests (a Slurm prolog, a CLI call); a blocking
//!   client needs no runtime and starts in microseconds. ureq brings
//!   HTTP/1.1 and rustls (the `ring` provider, as russh already uses) and
//!   nothing else: no default features but `rustls`.
//! * **Typed answers.** Each call returns the server's own types where the
//!   library has them ([`Decision`], [`ApplyReport`], [`Status`]), so the
//!   CLI prints a remote answer with the code that prints a local one.
//!   `POST /v1/jobs` answers one of three shapes ([`Submitted`]).
//! * **Typed errors** ([`ClientError`]): a transport failure (naming the
//!   URL), an RFC 9457 problem (status, title, detail, `field`,
//!   `suggested_servers`, the transaction report of a 502), or a response
//!   that is not what the API promises. Text that comes from the server is
//!   stripped of control characters and cut to a bound before it is put in
//!   an error, since callers print it into logs (slurmctld's).
//! * **Bounds.** A response body is read up to [`Options::max_body`] (64
//!   MiB by default); connecting and the whole exchange have timeouts
//!   ([`Options::connect_timeout`], [`Options::timeout`]); redirects are not
//!   followed (the API never redirects, and the token must not travel).
//! * **Retries.** A `503` carrying `Retry-After` (the service is busy, or a
//!   change outlived its request timeout) is retried up to
//!   [`Options::tries`] times in all, waiting what `Retry-After` says but at
//!   most [`Options::max_retry_wait`]. Safe for every call: reads change
//!   nothing, and `POST /v1/jobs` and `DELETE /v1/jobs/{id}` are idempotent
//!   by job id (a retried admission answers `200 existing`, a retried
//!   release `404`). A `503` without `Retry-After` (a pending journal) is
//!   returned at once: waiting does not fix it.
//! * **Several instances** (`--server URL1,URL2`: [`Client::with_servers`];
//!   `vclos serve --store etcd` under leader election, docs/ha.md). A
//!   follower answers writes `503` with the leader's URL in `leader`; the
//!   client sends the request there. An instance that refuses the
//!   connection, or a follower that knows no leader yet, sends it to the
//!   next instance of the list, pausing between rounds, for up to
//!   [`Options::failover_wait`]. Both happen only where nothing was done:
//!   a request that may have reached an instance is never sent to another.
//!   A leader's URL from a follower is checked like a configured one; the
//!   token goes to it, as it would to any instance of the service.
//! * **The token** ([`Token`]) comes from a file, trimmed; its `Debug`
//!   is redacted and no error or log line carries it. Credentials in the
//!   URL (`user:pass@`) are refused for the same reason.
//! * **TLS.** `https://` URLs are verified against the system's trust
//!   store (ureq's `platform-verifier`: on Linux the CA certificates of
//!   `/etc/ssl/certs`, including a private CA installed there), or only
//!   against the PEM certificates of a CA file when one is given (a
//!   service with a private CA, nothing installed system-wide).

use crate::placement::given::Named;
use crate::placement::Policy;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;
use ureq::http::{Response, StatusCode};

use crate::controller::ApplyReport;
use crate::decision::Decision;
use crate::jobs::Status;
use crate::names::JobId;

/// Largest token file, bytes.
pub const MAX_TOKEN_FILE: u64 = 4096;
/// Largest CA file, bytes.
pub const MAX_CA_FILE: u64 = 1024 * 1024;
/// Longest text from the server put into an error.
const MAX_SHOWN: usize = 2000;

/// A bearer token. Its `Debug` never shows it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// The token in `text` without surrounding whitespace: visible ASCII,
    /// not empty (the service asks more of its own token file).
    pub fn new(text: &str) -> Result<Token, ClientError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(ClientError::Token("the token file is empty".into()));
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ClientError::Token(
                "the token must be printable ASCII without spaces".into(),
            ));
        }
        Ok(Token(t.to_string()))
    }

    /// Read a token file (at most [`MAX_TOKEN_FILE`] bytes).
    pub fn from_file(path: &Path) -> Result<Token, ClientError> {
        let text = read_bounded(path, MAX_TOKEN_FILE)
            .map_err(|why| ClientError::Token(format!("token file {}: {why}", path.display())))?;
        let text = String::from_utf8(text)
            .map_err(|_| ClientError::Token(format!("token file {}: not text", path.display())))?;
        Token::new(&text).map_err(|e| match e {
            ClientError::Token(why) => {
                ClientError::Token(format!("token file {}: {why}", path.display()))
            }
            other => other,
        })
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let buf = vclos_core::yaml::read_capped(path, max as usize).map_err(|e| e.to_string())?;
    if buf.len() as u64 > max {
        return Err(format!("over the {max}-byte limit"));
    }
    Ok(buf)
}

/// Timeouts, bounds and retries.
#[derive(Debug, Clone)]
pub struct Options {
    /// To open the TCP connection (and TLS handshake).
    pub connect_timeout: Duration,
    /// For one whole request and its answer. The default is above the
    /// service's own request timeout (120 s), so a change that outlives it
    /// is answered `503` by the service rather than cut here.
    pub timeout: Duration,
    /// Largest response body read, bytes.
    pub max_body: u64,
    /// Attempts in all when the service answers `503` with `Retry-After`.
    pub tries: u32,
    /// Longest wait between two attempts, whatever `Retry-After` says.
    pub max_retry_wait: Duration,
    /// How long a request looks for the leader among the instances (a
    /// follower's `503`, an instance refusing connections) before the last
    /// answer is returned: above a failover's lease TTL + 2 s (10 s TTL
    /// by default, docs/ha.md).
    pub failover_wait: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(150),
            max_body: 64 * 1024 * 1024,
            tries: 5,
            max_retry_wait: Duration::from_secs(3),
            failover_wait: Duration::from_secs(30),
        }
    }
}

/// An RFC 9457 problem the service answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub status: u16,
    pub title: String,
    pub detail: String,
    /// The request field at fault.
    pub field: Option<String>,
    /// Servers near the asked ones that would be admitted now (a `409` to a
    /// request naming `servers`).
    pub suggested_servers: Vec<String>,
    /// The transaction report of a `502` (every device and what it did).
    pub report: Option<ApplyReport>,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.title, self.detail)?;
        if let Some(field) = &self.field {
            write!(f, " (field `{field}`)")?;
        }
        if !self.suggested_servers.is_empty() {
            write!(
                f,
                "; suggested servers: {}",
                self.suggested_servers.join(",")
            )?;
        }
        Ok(())
    }
}

#[derive(Debug, Error)]
pub enum ClientError {
    #[error("{0}")]
    Token(String),
    #[error("--ca-file {path}: {why}")]
    Ca { path: String, why: String },
    #[error("server URL {url:?}: {why}")]
    Url { url: String, why: String },
    #[error("invalid job id: {0}")]
    JobId(#[from] crate::names::NameError),
    /// The request did not get an answer.
    #[error("{method} {url}: {message}")]
    Transport {
        method: &'static str,
        url: String,
        message: String,
    },
    /// The service answered with a problem.
    #[error("{method} {url}: {problem}")]
    Problem {
        method: &'static str,
        url: String,
        problem: Box<Problem>,
    },
    /// The answer is not what the API promises.
    #[error("{method} {url}: bad response (HTTP {status}): {why}")]
    BadResponse {
        method: &'static str,
        url: String,
        status: u16,
        why: String,
    },
}

impl ClientError {
    /// The problem the service answered, if that is what this is.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            ClientError::Problem { problem, .. } => Some(problem),
            _ => None,
        }
    }

    /// The HTTP status of a problem answer.
    pub fn status(&self) -> Option<u16> {
        self.problem().map(|p| p.status)
    }
}

/// A job committed on every device (`201` to a submission, `200` to a
/// release): the plan's decision and the transaction's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Applied {
    pub job: JobId,
    pub action: String,
    pub committed: bool,
    pub decision: Decision,
    pub devices: ApplyReport,
    pub timings: Timings,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timings {
    pub total_ms: f64,
}

/// A job already held with the same request (`200`, `existing`: an
/// idempotent retry).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Held {
    pub job: JobId,
    pub existing: bool,
    pub decision: Decision,
}

/// The answer to `POST /v1/jobs`.
#[derive(Debug, Clone)]
pub enum Submitted {
    /// Admitted now (`201`).
    Committed(Box<Applied>),
    /// Already held with this request (`200`, `existing`).
    Existing(Box<Held>),
    /// A dry run's plan (`200`, `dry_run`): per-device diffs and commands.
    DryRun(Value),
}

/// `POST /v1/jobs`.
#[derive(Debug, Serialize)]
struct SubmitBody<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpus: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    servers: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpus_on: Option<&'a std::collections::BTreeMap<String, Vec<u16>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<&'static str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

/// A client of one service (one instance, or the instances of one fabric
/// under leader election).
#[derive(Debug)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
    /// Every instance given, `base` first ([`Client::with_servers`]).
    servers: Vec<String>,
    /// The instance requests go to now: the last one that answered as the
    /// leader (or `base`).
    current: std::sync::Mutex<String>,
    token: Option<Token>,
    options: Options,
}

impl Client {
    /// A client of the service at `base` (`http://host:port` or
    /// `https://...`, any path prefix kept), authenticating with `token`
    /// when given, trusting only the certificates of the PEM `ca` when
    /// given (`ca_path` names it in errors).
    pub fn new(
        base: &str,
        token: Option<Token>,
        ca: Option<(&Path, &[u8])>,
        options: Options,
    ) -> Result<Client, ClientError> {
        let base = check_url(base)?;
        let mut tls = ureq::tls::TlsConfig::builder();
        if let Some((path, pem)) = ca {
            let fail = |why: String| ClientError::Ca {
                path: path.display().to_string(),
                why,
            };
            let mut certs = Vec::new();
            for item in ureq::tls::parse_pem(pem) {
                match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => certs.push(c),
                    Ok(_) => {}
                    Err(e) => return Err(fail(format!("not PEM: {e}"))),
                }
            }
            if certs.is_empty() {
                return Err(fail("no PEM certificate in it".into()));
            }
            tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
        } else {
            // The system's trust store (rustls-platform-verifier: on Linux
            // the certificates openssl-probe finds, e.g. /etc/ssl/certs).
            tls = tls.root_certs(ureq::tls::RootCerts::PlatformVerifier);
        }
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .max_redirects_will_error(false)
            .timeout_connect(Some(options.connect_timeout))
            .timeout_global(Some(options.timeout))
            .user_agent(concat!("vclos/", env!("CARGO_PKG_VERSION")))
            .tls_config(tls.build())
            .build();
        Ok(Client {
            agent: ureq::Agent::new_with_config(config),
            servers: vec![base.clone()],
            current: std::sync::Mutex::new(base.clone()),
            base,
            token,
            options,
        })
    }

    /// Also reach the service at `others` (more instances of one fabric):
    /// a request goes to the instance that leads, skipping one that refuses
    /// the connection and following a follower's `503` naming the leader
    /// (issue 18; see the module docs).
    pub fn with_servers(mut self, others: &[String]) -> Result<Client, ClientError> {
        for o in others {
            let url = check_url(o)?;
            if !self.servers.contains(&url) {
                self.servers.push(url);
            }
        }
        Ok(self)
    }

    /// Like [`Client::new`], reading the token file and CA file.
    pub fn from_files(
        base: &str,
        token_file: Option<&Path>,
        ca_file: Option<&Path>,
        options: Options,
    ) -> Result<Client, ClientError> {
        let token = token_file.map(Token::from_file).transpose()?;
        let ca = match ca_file {
            Some(p) => Some((
                p,
                read_bounded(p, MAX_CA_FILE).map_err(|why| ClientError::Ca {
                    path: p.display().to_string(),
                    why,
                })?,
            )),
            None => None,
        };
        Client::new(
            base,
            token,
            ca.as_ref().map(|(p, pem)| (*p, pem.as_slice())),
            options,
        )
    }

    /// The service's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// `POST /v1/jobs`: admit `id` with `gpus` GPUs, or on exactly the
    /// servers or GPUs `named` (then `gpus` may be left out: all of them).
    pub fn submit(
        &self,
        id: &JobId,
        gpus: Option<u32>,
        named: Option<&Named>,
        dry_run: bool,
    ) -> Result<Submitted, ClientError> {
        self.submit_by(id, gpus, named, None, dry_run)
    }

    /// [`Client::submit`] placed with `policy` (the body's `policy`; the
    /// service's own when `None`).
    pub fn submit_by(
        &self,
        id: &JobId,
        gpus: Option<u32>,
        named: Option<&Named>,
        policy: Option<Policy>,
        dry_run: bool,
    ) -> Result<Submitted, ClientError> {
        let body = SubmitBody {
            policy: policy.map(Policy::name),
            id: id.as_str(),
            gpus,
            servers: match named {
                Some(Named::Servers(s)) => Some(s),
                _ => None,
            },
            gpus_on: match named {
                Some(Named::Gpus(g)) => Some(g),
                _ => None,
            },
            dry_run,
        };
        let body = serde_json::to_vec(&body).map_err(|e| ClientError::BadResponse {
            method: "POST",
            url: self.url("/v1/jobs"),
            status: 0,
            why: format!("encoding the request: {e}"),
        })?;
        let (status, v) = self.request(Method::Post, "/v1/jobs", Some(&body))?;
        let bad = |why: String| self.bad(Method::Post, "/v1/jobs", status, why);
        match status {
            201 => Ok(Submitted::Committed(Box::new(decode(v).map_err(bad)?))),
            200 if v.get("existing") == Some(&Value::Bool(true)) => {
                Ok(Submitted::Existing(Box::new(decode(v).map_err(bad)?)))
            }
            200 if v.get("dry_run") == Some(&Value::Bool(true)) => Ok(Submitted::DryRun(
                v.get("plan").cloned().unwrap_or(Value::Null),
            )),
            _ => Err(bad(format!("unexpected status {status}"))),
        }
    }

    /// `DELETE /v1/jobs/{id}`. A job not held is a `404` problem
    /// ([`ClientError::status`]).
    pub fn release(&self, id: &JobId) -> Result<Applied, ClientError> {
        let path = format!("/v1/jobs/{id}");
        let (status, v) = self.request(Method::Delete, &path, None)?;
        decode(v).map_err(|why| self.bad(Method::Delete, &path, status, why))
    }

    /// `GET /v1/jobs`: every held job's decision.
    pub fn list(&self) -> Result<Vec<Decision>, ClientError> {
        self.get("/v1/jobs")
    }

    /// `GET /v1/jobs/{id}`: one job's decision (`404` if not held).
    pub fn show(&self, id: &JobId) -> Result<Decision, ClientError> {
        self.get(&format!("/v1/jobs/{id}"))
    }

    /// `GET /v1/status`: jobs, each device's reachability and drift, a
    /// pending journal.
    pub fn status(&self) -> Result<Status, ClientError> {
        self.get("/v1/status")
    }

    fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let (status, v) = self.request(Method::Get, path, None)?;
        decode(v).map_err(|why| self.bad(Method::Get, path, status, why))
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.now())
    }

    /// The instance requests go to now.
    fn now(&self) -> String {
        self.current
            .lock()
            .map_or_else(|_| self.base.clone(), |c| c.clone())
    }

    /// Send the next requests to `url`.
    fn switch(&self, url: String) {
        tracing::info!(%url, "trying another instance");
        if let Ok(mut c) = self.current.lock() {
            *c = url;
        }
    }

    /// The instance after the current one in the list.
    fn next_server(&self) -> String {
        let now = self.now();
        let at = self.servers.iter().position(|s| *s == now);
        let next = at.map_or(0, |i| (i + 1) % self.servers.len());
        self.servers[next].clone()
    }

    fn bad(&self, method: Method, path: &str, status: u16, why: String) -> ClientError {
        ClientError::BadResponse {
            method: method.name(),
            url: self.url(path),
            status,
            why,
        }
    }

    /// One call, retried on `503` + `Retry-After`, and moved to the leader
    /// when a follower names it or an instance refuses the connection: a
    /// 2xx status and its JSON body, or the error.
    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<(u16, Value), ClientError> {
        let tries = self.options.tries.max(1);
        let mut attempt = 1;
        let started = std::time::Instant::now();
        let electing = || started.elapsed() < self.options.failover_wait;
        loop {
            let url = self.url(path);
            let mut resp = match self.send(method, &url, body) {
                Ok(r) => r,
                // Nothing was sent: another instance may lead.
                Err(e)
                    if never_sent(&e)
                        && electing()
                        && (self.servers.len() > 1 || self.now() != self.base) =>
                {
                    tracing::info!(%url, error = %transport_message(&e), "not reached");
                    self.switch(self.next_server());
                    std::thread::sleep(FAILOVER_PAUSE);
                    continue;
                }
                Err(e) => {
                    return Err(ClientError::Transport {
                        method: method.name(),
                        url: url.clone(),
                        message: transport_message(&e),
                    })
                }
            };
            let status = resp.status();
            let wait = retry_after(&resp).map(|w| w.min(self.options.max_retry_wait));
            let bytes = self.body(&mut resp, method, path, status)?;
            if status == StatusCode::SERVICE_UNAVAILABLE {
                if let Some(leader) = follower_of(&bytes) {
                    if electing() {
                        match leader.and_then(|l| check_url(&l).ok()) {
                            Some(l) if l != self.now() => self.switch(l),
                            // No leader elected yet: wait, then ask another.
                            _ => {
                                std::thread::sleep(wait.unwrap_or(FAILOVER_PAUSE));
                                self.switch(self.next_server());
                            }
                        }
                        continue;
                    }
                } else if let (Some(wait), true) = (wait, attempt < tries) {
                    tracing::info!(%url, attempt, wait_ms = wait.as_millis() as u64, "503: retrying");
                    std::thread::sleep(wait);
                    attempt += 1;
                    continue;
                }
            }
            if status.is_success() {
                let v = serde_json::from_slice(&bytes).map_err(|e| {
                    self.bad(method, path, status.as_u16(), format!("not JSON: {e}"))
                })?;
                return Ok((status.as_u16(), v));
            }
            return Err(ClientError::Problem {
                method: method.name(),
                url,
                problem: Box::new(problem(status, &bytes)),
            });
        }
    }

    /// An answer's body, bounded.
    fn body(
        &self,
        resp: &mut Response<ureq::Body>,
        method: Method,
        path: &str,
        status: StatusCode,
    ) -> Result<Vec<u8>, ClientError> {
        resp.body_mut()
            .with_config()
            .limit(self.options.max_body)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => self.bad(
                    method,
                    path,
                    status.as_u16(),
                    format!("body over the {}-byte limit", self.options.max_body),
                ),
                e => ClientError::Transport {
                    method: method.name(),
                    url: self.url(path),
                    message: format!("reading the answer: {}", transport_message(&e)),
                },
            })
    }

    fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&[u8]>,
    ) -> Result<Response<ureq::Body>, ureq::Error> {
        let auth = self.token.as_ref().map(|t| format!("Bearer {}", t.0));
        match method {
            Method::Get | Method::Delete => {
                let mut r = if method == Method::Get {
                    self.agent.get(url)
                } else {
                    self.agent.delete(url)
                };
                r = r.header("Accept", "application/json");
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.call()
            }
            Method::Post => {
                let mut r = self
                    .agent
                    .post(url)
                    .header("Accept", "application/json")
                    .content_type("application/json");
                if let Some(a) = &auth {
                    r = r.header("Authorization", a);
                }
                r.send(body.unwrap_or_default())
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Post,
    Delete,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Delete => "DELETE",
        }
    }
}

fn decode<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        format!("at `{path}`: {}", e.into_inner())
    })
}

/// `http(s)://authority[/prefix]`, without a trailing `/`.
fn check_url(url: &str) -> Result<String, ClientError> {
    let fail = |why: &str| ClientError::Url {
        url: clean(url, 200),
        why: why.to_string(),
    };
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| fail("must start with http:// or https://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return Err(fail("no host"));
    }
    if authority.contains('@') {
        return Err(fail(
            "credentials in the URL are not accepted; give the token with --token-file",
        ));
    }
    if rest.contains(['?', '#']) || !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(fail(
            "a base URL has no query, fragment, spaces or control characters",
        ));
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// Pause between two instances while a leader is being elected.
const FAILOVER_PAUSE: Duration = Duration::from_millis(250);

/// Whether a request never left this process (the connection could not
/// be made), so another instance may be asked without risk.
fn never_sent(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => true,
        ureq::Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
        _ => false,
    }
}

/// A follower's `503` (vclos serve under leader election): `Some(leader
/// URL if one is elected)`; `None` for any other answer.
fn follower_of(body: &[u8]) -> Option<Option<String>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let leader = v.as_object()?.get("leader")?;
    Some(leader.as_str().map(str::to_string))
}

/// The wait a `Retry-After: <seconds>` asks for (an HTTP date: 1 s).
fn retry_after(resp: &Response<ureq::Body>) -> Option<Duration> {
    let v = resp.headers().get("retry-after")?.to_str().ok()?.trim();
    Some(match v.parse::<u64>() {
        Ok(s) => Duration::from_secs(s),
        Err(_) => Duration::from_secs(1),
    })
}

/// The problem in an error answer's body; a body that is not one (a
/// proxy's HTML page) still gives the status and an excerpt.
fn problem(status: StatusCode, body: &[u8]) -> Problem {
    let reason = status.canonical_reason().unwrap_or("Error").to_string();
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let text = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(|s| clean(s, MAX_SHOWN))
    };
    let detail = match text("detail") {
        Some(d) => d,
        None if v.is_object() => String::new(),
        None => format!(
            "not a problem document: {}",
            clean(&String::from_utf8_lossy(body), 200)
        ),
    };
    let suggested_servers = v
        .get("suggested_servers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .take(4096)
                .map(|s| clean(s, 255))
                .collect()
        })
        .unwrap_or_default();
    Problem {
        status: status.as_u16(),
        title: text("title").unwrap_or(reason),
        detail,
        field: text("field"),
        suggested_servers,
        report: v
            .get("devices")
            .and_then(|d| serde_json::from_value(d.clone()).ok()),
    }
}

/// `s` without control characters (each becomes a space), at most `max`
/// characters: text from the other side, safe to print into a log.
pub fn clean(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .take(max)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if s.chars().nth(max).is_some() {
        out.push_str("...");
    }
    out
}

/// A transport error in words: ureq's message, with the I/O cause.
fn transport_message(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => format!("{io}"),
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        ureq::Error::HostNotFound => "host not found".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
