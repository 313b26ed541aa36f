//! The write-ahead journal: what a lifecycle operation is about to do to the
//! devices, written before the first device is touched.
//!
//! `DIR/journal.json` holds the operation, the job's decision, the state
//! before and the state intended after (both as decision lists, like
//! state.json), the devices the change touches and when it started. It is
//! created exclusively (a hard link of a fully written, fsynced temporary
//! file), so two processes cannot run a transaction on one state directory
//! at once, and removed once state.json says what the devices hold. Its
//! presence at start-up therefore means a run died mid-transaction, and it
//! carries everything recovery needs to decide which state the devices are
//! in without trusting the dead process.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::JobsError;
use crate::decision::Decision;

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

/// Read the journal in `dir`, if there is one.
pub fn read(dir: &Path) -> Result<Option<Journal>, JobsError> {
    let file = journal_path(dir);
    let bytes = match fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(&file, e.to_string())),
    };
    let j: Journal = serde_json::from_slice(&bytes)
        .map_err(|e| err(&file, format!("not a valid journal: {e}")))?;
    if j.version != VERSION {
        return Err(err(
            &file,
            format!("version {} is not supported", j.version),
        ));
    }
    Ok(Some(j))
}

/// Write `journal` into `dir`, failing if a journal is already there.
pub fn create(dir: &Path, journal: &Journal) -> Result<(), JobsError> {
    let file = journal_path(dir);
    fs::create_dir_all(dir).map_err(|e| err(dir, e.to_string()))?;
    let mut text = serde_json::to_vec_pretty(journal).map_err(|e| err(&file, e.to_string()))?;
    text.push(b'\n');
    let tmp = dir.join(format!(".{JOURNAL_FILE}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp).map_err(|e| err(&tmp, e.to_string()))?;
        f.write_all(&text).map_err(|e| err(&tmp, e.to_string()))?;
        f.sync_all().map_err(|e| err(&tmp, e.to_string()))?;
        // A hard link never replaces an existing file: the exclusive create.
        fs::hard_link(&tmp, &file).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                JobsError::PendingJournal(file.display().to_string())
            } else {
                err(&file, e.to_string())
            }
        })?;
        sync_dir(dir)
    })();
    let _ = fs::remove_file(&tmp);
    result
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
        fs::write(journal_path(dir.path()), "{").unwrap();
        assert!(read(dir.path())
            .unwrap_err()
            .to_string()
            .contains("journal.json"));
    }
}
