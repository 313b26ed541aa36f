//! Async SSH transport (russh): connect with timeout and bounded retries,
//! password authentication, host-key verification against a known_hosts
//! file, and two channel kinds: an interactive shell with prompt detection
//! (for CLI dialects) and a subsystem channel (for NETCONF).
//!
//! One SSH stack serves both the CLI and NETCONF drivers. `netconf-rs` was
//! not used: it is blocking and pulls in libssh2 (C, OpenSSL), which would
//! mean a second SSH implementation, a thread per device, and none of
//! tokio's timeouts.
//!
//! Secrets: the password lives in a [`Password`] whose `Debug` is redacted;
//! it is never logged or put in an error.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use russh::client::{self, Handle, Msg};
use russh::keys::{check_known_hosts_path, PublicKeyOrCertificate};
use russh::{Channel, ChannelMsg, Disconnect};
use tracing::{debug, warn};

use crate::pipeline::split_replies;
use crate::ErrorKind;

/// A password that never prints.
#[derive(Clone)]
pub struct Password(String);

/// Largest known_hosts file handed to russh, which reads it whole
/// (OpenSSH's files take a few hundred bytes per host).
pub const MAX_KNOWN_HOSTS: u64 = 16 * 1024 * 1024;

/// A known_hosts path russh may read: a regular file within
/// [`MAX_KNOWN_HOSTS`] (a pipe would block the read, `/dev/zero` never
/// ends). A missing file passes: russh reports it as no entry.
fn known_hosts_readable(path: &std::path::Path) -> Result<(), String> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.to_string()),
        Ok(m) if !m.is_file() => Err("not a regular file".into()),
        Ok(m) if m.len() > MAX_KNOWN_HOSTS => Err(format!(
            "{} bytes, over the {MAX_KNOWN_HOSTS}-byte limit",
            m.len()
        )),
        Ok(_) => Ok(()),
    }
}

impl Password {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// How the server's host key is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyCheck {
    /// The key must match this host's entry in a known_hosts file (an entry
    /// `[host]:port` for ports other than 22). No entry or another key for
    /// the same algorithm fails with [`ErrorKind::HostKey`].
    KnownHosts(PathBuf),
    /// Accept any key (topology `host_key: insecure-accept-any`); warned on
    /// every connect.
    InsecureAcceptAny,
}

/// Everything needed to reach one device.
#[derive(Debug, Clone)]
pub struct SshOptions {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: Password,
    pub host_key: HostKeyCheck,
    pub connect_timeout: Duration,
    /// Bound on every command / RPC round trip.
    pub command_timeout: Duration,
    /// Extra connection attempts after the first (connect errors and
    /// timeouts only; host-key and auth failures are never retried).
    pub connect_retries: u32,
    pub retry_backoff: Duration,
}

impl SshOptions {
    /// Options with the defaults: 10 s connect, 30 s command, 2 retries
    /// 500 ms apart.
    pub fn new(
        host: impl Into<String>,
        port: u16,
        username: impl Into<String>,
        password: Password,
        host_key: HostKeyCheck,
    ) -> Self {
        Self {
            host: host.into(),
            port,
            username: username.into(),
            password,
            host_key,
            connect_timeout: Duration::from_secs(10),
            command_timeout: Duration::from_secs(30),
            connect_retries: 2,
            retry_backoff: Duration::from_millis(500),
        }
    }
}

struct Verifier {
    host: String,
    port: u16,
    check: HostKeyCheck,
    /// Why the key was refused, read back after russh reports the refusal.
    refusal: Arc<Mutex<Option<String>>>,
}

impl client::Handler for Verifier {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = key else {
            self.refuse("host certificates are not supported".into());
            return Ok(false);
        };
        match &self.check {
            HostKeyCheck::InsecureAcceptAny => {
                warn!(host = %self.host, port = self.port, "host key NOT verified (insecure-accept-any)");
                Ok(true)
            }
            HostKeyCheck::KnownHosts(path) => {
                if let Err(why) = known_hosts_readable(path) {
                    self.refuse(format!("cannot read {}: {why}", path.display()));
                    return Ok(false);
                }
                match check_known_hosts_path(&self.host, self.port, key, path) {
                    Ok(true) => Ok(true),
                    Ok(false) => {
                        self.refuse(format!(
                            "no known_hosts entry for [{}]:{} in {}",
                            self.host,
                            self.port,
                            path.display()
                        ));
                        Ok(false)
                    }
                    Err(russh::keys::Error::KeyChanged { line }) => {
                        self.refuse(format!(
                            "key differs from {} line {line} (possible man-in-the-middle)",
                            path.display()
                        ));
                        Ok(false)
                    }
                    Err(e) => {
                        self.refuse(format!("cannot read {}: {e}", path.display()));
                        Ok(false)
                    }
                }
            }
        }
    }
}

