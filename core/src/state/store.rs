//! The state directory: what the fabric is running, on disk.
//!
//! `DIR/state.json` holds `{"version":1,"topology":"<name>","decisions":[..]}`,
//! the admitted decisions in admission order; the live state is rebuilt by
//! re-admitting them ([`super::FabricState::from_decisions`]), so the file
//! never stores anything derived.
//!
//! A directory is a state directory only once [`init`] created its
//! state.json (`--init` on the command line): a missing file is an error,
//! never an empty fabric, so a mistyped `--state` cannot make a command
//! believe no job is held (and "fix" the devices to match). `init` refuses
//! a directory that holds anything else, so `--init` cannot turn a
//! mistyped path to some other directory into a state directory either.
//!
//! # Writes, and what a crash can leave
//!
//! [`save`] is atomic and durable on its own: temporary file, fsync, rename,
//! fsync of the directory; a crash leaves the old or the new state. That is
//! two filesystem journal commits (the file's blocks, then the rename).
//!
//! [`save_journaled`] is for the job lifecycle, which only ever replaces
//! state.json while a write-ahead journal holding both the old and the new
//! state is durable on disk (`jobs::journal`). It writes the temporary file,
//! renames it, then fsyncs the renamed file and the directory: one journal
//! commit on ext4/XFS (the file's fsync commits the rename with it; the
//! directory's fsync, kept for POSIX, then has nothing left to do). A
//! `kill -9` cannot tear it (the bytes are in the page cache before the
//! rename); a power loss before its fsync returns may leave state.json
//! empty, zero-filled or cut short. [`load`] reports exactly those cases as
//! [`StoreError::Torn`], and as the journal is still there (it is removed
//! only after this fsync), the next open takes the state from the journal
//! and recovery settles it from the devices.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::decision::Decision;

/// File name inside the state directory.
pub const STATE_FILE: &str = "state.json";
/// Largest state.json (or journal.json) read: far above any real fabric's
/// (a few MB at 8192 GPUs), a bound on the memory a corrupt file can take.
pub const MAX_STATE_BYTES: usize = 64 << 20;
const VERSION: u32 = 1;

#[derive(Debug, Error)]
pub enum StoreError {
    /// No state.json: not a state directory (a mistyped `--state`?).
    #[error("{dir}: not a vclos state directory (no {STATE_FILE}); check --state, or create one with --init")]
    Missing { dir: String },
    #[error("{file}: larger than {limit} bytes: not a state file vclos wrote")]
    TooLarge { file: String, limit: usize },
    /// `init` in a directory that holds something else.
    #[error("{dir}: refusing to create a state directory here: it is not empty ({entry}) and holds no {STATE_FILE}")]
    NotEmpty { dir: String, entry: String },
    // The cause is in the message, not a `#[source]`: error chains print
    // each cause once.
    #[error("{file}: {error}")]
    Io { file: String, error: std::io::Error },
    /// Empty, zero-filled or cut short: a power loss while it was being
    /// replaced under a journal (see the module docs).
    #[error(
        "{file}: damaged: empty, zero-filled, cut short or not text, as a crash while it was \
         being replaced leaves it. With the journal of that change next to it, the next open \
         settles it from the devices; without one, restore the file from a backup (vclos does \
         not guess which jobs it held)"
    )]
    Torn { file: String },
    #[error("{file}: not a valid state file: {error}")]
    Parse {
        file: String,
        error: serde_json::Error,
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
    move |error| StoreError::Io {
        file: file.display().to_string(),
        error,
    }
}

/// Path of the state file in `dir`.
pub fn state_path(dir: &Path) -> PathBuf {
    dir.join(STATE_FILE)
}

