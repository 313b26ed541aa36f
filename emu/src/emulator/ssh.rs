//! The SSH server of an emulated switch (russh): one per device on
//! 127.0.0.1:0, password authentication, a fresh ed25519 host key per start
//! (exported in known_hosts form so the real drivers verify it).
//!
//! Channels: for a CLI device (any [`ShellDevice`]: the Huawei CE CLI, the
//! SONiC shell), `shell` runs one of its sessions with minimal line editing
//! (`\r`, `\n`, `\r\n`, backspace) and, when a pty was requested, echo —
//! as a real device does, so OpenSSH works both interactively and with
//! commands piped in; `exec` runs one command. For a NETCONF device, the
//! `netconf` subsystem runs a [`NetconfSession`].
//!
//! Each channel is a tokio task owning the russh `Channel` and its session
//! state, so a slow reply (injected delay) blocks only that channel.
//!
//! Bounds ([`super::slots`] gives the figures and their sources): each
//! accepted connection takes one of its device's session slots
//! ([`ShellDevice::sessions`], [`NetconfDevice::clients`]) and a connection
//! beyond the device's maximum is closed at once (as sshd drops one past
//! `MaxStartups`); a connection opens at most
//! [`SSH_SESSIONS_PER_CONNECTION`] channels at once (sshd's `MaxSessions`;
//! the next is refused `administratively prohibited`); a NETCONF device
//! runs at most [`NetconfDevice::netconf_sessions`] sessions at once (the
//! channel of a `netconf` subsystem beyond is closed before the hello).
//! The shell's line editor keeps at most the device's
//! [`ShellDevice::max_line`] bytes of a line and discards the rest as it
//! arrives (Huawei CE: 510 characters, its editing buffer; when full, the
//! terminal alarm, a BEL, sounds once); at the end of the line the device's
//! answer to an over-long line
//! ([`super::shell::ShellSession::line_too_long`]) replaces running it. An
//! `exec` command longer than that gets the same answer. A failed accept
//! (`EMFILE`: out of descriptors) is retried after 50 ms and logged at most
//! once a second ([`Throttle`]), as are refused connections.
//!
//! Session timeouts ([`SessionTimeouts`], models and citations in
//! [`super::timeouts`]): each connection has a watchdog that disconnects it
//! when it has not authenticated within the login grace time (counted from
//! the TCP accept, so it covers a client that never sends its version line
//! too), or when, authenticated, no channel received input for the idle
//! time while no command was running. Dead clients are found by russh's
//! keepalives (OpenSSH's `ClientAliveInterval`/`ClientAliveCountMax`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use russh::keys::{Algorithm, PrivateKey, PublicKey};
use russh::server::{Auth, Handle, Msg, Session};
use russh::{Channel, ChannelId, ChannelMsg, Disconnect};
use thiserror::Error;
use tokio::task::JoinHandle;
use tracing::{debug, info, info_span, warn, Instrument};

use super::faults::Faults;
use super::netconf::session::too_big_reply;
use super::netconf::{NetconfDevice, NetconfSession};
use super::shell::{SessionAction, SessionKind, ShellDevice};
use super::slots::{accept_next, SessionSlots, Slot, Throttle, SSH_SESSIONS_PER_CONNECTION};
use super::timeouts::{Activity, SessionTimeouts, CLIENT_ALIVE_COUNT_MAX, CLIENT_ALIVE_INTERVAL};
use vclos_drivers::netconf::framing::{encode, Decoder, Framing, FramingError};

/// What the server runs.
#[derive(Debug, Clone)]
pub enum Service {
    /// A command line (Huawei CE CLI, SONiC shell) over `shell` / `exec`.
    Cli(Arc<dyn ShellDevice>),
    /// NETCONF over the `netconf` subsystem.
    Netconf(Arc<NetconfDevice>),
}

impl Service {
    fn name(&self) -> &str {
        match self {
            Service::Cli(d) => d.name(),
            Service::Netconf(d) => d.name(),
        }
    }

    fn faults(&self) -> &Arc<Faults> {
        match self {
            Service::Cli(d) => d.faults(),
            Service::Netconf(d) => d.faults(),
        }
    }

