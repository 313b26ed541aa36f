//! The seam between the SSH server and a device's command line: a device
//! that opens sessions, a session that turns one input line into output and
//! a prompt. The Huawei CE CLI ([`super::cli`]) and the SONiC shell
//! ([`super::sonic`]) are such devices, so [`super::ssh`] serves both with
//! one byte pump (line editing, echo, faults' reply delay).
//!
//! A device also says how many sessions it serves at once
//! ([`ShellDevice::sessions`], [`super::slots`]) and how long a command
//! line may be ([`ShellDevice::max_line`]): the line editor keeps at most
//! that many bytes of a line, drops the rest as it arrives and, at the end
//! of the line, asks the session for the device's answer to a line that
//! was too long ([`ShellSession::line_too_long`]) instead of running it. A
//! session's memory is so bounded whatever a client sends.

use std::fmt;
use std::sync::Arc;

use super::faults::Faults;
use super::slots::SessionSlots;

/// The longest command line a device takes unless it says otherwise
/// ([`ShellDevice::max_line`]).
pub const DEFAULT_MAX_LINE: usize = 64 * 1024;

/// Which SSH channel request started a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    /// An interactive `shell` (a login shell).
    Shell,
    /// One `exec` command.
    Exec,
}

/// A device with a command line, served over SSH `shell` and `exec`.
pub trait ShellDevice: fmt::Debug + Send + Sync {
    /// The device's name (for spans and errors).
    fn name(&self) -> &str;
    /// The faults armed on the device (the transport applies reply delays).
    fn faults(&self) -> &Arc<Faults>;
    /// A new session for `user`.
    fn session(self: Arc<Self>, user: &str, kind: SessionKind) -> Box<dyn ShellSession>;
    /// The device's session slots: the SSH server takes one per accepted
    /// connection and refuses connections beyond the maximum.
    fn sessions(&self) -> &Arc<SessionSlots>;
    /// The longest command line, in bytes, the device takes.
    fn max_line(&self) -> usize {
        DEFAULT_MAX_LINE
    }
}

/// One logged-in session.
pub trait ShellSession: Send {
    /// Printed before the first prompt of a `shell`.
    fn banner(&self) -> String;
    /// The prompt to print now.
    fn prompt(&self) -> String;
    /// Handle one input line (without its terminator).
    fn handle_line(&mut self, line: &str) -> Reply;
    /// The answer to a line longer than the device's
    /// [`ShellDevice::max_line`], which is not run.
    fn line_too_long(&mut self) -> Reply;
}

/// What the transport must do after printing a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAction {
    Continue,
    /// The user logged out.
    Close,
    /// Fault injection: close the connection abruptly, printing nothing.
    Drop,
}

/// The answer to one input line. `output` uses `\n` line ends and ends with
/// one when non-empty; the transport prints it, then the session's prompt.
/// `status` is the line's exit status (0 success), which the SSH server
/// sends as the `exit-status` of an `exec` request (RFC 4254 §6.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub output: String,
    pub action: SessionAction,
    pub status: u32,
}

impl Reply {
    /// Output, and the session goes on.
    pub fn text(output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            action: SessionAction::Continue,
            status: 0,
        }
    }

    /// The session ends after `output`.
    pub fn close(output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            action: SessionAction::Close,
            status: 0,
        }
    }

    /// The same reply with exit status `status`.
    pub fn with_status(self, status: u32) -> Self {
        Self { status, ..self }
    }

    /// The connection drops (fault injection).
    pub fn drop_connection() -> Self {
        Self {
            output: String::new(),
            action: SessionAction::Drop,
            status: 0,
        }
    }
}
