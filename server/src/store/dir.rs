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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::jobs::Operation;

    fn d(job: &str) -> Decision {
        Decision::one_gpu(job)
    }

    fn journal(old: Vec<Decision>, new: Vec<Decision>) -> Journal {
        Journal::new(
            "t",
            Operation::Admit,
            d("a"),
            old,
            new,
            vec!["leaf1".into()],
        )
    }

    /// The lifecycle's sequence through `dyn Store` leaves exactly the files
    /// the state directory functions write: state.json byte for byte, no
    /// journal, nothing else but the lock.
    #[tokio::test]
    async fn a_transaction_through_the_trait_writes_the_same_files() {
        let dir = tempfile::tempdir().unwrap();
        let s: Box<dyn Store> = Box::new(DirStore::new(dir.path(), "t"));
        let missing = s.load().await.unwrap_err();
        assert!(
            matches!(missing, JobsError::Store(store::StoreError::Missing { .. })),
            "{missing}"
        );
        assert!(s.init().await.unwrap());
        assert!(!s.init().await.unwrap());
        let read = s.load().await.unwrap();
        assert_eq!(read.decisions, vec![]);
        assert_eq!(read.version, Version::default());
        assert_eq!(s.journal().await.unwrap(), None);

        let j = journal(vec![], vec![d("a")]);
        s.begin(&j).await.unwrap().sync().await.unwrap();
        assert_eq!(s.journal().await.unwrap(), Some(j.clone()));
        assert_eq!(
            std::fs::read(journal::journal_path(dir.path())).unwrap(),
            [serde_json::to_vec_pretty(&j).unwrap(), b"\n".to_vec()].concat(),
            "journal.json as jobs::journal writes it"
        );
        let again = s.begin(&j).await.err().unwrap();
        assert!(matches!(again, JobsError::PendingJournal(_)), "{again}");
        assert_eq!(
            s.save(read.version, &[d("a")]).await.unwrap(),
            Version::default()
        );
        s.remove_journal().await.unwrap();
        s.remove_journal().await.unwrap();
        assert_eq!(s.journal().await.unwrap(), None);
        assert_eq!(s.load().await.unwrap().decisions, vec![d("a")]);

        let other = tempfile::tempdir().unwrap();
        store::save(other.path(), "t", &[d("a")]).unwrap();
        assert_eq!(
            std::fs::read(store::state_path(dir.path())).unwrap(),
            std::fs::read(store::state_path(other.path())).unwrap(),
            "state.json byte for byte"
        );
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["state.json"]);
        assert_eq!(
            s.state_name(),
            store::state_path(dir.path()).display().to_string()
        );
        assert_eq!(s.dir(), Some(dir.path()));
    }

    #[tokio::test]
    async fn the_lock_through_the_trait_is_the_state_directorys_flock() {
        let dir = tempfile::tempdir().unwrap();
        let s = DirStore::new(dir.path(), "t");
        s.init().await.unwrap();
        assert_eq!(s.writer().await.unwrap(), None);
        let mut held = s
            .lock(&Holder::me("serve", None), Duration::ZERO)
            .await
            .unwrap();
        held.set_operation("job submit", Some("a")).await.unwrap();
        let seen = s.writer().await.unwrap().unwrap().unwrap();
        assert_eq!(
            (seen.operation.as_str(), seen.job.as_deref()),
            ("job submit", Some("a"))
        );
        // Another writer (here: the flock functions directly) is refused.
        assert!(lock::try_acquire(dir.path(), &Holder::me("x", None))
            .unwrap()
            .is_none());
        let busy = s
            .lock(&Holder::me("other", None), Duration::from_millis(20))
            .await
            .unwrap_err();
        assert!(
            matches!(busy, JobsError::Lock(lock::LockError::Busy { .. })),
            "{busy}"
        );
        drop(held);
        assert_eq!(s.writer().await.unwrap(), None);
    }
}
