//! The state directory's writer lock: one process (or one `vclos::jobs::Fabric` of a
//! process) changes a fabric at a time, and everyone else can tell who.
//!
//! `DIR/lock` is an ordinary file, created once and never removed, on which
//! every writer holds an exclusive advisory lock (`flock(2)` through
//! [`std::fs::File::lock`], Rust 1.89) for its whole run: planning against
//! the state it just re-read, the journal, the device transaction, saving
//! state.json and recovery of a journal left by a dead writer. The kernel
//! drops the lock when the holder's file description closes, so a `kill
//! -9`ed writer releases it at once and no stale lock can outlive its
//! owner; that is what makes recovery safe: **a journal found while holding
//! the lock was left by a writer that is gone** (the writer never leaves
//! one behind while it runs on, except after a failed rollback, which it
//! reports).
//!
//! `flock` locks belong to the open file description, not the process
//! (flock(2), "Locks created by flock() are associated with an open file
//! description"), so two `Fabric`s of one process exclude each other just
//! as two processes do. They are advisory: only vclos honours them; and
//! they are local (on NFS, Linux emulates them with POSIX byte-range locks,
//! flock(2) NOTES), so a state directory is shared by processes of one
//! host, never across hosts (that is the etcd store's job).
//!
//! Once it holds the lock, a writer writes who it is into the file (pid,
//! host, operation, job, since when); a writer that has to wait names the
//! holder in its message, and read-only commands [`probe`] the lock (a
//! shared lock tried and dropped at once) to say that an operation is in
//! flight instead of reporting its journal as interrupted.
//!
//! **Waiting** (first come, first served). `flock` has no queue a waiter
//! could stand in without blocking a thread it cannot take back when its
//! wait runs out, and its release makes no event to wait on, so a waiter
//! polls. Polled alone (with back-off to 200 ms, until 2026-11-27), a
//! writer that released the lock and asked again (a scheduler submitting
//! jobs one after another) took it back before any sleeping waiter woke:
//! with 8 writers one waited 4 s while others never waited, and the lock
//! sat free 175 ms at a handoff (`examples/lock_handoff.rs`,
//! docs/performance.md). So waiters queue ([`queue`]: a numbered file per
//! waiter in `DIR/lock.queue/`, `flock`ed by it, so a dead waiter's place
//! is seen to be free), and only the waiter at the head polls the lock,
//! every 1 ms; the others poll the queue every 1-4 ms. A writer that finds
//! the lock free and nobody queued takes it at once. With 8 writers the
//! longest wait is now 7 holds and the lock sits free about 2 ms at a
//! handoff.

use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod queue;

/// File name inside the state directory.
pub const LOCK_FILE: &str = "lock";

/// How long a writer waits for the lock unless told otherwise.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);

/// Longest holder record read back (it is a few hundred bytes).
const MAX_HOLDER_BYTES: u64 = 4096;

/// Who holds (or held) the lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    /// What it is doing (`job submit`, `reconcile --fix`, ...).
    pub operation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Seconds since the Unix epoch when it took the lock.
    pub since: u64,
    /// Where this writer serves the API, when it is `vclos serve`
    /// (`--advertise-url`): what a follower tells clients to write to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl Holder {
    /// This process, about to do `operation` (on `job`).
    pub fn me(operation: &str, job: Option<&str>) -> Self {
        Holder {
            pid: std::process::id(),
            host: hostname(),
            operation: operation.to_string(),
            job: job.map(str::to_string),
            since: now(),
            url: None,
        }
    }

    /// The same holder, serving the API at `url`.
    pub fn serving_at(mut self, url: &str) -> Self {
        self.url = Some(url.to_string());
        self
    }
}

/// A holder as messages name it (its record may not be written yet).
pub fn who(holder: Option<&Holder>) -> String {
    holder.map_or_else(|| "another vclos process".into(), ToString::to_string)
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} on {} ({}", self.pid, self.host, self.operation)?;
        if let Some(j) = &self.job {
            write!(f, " of job `{j}`")?;
        }
        let ago = now().saturating_sub(self.since);
        write!(f, ", for {ago} s since unix time {})", self.since)
    }
}

