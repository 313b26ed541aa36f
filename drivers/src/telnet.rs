//! A minimal async Telnet line transport, enough for TL1.
//!
//! TL1 over Telnet needs only three things from Telnet: a TCP stream, line
//! framing, and removal of the IAC negotiation bytes a peer may send. This
//! module does exactly that on tokio rather than using the `telnet` crate:
//! the controller is async and drives many devices at once, and the crate's
//! blocking API would need a thread per device. Every option a peer offers
//! is refused (WILL -> DONT, DO -> WONT), which keeps both ends in plain NVT
//! mode; replies are never sent to WONT/DONT, so negotiation cannot loop.
//!
//! Telnet is plaintext: the TL1 login (password included) crosses the wire in
//! clear. Use it on a management network only; it is what OCS units speak.
//!
//! [`IacFilter`] is shared with the emulator's TL1 server so both ends strip
//! Telnet commands the same way.

use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const IAC: u8 = 255;
const DONT: u8 = 254;
const DO: u8 = 253;
const WONT: u8 = 252;
const WILL: u8 = 251;
const SB: u8 = 250;
const SE: u8 = 240;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum IacState {
    #[default]
    Data,
    Iac,
    Option(u8),
    Sub,
    SubIac,
}

/// Streaming Telnet command stripper. Feed it raw bytes in any chunking; it
/// returns the data bytes and the refusals to send back.
#[derive(Debug, Default, Clone)]
pub struct IacFilter {
    state: IacState,
}

impl IacFilter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Append the data bytes of `input` to `data` and the negotiation
    /// replies to `replies`.
    pub fn feed(&mut self, input: &[u8], data: &mut Vec<u8>, replies: &mut Vec<u8>) {
        for &b in input {
            self.state = match (self.state, b) {
                (IacState::Data, IAC) => IacState::Iac,
                (IacState::Data, b) => {
                    data.push(b);
                    IacState::Data
                }
                (IacState::Iac, IAC) => {
                    data.push(IAC);
                    IacState::Data
                }
                (IacState::Iac, v @ WILL..=DONT) => IacState::Option(v),
                (IacState::Iac, SB) => IacState::Sub,
                // NOP, GA, AYT, ...: two-byte commands with nothing to do.
                (IacState::Iac, _) => IacState::Data,
                (IacState::Option(v), opt) => {
                    match v {
                        WILL => replies.extend_from_slice(&[IAC, DONT, opt]),
                        DO => replies.extend_from_slice(&[IAC, WONT, opt]),
                        _ => {}
                    }
                    IacState::Data
                }
                (IacState::Sub, IAC) => IacState::SubIac,
                (IacState::Sub, _) => IacState::Sub,
                (IacState::SubIac, SE) => IacState::Data,
                (IacState::SubIac, _) => IacState::Sub,
            };
        }
    }
}

/// Transport tunables. The defaults suit a LAN-attached OCS.
#[derive(Debug, Clone)]
pub struct TelnetConfig {
    /// Per connection attempt.
    pub connect_timeout: Duration,
    /// From sending a command to the end of its response.
    pub command_timeout: Duration,
    /// Connection attempts before giving up (commands are never retried:
    /// a TL1 change is not idempotent).
    pub connect_attempts: u32,
    /// Pause between connection attempts.
    pub retry_backoff: Duration,
    /// Largest response accepted, in bytes.
    pub max_response: usize,
}

impl Default for TelnetConfig {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(10),
            connect_attempts: 3,
            retry_backoff: Duration::from_millis(200),
            max_response: 1 << 20,
        }
    }
}

/// Why the transport failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TransportError {
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("no complete response within {0:?}")]
    Timeout(Duration),
    #[error("connection closed by the peer")]
    Closed,
    #[error("i/o error: {0}")]
    Io(String),
    #[error("response larger than {0} bytes")]
    TooLong(usize),
}

/// One Telnet connection, read as TL1 response blocks.
#[derive(Debug)]
pub struct TelnetLines {
    stream: TcpStream,
    filter: IacFilter,
    /// Data bytes received but not yet consumed as lines.
    pending: Vec<u8>,
    config: TelnetConfig,
}

