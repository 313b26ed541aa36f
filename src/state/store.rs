//! The state directory: what the fabric is running, on disk.
//!
//! `DIR/state.json` holds `{"version":1,"topology":"<name>","decisions":[..]}`,
//! the admitted decisions in admission order; the live state is rebuilt by
//! re-admitting them ([`super::FabricState::from_decisions`]), so the file
//! never stores anything derived. A missing file is an empty fabric. Writes
//! are atomic (temporary file in the same directory, fsync, rename, fsync
//! of the directory) so a crash leaves either the old or the new state.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::decision::Decision;

/// File name inside the state directory.
pub const STATE_FILE: &str = "state.json";
const VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not a valid state file: {source}")]
    Parse {
        file: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{file}: state file version {found} is not supported (expected {VERSION})")]
    Version { file: String, found: u32 },
    #[error("{file}: state belongs to topology `{found}`, not `{expected}`")]
    Topology {
        file: String,
        found: String,
        expected: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    version: u32,
    topology: String,
    decisions: Vec<Decision>,
}

fn io(file: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        file: file.display().to_string(),
        source,
    }
}

/// Path of the state file in `dir`.
pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// Load the decisions stored in `dir` for topology `topology` (missing file:
/// none). A state written for another topology is an error.
pub fn load(dir: &Path, topology: &str) -> Result<Vec<Decision>, StoreError> {
    let file = state_path(dir);
    let bytes = match fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&file)(e)),
    };
    let name = file.display().to_string();
    let parsed: StateFile = serde_json::from_slice(&bytes).map_err(|source| StoreError::Parse {
        file: name.clone(),
        source,
    })?;
    if parsed.version != VERSION {
        return Err(StoreError::Version {
            file: name,
            found: parsed.version,
        });
    }
    if parsed.topology != topology {
        return Err(StoreError::Topology {
            file: name,
            found: parsed.topology,
            expected: topology.to_string(),
        });
    }
    Ok(parsed.decisions)
}

/// Atomically replace the state in `dir` (created if missing).
pub fn save(dir: &Path, topology: &str, decisions: &[Decision]) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(io(dir))?;
    let file = state_path(dir);
    let body = StateFile {
        version: VERSION,
        topology: topology.to_string(),
        decisions: decisions.to_vec(),
    };
    let mut text = serde_json::to_vec_pretty(&body).map_err(|source| StoreError::Parse {
        file: file.display().to_string(),
        source,
    })?;
    text.push(b'\n');
    write_atomic(dir, &file, &text)
}

/// Atomically replace `file` (inside `dir`) with `bytes`: temporary file in
/// the same directory, fsync, rename, fsync of the directory. Readers see
/// the old or the new content, never a mix, even across a crash.
pub fn write_atomic(dir: &Path, file: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(io(dir))?;
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let result = (|| {
        let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        fs::rename(&tmp, file).map_err(io(file))?;
        // Make the rename itself durable.
        fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::decision::{GpuRef, Stage};
    use crate::names::JobId;

    fn d(job: &str) -> Decision {
        Decision {
            job: JobId::new(job).unwrap(),
            stage: Stage::Server,
            gpus: vec![GpuRef {
                server: "srv1-1".into(),
                gpu: 0,
            }],
            vclos: Default::default(),
            source_routes: vec![],
        }
    }

    #[test]
    fn missing_file_is_empty_and_round_trip_keeps_order() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path(), "t").unwrap().is_empty());
        let ds = vec![d("b"), d("a")];
        save(dir.path(), "t", &ds).unwrap();
        assert_eq!(load(dir.path(), "t").unwrap(), ds);
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), "t", &[d("a")]).unwrap();
        let e = load(dir.path(), "other").unwrap_err().to_string();
        assert!(e.contains("state.json") && e.contains("`t`"), "{e}");
        fs::write(
            state_path(dir.path()),
            "{\"version\":2,\"topology\":\"t\",\"decisions\":[]}",
        )
        .unwrap();
        let e = load(dir.path(), "t").unwrap_err().to_string();
        assert!(e.contains("version 2"), "{e}");
        fs::write(state_path(dir.path()), "{nope").unwrap();
        let e = load(dir.path(), "t").unwrap_err().to_string();
        assert!(
            e.contains("state.json") && e.contains("not a valid state file"),
            "{e}"
        );
        let bad_job = "{\"version\":1,\"topology\":\"t\",\"decisions\":[{\"job\":\"a;b\",\"stage\":\"server\",\"gpus\":[]}]}";
        fs::write(state_path(dir.path()), bad_job).unwrap();
        assert!(load(dir.path(), "t").is_err());
    }
}