    /// The device's connection slots.
    fn sessions(&self) -> &Arc<SessionSlots> {
        match self {
            Service::Cli(d) => d.sessions(),
            Service::Netconf(d) => d.clients(),
        }
    }
}

pub use crate::emulator::Login;

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("cannot bind 127.0.0.1:0: {0}")]
    Bind(#[from] std::io::Error),
    #[error("cannot generate a host key: {0}")]
    HostKey(String),
}

/// A running SSH server. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct SshServer {
    addr: SocketAddr,
    host_key: PublicKey,
    task: JoinHandle<()>,
}

impl Drop for SshServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SshServer {
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn host_key(&self) -> &PublicKey {
        &self.host_key
    }

    /// The host key as OpenSSH writes it: `ssh-ed25519 AAAA...`.
    pub fn host_key_openssh(&self) -> String {
        self.host_key.to_openssh().unwrap_or_default()
    }

    /// A known_hosts line for this server: `[127.0.0.1]:PORT ssh-ed25519 AAAA...`.
    pub fn known_hosts_line(&self) -> String {
        format!(
            "[{}]:{} {}",
            self.addr.ip(),
            self.addr.port(),
            self.host_key_openssh()
        )
    }
}

/// Start serving `service` on 127.0.0.1 (an ephemeral port).
pub async fn serve(service: Service, login: Login) -> Result<SshServer, ServeError> {
    serve_on("127.0.0.1:0", service, login).await
}

/// Start serving on a given address (e.g. a fixed port for `vclos emu serve`).
pub async fn serve_on(bind: &str, service: Service, login: Login) -> Result<SshServer, ServeError> {
    serve_with(bind, service, login, SessionTimeouts::default()).await
}

/// Start serving on a given address with the given session timeouts.
pub async fn serve_with(
    bind: &str,
    service: Service,
    login: Login,
    timeouts: SessionTimeouts,
) -> Result<SshServer, ServeError> {
    let key = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519)
        .map_err(|e| ServeError::HostKey(e.to_string()))?;
    let host_key = key.public_key().clone();
    let config = Arc::new(russh::server::Config {
        keys: vec![key],
        auth_rejection_time: Duration::from_millis(200),
        auth_rejection_time_initial: Some(Duration::ZERO),
        // Dead-peer detection only (the watchdog handles login and idle):
        // a live client answers the keepalives, which resets this timer.
        keepalive_interval: Some(CLIENT_ALIVE_INTERVAL),
        keepalive_max: CLIENT_ALIVE_COUNT_MAX,
        inactivity_timeout: Some(CLIENT_ALIVE_INTERVAL * (CLIENT_ALIVE_COUNT_MAX as u32 + 1)),
        methods: russh::MethodSet::from(&[russh::MethodKind::Password][..]),
        nodelay: true,
        ..Default::default()
    });
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let login = Arc::new(login);
    let span = info_span!("emu.ssh", device = %service.name(), %addr);
    let task = tokio::spawn(
        async move {
            // Dropped with this task: every connection is then disconnected.
            let (stop, _) = tokio::sync::watch::channel(());
            let (failing, refusing) = (Throttle::default(), Throttle::default());
            loop {
                let (socket, peer) = accept_next(|| listener.accept(), &failing, "ssh").await;
                let slots = service.sessions();
                let Some(slot) = slots.try_take() else {
                    if let Some(held) = refusing.pass() {
                        warn!(%peer, max = slots.max(), repeated = held,
                            "ssh connection refused: the device's sessions are all in use");
                    }
                    drop(socket);
                    continue;
                };
                let _ = socket.set_nodelay(true);
                let activity = Activity::new();
                let conn = Conn {
                    service: service.clone(),
                    login: login.clone(),
                    user: String::new(),
                    activity: activity.clone(),
                    channels: SessionSlots::new(SSH_SESSIONS_PER_CONNECTION),
                };
                let span = info_span!("emu.ssh.conn", %peer);
                let served = connection(
                    config.clone(),
                    socket,
                    conn,
                    activity,
                    timeouts,
                    stop.subscribe(),
                    slot,
                );
                tokio::spawn(served.instrument(span));
            }
        }
        .instrument(span),
    );
    Ok(SshServer {
        addr,
        host_key,
        task,
    })
}

