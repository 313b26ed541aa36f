//! The pool's bookkeeping against a fake driver that counts what happens to
//! its session (end to end over real sockets: tests/lifecycle_pool.rs).
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use vclos_drivers::{Capabilities, CommitId, Driver, DriverError, ErrorKind, LoadMode, Step};

use super::*;

/// How the fake's `reuse` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Ok,
    Stale,
    Hang,
    Unsupported,
}

#[derive(Debug, Default)]
struct Counts {
    /// Drivers made by the factory.
    made: AtomicUsize,
    opens: AtomicUsize,
    closes: AtomicUsize,
    reuses: AtomicUsize,
}

#[derive(Clone)]
struct Fake {
    counts: Arc<Counts>,
    check: Arc<Mutex<Check>>,
    /// `get_config` fails (true) or never answers (`hang`).
    fail: Arc<Mutex<bool>>,
    hang: Arc<Mutex<bool>>,
}

impl Fake {
    fn new() -> Self {
        Fake {
            counts: Arc::default(),
            check: Arc::new(Mutex::new(Check::Ok)),
            fail: Arc::default(),
            hang: Arc::default(),
        }
    }
    fn n(&self, f: impl Fn(&Counts) -> &AtomicUsize) -> usize {
        f(&self.counts).load(Ordering::SeqCst)
    }
    fn pool(&self, idle: Duration) -> SessionPool {
        let me = self.clone();
        let factory = move |device: &str| -> Result<Box<dyn Driver>, DriverError> {
            me.counts.made.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(FakeDriver {
                device: device.to_string(),
                fake: me.clone(),
                checkpoint: None,
            }))
        };
        SessionPool::new(
            Arc::new(factory),
            PoolOptions {
                idle_timeout: idle,
                check_timeout: Duration::from_millis(100),
            },
        )
    }
}

struct FakeDriver {
    device: String,
    fake: Fake,
    /// What `rollback(None)` would restore; `reuse` forgets it.
    checkpoint: Option<CommitId>,
}

fn err(device: &str, step: Step, kind: ErrorKind) -> DriverError {
    DriverError {
        device: device.to_string(),
        step,
        kind,
    }
}