#[derive(Debug, Error)]
pub enum LockError {
    #[error("{file}: {error}")]
    Io { file: String, error: std::io::Error },
    /// Another writer kept the lock for the whole wait.
    #[error("{dir} is locked by {}; gave up after waiting {waited} s (--wait SECONDS waits longer; nothing was changed)",
        who(holder.as_deref()))]
    Busy {
        dir: String,
        holder: Option<Box<Holder>>,
        waited: u64,
    },
}

/// The held lock; dropping it releases it.
#[derive(Debug)]
pub struct StateLock {
    file: File,
    path: PathBuf,
    holder: Holder,
}

impl StateLock {
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// Record another operation (the same process goes on under the lock).
    pub fn set_operation(&mut self, operation: &str, job: Option<&str>) -> Result<(), LockError> {
        self.holder.operation = operation.to_string();
        self.holder.job = job.map(str::to_string);
        write_holder(&mut self.file, &self.path, &self.holder)
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // Clear the record first, so a reader never names a holder that
        // has gone; the lock itself goes with the file description.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

/// Path of the lock file in `dir`.
pub fn lock_path(dir: &Path) -> PathBuf {
    dir.join(LOCK_FILE)
}

fn io(file: &Path) -> impl FnOnce(std::io::Error) -> LockError + '_ {
    move |error| LockError::Io {
        file: file.display().to_string(),
        error,
    }
}

/// Take the lock without waiting: `Ok(None)` if another writer holds it.
/// `dir` must exist.
pub fn try_acquire(dir: &Path, holder: &Holder) -> Result<Option<StateLock>, LockError> {
    let path = lock_path(dir);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(None),
        Err(TryLockError::Error(e)) => return Err(io(&path)(e)),
    }
    write_holder(&mut file, &path, holder)?;
    Ok(Some(StateLock {
        file,
        path,
        holder: holder.clone(),
    }))
}

/// Take the lock, waiting up to `wait` for the writers holding it and
/// queued for it before this one (polled every few ms, so the wait is
/// bounded and the task stays cancellable). A warning names the holder
/// once when the wait begins.
///
/// Taken at once when it is free and nobody is queued; otherwise this
/// writer queues ([`queue`]) and goes for the lock once every live waiter
/// ahead of it has had it (module doc, "Waiting").
pub async fn acquire(dir: &Path, holder: &Holder, wait: Duration) -> Result<StateLock, LockError> {
    let deadline = Instant::now() + wait;
    if !queue::ahead(dir, u64::MAX)? {
        if let Some(l) = try_acquire(dir, holder)? {
            return Ok(l);
        }
    }
    let ticket = queue::join(dir)?;
    let other = read_holder(dir);
    tracing::warn!(dir = %dir.display(), "waiting up to {} s for the state lock held by {}", wait.as_secs(), who(other.as_ref()));
    let mut pause = Duration::from_millis(1);
    loop {
        // At the head of the queue, poll the lock more often: nobody else does.
        let head = !queue::ahead(dir, ticket.number)?;
        if head {
            if let Some(l) = try_acquire(dir, holder)? {
                drop(ticket);
                return Ok(l);
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(LockError::Busy {
                dir: dir.display().to_string(),
                holder: read_holder(dir).map(Box::new),
                waited: wait.as_secs(),
            });
        }
        tokio::time::sleep(pause.min(left)).await;
        let most = Duration::from_millis(if head { 1 } else { 4 });
        pause = (pause * 2).min(most);
    }
}

/// For read-only commands: the writer holding the lock right now, if any
/// (`Some` with an unknown holder when it has not written its record yet).
/// Never creates the lock file and never blocks a writer for longer than
/// one `flock` call.
pub fn probe(dir: &Path) -> Result<Option<Option<Holder>>, LockError> {
    let path = lock_path(dir);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(None)
        }
        Err(TryLockError::WouldBlock) => Ok(Some(read_holder(dir))),
        Err(TryLockError::Error(e)) => Err(io(&path)(e)),
    }
}

fn write_holder(file: &mut File, path: &Path, holder: &Holder) -> Result<(), LockError> {
    let text = serde_json::to_vec(holder).map_err(|e| io(path)(std::io::Error::other(e)))?;
    file.set_len(0).map_err(io(path))?;
    file.seek(SeekFrom::Start(0)).map_err(io(path))?;
    file.write_all(&text).map_err(io(path))
}

