//! The state directory as a [`Store`]: `DIR/state.json`, `DIR/journal.json`
//! and `DIR/lock`, exactly the files (and the fsync order) of
//! [`crate::state::store`], [`crate::jobs::journal`] and
//! [`crate::state::lock`], whose module docs give the crash-safety argument;
//! this type only routes the lifecycle's calls to them.
//!
//! The `flock` excludes every other writer for as long as it is held, so
//! the state read under it cannot change before it is written: [`Version`]
//! stays 0 and [`Store::save`] has nothing to compare (the lifecycle still
//! re-reads the state before each transaction and refuses a stale plan).

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

use super::{Committed, Durable, Store, Version, WriterLock};
use crate::decision::Decision;
use crate::jobs::{journal, JobsError, Journal};
use crate::state::lock::{self, Holder, StateLock};
use crate::state::store;

/// A fabric's state directory.
#[derive(Debug, Clone)]
pub struct DirStore {
    dir: PathBuf,
    topology: String,
}

impl DirStore {
    /// The state directory `dir` of topology `topology` (nothing is read).
    pub fn new(dir: impl Into<PathBuf>, topology: &str) -> Self {
        DirStore {
            dir: dir.into(),
            topology: topology.to_string(),
        }
    }

    /// [`Store::load`], without a runtime (the file is read inline anyway).
    pub fn load_now(&self) -> Result<Committed, JobsError> {
        Ok(Committed {
            decisions: store::load(&self.dir, &self.topology)?,
            version: Version::default(),
        })
    }

    /// [`Store::journal`], without a runtime.
    pub fn journal_now(&self) -> Result<Option<Journal>, JobsError> {
        journal::read(&self.dir)
    }
}

struct Unsynced(journal::Unsynced);

#[async_trait]
impl Durable for Unsynced {
    async fn sync(self: Box<Self>) -> Result<(), JobsError> {
        let Unsynced(u) = *self;
        let file = journal::journal_path(u.dir()).display().to_string();
        tokio::task::spawn_blocking(move || u.sync())
            .await
            .unwrap_or_else(|e| {
                Err(JobsError::Journal {
                    file,
                    message: format!("the task writing it failed: {e}"),
                })
            })
    }
}

#[async_trait]
impl WriterLock for StateLock {
    fn holder(&self) -> &Holder {
        StateLock::holder(self)
    }

    async fn set_operation(&mut self, operation: &str, job: Option<&str>) -> Result<(), JobsError> {
        Ok(StateLock::set_operation(self, operation, job)?)
    }
}

#[async_trait]
impl Store for DirStore {
    fn location(&self) -> String {
        format!("state directory {}", self.dir.display())
    }

    fn state_name(&self) -> String {
        store::state_path(&self.dir).display().to_string()
    }

    fn journal_name(&self) -> String {
        journal::journal_path(&self.dir).display().to_string()
    }

    fn dir(&self) -> Option<&Path> {
        Some(&self.dir)
    }

    async fn init(&self) -> Result<bool, JobsError> {
        Ok(store::init(&self.dir, &self.topology)?)
    }

    async fn load(&self) -> Result<Committed, JobsError> {
        self.load_now()
    }

    async fn journal(&self) -> Result<Option<Journal>, JobsError> {
        self.journal_now()
    }

    async fn begin(&self, journal: &Journal) -> Result<Box<dyn Durable>, JobsError> {
        Ok(Box::new(Unsynced(journal::begin(&self.dir, journal)?)))
    }

    async fn save(&self, _read: Version, decisions: &[Decision]) -> Result<Version, JobsError> {
        store::save_journaled(&self.dir, &self.topology, decisions)?;
        Ok(Version::default())
    }

    async fn remove_journal(&self) -> Result<(), JobsError> {
        journal::remove(&self.dir)
    }

    async fn lock(
        &self,
        holder: &Holder,
        wait: Duration,
    ) -> Result<Box<dyn WriterLock>, JobsError> {
        Ok(Box::new(lock::acquire(&self.dir, holder, wait).await?))
    }

    async fn writer(&self) -> Result<Option<Option<Holder>>, JobsError> {
        Ok(lock::probe(&self.dir)?)
    }
}