/// Serve one accepted connection until it ends or its timers close it; it
/// holds `_slot`, its device's session slot, until then.
async fn connection(
    config: Arc<russh::server::Config>,
    socket: tokio::net::TcpStream,
    conn: Conn,
    activity: Arc<Activity>,
    timeouts: SessionTimeouts,
    mut stopped: tokio::sync::watch::Receiver<()>,
    _slot: Slot,
) {
    // A second handle on the socket, to shut it down whatever state the
    // SSH session is in: during a key exchange russh does not act on a
    // disconnect request, so a client stalling there would otherwise stay.
    let (socket, killer) = match split_killer(socket) {
        Ok(s) => s,
        Err(e) => {
            debug!(error = %e, "cannot take over the ssh socket");
            return;
        }
    };
    // Until the client's version line arrives there is no session to
    // disconnect: the login grace time then just drops the socket.
    let session = tokio::select! {
        r = russh::server::run_stream(config, socket, conn) => match r {
            Ok(s) => s,
            Err(e) => {
                debug!(error = %e, "ssh connection setup failed");
                return;
            }
        },
        why = activity.expired(timeouts) => {
            info!(reason = why.reason(), "dropping the ssh connection before its version line");
            return;
        }
        _ = stopped.changed() => return,
    };
    let handle = session.handle();
    tokio::pin!(session);
    // The watchdog runs beside the session and ends it with a disconnect
    // message, as sshd does; so does stopping the server.
    let why = tokio::select! {
        r = &mut session => {
            if let Err(e) = r {
                debug!(error = %e, "ssh connection ended");
            }
            return;
        }
        why = activity.expired(timeouts) => why.reason(),
        _ = stopped.changed() => "server stopped",
    };
    info!(reason = why, "closing the ssh connection");
    let _ = handle
        .disconnect(Disconnect::ByApplication, why.into(), "en".into())
        .await;
    // A client gets a moment to read the message and close; then the
    // socket goes, whether or not the session acted on the request.
    let _ = tokio::time::timeout(DISCONNECT_GRACE, &mut session).await;
    let _ = killer.shutdown(std::net::Shutdown::Both);
}

/// How long a disconnected client has to close before the socket is shut down.
const DISCONNECT_GRACE: Duration = Duration::from_secs(1);

/// The socket back for tokio, and a clone of it that can shut it down.
fn split_killer(
    socket: tokio::net::TcpStream,
) -> std::io::Result<(tokio::net::TcpStream, std::net::TcpStream)> {
    let std = socket.into_std()?;
    let killer = std.try_clone()?;
    Ok((tokio::net::TcpStream::from_std(std)?, killer))
}

struct Conn {
    service: Service,
    login: Arc<Login>,
    user: String,
    activity: Arc<Activity>,
    /// The channels open on this connection.
    channels: Arc<SessionSlots>,
}

impl russh::server::Handler for Conn {
    type Error = russh::Error;

    async fn auth_password(&mut self, user: &str, password: &str) -> Result<Auth, Self::Error> {
        if user == self.login.username && password == self.login.password {
            self.user = user.to_string();
            self.activity.logged_in();
            self.service.faults().count_login();
            Ok(Auth::Accept)
        } else {
            Ok(Auth::reject())
        }
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: russh::server::ChannelOpenHandle,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let Some(slot) = self.channels.try_take() else {
            debug!(
                max = self.channels.max(),
                "channel refused: too many open on this connection"
            );
            reply
                .reject(russh::ChannelOpenFailure::AdministrativelyProhibited)
                .await;
            return Ok(());
        };
        reply.accept().await;
        let handle = session.handle();
        let task = ChannelTask {
            service: self.service.clone(),
            user: self.user.clone(),
            handle: handle.clone(),
            activity: self.activity.clone(),
            _slot: slot,
        };
        let span = info_span!("emu.channel", device = %self.service.name());
        // An injected disconnect ends the channel and the whole connection.
        let mut gone = self.service.faults().disconnects();
        let served = async move {
            // Biased: once disconnected, no further request is answered.
            tokio::select! {
                biased;
                Ok(()) = gone.changed() => {
                    debug!("injected disconnect");
                    disconnect(&handle).await;
                }
                () = task.run(channel) => {}
            }
        };
        tokio::spawn(served.instrument(span));
        Ok(())
    }

    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _cols: u32,
        _rows: u32,
        _pw: u32,
        _ph: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        match self.service {
            Service::Cli(_) => session.channel_success(channel),
            Service::Netconf(_) => session.channel_failure(channel),
        }
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        _data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        match self.service {
            Service::Cli(_) => session.channel_success(channel),
            Service::Netconf(_) => session.channel_failure(channel),
        }
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        match (&self.service, name) {
            // The channel's task takes the session slot, or closes the
            // channel before the hello when none is free (one place
            // decides, so no slot is taken for a refused request).
            (Service::Netconf(_), "netconf") => session.channel_success(channel),
            _ => session.channel_failure(channel),
        }
    }
}

