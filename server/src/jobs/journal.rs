//! The write-ahead journal: what a lifecycle operation is about to do to the
//! devices, durable before the first device commits anything.
//!
//! `DIR/journal.json` holds the operation, the job's decision, the state
//! before and the state intended after (both as decision lists, like
//! state.json), the devices the change touches, when it started and which
//! writer (pid, host) started it. Writers are serialised by the state
//! directory's lock ([`crate::state::lock`]), held from before the state is
//! read until after the journal is removed; the journal is also created
//! exclusively (a hard link of a fully written temporary file) as a second
//! line of defence, and removed once state.json says what the devices hold.
//! A journal seen by the holder of the lock was therefore left by a writer
//! that died mid-transaction (or by its own failed rollback), and it
//! carries everything recovery needs to decide which state the devices are
//! in without trusting the dead process. Recovery still checks it against
//! state.json and validates both of its states before acting on it
//! ([`crate::jobs::Fabric::recover`]).
//!
//! # Durability, and what each crash leaves
//!
//! One apply costs two filesystem journal commits (it was four):
//!
//! 1. [`begin`]: write the temporary file and hard-link it as journal.json
//!    (the exclusive create); then [`Unsynced::sync`]: fsync that inode (its
//!    data and, on journaling filesystems such as ext4 and XFS, the link
//!    with it: one commit), and fsync the directory (kept for POSIX; it
//!    then has nothing left to commit). The lifecycle runs the sync while
//!    the controller prepares the devices, which changes no running
//!    configuration (the driver contract), and no device commits before it
//!    returned ([`crate::controller::apply_gated`]).
//! 2. After the transaction, state.json is replaced with
//!    [`store::save_journaled`] (one commit), then journal.json is removed
//!    without an fsync.
//!
//! A `kill -9` tears nothing: every file is complete in the page cache
//! before it gets its name. A power loss can leave:
//!
//! * before (1) returned: no journal.json, or one that is empty, zero-filled
//!   or cut short. No device was committed yet, so [`read`] treats such a
//!   journal as absent and [`begin`] replaces it. (A `kill -9` there leaves
//!   a whole journal; recovery finds every device still as the old state
//!   says and removes it.)
//! * between (1) and (2): a whole journal and the old state.json; recovery
//!   reads the devices and settles (the journal's purpose).
//! * during (2): a whole journal and a state.json that is old, new or torn;
//!   a torn one is replaced by the journal's old state at load, and recovery
//!   settles as above.
//! * after (2): state.json says what the devices hold; the journal may
//!   reappear (its removal was not synced) and recovery finds the devices
//!   holding its new state, which state.json already says: it adopts it,
//!   changing nothing.
//!
//! So in every case the next run settles to a state the devices hold, with
//! no leaked reservation.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::JobsError;
use crate::decision::Decision;
use crate::state::lock::Holder;
use crate::state::store;

/// File name inside the state directory.
pub const JOURNAL_FILE: &str = "journal.json";
const VERSION: u32 = 1;

/// What the interrupted operation was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    Admit,
    Release,
}

/// One in-flight transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    pub version: u32,
    pub topology: String,
    pub operation: Operation,
    /// The decision admitted or released.
    pub decision: Decision,
    /// Held decisions before the operation (what state.json still says).
    pub old: Vec<Decision>,
    /// Held decisions once the operation has committed.
    pub new: Vec<Decision>,
    /// Devices the transaction changes.
    pub devices: Vec<String>,
    /// Seconds since the Unix epoch when the operation started.
    pub started: u64,
    /// The writer that started it (it held the state lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Holder>,
    /// The writer's term when the store has one (etcd: its lock's
    /// `create_revision`; each new lock holder has a larger one): which
    /// leader started the operation. Absent from state directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term: Option<i64>,
}

impl Journal {
    pub fn new(
        topology: &str,
        operation: Operation,
        decision: Decision,
        old: Vec<Decision>,
        new: Vec<Decision>,
        devices: Vec<String>,
    ) -> Self {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Journal {
            version: VERSION,
            topology: topology.to_string(),
            operation,
            decision,
            old,
            new,
            devices,
            started,
            owner: None,
            term: None,
        }
    }
}

/// Path of the journal in `dir`.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_FILE)
}

fn err(file: &Path, message: impl Into<String>) -> JobsError {
    JobsError::Journal {
        file: file.display().to_string(),
        message: message.into(),
    }
}

/// Read the journal in `dir`, if there is one. A journal torn by a power
/// loss during its own creation counts as none: no device was touched yet.
pub fn read(dir: &Path) -> Result<Option<Journal>, JobsError> {
    let file = journal_path(dir);
    let bytes = match crate::yaml::read_capped(&file, store::MAX_STATE_BYTES) {
        Ok(b) if b.len() > store::MAX_STATE_BYTES => {
            return Err(err(
                &file,
                format!(
                    "larger than {} bytes: not a journal vclos wrote",
                    store::MAX_STATE_BYTES
                ),
            ))
        }
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(&file, e.to_string())),
    };
    let j: Journal = match serde_json::from_slice(&bytes) {
        Ok(j) => j,
        Err(e) if store::torn(&bytes, &e) => {
            tracing::warn!(file = %file.display(), "ignoring a journal torn before any device was touched");
            return Ok(None);
        }
        Err(e) => return Err(err(&file, format!("not a valid journal: {e}"))),
    };
    if j.version != VERSION {
        return Err(err(
            &file,
            format!("version {} is not supported", j.version),
        ));
    }
    Ok(Some(j))
}