impl TelnetLines {
    /// Connect, retrying up to `connect_attempts` times.
    pub async fn connect(
        host: &str,
        port: u16,
        config: TelnetConfig,
    ) -> Result<Self, TransportError> {
        let addr = format!("{host}:{port}");
        let attempts = config.connect_attempts.max(1);
        let mut reason = String::new();
        for attempt in 1..=attempts {
            match tokio::time::timeout(config.connect_timeout, TcpStream::connect((host, port)))
                .await
            {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(Self {
                        stream,
                        filter: IacFilter::new(),
                        pending: Vec::new(),
                        config,
                    });
                }
                Ok(Err(e)) => reason = e.to_string(),
                Err(_) => reason = format!("timed out after {:?}", config.connect_timeout),
            }
            tracing::debug!(%addr, attempt, %reason, "telnet connect failed");
            if attempt < attempts {
                tokio::time::sleep(config.retry_backoff).await;
            }
        }
        Err(TransportError::Connect { addr, reason })
    }

    /// Send one line (CR LF appended; a literal 0xFF is escaped as IAC IAC).
    pub async fn send_line(&mut self, line: &str) -> Result<(), TransportError> {
        let mut out = Vec::with_capacity(line.len() + 2);
        for &b in line.as_bytes() {
            out.push(b);
            if b == IAC {
                out.push(IAC);
            }
        }
        out.extend_from_slice(b"\r\n");
        self.stream
            .write_all(&out)
            .await
            .map_err(|e| TransportError::Io(e.to_string()))
    }

    /// Read one response block: the lines up to the line holding only `;`
    /// (excluded). Blank lines and `<` ready prompts are skipped. No timeout
    /// here; see [`TelnetLines::exchange`].
    pub async fn read_block(&mut self) -> Result<Vec<String>, TransportError> {
        let mut lines = Vec::new();
        let mut size = 0usize;
        loop {
            while let Some(end) = self.pending.iter().position(|&b| b == b'\n' || b == b'\r') {
                let raw: Vec<u8> = self.pending.drain(..=end).collect();
                // NVT sends CR as CR NUL; NULs carry nothing anywhere.
                let text = String::from_utf8_lossy(&raw[..raw.len() - 1]).replace('\0', "");
                let line = text.trim_end();
                size += raw.len();
                if line.trim() == ";" {
                    return Ok(lines);
                }
                if line.trim().is_empty() || line.trim() == "<" {
                    continue;
                }
                lines.push(line.to_string());
            }
            if size + self.pending.len() > self.config.max_response {
                return Err(TransportError::TooLong(self.config.max_response));
            }
            let mut buf = [0u8; 4096];
            let n = self
                .stream
                .read(&mut buf)
                .await
                .map_err(|e| TransportError::Io(e.to_string()))?;
            if n == 0 {
                return Err(TransportError::Closed);
            }
            let mut replies = Vec::new();
            self.filter.feed(&buf[..n], &mut self.pending, &mut replies);
            if !replies.is_empty() {
                self.stream
                    .write_all(&replies)
                    .await
                    .map_err(|e| TransportError::Io(e.to_string()))?;
            }
        }
    }

    /// Send a command and read blocks until `accept` takes one, all within
    /// the command timeout. Blocks `accept` rejects (unsolicited messages,
    /// late replies to other ctags) are skipped.
    pub async fn exchange(
        &mut self,
        line: &str,
        mut accept: impl FnMut(&[String]) -> bool + Send,
    ) -> Result<Vec<String>, TransportError> {
        let timeout = self.config.command_timeout;
        let work = async {
            self.send_line(line).await?;
            loop {
                let block = self.read_block().await?;
                if accept(&block) {
                    return Ok(block);
                }
                tracing::trace!(lines = block.len(), "skipped an unrelated TL1 block");
            }
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| TransportError::Timeout(timeout))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let mut f = IacFilter::new();
        let (mut d, mut r) = (Vec::new(), Vec::new());
        for c in chunks {
            f.feed(c, &mut d, &mut r);
        }
        (d, r)
    }

    #[test]
    fn strips_negotiation_and_refuses_options() {
        let (d, r) = run(&[b"ab\xff\xfb\x01cd\xff\xfd\x18e"]);
        assert_eq!(d, b"abcde");
        assert_eq!(r, vec![IAC, DONT, 1, IAC, WONT, 0x18]);
    }

    #[test]
    fn survives_any_chunking_and_subnegotiation() {
        let (d, r) = run(&[
            b"x\xff",
            b"\xfa\x18\x01\xff",
            b"\xff\x00\xff",
            b"\xf0y\xff\xffz\xff\xfc\x01",
        ]);
        assert_eq!(d, b"xy\xffz");
        assert!(r.is_empty(), "WONT is never answered");
    }
}
