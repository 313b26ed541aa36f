//! The emulated OCS's management endpoint: TL1 over Telnet.
//!
//! One tokio TCP listener per OCS (loopback, ephemeral port by default), one
//! task per connection, many sessions at once, all on the same
//! [`OcsModel`]. A session reads lines (`\r\n`, `\n` or `\r`), strips Telnet
//! IAC sequences and refuses every option (shared [`IacFilter`]), splits each
//! line on `;` and answers every command with a standard TL1 response block
//! ([`session`] documents verbs and DENY codes). Binary garbage gets a DENY,
//! never a crash; over-long lines are refused and dropped.
//!
//! Telnet is plaintext: logins cross the wire in clear. The server binds to
//! loopback unless told otherwise, as it is an emulator.
//!
//! Why tokio and not a Telnet crate: the emulator serves every device of a
//! fabric from one process, and TL1 needs only line framing and IAC
//! stripping, which the drivers crate already has for its client.
//!
//! Session timeouts ([`SessionTimeouts`], models and citations in
//! [`crate::emulator::timeouts`]): a connection that has not completed
//! `ACT-USER` within the login grace time (counted from the accept, and
//! again from a `CANC-USER`) is closed without a word; a logged-in session
//! with no input for the idle time gets the autonomous `CANC` message TL1
//! network elements send on a session time-out, then is closed. The clock
//! is not running while a command executes (a 50 ms OCS switch, an injected
//! delay): it restarts when the reply has been written.
//!
//! Bounds: at most [`Tl1Options::max_sessions`] connections at once
//! ([`TL1_SESSIONS`], 32, by default; [`crate::emulator::slots`]), a
//! connection beyond being closed at once, before a byte is read; a failed
//! accept (`EMFILE`: out of descriptors) is retried after 50 ms and logged
//! at most once a second, as are refused connections; a session is closed
//! after [`session::MAX_LOGIN_FAILURES`] failed `ACT-USER`s, each answered
//! only after [`session::LOGIN_FAILURE_DELAY`] ([`session`] gives the rule).
//!
//! Fault injection ([`Faults`]): at every command a session may drop the
//! connection or DENY (`SROF`); `ENT-PATCH`/`DLT-PATCH` are the commits that
//! `refuse_commits` DENYs; every reply can be delayed; `disconnect_all`
//! closes every open session.

mod command;
pub mod session;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;
use vclos_drivers::telnet::IacFilter;

pub use command::{parse, port_list, Command, ParseError};
pub use session::{Login, Outcome, Session};

use super::faults::Faults;
use super::ocs::OcsModel;
use super::slots::{accept_next, SessionSlots, Throttle, TL1_SESSIONS};
use super::timeouts::{self, SessionTimeouts};

/// Longest input line accepted, in bytes.
const MAX_LINE: usize = 4096;

/// How to serve one OCS.
#[derive(Debug, Clone)]
pub struct Tl1Options {
    /// Where to listen; `127.0.0.1:0` picks a free loopback port.
    pub bind: SocketAddr,
    pub login: Login,
    pub faults: Arc<Faults>,
    /// Login grace and idle timeouts.
    pub timeouts: SessionTimeouts,
    /// Connections served at once; more are closed at once.
    pub max_sessions: usize,
}

impl Tl1Options {
    /// Loopback, ephemeral port, no faults.
    pub fn new(login: Login) -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            login,
            faults: Arc::new(Faults::new()),
            timeouts: SessionTimeouts::default(),
            max_sessions: TL1_SESSIONS,
        }
    }
}