impl Verifier {
    fn refuse(&self, why: String) {
        if let Ok(mut g) = self.refusal.lock() {
            *g = Some(why);
        }
    }
}

/// An authenticated SSH connection.
pub struct SshSession {
    handle: Handle<Verifier>,
    opts: SshOptions,
}

impl fmt::Debug for SshSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SshSession")
            .field("host", &self.opts.host)
            .field("port", &self.opts.port)
            .finish()
    }
}

/// Connect and authenticate, retrying connection failures.
pub async fn connect(opts: &SshOptions) -> Result<SshSession, ErrorKind> {
    let mut attempt = 0;
    loop {
        match connect_once(opts).await {
            Ok(s) => return Ok(s),
            Err(e @ (ErrorKind::Connect(_) | ErrorKind::Timeout(_)))
                if attempt < opts.connect_retries =>
            {
                attempt += 1;
                debug!(host = %opts.host, port = opts.port, attempt, error = %e, "retrying connect");
                tokio::time::sleep(opts.retry_backoff).await;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn connect_once(opts: &SshOptions) -> Result<SshSession, ErrorKind> {
    let config = Arc::new(client::Config {
        inactivity_timeout: None,
        // Request/response traffic: Nagle's algorithm would hold a small
        // write back until the previous one is acknowledged, and a delayed
        // ACK makes that a 40 ms stall (OpenSSH sets TCP_NODELAY too).
        nodelay: true,
        ..Default::default()
    });
    let refusal = Arc::new(Mutex::new(None));
    let verifier = Verifier {
        host: opts.host.clone(),
        port: opts.port,
        check: opts.host_key.clone(),
        refusal: refusal.clone(),
    };
    let addr = (opts.host.clone(), opts.port);
    let fut = async {
        let mut handle =
            client::connect(config, addr, verifier).await.map_err(|e| {
                match refusal.lock().ok().and_then(|mut g| g.take()) {
                    Some(why) => ErrorKind::HostKey(why),
                    None => ErrorKind::Connect(e.to_string()),
                }
            })?;
        let auth = handle
            .authenticate_password(opts.username.clone(), opts.password.0.clone())
            .await
            .map_err(|e| ErrorKind::Connect(e.to_string()))?;
        if !auth.success() {
            return Err(ErrorKind::Auth);
        }
        Ok(handle)
    };
    let handle = tokio::time::timeout(opts.connect_timeout, fut)
        .await
        .map_err(|_| ErrorKind::Timeout(opts.connect_timeout))??;
    Ok(SshSession {
        handle,
        opts: opts.clone(),
    })
}

impl SshSession {
    /// An interactive shell with a wide pty (no line wrapping), positioned
    /// after the login banner and first prompt; `is_prompt` recognises the
    /// device's prompt line ([`is_vrp_prompt`], [`is_bash_prompt`]).
    pub async fn open_shell(&self, is_prompt: fn(&str) -> bool) -> Result<Shell, ErrorKind> {
        let t = self.opts.command_timeout;
        let fut = async {
            let ch = self.handle.channel_open_session().await.map_err(disc)?;
            ch.request_pty(true, "vt100", 511, 24, 0, 0, &[])
                .await
                .map_err(disc)?;
            ch.request_shell(true).await.map_err(disc)?;
            Ok::<_, ErrorKind>(ch)
        };
        let channel = tokio::time::timeout(t, fut)
            .await
            .map_err(|_| ErrorKind::Timeout(t))??;
        let mut shell = Shell {
            channel,
            buf: Vec::new(),
            timeout: t,
            is_prompt,
            last_prompt: String::new(),
        };
        let banner = shell.read_until_prompt().await?;
        debug!(lines = banner.lines().count(), "shell open");
        Ok(shell)
    }

    /// A channel running the named subsystem (e.g. `netconf`).
    pub async fn open_subsystem(&self, name: &str) -> Result<Channel<Msg>, ErrorKind> {
        let t = self.opts.command_timeout;
        let fut = async {
            let ch = self.handle.channel_open_session().await.map_err(disc)?;
            ch.request_subsystem(true, name).await.map_err(disc)?;
            Ok::<_, ErrorKind>(ch)
        };
        tokio::time::timeout(t, fut)
            .await
            .map_err(|_| ErrorKind::Timeout(t))?
    }

    pub fn command_timeout(&self) -> Duration {
        self.opts.command_timeout
    }

    /// Close the connection politely.
    pub async fn close(&self) {
        let _ = self
            .handle
            .disconnect(Disconnect::ByApplication, "bye", "en")
            .await;
    }
}

fn disc(e: russh::Error) -> ErrorKind {
    ErrorKind::Disconnected(e.to_string())
}

/// An interactive CLI shell.
pub struct Shell {
    channel: Channel<Msg>,
    buf: Vec<u8>,
    timeout: Duration,
    is_prompt: fn(&str) -> bool,
    last_prompt: String,
}

impl fmt::Debug for Shell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shell").finish_non_exhaustive()
    }
}

/// Whether `line` is a Huawei VRP prompt: `<NAME>`, `[~NAME...]`, `[*NAME...]`.
pub fn is_vrp_prompt(line: &str) -> bool {
    let l = line.trim_end();
    (l.len() > 2 && l.starts_with('<') && l.ends_with('>') && !l[1..].contains('<'))
        || (l.len() > 3 && (l.starts_with("[~") || l.starts_with("[*")) && l.ends_with(']'))
}

/// Whether `line` is a bash prompt as SONiC shows it: `USER@HOST:DIR$ `
/// (or `# ` for root), with a space after the sign.
pub fn is_bash_prompt(line: &str) -> bool {
    let Some(rest) = line.strip_suffix("$ ").or_else(|| line.strip_suffix("# ")) else {
        return false;
    };
    let word = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    };
    match rest.split_once('@').map(|(u, r)| (u, r.split_once(':'))) {
        Some((user, Some((host, dir)))) => {
            word(user) && word(host) && !dir.is_empty() && !dir.contains(char::is_whitespace)
        }
        _ => false,
    }
}

impl Shell {
    /// Wait for the next data from the device and append it to the buffer.
    async fn read_more(&mut self) -> Result<(), ErrorKind> {
        loop {
            match self.channel.wait().await {
                Some(ChannelMsg::Data { data }) | Some(ChannelMsg::ExtendedData { data, .. }) => {
                    self.buf.extend_from_slice(&data);
                    return Ok(());
                }
                Some(ChannelMsg::Eof | ChannelMsg::Close) | None => {
                    return Err(ErrorKind::Disconnected(
                        "channel closed by the device".into(),
                    ))
                }
                Some(_) => {}
            }
        }
    }

    /// Read until the last line is a prompt; return the text before it
    /// (CRs removed) and remember the prompt.
    pub async fn read_until_prompt(&mut self) -> Result<String, ErrorKind> {
        let t = self.timeout;
        tokio::time::timeout(t, async {
            loop {
                let text = String::from_utf8_lossy(&self.buf).replace('\r', "");
                let last = text.rsplit('\n').next().unwrap_or("");
                if (self.is_prompt)(last) {
                    let body = text[..text.len() - last.len()].to_string();
                    let prompt = last.trim_end().to_string();
                    self.buf.clear();
                    return Ok((body, prompt));
                }
                self.read_more().await?;
            }
        })
        .await
        .map_err(|_| ErrorKind::Timeout(t))?
        .map(|(body, prompt)| {
            self.last_prompt = prompt;
            body
        })
    }

    /// Send one command line and return its output (echo and prompt removed).
    pub async fn command(&mut self, cmd: &str) -> Result<String, ErrorKind> {
        self.channel
            .data_bytes(format!("{cmd}\n").into_bytes())
            .await
            .map_err(disc)?;
        let out = self.read_until_prompt().await?;
        // Strip the echoed command (or the bare newline a non-echoing
        // device prints).
        let out = match out.split_once('\n') {
            Some((first, rest))
                if first.trim().is_empty() || first.trim_end().ends_with(cmd.trim()) =>
            {
                rest.to_string()
            }
            _ => out,
        };
        Ok(out)
    }

    /// Send several command lines in one write and return each one's
    /// output (see [`crate::pipeline`]); each command has the usual
    /// timeout, so the whole batch is bounded by their sum.
    pub async fn commands(&mut self, cmds: &[&str]) -> Result<Vec<String>, ErrorKind> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        let mut batch = cmds.join("\n");
        batch.push('\n');
        self.channel
            .data_bytes(batch.into_bytes())
            .await
            .map_err(disc)?;
        let t = self
            .timeout
            .saturating_mul(cmds.len().try_into().unwrap_or(u32::MAX));
        let (outs, prompt) = tokio::time::timeout(t, async {
            loop {
                let text = String::from_utf8_lossy(&self.buf).replace('\r', "");
                if let Some(done) = split_replies(&text, cmds, self.is_prompt) {
                    self.buf.clear();
                    return Ok(done);
                }
                self.read_more().await?;
            }
        })
        .await
        .map_err(|_| ErrorKind::Timeout(t))??;
        self.last_prompt = prompt;
        Ok(outs)
    }

    /// The prompt seen last.
    pub fn prompt(&self) -> &str {
        &self.last_prompt
    }
}
