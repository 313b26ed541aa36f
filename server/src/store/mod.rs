//! Where a fabric's committed state lives: the [`Store`] trait, and its
//! implementations — the state directory ([`dir::DirStore`], the default)
//! and, with the `etcd` feature, an etcd cluster (`etcd::EtcdStore`).
//!
//! The job lifecycle ([`crate::jobs::Fabric`]) needs exactly these
//! operations, in this order, for one transaction:
//!
//! 1. [`Store::lock`]: become the only writer (the state directory's
//!    `flock`; on etcd, a key bound to a lease).
//! 2. [`Store::load`]: the committed decisions and the [`Version`] they
//!    were read at; [`Store::journal`]: a pending write-ahead journal.
//! 3. [`Store::begin`]: write the journal, exclusively (it fails with
//!    [`JobsError::PendingJournal`] if one exists), then
//!    [`Durable::sync`] — no device commits before that returned.
//! 4. [`Store::save`]: write the new state **conditionally on the version
//!    read in 2** (a compare-and-swap: [`JobsError::Conflict`] when another
//!    writer changed it in between, and nothing is written), then
//!    [`Store::remove_journal`].
//!
//! Recovery uses the same operations on a journal a dead writer left. The
//! crash-safety argument of each implementation is in its module docs; the
//! lifecycle's is in [`crate::jobs`] and [`crate::jobs::journal`].
//!
//! The trait is async: etcd is reached over gRPC; the state directory's
//! operations are short local file writes, done inline as before, except
//! the journal's fsync, which runs on a blocking thread while the devices
//! prepare ([`Durable`]).

pub mod dir;
#[cfg(feature = "etcd")]
pub mod etcd;

use std::fmt;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use crate::decision::Decision;
use crate::jobs::{JobsError, Journal};
use crate::state::lock::Holder;

/// What a conditional write compares: the state as it was read.
///
/// The state directory needs none (its lock excludes every other writer,
/// and both fields stay 0); on etcd, `revision` is the state key's
/// `mod_revision` and `txn` the transaction number stored with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Version {
    /// The store's revision of the state when read (etcd `mod_revision`).
    pub revision: i64,
    /// Transactions committed to this fabric so far (etcd; 0 on the
    /// filesystem, whose files carry no counter).
    pub txn: u64,
}

/// The committed state and the version it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Held decisions, in admission order.
    pub decisions: Vec<Decision>,
    pub version: Version,
}

/// A journal written and named, not yet known durable.
#[async_trait]
pub trait Durable: Send {
    /// Wait until the journal is durable (no device may commit before).
    async fn sync(self: Box<Self>) -> Result<(), JobsError>;
}

/// A writer's hold on a store: dropping it releases it.
#[async_trait]
pub trait WriterLock: fmt::Debug + Send + Sync {
    /// Who holds it (this process).
    fn holder(&self) -> &Holder;
    /// The writer's term, where the store has one (etcd: the lock key's
    /// `create_revision`, which grows with every new holder); recorded in
    /// the journal before any device commits. None for the state
    /// directory's `flock`.
    fn term(&self) -> Option<i64> {
        None
    }
    /// Record another operation (the same writer goes on holding it).
    async fn set_operation(&mut self, operation: &str, job: Option<&str>) -> Result<(), JobsError>;
    /// Becomes `true` once this lock is lost (etcd: its lease was not
    /// renewed within its TTL, e.g. after the process was stopped or cut
    /// off from etcd); `None` where a lock cannot be lost while its holder
    /// lives (the state directory's `flock`). Leader election steps down
    /// on it.
    fn lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        None
    }
    /// Check that the lock is still held, with time to spare, right before
    /// the first device commit ([`RemoteError::LockLost`] otherwise);
    /// nothing to check for `flock`.
    async fn check(&self) -> Result<(), JobsError> {
        Ok(())
    }
    /// Release the lock and wait until the store has it released (etcd:
    /// the lease revoked, so a waiting writer takes over at once rather
    /// than after the TTL). Dropping releases too, in the background.
    async fn release(self: Box<Self>) {}
}

/// A fabric's committed state, its write-ahead journal and its writer
/// lock. One store holds one fabric (one topology).
#[async_trait]
pub trait Store: fmt::Debug + Send + Sync {
    /// Where the state lives, for messages (`state directory DIR`,
    /// `etcd http://..: /vclos/NAME`); never credentials.
    fn location(&self) -> String;
    /// The state's name in messages (`DIR/state.json`, an etcd key).
    fn state_name(&self) -> String;
    /// The journal's name in messages (`DIR/journal.json`, an etcd key).
    fn journal_name(&self) -> String;
    /// The state directory, for the filesystem store.
    fn dir(&self) -> Option<&Path> {
        None
    }

    /// Create an empty state (no job held) unless one exists: `Ok(false)`
    /// then, and nothing changes.
    async fn init(&self) -> Result<bool, JobsError>;
    /// The committed decisions and their version. A missing state is an
    /// error (never an empty fabric).
    async fn load(&self) -> Result<Committed, JobsError>;
    /// The pending journal, if any.
    async fn journal(&self) -> Result<Option<Journal>, JobsError>;
    /// Write `journal` exclusively ([`JobsError::PendingJournal`] when one
    /// exists); durable once the returned [`Durable::sync`] returned.
    async fn begin(&self, journal: &Journal) -> Result<Box<dyn Durable>, JobsError>;
    /// Replace the state with `decisions` while a durable journal holds
    /// both the old and the new state, if it is still at version `read`
    /// ([`JobsError::Conflict`] otherwise: nothing written). Returns the
    /// new version. An implementation may remove the journal in the same
    /// atomic write ([`Store::remove_journal`] is then a no-op).
    async fn save(&self, read: Version, decisions: &[Decision]) -> Result<Version, JobsError>;
    /// Remove the journal (the operation is settled); no error if none.
    async fn remove_journal(&self) -> Result<(), JobsError>;

    /// Become the only writer, waiting up to `wait` for another one
    /// ([`crate::state::lock::LockError::Busy`] then).
    async fn lock(&self, holder: &Holder, wait: Duration)
        -> Result<Box<dyn WriterLock>, JobsError>;
    /// The writer holding the lock right now, if any (`Some(None)`: held,
    /// holder unknown). Never blocks a writer.
    async fn writer(&self) -> Result<Option<Option<Holder>>, JobsError>;
}

/// Why a store other than the state directory (etcd) failed. Messages
/// name the store by [`Store::location`], never by credentials.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The store could not be reached or answered an error.
    #[error("{location}: {message}")]
    Unavailable { location: String, message: String },
    /// No state under this fabric's keys yet.
    #[error("{location}: no vclos state for topology `{topology}` here; create it with --init")]
    Missing { location: String, topology: String },
    /// A value over what one write (or read) may carry; nothing was
    /// written.
    #[error("{key}: {size} bytes, over the store's limit of {limit} bytes per value{hint}; nothing was written")]
    TooLarge {
        key: String,
        size: usize,
        limit: usize,
        hint: &'static str,
    },
    /// A value that is not what vclos writes.
    #[error("{key}: {message}")]
    Invalid { key: String, message: String },
    /// This writer's lock (lease) is gone: another writer may hold it, so
    /// nothing was written.
    #[error("{location}: this writer no longer holds the lock ({why}); nothing was written")]
    LockLost { location: String, why: String },
}