/// The per-channel task.
struct ChannelTask {
    service: Service,
    user: String,
    handle: Handle,
    /// The connection's activity: input and running commands hold off its
    /// idle timeout.
    activity: Arc<Activity>,
    /// This channel's place among its connection's channels.
    _slot: Slot,
}

/// Minimal line editor for the interactive shell, keeping at most `max`
/// bytes of a line.
#[derive(Debug)]
struct LineEditor {
    line: Vec<u8>,
    last_cr: bool,
    max: usize,
    /// Bytes of this line were discarded.
    overflow: bool,
}

enum Edit {
    Echo(Vec<u8>),
    Line(String),
    /// The line ended, and was longer than the editor keeps.
    TooLong,
}

/// The terminal alarm rung when the line is full.
const BEL: u8 = 0x07;

impl LineEditor {
    fn new(max: usize) -> Self {
        LineEditor {
            line: Vec::new(),
            last_cr: false,
            max,
            overflow: false,
        }
    }

    fn feed(&mut self, b: u8) -> Option<Edit> {
        let was_cr = std::mem::replace(&mut self.last_cr, b == b'\r');
        match b {
            b'\n' if was_cr => None,
            b'\r' | b'\n' => {
                let l = String::from_utf8_lossy(&self.line).into_owned();
                self.line.clear();
                if std::mem::take(&mut self.overflow) {
                    return Some(Edit::TooLong);
                }
                Some(Edit::Line(l))
            }
            0x7f | 0x08 => self.line.pop().map(|_| Edit::Echo(b"\x08 \x08".to_vec())),
            0x03 => {
                self.line.clear();
                self.overflow = false;
                Some(Edit::Line(String::new()))
            }
            // The buffer is full: the byte is dropped, the bell rung once.
            b if (b >= 0x20 || b == b'\t') && self.line.len() >= self.max => {
                (!std::mem::replace(&mut self.overflow, true)).then(|| Edit::Echo(vec![BEL]))
            }
            b if b >= 0x20 || b == b'\t' => {
                self.line.push(b);
                Some(Edit::Echo(vec![b]))
            }
            _ => None,
        }
    }
}

/// End the SSH connection at once (a dropped connection, as the client sees it).
async fn disconnect(handle: &Handle) {
    let _ = handle
        .disconnect(
            Disconnect::ByApplication,
            "connection dropped".into(),
            "en".into(),
        )
        .await;
}

fn crlf(s: &str) -> String {
    s.replace('\n', "\r\n")
}

impl ChannelTask {
    async fn run(self, mut channel: Channel<Msg>) {
        let mut pty = false;
        while let Some(msg) = channel.wait().await {
            match msg {
                ChannelMsg::RequestPty { .. } => pty = true,
                ChannelMsg::RequestShell { .. } => {
                    if let Service::Cli(dev) = &self.service {
                        let dev = dev.clone();
                        self.shell(channel, dev, pty).await;
                    }
                    return;
                }
                ChannelMsg::Exec { command, .. } => {
                    if let Service::Cli(dev) = &self.service {
                        let dev = dev.clone();
                        self.exec(channel, dev, &String::from_utf8_lossy(&command))
                            .await;
                    }
                    return;
                }
                ChannelMsg::RequestSubsystem { name, .. } => {
                    if let (Service::Netconf(dev), "netconf") = (&self.service, name.as_str()) {
                        let dev = dev.clone();
                        self.netconf(channel, dev).await;
                    }
                    return;
                }
                ChannelMsg::Eof | ChannelMsg::Close => return,
                _ => {}
            }
        }
    }

