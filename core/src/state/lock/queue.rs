//! The waiters' queue of the state directory's lock (module doc of
//! [`super`], "Waiting").
//!
//! `DIR/lock.queue/` holds one file per waiting writer, named by its place
//! (20 digits, so names sort as numbers), on which that writer holds an
//! exclusive `flock` for as long as it waits. A waiter goes for the lock
//! only when no ticket below its own belongs to a live waiter; a ticket
//! whose `flock` can be taken belongs to a waiter that is gone (the kernel
//! dropped its lock with its file description: `kill -9`, a dropped task),
//! and is removed by whoever finds it. A ticket is created under a private
//! name, locked, then hard-linked under its number (`link(2)` fails with
//! `EEXIST` instead of replacing: the next number is tried), so no waiter
//! ever sees a numbered ticket that is not locked while its owner lives.
//! (A writer killed between creating its private file and removing it
//! leaves that dot-file behind; it is never read as a ticket, and nobody
//! removes another's private file, which a live writer may be about to
//! link.)
//!
//! The queue orders waiters; it never excludes anyone: exclusion is the
//! lock's own `flock`. A writer that ignores the queue (an older vclos)
//! can still take the lock when it is free, and the one rare race (a dead
//! ticket removed just as a new waiter links the same number) costs that
//! waiter its place, not correctness.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::{io, LockError};

/// The queue's directory inside the state directory.
pub const QUEUE_DIR: &str = "lock.queue";

/// Most entries read from the queue directory (a few per waiting writer).
const MAX_ENTRIES: usize = 100_000;

/// A place in the queue, given up (its file removed) when dropped.
#[derive(Debug)]
pub(super) struct Ticket {
    path: PathBuf,
    pub(super) number: u64,
    _file: File,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Join the queue of `dir`'s lock at its tail.
pub(super) fn join(dir: &Path) -> Result<Ticket, LockError> {
    static JOINS: AtomicU64 = AtomicU64::new(0);
    let q = dir.join(QUEUE_DIR);
    fs::create_dir_all(&q).map_err(io(&q))?;
    let private = q.join(format!(
        ".joining-{}-{}",
        std::process::id(),
        JOINS.fetch_add(1, Ordering::Relaxed)
    ));
    let file = (OpenOptions::new().read(true).write(true).create_new(true))
        .open(&private)
        .map_err(io(&private))?;
    let linked = file
        .lock()
        .map_err(io(&private))
        .and_then(|()| link_next(&q, &private));
    let _ = fs::remove_file(&private);
    let (path, number) = linked?;
    Ok(Ticket {
        path,
        number,
        _file: file,
    })
}

/// Link `private` under the first number past every ticket in `q`.
fn link_next(q: &Path, private: &Path) -> Result<(PathBuf, u64), LockError> {
    let mut n = tickets(q)?.last().map_or(1, |t| t + 1);
    loop {
        let path = q.join(format!("{n:020}"));
        match fs::hard_link(private, &path) {
            Ok(()) => return Ok((path, n)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(io(&path)(e)),
        }
    }
}

/// Whether a live waiter holds a ticket below `number` (`u64::MAX`: any
/// ticket); tickets of waiters that are gone are removed on the way.
pub(super) fn ahead(dir: &Path, number: u64) -> Result<bool, LockError> {
    let q = dir.join(QUEUE_DIR);
    for n in tickets(&q)?.into_iter().take_while(|&n| n < number) {
        let path = q.join(format!("{n:020}"));
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&path)(e)),
        };
        match file.try_lock_shared() {
            Ok(()) => {
                let _ = fs::remove_file(&path); // its waiter is gone
            }
            Err(TryLockError::WouldBlock) => return Ok(true),
            Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
        }
    }
    Ok(false)
}

/// The ticket numbers in `q`, sorted (none when it does not exist).
fn tickets(q: &Path) -> Result<Vec<u64>, LockError> {
    let entries = match fs::read_dir(q) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(q)(e)),
    };
    let mut out: Vec<u64> = entries
        .take(MAX_ENTRIES)
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            let name = name.to_str()?;
            (name.len() == 20).then(|| name.parse().ok())?
        })
        .collect();
    out.sort_unstable();
    Ok(out)
}
