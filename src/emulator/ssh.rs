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

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use russh::keys::{Algorithm, PrivateKey, PublicKey};
use russh::server::{Auth, Handle, Msg, Server as _, Session};
use russh::{Channel, ChannelId, ChannelMsg, Disconnect};
use thiserror::Error;
use tokio::task::JoinHandle;
use tracing::{debug, info_span, Instrument};

use super::faults::Faults;
use super::netconf::session::too_big_reply;
use super::netconf::{NetconfDevice, NetconfSession};
use super::shell::{SessionAction, SessionKind, ShellDevice};
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
    let key = PrivateKey::random(&mut rand::rng(), Algorithm::Ed25519)
        .map_err(|e| ServeError::HostKey(e.to_string()))?;
    let host_key = key.public_key().clone();
    let config = Arc::new(russh::server::Config {
        keys: vec![key],
        auth_rejection_time: Duration::from_millis(200),
        auth_rejection_time_initial: Some(Duration::ZERO),
        inactivity_timeout: Some(Duration::from_secs(3600)),
        methods: russh::MethodSet::from(&[russh::MethodKind::Password][..]),
        nodelay: true,
        ..Default::default()
    });
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let mut server = Server {
        service: service.clone(),
        login: Arc::new(login),
    };
    let span = info_span!("emu.ssh", device = %service.name(), %addr);
    let task = tokio::spawn(
        async move {
            if let Err(e) = server.run_on_socket(config, &listener).await {
                debug!(error = %e, "ssh server stopped");
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

#[derive(Clone)]
struct Server {
    service: Service,
    login: Arc<Login>,
}

impl russh::server::Server for Server {
    type Handler = Conn;
    fn new_client(&mut self, _peer: Option<SocketAddr>) -> Conn {
        Conn {
            service: self.service.clone(),
            login: self.login.clone(),
            user: String::new(),
        }
    }
}

struct Conn {
    service: Service,
    login: Arc<Login>,
    user: String,
}

impl russh::server::Handler for Conn {
    type Error = russh::Error;

    async fn auth_password(&mut self, user: &str, password: &str) -> Result<Auth, Self::Error> {
        if user == self.login.username && password == self.login.password {
            self.user = user.to_string();
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
        let mut s = dev.clone().session(&self.user, SessionKind::Exec);
        let r = s.handle_line(command);
        tokio::time::sleep(dev.faults().reply_delay()).await;
        if r.action == SessionAction::Drop {
            return self.drop_connection().await;
        }
        let _ = channel.data_bytes(r.output.into_bytes()).await;
        let _ = channel.exit_status(0).await;
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
        loop {
            let (data, eof) = match channel.wait().await {
                Some(ChannelMsg::Data { data }) => (data.to_vec(), false),
                Some(ChannelMsg::Eof) | Some(ChannelMsg::Close) | None => (b"\n".to_vec(), true),
                Some(_) => continue,
            };
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
                        let delay = dev.faults().reply_delay();
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        match r.action {
                            SessionAction::Drop => return self.drop_connection().await,
                            SessionAction::Close => {
                                let _ = channel.data_bytes(pending).await;
                                let _ = channel.exit_status(0).await;
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
                let _ = channel.exit_status(0).await;
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