/// Write `journal` into `dir` durably, failing if a journal is already
/// there: [`begin`] then [`Unsynced::sync`].
pub fn create(dir: &Path, journal: &Journal) -> Result<(), JobsError> {
    begin(dir, journal)?.sync()
}

/// A journal named and complete (in the page cache) but not yet durable.
#[derive(Debug)]
pub struct Unsynced {
    dir: PathBuf,
    file: fs::File,
}

impl Unsynced {
    /// The state directory it is in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Make it durable: the linked inode (its data and the link in one
    /// journal commit, see the module docs), then the directory.
    pub fn sync(self) -> Result<(), JobsError> {
        let path = journal_path(&self.dir);
        self.file
            .sync_all()
            .map_err(|e| err(&path, e.to_string()))?;
        sync_dir(&self.dir)
    }
}

/// Write `journal` and name it journal.json exclusively (the cross-process
/// lock: a second transaction on `dir` fails here with `PendingJournal`),
/// without waiting for the disk. No device may be committed before
/// [`Unsynced::sync`] returned.
pub fn begin(dir: &Path, journal: &Journal) -> Result<Unsynced, JobsError> {
    let file = journal_path(dir);
    fs::create_dir_all(dir).map_err(|e| err(dir, e.to_string()))?;
    let mut text = serde_json::to_vec_pretty(journal).map_err(|e| err(&file, e.to_string()))?;
    text.push(b'\n');
    let tmp = dir.join(format!(".{JOURNAL_FILE}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp).map_err(|e| err(&tmp, e.to_string()))?;
        f.write_all(&text).map_err(|e| err(&tmp, e.to_string()))?;
        link_exclusive(dir, &tmp, &file)?;
        Ok::<_, JobsError>(f)
    })();
    let _ = fs::remove_file(&tmp);
    Ok(Unsynced {
        dir: dir.to_path_buf(),
        file: result?,
    })
}

/// Name `tmp` `file`, never replacing a journal (the exclusive create),
/// except one torn before any device was touched.
fn link_exclusive(dir: &Path, tmp: &Path, file: &Path) -> Result<(), JobsError> {
    let link = || fs::hard_link(tmp, file);
    let exists = |e: &std::io::Error| e.kind() == std::io::ErrorKind::AlreadyExists;
    match link() {
        Err(e) if exists(&e) && read(dir)?.is_none() => {
            let _ = fs::remove_file(file);
            link()
        }
        other => other,
    }
    .map_err(|e| {
        if exists(&e) {
            JobsError::PendingJournal(file.display().to_string())
        } else {
            err(file, e.to_string())
        }
    })
}

/// Remove the journal (the operation is settled).
///
/// The removal is not fsynced: it is only ever done once state.json (already
/// durable) says what the devices hold, so if a crash loses it, recovery finds
/// the devices agreeing with state.json and settles to the same state.
pub fn remove(dir: &Path) -> Result<(), JobsError> {
    let file = journal_path(dir);
    match fs::remove_file(&file) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(err(&file, e.to_string())),
    }
}

fn sync_dir(dir: &Path) -> Result<(), JobsError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| err(dir, e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::decision::Stage;
    use crate::names::JobId;

    fn d(job: &str) -> Decision {
        Decision {
            requested_gpus: None,
            sharing: None,
            job: JobId::new(job).unwrap(),
            stage: Stage::Manual,
            gpus: vec![],
            vclos: Default::default(),
            source_routes: vec![],
        }
    }

    #[test]
    fn create_is_exclusive_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let j = Journal::new(
            "t",
            Operation::Admit,
            d("a"),
            vec![],
            vec![d("a")],
            vec!["leaf1".into()],
        );
        create(dir.path(), &j).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(j.clone()));
        let e = create(dir.path(), &j).unwrap_err();
        assert!(matches!(e, JobsError::PendingJournal(_)), "{e}");
        remove(dir.path()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        fs::write(journal_path(dir.path()), "{\"version\": 1}").unwrap();
        assert!(read(dir.path())
            .unwrap_err()
            .to_string()
            .contains("journal.json"));
    }

    #[test]
    fn a_journal_torn_during_its_creation_counts_as_none_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::new("t", Operation::Admit, d("a"), vec![], vec![d("a")], vec![]);
        create(dir.path(), &j).unwrap();
        let whole = fs::read(journal_path(dir.path())).unwrap();
        for torn in [&b""[..], &whole[..whole.len() / 3], &[0u8; 32]] {
            fs::write(journal_path(dir.path()), torn).unwrap();
            assert_eq!(read(dir.path()).unwrap(), None);
            create(dir.path(), &j).unwrap();
            assert_eq!(read(dir.path()).unwrap(), Some(j.clone()));
        }
        // A whole one is never replaced.
        assert!(matches!(
            create(dir.path(), &j),
            Err(JobsError::PendingJournal(_))
        ));
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
