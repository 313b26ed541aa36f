//! Device drivers for vclos: one async contract, several transports.
//!
//! The contract follows NAPALM's: open/close, get the running config, load a
//! candidate (merge or replace) without touching running, compare, commit with
//! an optional confirm timeout, confirm, discard, rollback. Drivers move
//! configuration text in the device's own dialect; rendering and parsing that
//! text is the main crate's business, so a transport never depends on a
//! dialect. (The SONiC driver reads config_db as JSON, to stage and diff
//! JSON Patches, but knows nothing of what vclos puts in it.)

pub mod telnet;
pub mod tl1;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use thiserror::Error;

/// How a candidate is loaded (NAPALM's load_merge_candidate / load_replace_candidate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// Apply the given commands / edit on top of running.
    Merge,
    /// The given text is the whole intended configuration.
    Replace,
}

/// What a driver can do natively (NAPALM's support matrix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    pub candidate: bool,
    pub replace: bool,
    pub commit_confirm: bool,
    pub rollback: bool,
    /// Commit applies all-or-nothing on the device.
    pub atomic: bool,
}

/// Identifier of a commit on the device (commit id, or a driver checkpoint).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommitId(pub String);

/// The step of the contract that failed, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Open,
    Close,
    GetConfig,
    Load,
    Compare,
    Commit,
    Confirm,
    Discard,
    Rollback,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Step::Open => "open",
            Step::Close => "close",
            Step::GetConfig => "get-config",
            Step::Load => "load-candidate",
            Step::Compare => "compare-config",
            Step::Commit => "commit",
            Step::Confirm => "confirm",
            Step::Discard => "discard",
            Step::Rollback => "rollback",
        };
        f.write_str(s)
    }
}

/// Why a step failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ErrorKind {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("authentication failed")]
    Auth,
    #[error("host key not trusted: {0}")]
    HostKey(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("connection lost: {0}")]
    Disconnected(String),
    #[error("configuration is locked by {0}")]
    Locked(String),
    #[error("device rejected the request: {0}")]
    Rejected(String),
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("not supported by this driver: {0}")]
    Unsupported(&'static str),
}

/// A driver error always names the device and the step.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{device}: {step}: {kind}")]
pub struct DriverError {
    pub device: String,
    pub step: Step,
    pub kind: ErrorKind,
}

/// The device contract every transport implements (and the emulator honours).
///
/// Configuration text is in the device's dialect: CLI commands for the
/// Huawei CE CLI, JSON Patch operations one per line (merge) or a config_db
/// document (replace) for SONiC, an XML `<config>` document for NETCONF, TL1
/// commands for the OCS.
#[async_trait]
pub trait Driver: Send {
    /// The device's name in the topology (used in every error and span).
    fn device(&self) -> &str;
    fn capabilities(&self) -> Capabilities;
    async fn open(&mut self) -> Result<(), DriverError>;
    async fn close(&mut self) -> Result<(), DriverError>;
    /// The running configuration, as the device prints it.
    async fn get_config(&mut self) -> Result<String, DriverError>;
    /// Stage a candidate without touching running.
    async fn load_candidate(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError>;
    /// The device's own diff of candidate against running.
    async fn compare_config(&mut self) -> Result<String, DriverError>;
    /// Make the candidate running; with `confirm`, revert unless confirmed in time.
    async fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError>;
    async fn confirm(&mut self) -> Result<(), DriverError>;
    async fn discard(&mut self) -> Result<(), DriverError>;
    /// Return running to `to`, or to the state before the last commit.
    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError>;

    /// Ready an open session to serve another transaction (NAPALM's
    /// `is_alive`, plus a reset): one cheap round trip proves the device
    /// still answers, and everything tied to the previous transaction — the
    /// candidate, commit checkpoints, the CLI view — is forgotten, so a later
    /// `rollback(None)` can only undo the new transaction's own commit.
    ///
    /// `Err` means the session must not be reused (closed by the device,
    /// timed out, a lock or a confirmed commit still pending, uncommitted
    /// edits); the caller drops it and opens a fresh one. The default is
    /// `Unsupported`: a driver is reused only when it says how.
    async fn reuse(&mut self) -> Result<(), DriverError> {
        Err(DriverError {
            device: self.device().to_string(),
            step: Step::Open,
            kind: ErrorKind::Unsupported("session reuse"),
        })
    }
}

pub mod cli;
pub mod configdb;
pub mod huawei_ce;
pub mod netconf;
pub mod pipeline;
pub mod sonic;
pub mod ssh;