    async fn drop_connection(&self) {
        disconnect(&self.handle).await;
    }

    async fn exec(&self, channel: Channel<Msg>, dev: Arc<dyn ShellDevice>, command: &str) {
        let _running = self.activity.running();
        let mut s = dev.clone().session(&self.user, SessionKind::Exec);
        let r = if command.len() > dev.max_line() {
            s.line_too_long()
        } else {
            s.handle_line(command)
        };
        tokio::time::sleep(dev.faults().reply_delay()).await;
        if r.action == SessionAction::Drop {
            return self.drop_connection().await;
        }
        let _ = channel.data_bytes(r.output.into_bytes()).await;
        let _ = channel.exit_status(r.status).await;
        let _ = channel.eof().await;
        let _ = channel.close().await;
    }

    async fn shell(&self, mut channel: Channel<Msg>, dev: Arc<dyn ShellDevice>, pty: bool) {
        let mut s = dev.clone().session(&self.user, SessionKind::Shell);
        let hello = format!("{}{}", crlf(&s.banner()), s.prompt());
        if channel.data_bytes(hello.into_bytes()).await.is_err() {
            return;
        }
        let mut ed = LineEditor::new(dev.max_line());
        let mut pending: Vec<u8> = Vec::new();
        // A shell's exit status is its last command's (bash(1), "EXIT STATUS").
        let mut last = 0;
        loop {
            let (data, eof) = match channel.wait().await {
                Some(ChannelMsg::Data { data }) => (data.to_vec(), false),
                Some(ChannelMsg::Eof) | Some(ChannelMsg::Close) | None => (b"\n".to_vec(), true),
                Some(_) => continue,
            };
            // Until this input is answered the session is not idle.
            let _running = self.activity.running();
            for b in data {
                let line = match ed.feed(b) {
                    Some(Edit::Echo(e)) => {
                        if pty {
                            pending.extend(e);
                        }
                        continue;
                    }
                    None => continue,
                    Some(Edit::Line(line)) => Some(line),
                    Some(Edit::TooLong) => None,
                };
                pending.extend(b"\r\n");
                if eof && line.as_deref() == Some("") {
                    continue;
                }
                let r = match line {
                    Some(line) => s.handle_line(&line),
                    None => s.line_too_long(),
                };
                last = r.status;
                let delay = dev.faults().reply_delay();
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                match r.action {
                    SessionAction::Drop => return self.drop_connection().await,
                    SessionAction::Close => {
                        let _ = channel.data_bytes(pending).await;
                        let _ = channel.exit_status(last).await;
                        let _ = channel.eof().await;
                        let _ = channel.close().await;
                        return;
                    }
                    SessionAction::Continue => {
                        pending.extend(crlf(&r.output).into_bytes());
                        pending.extend(s.prompt().into_bytes());
                    }
                }
            }
            if !pending.is_empty()
                && channel
                    .data_bytes(std::mem::take(&mut pending))
                    .await
                    .is_err()
            {
                return;
            }
            if eof {
                let _ = channel.exit_status(last).await;
                let _ = channel.eof().await;
                let _ = channel.close().await;
                return;
            }
        }
    }