/// A running TL1 server. Dropping it stops the listener and every session.
#[derive(Debug)]
pub struct Tl1Server {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Tl1Server {
    /// The address actually bound (with the ephemeral port resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting and close every session.
    pub fn shutdown(self) {}
}

impl Drop for Tl1Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bind and start serving `model` over Telnet/TL1.
pub async fn serve(model: Arc<OcsModel>, opts: Tl1Options) -> io::Result<Tl1Server> {
    let listener = TcpListener::bind(opts.bind).await?;
    let addr = listener.local_addr()?;
    let device = model.name().to_string();
    tracing::info!(device = %device, %addr, "tl1 server listening (telnet, plaintext)");
    let login = Arc::new(opts.login);
    let faults = opts.faults;
    let limits = opts.timeouts;
    let slots = SessionSlots::new(opts.max_sessions);
    let task = tokio::spawn(
        async move {
            // Sessions live in the set, so aborting this task ends them too.
            let mut sessions = JoinSet::new();
            let (failing, refusing) = (Throttle::default(), Throttle::default());
            loop {
                tokio::select! {
                    (stream, peer) = accept_next(|| listener.accept(), &failing, "tl1") => {
                        let Some(slot) = slots.try_take() else {
                            if let Some(held) = refusing.pass() {
                                tracing::warn!(%peer, max = slots.max(), repeated = held,
                                    "tl1 connection refused: the OCS's sessions are all in use");
                            }
                            drop(stream);
                            continue;
                        };
                        // Replies go out at once, as the SSH endpoints' do.
                        let _ = stream.set_nodelay(true);
                        let session = Session::new(model.clone(), login.clone(), faults.clone());
                        let gone = faults.disconnects();
                        let span = tracing::info_span!("tl1-session", device = %model.name(), %peer);
                        let served = async move {
                            run_session(stream, session, gone, limits).await;
                            drop(slot);
                        };
                        sessions.spawn(served.instrument(span));
                    }
                    Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
                }
            }
        }
        .instrument(tracing::info_span!("tl1-server", device = %device)),
    );
    Ok(Tl1Server { addr, task })
}

/// Serve one connection until the peer leaves, a fault drops it (at a
/// command, or [`Faults::disconnect_all`] at any time) or its timers close it.
async fn run_session(
    mut stream: TcpStream,
    mut session: Session,
    mut gone: tokio::sync::watch::Receiver<u64>,
    limits: SessionTimeouts,
) {
    tracing::debug!("tl1 session open");
    let mut filter = IacFilter::new();
    let mut line = Vec::with_capacity(256);
    let mut overflow = false;
    let mut buf = [0u8; 4096];
    // Login grace counts from here (and from a logout); idle from the last
    // input or reply.
    let (mut waiting_since, mut last) = (Instant::now(), Instant::now());
    let mut was_logged_in = false;
    loop {
        let due = timeouts::deadline(&limits, session.logged_in(), waiting_since, last);
        // Biased: once disconnected, no further command is answered.
        let read = tokio::select! {
            biased;
            Ok(()) = gone.changed() => {
                tracing::debug!("tl1 session dropped (injected disconnect)");
                return;
            }
            () = timeouts::sleep_until(due.map(|(at, _)| at)) => {
                if let Some((_, why)) = due {
                    tracing::info!(reason = why.reason(), "closing the tl1 session");
                    if let Some(msg) = session.timed_out() {
                        let _ = stream.write_all(msg.as_bytes()).await;
                    }
                }
                return;
            }
            r = stream.read(&mut buf) => r,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let (mut data, mut replies) = (Vec::with_capacity(n), Vec::new());
        filter.feed(&buf[..n], &mut data, &mut replies);
        let n_data = data.len();
        if !replies.is_empty() && stream.write_all(&replies).await.is_err() {
            break;
        }
        for b in data {
            match b {
                b'\r' | b'\n' => {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    line.clear();
                    let lost = std::mem::take(&mut overflow);
                    if lost {
                        let msg = session.framing_error("line too long");
                        if stream.write_all(msg.as_bytes()).await.is_err() {
                            return;
                        }
                    } else if !handle_line(&mut stream, &mut session, &text).await {
                        tracing::debug!("tl1 session dropped");
                        return;
                    }
                }
                0 => {}
                _ if line.len() >= MAX_LINE => overflow = true,
                _ => line.push(b),
            }
        }
        // Only input restarts the idle clock (not Telnet negotiation), and
        // it restarts once the commands it carried have been answered.
        if n_data > 0 {
            last = Instant::now();
        }
        if was_logged_in && !session.logged_in() {
            waiting_since = Instant::now();
        }
        was_logged_in = session.logged_in();
    }
    tracing::debug!("tl1 session closed");
}

/// Run every `;`-terminated command of a line; false if the session ends.
async fn handle_line(stream: &mut TcpStream, session: &mut Session, text: &str) -> bool {
    let mut parts: Vec<&str> = text.split(';').collect();
    let tail = parts.pop().unwrap_or("");
    for cmd in parts {
        if cmd.trim().is_empty() {
            continue;
        }
        match session.execute(cmd).await {
            Outcome::Drop => return false,
            Outcome::Reply(r) => {
                if stream.write_all(r.as_bytes()).await.is_err() {
                    return false;
                }
            }
            Outcome::Close(r) => {
                let _ = stream.write_all(r.as_bytes()).await;
                return false;
            }
        }
    }
    if !tail.trim().is_empty() {
        let msg = session.framing_error("command must end with ';'");
        return stream.write_all(msg.as_bytes()).await.is_ok();
    }
    true
}