/// The holder record, if it can be read whole (a writer may be rewriting it).
fn read_holder(dir: &Path) -> Option<Holder> {
    let mut text = Vec::new();
    File::open(lock_path(dir))
        .ok()?
        .take(MAX_HOLDER_BYTES)
        .read_to_end(&mut text)
        .ok()?;
    serde_json::from_slice(&text).ok()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// This host's name (Linux: the kernel's; elsewhere `HOSTNAME` or `localhost`).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn one_holder_at_a_time_even_within_one_process() {
        let dir = tempfile::tempdir().unwrap();
        let a = try_acquire(dir.path(), &Holder::me("job submit", Some("a"))).unwrap();
        let a = a.expect("the first writer takes it");
        // A second file description of the same process is refused.
        assert!(try_acquire(dir.path(), &Holder::me("job release", None))
            .unwrap()
            .is_none());
        let seen = probe(dir.path()).unwrap().expect("held");
        assert_eq!(seen.as_ref(), Some(a.holder()));
        assert_eq!(seen.unwrap().job.as_deref(), Some("a"));
        drop(a);
        assert_eq!(probe(dir.path()).unwrap(), None);
        assert!(try_acquire(dir.path(), &Holder::me("x", None))
            .unwrap()
            .is_some());
    }

    #[tokio::test]
    async fn a_waiting_writer_gets_it_when_released_or_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = try_acquire(dir.path(), &Holder::me("apply", Some("j1")))
            .unwrap()
            .unwrap();
        let e = acquire(
            dir.path(),
            &Holder::me("b", None),
            Duration::from_millis(30),
        )
        .await
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(text.contains("apply of job `j1`"), "{text}");
        let path = dir.path().to_path_buf();
        let waiter = tokio::spawn(async move {
            acquire(&path, &Holder::me("b", None), Duration::from_secs(30)).await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished());
        drop(held);
        let got = waiter.await.unwrap().unwrap();
        assert_eq!(got.holder().operation, "b");
    }

    #[test]
    fn probing_never_creates_the_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(probe(dir.path()).unwrap(), None);
        assert!(!lock_path(dir.path()).exists());
    }

    /// Live tickets in `dir`'s queue.
    fn queued(dir: &Path) -> usize {
        let q = dir.join(queue::QUEUE_DIR);
        std::fs::read_dir(&q).map_or(0, |e| e.count())
    }

    /// Wait (bounded) until `n` waiters are queued.
    async fn until_queued(dir: &Path, n: usize) {
        for _ in 0..10_000 {
            if queued(dir) == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("{} queued, not {n}", queued(dir));
    }

    /// Waiters get the lock in the order they asked for it, and a writer
    /// that releases it and asks again queues behind them instead of
    /// taking it back at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_get_the_lock_first_come_first_served() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let held = acquire(&path, &Holder::me("x", None), Duration::ZERO)
            .await
            .unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut waiters = Vec::new();
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            let (p, tx) = (path.clone(), tx.clone());
            waiters.push(tokio::spawn(async move {
                let l = acquire(&p, &Holder::me(name, None), Duration::from_secs(60))
                    .await
                    .unwrap();
                tx.send(l.holder().operation.clone()).unwrap();
            }));
            until_queued(&path, i + 1).await;
        }
        drop(held);
        let again = acquire(&path, &Holder::me("x again", None), Duration::from_secs(60))
            .await
            .unwrap();
        tx.send(again.holder().operation.clone()).unwrap();
        drop(again);
        for w in waiters {
            w.await.unwrap();
        }
        let mut order = Vec::new();
        while let Ok(o) = rx.try_recv() {
            order.push(o);
        }
        assert_eq!(order, ["a", "b", "c", "x again"]);
        assert_eq!(queued(&path), 0, "every ticket is given up");
    }

    /// A ticket whose waiter is gone (no `flock` on it) holds nobody up
    /// and is removed; a waiter whose wait runs out gives up its place.
    #[tokio::test]
    async fn a_dead_waiters_ticket_is_skipped_and_a_timed_out_one_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join(queue::QUEUE_DIR);
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join(format!("{:020}", 1)), b"").unwrap();
        let l = acquire(dir.path(), &Holder::me("a", None), Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(queued(dir.path()), 0, "the dead ticket was removed");
        let e = acquire(
            dir.path(),
            &Holder::me("b", None),
            Duration::from_millis(20),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, LockError::Busy { .. }), "{e}");
        assert_eq!(queued(dir.path()), 0, "the timed-out waiter left");
        drop(l);
    }
}
