//! A driver factory that runs a hook at one step of one device's driver:
//! arm a fault exactly at commit, or hang forever (a process killed there).
#![allow(clippy::unwrap_used, dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use vclos::controller::DriverFactory;
use vclos_drivers::{Capabilities, CommitId, Driver, DriverError, LoadMode};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum At {
    Commit,
    /// The close of a session that committed (read-only sessions, such as
    /// the foreign-steering check before an apply, do not count).
    Close,
}

pub type Hook = Arc<dyn Fn() + Send + Sync>;

/// What to do at the hooked step.
#[derive(Clone)]
pub enum Then {
    /// Run `before`, the real step, then `after`.
    Around { before: Hook, after: Hook },
    /// Run `before`, then never return (the process "dies" here).
    Hang { before: Hook },
}

pub struct Hooked {
    pub inner: Arc<dyn DriverFactory>,
    pub device: String,
    pub at: At,
    pub then: Then,
    fired: Arc<AtomicBool>,
}

impl Hooked {
    pub fn new(inner: impl DriverFactory + 'static, device: &str, at: At, then: Then) -> Arc<Self> {
        Self::around(Arc::new(inner), device, at, then)
    }

    /// [`Hooked::new`] around a shared factory (a session pool).
    pub fn around(inner: Arc<dyn DriverFactory>, device: &str, at: At, then: Then) -> Arc<Self> {
        Arc::new(Hooked {
            inner,
            device: device.into(),
            at,
            then,
            fired: Arc::new(AtomicBool::new(false)),
        })
    }
}

impl DriverFactory for Hooked {
    fn driver(&self, device: &str) -> Result<Box<dyn Driver>, DriverError> {
        let inner = self.inner.driver(device)?;
        if device != self.device {
            return Ok(inner);
        }
        Ok(Box::new(HookDriver {
            inner,
            at: self.at,
            then: self.then.clone(),
            fired: self.fired.clone(),
            committed: false,
        }))
    }
}

struct HookDriver {
    inner: Box<dyn Driver>,
    at: At,
    then: Then,
    fired: Arc<AtomicBool>,
    /// This session committed (At::Close fires only then).
    committed: bool,
}

impl HookDriver {
    /// Whether the hook fires now (once per factory).
    fn fire(&self, at: At) -> bool {
        self.at == at && !self.fired.swap(true, Ordering::SeqCst)
    }
}

#[async_trait]
impl Driver for HookDriver {
    fn device(&self) -> &str {
        self.inner.device()
    }
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn open(&mut self) -> Result<(), DriverError> {
        self.inner.open().await
    }
    async fn close(&mut self) -> Result<(), DriverError> {
        if self.committed && self.fire(At::Close) {
            return self.hooked_close().await;
        }
        self.inner.close().await
    }
    async fn get_config(&mut self) -> Result<String, DriverError> {
        self.inner.get_config().await
    }
    async fn load_candidate(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError> {
        self.inner.load_candidate(config, mode).await
    }
    async fn compare_config(&mut self) -> Result<String, DriverError> {
        self.inner.compare_config().await
    }
    async fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError> {
        if !self.fire(At::Commit) {
            let r = self.inner.commit(confirm).await;
            self.committed |= r.is_ok();
            return r;
        }
        match self.then.clone() {
            Then::Around { before, after } => {
                before();
                let r = self.inner.commit(confirm).await;
                after();
                r
            }
            Then::Hang { before } => {
                before();
                std::future::pending().await
            }
        }
    }
    async fn confirm(&mut self) -> Result<(), DriverError> {
        self.inner.confirm().await
    }
    async fn discard(&mut self) -> Result<(), DriverError> {
        self.inner.discard().await
    }
    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        self.inner.rollback(to).await
    }
    async fn reuse(&mut self) -> Result<(), DriverError> {
        self.inner.reuse().await
    }
}

impl HookDriver {
    async fn hooked_close(&mut self) -> Result<(), DriverError> {
        match self.then.clone() {
            Then::Around { before, after } => {
                before();
                let r = self.inner.close().await;
                after();
                r
            }
            Then::Hang { before } => {
                before();
                std::future::pending().await
            }
        }
    }
}
