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
use tracing::{debug, info, info_span, Instrument};

use super::faults::Faults;
use super::netconf::session::too_big_reply;
use super::netconf::{NetconfDevice, NetconfSession};
use super::shell::{SessionAction, SessionKind, ShellDevice};
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
            loop {
                let (socket, peer) = match listener.accept().await {
                    Ok(a) => a,
                    Err(e) => {
                        debug!(error = %e, "ssh accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = socket.set_nodelay(true);
                let activity = Activity::new();
                let conn = Conn {
                    service: service.clone(),
                    login: login.clone(),
                    user: String::new(),
                    activity: activity.clone(),
                };
                let span = info_span!("emu.ssh.conn", %peer);
                let served = connection(
                    config.clone(),
                    socket,
                    conn,
                    activity,
                    timeouts,
                    stop.subscribe(),
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

/// Serve one accepted connection until it ends or its timers close it.
async fn connection(
    config: Arc<russh::server::Config>,
    socket: tokio::net::TcpStream,
    conn: Conn,
    activity: Arc<Activity>,
    timeouts: SessionTimeouts,
    mut stopped: tokio::sync::watch::Receiver<()>,
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
        reply.accept().await;
        let handle = session.handle();
        let task = ChannelTask {
            service: self.service.clone(),
            user: self.user.clone(),
            handle: handle.clone(),
            activity: self.activity.clone(),
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
}

/// Minimal line editor for the interactive shell.
#[derive(Debug, Default)]
struct LineEditor {
    line: Vec<u8>,
    last_cr: bool,
}

enum Edit {
    Echo(Vec<u8>),
    Line(String),
}

impl LineEditor {
    fn feed(&mut self, b: u8) -> Option<Edit> {
        let was_cr = std::mem::replace(&mut self.last_cr, b == b'\r');
        match b {
            b'\n' if was_cr => None,
            b'\r' | b'\n' => {
                let l = String::from_utf8_lossy(&self.line).into_owned();
                self.line.clear();
                Some(Edit::Line(l))
            }
            0x7f | 0x08 => self.line.pop().map(|_| Edit::Echo(b"\x08 \x08".to_vec())),
            0x03 => {
                self.line.clear();
                Some(Edit::Line(String::new()))
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
        let r = s.handle_line(command);
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
        let mut ed = LineEditor::default();
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
                match ed.feed(b) {
                    Some(Edit::Echo(e)) if pty => pending.extend(e),
                    Some(Edit::Echo(_)) | None => {}
                    Some(Edit::Line(line)) => {
                        pending.extend(b"\r\n");
                        if eof && line.is_empty() {
                            continue;
                        }
                        let r = s.handle_line(&line);
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
    /// devices are untouched. A `<kill-session>` from another session
    /// closes this one.
    async fn netconf(&self, mut channel: Channel<Msg>, dev: Arc<NetconfDevice>) {
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
                let m = match dec.next_message() {
                    Ok(Some(m)) => m,
                    Ok(None) => break,
                    Err(FramingError::TooLarge(limit)) => {
                        debug!(limit, "message over the size limit: closing the session");
                        let r = too_big_reply(limit);
                        let _ = channel.data_bytes(encode(&r, s.framing())).await;
                        break 'outer;
                    }
                    Err(e) => {
                        debug!(error = %e, "framing error: closing");
                        break 'outer;
                    }
                };
                let framing = s.framing();
                let out = s.handle(&m);
                drop(m);
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
        let mut ed = LineEditor::default();
        let mut lines = Vec::new();
        for b in b"ab\x7fc\r\nd\re\n" {
            if let Some(Edit::Line(l)) = ed.feed(*b) {
                lines.push(l);
            }
        }
        assert_eq!(lines, vec!["ac", "d", "e"]);
    }
}