#[async_trait]
impl Driver for FakeDriver {
    fn device(&self) -> &str {
        &self.device
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }
    async fn open(&mut self) -> Result<(), DriverError> {
        self.fake.counts.opens.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn close(&mut self) -> Result<(), DriverError> {
        self.fake.counts.closes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    async fn get_config(&mut self) -> Result<String, DriverError> {
        if *self.fake.hang.lock().unwrap() {
            std::future::pending::<()>().await;
        }
        if *self.fake.fail.lock().unwrap() {
            return Err(err(
                &self.device,
                Step::GetConfig,
                ErrorKind::Disconnected("eof".into()),
            ));
        }
        Ok(format!("{} running", self.device))
    }
    async fn load_candidate(&mut self, _: &str, _: LoadMode) -> Result<(), DriverError> {
        Ok(())
    }
    async fn compare_config(&mut self) -> Result<String, DriverError> {
        Ok(String::new())
    }
    async fn commit(&mut self, _: Option<Duration>) -> Result<CommitId, DriverError> {
        let id = CommitId(format!("c{}", self.fake.n(|c| &c.reuses)));
        self.checkpoint = Some(id.clone());
        Ok(id)
    }
    async fn confirm(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    async fn discard(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        match (to, &self.checkpoint) {
            (None, Some(_)) => Ok(()),
            (Some(t), Some(c)) if t == c => Ok(()),
            _ => Err(err(
                &self.device,
                Step::Rollback,
                ErrorKind::Rejected("no commit to roll back".into()),
            )),
        }
    }
    async fn reuse(&mut self) -> Result<(), DriverError> {
        self.fake.counts.reuses.fetch_add(1, Ordering::SeqCst);
        let check = *self.fake.check.lock().unwrap();
        match check {
            Check::Ok => {
                self.checkpoint = None;
                Ok(())
            }
            Check::Stale => Err(err(
                &self.device,
                Step::Open,
                ErrorKind::Disconnected("eof".into()),
            )),
            Check::Hang => std::future::pending().await,
            Check::Unsupported => Err(err(
                &self.device,
                Step::Open,
                ErrorKind::Unsupported("reuse"),
            )),
        }
    }
}

/// One read-only "transaction": borrow, open, read, close.
async fn read(pool: &SessionPool, device: &str) -> Result<String, DriverError> {
    let mut d = pool.driver(device)?;
    d.open().await?;
    let r = d.get_config().await;
    d.close().await?;
    r
}

const LONG: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn an_open_session_serves_the_next_transaction() {
    let f = Fake::new();
    let pool = f.pool(LONG);
    read(&pool, "leaf1").await.unwrap();
    assert_eq!(pool.idle_devices(), vec!["leaf1"]);
    read(&pool, "leaf1").await.unwrap();
    read(&pool, "leaf1").await.unwrap();
    assert_eq!((f.n(|c| &c.made), f.n(|c| &c.opens)), (1, 1));
    assert_eq!((f.n(|c| &c.reuses), f.n(|c| &c.closes)), (2, 0));
    let s = pool.stats();
    assert_eq!((s.opened, s.reused, s.discarded), (1, 2, 0));
    // Another device has its own session.
    read(&pool, "leaf2").await.unwrap();
    assert_eq!(pool.idle_devices(), vec!["leaf1", "leaf2"]);
    assert_eq!(f.n(|c| &c.opens), 2);
}

#[tokio::test(start_paused = true)]
async fn a_reused_driver_forgets_the_previous_commit() {
    let f = Fake::new();
    let pool = f.pool(LONG);
    let mut d = pool.driver("ocs1").unwrap();
    d.open().await.unwrap();
    d.commit(None).await.unwrap();
    d.close().await.unwrap();
    let mut d = pool.driver("ocs1").unwrap();
    d.open().await.unwrap();
    let e = d.rollback(None).await.unwrap_err();
    assert!(e.to_string().contains("no commit to roll back"), "{e}");
}

#[tokio::test(start_paused = true)]
async fn a_failed_call_closes_the_session_instead_of_returning_it() {
    let f = Fake::new();
    let pool = f.pool(LONG);
    read(&pool, "leaf1").await.unwrap();
    *f.fail.lock().unwrap() = true;
    read(&pool, "leaf1").await.unwrap_err();
    assert!(pool.idle_devices().is_empty());
    assert_eq!(f.n(|c| &c.closes), 1);
    *f.fail.lock().unwrap() = false;
    read(&pool, "leaf1").await.unwrap();
    assert_eq!((f.n(|c| &c.made), f.n(|c| &c.opens)), (2, 2));
    assert_eq!(pool.stats().discarded, 1);
}

#[tokio::test(start_paused = true)]
async fn an_abandoned_call_or_a_dropped_driver_is_not_returned() {
    let f = Fake::new();
    let pool = f.pool(LONG);
    *f.hang.lock().unwrap() = true;
    let mut d = pool.driver("spine1").unwrap();
    d.open().await.unwrap();
    // The controller's step timeout drops the call mid-way.
    assert!(tokio::time::timeout(Duration::from_secs(1), d.get_config())
        .await
        .is_err());
    d.close().await.unwrap();
    assert!(pool.idle_devices().is_empty());
    assert_eq!(f.n(|c| &c.closes), 1);
    *f.hang.lock().unwrap() = false;
    let mut d = pool.driver("spine1").unwrap();
    d.open().await.unwrap();
    drop(d);
    assert!(pool.idle_devices().is_empty());
    assert_eq!(pool.stats().discarded, 2);
}

#[tokio::test(start_paused = true)]
async fn a_stale_or_silent_session_is_replaced_transparently() {
    for check in [Check::Stale, Check::Hang] {
        let f = Fake::new();
        let pool = f.pool(LONG);
        read(&pool, "ocs1").await.unwrap();
        *f.check.lock().unwrap() = check;
        assert_eq!(read(&pool, "ocs1").await.unwrap(), "ocs1 running");
        assert_eq!((f.n(|c| &c.made), f.n(|c| &c.opens)), (2, 2), "{check:?}");
        let s = pool.stats();
        assert_eq!((s.reconnected, s.opened, s.reused), (1, 2, 0), "{check:?}");
        // The fresh session went back to the pool; the stale one is closed.
        assert_eq!(pool.idle_devices(), vec!["ocs1"]);
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(f.n(|c| &c.closes), 1, "{check:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_driver_without_reuse_is_never_kept() {
    let f = Fake::new();
    *f.check.lock().unwrap() = Check::Unsupported;
    let pool = f.pool(LONG);
    for _ in 0..3 {
        read(&pool, "leaf1").await.unwrap();
    }
    // The first return is kept (the pool cannot know yet); the check of its
    // next use says unsupported, and from then on nothing is kept.
    assert!(pool.idle_devices().is_empty());
    assert_eq!((f.n(|c| &c.made), f.n(|c| &c.opens)), (3, 3));
}

#[tokio::test(start_paused = true)]
async fn sessions_are_exclusive_and_one_is_kept_per_device() {
    let f = Fake::new();
    let pool = f.pool(LONG);
    let mut a = pool.driver("leaf1").unwrap();
    let mut b = pool.driver("leaf1").unwrap();
    a.open().await.unwrap();
    b.open().await.unwrap();
    assert_eq!(f.n(|c| &c.made), 2);
    a.close().await.unwrap();
    b.close().await.unwrap();
    assert_eq!(pool.idle_devices(), vec!["leaf1"]);
    assert_eq!(f.n(|c| &c.closes), 1);
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire_and_shutdown_closes_the_rest() {
    let f = Fake::new();
    let pool = f.pool(Duration::from_secs(10));
    read(&pool, "leaf1").await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    read(&pool, "leaf2").await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    // leaf1 idled 11 s, leaf2 5 s.
    assert_eq!(pool.idle_devices(), vec!["leaf2"]);
    assert_eq!((f.n(|c| &c.closes), pool.stats().expired), (1, 1));
    pool.shutdown().await;
    assert!(pool.idle_devices().is_empty());
    assert_eq!(f.n(|c| &c.closes), 2);
    // After shutdown the pool only lends fresh drivers and closes them.
    read(&pool, "leaf2").await.unwrap();
    assert!(pool.idle_devices().is_empty());
    assert_eq!((f.n(|c| &c.opens), f.n(|c| &c.closes)), (3, 3));
}