/// Load the decisions stored in `dir` for topology `topology`. A missing
/// state.json ([`StoreError::Missing`]) or one written for another
/// topology is an error.
pub fn load(dir: &Path, topology: &str) -> Result<Vec<Decision>, StoreError> {
    let file = state_path(dir);
    let bytes = match crate::yaml::read_capped(&file, MAX_STATE_BYTES) {
        Ok(b) if b.len() > MAX_STATE_BYTES => {
            return Err(StoreError::TooLarge {
                file: file.display().to_string(),
                limit: MAX_STATE_BYTES,
            })
        }
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(StoreError::Missing {
                dir: dir.display().to_string(),
            })
        }
        Err(e) => return Err(io(&file)(e)),
    };
    let name = file.display().to_string();
    let parsed: StateFile = serde_json::from_slice(&bytes).map_err(|error| {
        if torn(&bytes, &error) {
            StoreError::Torn { file: name.clone() }
        } else {
            StoreError::Parse {
                file: name.clone(),
                error,
            }
        }
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

/// Make `dir` a state directory for `topology` holding no job, unless it
/// is one already (then nothing changes: `Ok(false)`; one for another
/// topology is [`StoreError::Topology`]). The directory is created if
/// missing; an existing one must be empty (a `lock` file aside).
pub fn init(dir: &Path, topology: &str) -> Result<bool, StoreError> {
    match load(dir, topology) {
        Ok(_) => return Ok(false),
        Err(StoreError::Missing { .. }) => {}
        Err(e) => return Err(e),
    }
    fs::create_dir_all(dir).map_err(io(dir))?;
    let other = fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // The lock, and a racing init's work: its file not yet named
        // state.json, or state.json itself (the exclusive link below then
        // finds it, and it is checked for this topology).
        .find(|n| {
            n != super::lock::LOCK_FILE
                && n != STATE_FILE
                && !n.starts_with(&format!(".{STATE_FILE}."))
        });
    if let Some(entry) = other {
        return Err(StoreError::NotEmpty {
            dir: dir.display().to_string(),
            entry,
        });
    }
    // Named exclusively, never replacing a state.json: two inits racing
    // cannot empty a state the faster one's first admission already saved.
    let file = state_path(dir);
    let text = render(&file, topology, &[])?;
    let tmp = tmp_path(dir, &dir.join(format!("{STATE_FILE}.init")));
    let result = (|| {
        let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(&text).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        match fs::hard_link(&tmp, &file) {
            Ok(()) => sync_dir(dir).map(|()| true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(io(&file)(e)),
        }
    })();
    let _ = fs::remove_file(&tmp);
    let created = result?;
    // Whoever created it, it must be this topology's.
    load(dir, topology)?;
    Ok(created)
}

/// What a write cut short by a power loss leaves of a JSON file written in
/// one go (never valid JSON text: it has no NUL bytes): nothing, zeros, or
/// a prefix.
pub fn torn(bytes: &[u8], error: &serde_json::Error) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace) || bytes.contains(&0) || error.is_eof()
}

fn render(file: &Path, topology: &str, decisions: &[Decision]) -> Result<Vec<u8>, StoreError> {
    let body = StateFile {
        version: VERSION,
        topology: topology.to_string(),
        decisions: decisions.to_vec(),
    };
    let mut text = serde_json::to_vec_pretty(&body).map_err(|error| StoreError::Parse {
        file: file.display().to_string(),
        error,
    })?;
    text.push(b'\n');
    Ok(text)
}

/// Atomically and durably replace the state in `dir` (created if missing).
pub fn save(dir: &Path, topology: &str, decisions: &[Decision]) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(io(dir))?;
    let file = state_path(dir);
    let text = render(&file, topology, decisions)?;
    write_atomic(dir, &file, &text)
}