    /// One NETCONF session. The decoder refuses a message over the
    /// device's size limit while reading it: the session answers
    /// `too-big` and closes (RFC 6241 Appendix A); other sessions and
    /// devices are untouched. A message that is not UTF-8 is answered
    /// `malformed-message` (RFC 6241 section 3) and the session goes on
    /// (before the hello it is closed); one that cannot be delimited (a bad
    /// chunk header) closes the session. A `<kill-session>` from another
    /// session closes this one. Beyond the device's maximum of NETCONF
    /// sessions the channel is closed before the hello.
    async fn netconf(&self, mut channel: Channel<Msg>, dev: Arc<NetconfDevice>) {
        let Some(_slot) = dev.netconf_sessions().try_take() else {
            info!(
                max = dev.netconf_sessions().max(),
                "netconf session refused: the device's sessions are all in use"
            );
            let _ = channel.eof().await;
            let _ = channel.close().await;
            return;
        };
        let mut s = NetconfSession::new(dev.clone());
        debug!(session = s.id(), "netconf session start");
        if channel
            .data_bytes(encode(&s.hello(), Framing::EndOfMessage))
            .await
            .is_err()
        {
            s.end();
            return;
        }
        let kill = s.kill_switch();
        let mut dec = Decoder::with_limit(dev.limits().max_message);
        'outer: loop {
            let msg = tokio::select! {
                m = channel.wait() => m,
                () = kill.killed() => break 'outer,
            };
            match msg {
                Some(ChannelMsg::Data { data }) => dec.push(&data),
                Some(ChannelMsg::Eof | ChannelMsg::Close) | None => break,
                Some(_) => continue,
            }
            // Until this input is answered the session is not idle.
            let _running = self.activity.running();
            loop {
                let framing = s.framing();
                let out = match dec.next_message() {
                    Ok(Some(m)) => s.handle(&m),
                    Ok(None) => break,
                    Err(FramingError::TooLarge(limit)) => {
                        info!(
                            limit,
                            "message over the size limit: too-big, closing the session"
                        );
                        let r = too_big_reply(limit);
                        let _ = channel.data_bytes(encode(&r, framing)).await;
                        break 'outer;
                    }
                    Err(FramingError::NotUtf8) => {
                        info!(
                            session = s.id(),
                            "message is not UTF-8: malformed-message (RFC 6241 section 3)"
                        );
                        s.not_utf8()
                    }
                    Err(e) => {
                        info!(
                            session = s.id(),
                            error = %e,
                            "framing error: no message can be delimited any more, closing the session"
                        );
                        break 'outer;
                    }
                };
                dec.set_framing(s.framing());
                let delay = dev.faults().reply_delay();
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                if out.drop {
                    s.end();
                    return self.drop_connection().await;
                }
                if let Some(r) = out.reply {
                    if channel.data_bytes(encode(&r, framing)).await.is_err() {
                        break 'outer;
                    }
                }
                if out.close {
                    break 'outer;
                }
            }
        }
        s.end();
        let _ = channel.exit_status(0).await;
        let _ = channel.eof().await;
        let _ = channel.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_editor_handles_crlf_and_backspace() {
        let mut ed = LineEditor::new(usize::MAX);
        let mut lines = Vec::new();
        for b in b"ab\x7fc\r\nd\re\n" {
            if let Some(Edit::Line(l)) = ed.feed(*b) {
                lines.push(l);
            }
        }
        assert_eq!(lines, vec!["ac", "d", "e"]);
    }

    #[test]
    fn line_editor_keeps_at_most_its_maximum_and_rings_once() {
        let mut ed = LineEditor::new(510);
        let mut bells = 0;
        // 1 MiB without a line end: the buffer stops at 510 bytes.
        for _ in 0..1 << 20 {
            match ed.feed(b'a') {
                Some(Edit::Echo(e)) if e == [BEL] => bells += 1,
                Some(Edit::Echo(_)) | None => {}
                Some(Edit::Line(_) | Edit::TooLong) => panic!("no line end was sent"),
            }
            assert!(ed.line.len() <= 510);
        }
        assert_eq!(bells, 1);
        assert!(matches!(ed.feed(b'\r'), Some(Edit::TooLong)));
        // The next line starts afresh; 510 bytes exactly is a line.
        assert!(ed.feed(b'\n').is_none());
        for _ in 0..510 {
            ed.feed(b'b');
        }
        match ed.feed(b'\n') {
            Some(Edit::Line(l)) => assert_eq!(l.len(), 510),
            _ => panic!("a 510-byte line is a line"),
        }
        // Ctrl-C forgets an over-long line too.
        for _ in 0..600 {
            ed.feed(b'c');
        }
        assert!(matches!(ed.feed(0x03), Some(Edit::Line(l)) if l.is_empty()));
        assert!(matches!(ed.feed(b'\n'), Some(Edit::Line(l)) if l.is_empty()));
    }
}