/// Replace the state in `dir` while a durable journal holds both the old
/// and the new state: one filesystem journal commit instead of two, at the
/// price of a window in which a power loss tears the file (see the module
/// docs). Never call it without such a journal.
pub fn save_journaled(
    dir: &Path,
    topology: &str,
    decisions: &[Decision],
) -> Result<(), StoreError> {
    let file = state_path(dir);
    let text = render(&file, topology, decisions)?;
    let tmp = tmp_path(dir, &file);
    let result = (|| {
        let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(&text).map_err(io(&tmp))?;
        fs::rename(&tmp, &file).map_err(io(&file))?;
        // The same inode, now named state.json: its data, and on ext4/XFS
        // the rename with it, in one journal commit.
        f.sync_all().map_err(io(&file))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn tmp_path(dir: &Path, file: &Path) -> PathBuf {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique within the process too: fabrics of one process may write at once.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    dir.join(format!(".{name}.tmp.{}.{seq}", std::process::id()))
}

/// Make renames and links in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(dir))
}

/// Atomically replace `file` (inside `dir`) with `bytes`: temporary file in
/// the same directory, fsync, rename, fsync of the directory. Readers see
/// the old or the new content, never a mix, even across a crash.
pub fn write_atomic(dir: &Path, file: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(io(dir))?;
    let tmp = tmp_path(dir, file);
    let result = (|| {
        let mut f = fs::File::create(&tmp).map_err(io(&tmp))?;
        f.write_all(bytes).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        fs::rename(&tmp, file).map_err(io(file))?;
        // Make the rename itself durable.
        sync_dir(dir)
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

    fn d(job: &str) -> Decision {
        Decision::one_gpu(job)
    }

    #[test]
    fn missing_file_is_an_error_until_init_and_round_trip_keeps_order() {
        let dir = tempfile::tempdir().unwrap();
        let e = load(dir.path(), "t").unwrap_err();
        assert!(matches!(e, StoreError::Missing { .. }), "{e}");
        assert!(e.to_string().contains("--init"), "{e}");
        assert!(init(dir.path(), "t").unwrap());
        assert!(load(dir.path(), "t").unwrap().is_empty());
        assert!(
            !init(dir.path(), "t").unwrap(),
            "a second init changes nothing"
        );
        let ds = vec![d("b"), d("a")];
        save(dir.path(), "t", &ds).unwrap();
        assert_eq!(load(dir.path(), "t").unwrap(), ds);
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn journaled_saves_round_trip_and_torn_files_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let ds = vec![d("a"), d("b")];
        save_journaled(dir.path(), "t", &ds).unwrap();
        assert_eq!(load(dir.path(), "t").unwrap(), ds);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let whole = fs::read(state_path(dir.path())).unwrap();
        // What a power loss mid-replace can leave: torn.
        for bad in [&b""[..], b"\n", &whole[..whole.len() / 2], &[0u8; 64]] {
            fs::write(state_path(dir.path()), bad).unwrap();
            let e = load(dir.path(), "t").unwrap_err();
            assert!(matches!(e, StoreError::Torn { .. }), "{e}");
            assert!(e.to_string().contains("state.json"), "{e}");
        }
        let mut zeros = whole[..20].to_vec();
        zeros.extend([0u8; 40]);
        fs::write(state_path(dir.path()), &zeros).unwrap();
        assert!(matches!(
            load(dir.path(), "t"),
            Err(StoreError::Torn { .. })
        ));
        // Whole but wrong: not torn, an ordinary parse error.
        fs::write(state_path(dir.path()), "{\"version\":1}").unwrap();
        assert!(matches!(
            load(dir.path(), "t"),
            Err(StoreError::Parse { .. })
        ));
    }

    #[test]
    fn init_refuses_other_directories_and_other_topologies() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let e = init(dir.path(), "t").unwrap_err();
        assert!(e.to_string().contains("notes.txt"), "{e}");
        assert!(!state_path(dir.path()).exists());
        let fresh = dir.path().join("a/b");
        assert!(init(&fresh, "t").unwrap());
        save(&fresh, "t", &[d("a")]).unwrap();
        assert!(!init(&fresh, "t").unwrap());
        assert_eq!(
            load(&fresh, "t").unwrap(),
            vec![d("a")],
            "init never empties a state"
        );
        assert!(matches!(
            init(&fresh, "u"),
            Err(StoreError::Topology { .. })
        ));
    }

    #[test]
    fn racing_inits_never_replace_a_saved_state() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("s");
        let created: Vec<bool> = std::thread::scope(|s| {
            let runs: Vec<_> = (0..8).map(|_| s.spawn(|| init(&state, "t"))).collect();
            runs.into_iter()
                .map(|r| r.join().unwrap().unwrap())
                .collect()
        });
        assert_eq!(created.iter().filter(|c| **c).count(), 1, "{created:?}");
        save(&state, "t", &[d("a")]).unwrap();
        assert!(!init(&state, "t").unwrap());
        assert_eq!(load(&state, "t").unwrap(), vec![d("a")]);
        let names: Vec<String> = fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["state.json"], "no temporary file left");
    }

    #[test]
    fn an_oversized_state_file_is_refused_without_reading_it_all() {
        let dir = tempfile::tempdir().unwrap();
        // Sparse: the bytes past the cap are never read.
        let f = fs::File::create(state_path(dir.path())).unwrap();
        f.set_len(4 * MAX_STATE_BYTES as u64).unwrap();
        let e = load(dir.path(), "t").unwrap_err();
        assert!(matches!(e, StoreError::TooLarge { .. }), "{e}");
        assert!(e.to_string().contains("state.json"), "{e}");
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
