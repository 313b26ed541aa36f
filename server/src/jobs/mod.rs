//! Jobs on a real (or emulated) fabric: placement, plan, transactional apply
//! and a persistent, crash-safe state — the lifecycle a scheduler drives.
//!
//! A [`Fabric`] is opened with a topology and a state directory. Planning
//! ([`Fabric::plan_submit`], [`Fabric::plan_release`],
//! [`Fabric::plan_decision`]) is pure: placement on a copy of the state and
//! a per-device plan; nothing is touched. [`Fabric::apply`] turns a plan
//! into a controller [`ChangeSet`](crate::controller::ChangeSet) (each
//! device's change commands in the form its driver loads, verified by
//! reading running back and parsing it in the device's dialect) and runs it
//! as one transaction.
//!
//! # The state changes only when the whole transaction committed
//!
//! Before the first device commits, a write-ahead [`journal`] records the
//! operation with the state before and after, durably (it is written while
//! the devices prepare; its module docs say what a crash or power loss at
//! each point leaves). On `Committed` the new
//! state.json is written (atomically) and the journal removed; on `Aborted`
//! or `RolledBack` (every device is as it was) the journal is removed and
//! state.json is untouched. If the process dies in between, the journal is
//! still there at the next [`Fabric::open`], which **recovers**: it reads
//! every device the transaction touched and, if all of them hold the new
//! intent, adopts the new state; otherwise it pushes the old intent back to
//! every device that differs (a rollback transaction) and keeps the old
//! state. Either way no reservation leaks: state and devices agree.
//!
//! # Where the state lives
//!
//! A fabric reads and writes its state, journal and writer lock through a
//! [`Store`]: the state directory by default
//! ([`Fabric::load`], [`Fabric::open`]; the files and the fsync order this
//! module and [`journal`] describe), or any other store
//! ([`Fabric::load_store`]; etcd with the `etcd` feature). Below, "state.json"
//! and "the state directory's lock" stand for the store's state and lock.
//! Each transaction re-reads the state with its [`Version`] before the
//! journal and saves the new state conditionally on that version (a
//! compare-and-swap where the store needs one: etcd; the directory's lock
//! already excludes every other writer).
//!
//! # One writer at a time
//!
//! Every state-changing call ([`Fabric::apply`], [`Fabric::recover`],
//! `reconcile` with `fix`) runs under the state directory's exclusive lock
//! ([`crate::state::lock`]): [`Fabric::lock`] takes it (waiting up to
//! [`Fabric::wait`]) and re-reads the state, so a command that locks before
//! it plans always plans against the latest state; a call made without it
//! takes it for its own duration (and a plan made before then is refused
//! as stale if the state moved). [`Fabric::open`] locks, then recovers, and
//! holds the lock until the fabric is dropped or [`Fabric::unlock`]ed.
//! Read-only calls ([`Fabric::load`], `status`, `jobs`) never lock.
//!
//! Recovery acts only under the lock, so the journal it settles was left
//! by a writer that is gone; and before it reads a device it checks the
//! journal: its previous state must be state.json's (or its next state,
//! if the writer died after saving), and both states must be valid and
//! differ by exactly the journal's operation. Otherwise it stops with an
//! error and changes nothing.
//!
//! # Refuse before sending
//!
//! A decision is validated by the fabric state (busy ports, cabling) before
//! it gets a plan; then, on the exact payloads about to be sent, every OCS
//! command is checked against the state once more ([`changes::guard_ocs`]):
//! no `ENT-PATCH`/`DLT-PATCH` may touch a port held by another job. A plan
//! that does not match the state (stale or forged) is refused too.
//!
//! Every apply, recovery push and `reconcile --fix` is also checked against
//! steering vclos did not write ([`foreign`]): the devices it configures are
//! read first, and a port it must configure (or rewire through the OCS) that
//! carries a foreign policy stops it with [`JobsError::ForeignSteering`],
//! naming device, port and policy, before anything is sent; `reconcile`
//! lists foreign steering on managed ports as drift and never deletes it.
//!
//! Recovery and `reconcile --fix` are not guarded by the state this way, on
//! purpose: every command they send moves a device back to the intent of
//! the state itself, so an OCS command on a held port re-makes that job's own
//! circuit where the device drifted from it (a repair, not a move). The OCS
//! still refuses to move a link its switches steer traffic onto.

pub mod changes;
pub mod devices;
mod error;
pub mod foreign;
pub mod journal;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::controller::{
    self, ApplyOptions, ApplyReport, DriverFactory, PoolOptions, Progress, SessionPool,
    TopologyDrivers,
};
use crate::decision::Decision;
use crate::intent::{self, FabricIntent};
use crate::names::JobId;
use crate::placement::given::{self, Given};
use crate::placement::{self, Blocked, JobRequest, Policy, SliceOptions};
use crate::plan::{self, Action, DevicePlan, Plan, Running};
use crate::state::lock::{self, Holder};
use crate::state::{store, FabricState};
use crate::store::dir::DirStore;
use crate::store::{Committed, Store, Version, WriterLock};
use crate::topology::{Role, Topology};

pub use devices::Drift;
pub use error::JobsError;
pub use foreign::ForeignConflict;
pub use journal::{Journal, Operation};

/// What a submission on named servers or GPUs checks before placement:
/// an id too long for this fabric's derived names, a policy that cannot
/// configure devices or does not take a scheduler's choice.
fn check_submit_on(topo: &Topology, job: &JobId, policy: Policy) -> Result<(), JobsError> {
    intent::name::check_job_id(topo, job)?;
    match policy {
        Policy::Vclos | Policy::OcsVclos => Ok(()),
        Policy::Titan => Err(JobsError::Placement(placement::PlacementError::Given {
            job: job.clone(),
            field: Some("policy".into()),
            reason: TITAN_NAMED.into(),
        })),
        p => Err(JobsError::Placement(
            placement::PlacementError::NotOnFabric(p),
        )),
    }
}

/// Why `titan` does not take a scheduler's servers or GPUs.
pub const TITAN_NAMED: &str = "titan chooses a job's GPUs itself; `servers` and `gpus_on` carry a \
     scheduler's choice, which the fabric's own policy isolates: leave the policy out";

/// What a transaction checks between prepare and the first commit, in
/// order (the controller's [`controller::Guard`]): the journal is durable;
/// no port the change configures carries foreign steering, judged on the
/// running configurations prepare read (so the devices are not read twice);
/// the writer lock is still held with time to spare. The lock is checked
/// again before every later commit stage and before a rollback.
struct TxGuard<'a> {
    journal: std::sync::Mutex<Option<tokio::sync::oneshot::Receiver<Result<(), String>>>>,
    topo: &'a Topology,
    touched: foreign::Touched,
    /// Touched devices outside the change set (the switch end of a rewired
    /// OCS port, say), read before the transaction: prepare reads only the
    /// devices it changes.
    outside: plan::Running,
    /// What the foreign-steering check found (the typed refusal).
    found: std::sync::Mutex<Vec<ForeignConflict>>,
    lock: Option<&'a dyn WriterLock>,
    /// The lock's refusal, when its check stopped the transaction (typed,
    /// for the answer: a lost lock is no device refusal, and checking it
    /// again after the transaction may pass once the lease is renewed).
    lost: std::sync::Mutex<Option<JobsError>>,
}

impl<'a> TxGuard<'a> {
    fn new(
        topo: &'a Topology,
        touched: foreign::Touched,
        lock: Option<&'a dyn WriterLock>,
        journal: tokio::sync::oneshot::Receiver<Result<(), String>>,
    ) -> Self {
        TxGuard {
            journal: std::sync::Mutex::new(Some(journal)),
            topo,
            touched,
            outside: plan::Running::new(),
            found: std::sync::Mutex::new(Vec::new()),
            lock,
            lost: std::sync::Mutex::new(None),
        }
    }

    /// For recovery's rollback: its journal is the one being settled, and
    /// foreign steering was checked on recovery's own read; the lock alone.
    fn lock_only(topo: &'a Topology, lock: Option<&'a dyn WriterLock>) -> Self {
        let (done, journal) = tokio::sync::oneshot::channel();
        let _ = done.send(Ok(()));
        Self::new(topo, foreign::Touched::new(), lock, journal)
    }

    /// Foreign steering on the touched ports, from prepare's reads.
    fn foreign(&self, read: &BTreeMap<&str, &str>) -> Result<(), String> {
        let mut running = self.outside.clone();
        for device in self.touched.keys() {
            if running.contains_key(device) {
                continue;
            }
            let text = read.get(device.as_str()).ok_or_else(|| {
                format!("{device}: not read in prepare, so not checked for foreign steering")
            })?;
            let id = (self.topo.device_id(device)).ok_or_else(|| format!("{device}: unknown"))?;
            let dialect = crate::dialect::dialect(self.topo.device(id).mgmt.dialect);
            let items = dialect.parse(device, text).map_err(|e| {
                format!("{device}: cannot be parsed to check it for foreign steering: {e}")
            })?;
            running.insert(device.clone(), items);
        }
        let conflicts = foreign::conflicts(&self.touched, &running);
        if conflicts.is_empty() {
            return Ok(());
        }
        let why = JobsError::ForeignSteering(conflicts.clone()).to_string();
        if let Ok(mut f) = self.found.lock() {
            *f = conflicts;
        }
        Err(why)
    }

    fn refused(&self) -> Vec<ForeignConflict> {
        self.found.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// The lock check's refusal, if one stopped the transaction.
    fn lost(&self) -> Option<JobsError> {
        self.lost.lock().ok()?.take()
    }
}

#[async_trait::async_trait]
impl controller::Guard for TxGuard<'_> {
    async fn before_commit(&self, read: &BTreeMap<&str, &str>) -> Result<(), String> {
        let journal = self.journal.lock().ok().and_then(|mut j| j.take());
        match journal {
            Some(j) => j
                .await
                .unwrap_or_else(|_| Err("the journal was not written".into()))?,
            None => return Err("the journal was not written".into()),
        }
        self.foreign(read)?;
        self.check().await
    }

    async fn check(&self) -> Result<(), String> {
        let Some(l) = self.lock else {
            return Ok(());
        };
        l.check().await.map_err(|e| {
            let why = e.to_string();
            if let Ok(mut lost) = self.lost.lock() {
                lost.get_or_insert(e);
            }
            why
        })
    }
}

/// A plan checked against the held state ([`Fabric::apply`]): the state it
/// leads to and the change set that configures it.
struct Checked {
    /// The decisions held now.
    held: Vec<Decision>,
    /// The committed state read; the new one is written against its version.
    read: Committed,
    /// The state after the plan, and its decisions.
    next: FabricState,
    new: Vec<Decision>,
    op: Operation,
    set: controller::ChangeSet,
}

/// A fabric under management: topology, committed state, device access.
pub struct Fabric {
    topo: Arc<Topology>,
    /// Where the committed state, the journal and the writer lock live.
    store: Arc<dyn Store>,
    state: FabricState,
    /// The version `state` was read (or last written) at.
    version: Version,
    base: Arc<FabricIntent>,
    /// The last intents built ([`intent::Kept`]): building a whole
    /// fabric's intent takes tens of ms on thousands of GPUs, and a change
    /// needs the current one twice (its plan, apply's check) and the one
    /// after it twice (plan, apply), and leaves the latter as the next
    /// change's current one, which the change after rebuilds only where it
    /// touches devices.
    intents: std::sync::Mutex<intent::Kept>,
    factory: Arc<dyn DriverFactory>,
    /// The session pool behind `factory`, when [`Fabric::load`] made one.
    pool: Option<Arc<SessionPool>>,
    policy: Policy,
    slicing: SliceOptions,
    /// How transactions are run.
    pub options: ApplyOptions,
    /// Bound on reading one device (recovery, reconcile, status).
    pub read_timeout: Duration,
    /// How long to wait for the state lock another writer holds.
    pub wait: Duration,
    /// The store's writer lock, while this fabric holds it.
    lock: Option<Box<dyn WriterLock>>,
}

impl fmt::Debug for Fabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fabric")
            .field("topology", &self.topo.name)
            .field("store", &self.store.location())
            .field("jobs", &self.state.job_count())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

/// A plan and what applying it did.
#[derive(Debug, Clone, Serialize)]
pub struct Applied {
    pub plan: Plan,
    pub report: ApplyReport,
}

/// What recovery did with a journal left by an interrupted run.
#[derive(Debug, Clone, Serialize)]
pub struct Recovery {
    pub journal: Journal,
    pub outcome: RecoveryOutcome,
    /// Per device: how it differed from the new intent when read.
    pub drift: Vec<Drift>,
    /// The rollback transaction, if one was needed.
    pub rollback: Option<ApplyReport>,
}

/// How an interrupted operation was settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryOutcome {
    /// Every device held the new intent: the operation is now committed.
    AdoptedNew,
    /// Devices were put back to the old intent; the operation never happened.
    RolledBack,
    /// The rollback transaction failed; the journal is kept for another try.
    Failed { reason: String },
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let j = &self.journal;
        let op = match j.operation {
            Operation::Admit => "admission",
            Operation::Release => "release",
        };
        write!(
            f,
            "recovered an interrupted {op} of job `{}` ({} device(s)",
            j.decision.job,
            j.devices.len()
        )?;
        if let Some(o) = &j.owner {
            write!(f, "; left by pid {} on {}, gone", o.pid, o.host)?;
        }
        write!(f, "): ")?;
        match &self.outcome {
            RecoveryOutcome::AdoptedNew => {
                write!(f, "every device held the new configuration; state updated")
            }
            RecoveryOutcome::RolledBack => write!(
                f,
                "devices put back to the previous configuration; state unchanged"
            ),
            RecoveryOutcome::Failed { reason } => {
                write!(f, "FAILED ({reason}); the journal is kept, retry")
            }
        }
    }
}

/// One device's reachability and drift.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceHealth {
    pub device: String,
    pub role: Role,
    /// Why it could not be read (None: reachable and parsed).
    pub error: Option<String>,
    /// Difference from the state's intent (None when unreadable).
    pub drift: Option<Drift>,
}

/// `vclos status` (also what `GET /v1/status` answers and the client reads).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    pub topology: String,
    pub jobs: Vec<Decision>,
    /// A journal: of the operation in flight when `writer` is set,
    /// otherwise left by an interrupted run (recovery pending).
    pub journal: Option<Journal>,
    /// A writer holds the state lock right now (`holder` when it could be
    /// read): an operation is in flight.
    pub writer: Option<Writer>,
    pub devices: Vec<DeviceHealth>,
}

/// The writer holding the state lock, as a read-only caller sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Writer {
    pub holder: Option<Holder>,
}

impl fmt::Display for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an operation is in flight: {}",
            lock::who(self.holder.as_ref())
        )
    }
}

/// What a read-only caller of a state directory should be told: a writer
/// at work, or a journal an interrupted one left.
#[derive(Debug, Clone)]
pub enum Pending {
    InFlight(Writer),
    Interrupted(Box<Journal>),
}

impl fmt::Display for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pending::InFlight(w) => write!(f, "{w}"),
            Pending::Interrupted(j) => write!(
                f,
                "an interrupted {:?} of job `{}` is pending recovery",
                j.operation, j.decision.job
            ),
        }
    }
}

/// [`Pending`] for `dir`, without taking the lock (a probe never blocks a
/// writer for longer than one `flock` call).
pub fn pending(dir: &Path) -> Result<Option<Pending>, JobsError> {
    if let Some(holder) = lock::probe(dir)? {
        return Ok(Some(Pending::InFlight(Writer { holder })));
    }
    Ok(journal::read(dir)?.map(|j| Pending::Interrupted(Box::new(j))))
}

/// `vclos reconcile`.
#[derive(Debug, Clone, Serialize)]
pub struct Reconcile {
    /// Devices whose running configuration differs from intent.
    pub drift: Vec<Drift>,
    /// Devices that could not be read: (device, error).
    pub unreachable: Vec<(String, String)>,
    /// The transaction pushing intent, with `fix`.
    pub fix: Option<ApplyReport>,
    /// Why `fix` was not run: ports it must configure carry foreign
    /// steering (nothing was sent to any device).
    pub fix_refused: Vec<ForeignConflict>,
}

impl Fabric {
    /// Load the state of `dir` without touching any device; drivers come
    /// from the topology's endpoints and credential references, through a
    /// [`SessionPool`] so device sessions stay open from one transaction to
    /// the next (call [`Fabric::shutdown`] to close them).
    pub fn load(topo: Arc<Topology>, dir: impl Into<PathBuf>) -> Result<Self, JobsError> {
        let drivers = Arc::new(TopologyDrivers::new(Arc::clone(&topo)));
        let pool = Arc::new(SessionPool::new(drivers, PoolOptions::default()));
        Self::load_pooled(topo, dir, pool)
    }

    /// [`Fabric::load`] with a session pool of your own (its idle timeout,
    /// or around another factory); [`Fabric::shutdown`] closes it.
    pub fn load_pooled(
        topo: Arc<Topology>,
        dir: impl Into<PathBuf>,
        pool: Arc<SessionPool>,
    ) -> Result<Self, JobsError> {
        let mut f = Self::load_with(topo, dir, Arc::clone(&pool) as Arc<dyn DriverFactory>)?;
        f.pool = Some(pool);
        Ok(f)
    }

    /// [`Fabric::load`] with another driver factory (tests, wrappers).
    pub fn load_with(
        topo: Arc<Topology>,
        dir: impl Into<PathBuf>,
        factory: Arc<dyn DriverFactory>,
    ) -> Result<Self, JobsError> {
        let store = DirStore::new(dir.into(), &topo.name);
        let (state, version) = dir_state(&store, &topo)?;
        Self::assemble(topo, Arc::new(store), state, version, factory)
    }

    /// Load the state held by `store` without touching any device; drivers
    /// from the topology through a [`SessionPool`] (as [`Fabric::load`]).
    pub async fn load_store(topo: Arc<Topology>, store: Arc<dyn Store>) -> Result<Self, JobsError> {
        let drivers = Arc::new(TopologyDrivers::new(Arc::clone(&topo)));
        let pool = Arc::new(SessionPool::new(drivers, PoolOptions::default()));
        let mut f =
            Self::load_store_with(topo, store, Arc::clone(&pool) as Arc<dyn DriverFactory>).await?;
        f.pool = Some(pool);
        Ok(f)
    }

    /// [`Fabric::load_store`] with another driver factory.
    pub async fn load_store_with(
        topo: Arc<Topology>,
        store: Arc<dyn Store>,
        factory: Arc<dyn DriverFactory>,
    ) -> Result<Self, JobsError> {
        let (state, version) = held_state(store.as_ref(), &topo).await?;
        Self::assemble(topo, store, state, version, factory)
    }

    fn assemble(
        topo: Arc<Topology>,
        store: Arc<dyn Store>,
        state: FabricState,
        version: Version,
        factory: Arc<dyn DriverFactory>,
    ) -> Result<Self, JobsError> {
        let intent_base = intent::Base::new(&topo)?;
        let base = Arc::new(intent::build_on(&intent_base, &topo, &[])?);
        let policy = Policy::of_fabric(&topo);
        Ok(Fabric {
            topo,
            store,
            state,
            version,
            base,
            intents: std::sync::Mutex::new(intent::Kept::new(intent_base)),
            factory,
            pool: None,
            policy,
            slicing: SliceOptions::default(),
            options: ApplyOptions::default(),
            read_timeout: Duration::from_secs(30),
            wait: lock::DEFAULT_WAIT,
            lock: None,
        })
    }

    /// Load, take the state lock (held until the fabric is dropped or
    /// unlocked), then settle any operation a previous run left half done.
    pub async fn open(
        topo: Arc<Topology>,
        dir: impl Into<PathBuf>,
    ) -> Result<(Self, Option<Recovery>), JobsError> {
        let mut f = Self::load(topo, dir)?;
        f.lock("open", None).await?;
        let r = f.recover(&controller::NoProgress).await?;
        Ok((f, r))
    }

    /// [`Fabric::open`] with another driver factory.
    pub async fn open_with(
        topo: Arc<Topology>,
        dir: impl Into<PathBuf>,
        factory: Arc<dyn DriverFactory>,
    ) -> Result<(Self, Option<Recovery>), JobsError> {
        let mut f = Self::load_with(topo, dir, factory)?;
        f.lock("open", None).await?;
        let r = f.recover(&controller::NoProgress).await?;
        Ok((f, r))
    }

    /// Take the store's writer lock for `operation` (waiting up
    /// to [`Fabric::wait`] for another writer) and re-read the state, which
    /// may have changed since this fabric was loaded. Held until
    /// [`Fabric::unlock`] or drop; locking again only renames the operation.
    pub async fn lock(&mut self, operation: &str, job: Option<&JobId>) -> Result<(), JobsError> {
        let job = job.map(JobId::as_str);
        if let Some(l) = &mut self.lock {
            l.set_operation(operation, job).await?;
            return Ok(());
        }
        let l = (self.store)
            .lock(&Holder::me(operation, job), self.wait)
            .await?;
        self.adopt_lock(l).await
    }

    /// Hold `lock`, taken from this fabric's [`Fabric::store`] by a caller
    /// that waited for it without holding the fabric (leader election),
    /// and re-read the state under it.
    pub async fn adopt_lock(&mut self, lock: Box<dyn WriterLock>) -> Result<(), JobsError> {
        (self.state, self.version) = held_state(self.store.as_ref(), &self.topo).await?;
        self.lock = Some(lock);
        Ok(())
    }

    /// Without the lock: re-read the committed state (what another writer,
    /// e.g. the leader, wrote since). Holding it, this fabric's state is
    /// the committed one already and nothing is read.
    pub async fn refresh(&mut self) -> Result<(), JobsError> {
        if self.lock.is_none() {
            (self.state, self.version) = held_state(self.store.as_ref(), &self.topo).await?;
        }
        Ok(())
    }

    /// The held lock's loss signal ([`WriterLock::lost`]), while one is
    /// held and can be lost.
    pub fn lock_lost(&self) -> Option<tokio::sync::watch::Receiver<bool>> {
        self.lock.as_ref().and_then(|l| l.lost())
    }

    /// Release the state lock (no-op without it).
    pub fn unlock(&mut self) {
        self.lock = None;
    }

    /// [`Fabric::unlock`], waiting until the store has released it (etcd:
    /// the lease revoked, so a standby takes over at once).
    pub async fn release_lock(&mut self) {
        if let Some(l) = self.lock.take() {
            l.release().await;
        }
    }

    /// Whether this fabric holds the state lock.
    pub fn is_locked(&self) -> bool {
        self.lock.is_some()
    }

    /// Lock for one call if not locked already; `true` if this call took it
    /// (and must [`Fabric::unlock`] when done).
    async fn lock_for(&mut self, operation: &str, job: Option<&JobId>) -> Result<bool, JobsError> {
        if self.lock.is_some() {
            return Ok(false);
        }
        self.lock(operation, job).await?;
        Ok(true)
    }

    /// The writer holding the state lock right now, if any (never blocks).
    pub async fn writer(&self) -> Result<Option<Writer>, JobsError> {
        if self.lock.is_some() {
            return Ok(None);
        }
        Ok(self.store.writer().await?.map(|holder| Writer { holder }))
    }

    /// Place with `policy` (vclos, ocs-vclos or titan; the default follows
    /// the topology: [`Policy::of_fabric`]).
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The policy jobs are placed with unless a submission names another.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Let the engine round jobs up (`--round-up`, [`placement::sizing`])
    /// or take partly used servers (`--partial-servers`).
    pub fn with_slicing(mut self, slicing: SliceOptions) -> Self {
        self.slicing = slicing;
        self
    }

    pub fn with_options(mut self, options: ApplyOptions) -> Self {
        self.options = options;
        self
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    /// The session pool behind the drivers ([`Fabric::load`],
    /// [`Fabric::load_pooled`]; None with another factory).
    pub fn sessions(&self) -> Option<&Arc<SessionPool>> {
        self.pool.as_ref()
    }

    /// Close the device sessions kept open between transactions. The
    /// fabric stays usable (later transactions open sessions and close
    /// them). Dropping a fabric without it closes the sockets, less politely.
    pub async fn shutdown(&self) {
        if let Some(p) = &self.pool {
            p.shutdown().await;
        }
    }

    /// The state directory (None for a store elsewhere, e.g. etcd).
    pub fn dir(&self) -> Option<&Path> {
        self.store.dir()
    }

    /// Where the state lives.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The version the committed state was read (or written) at.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The committed state.
    pub fn state(&self) -> &FabricState {
        &self.state
    }

    /// Held jobs' decisions, in admission order.
    pub fn jobs(&self) -> Vec<Decision> {
        self.state.decisions().into_iter().cloned().collect()
    }

    /// The intent of the committed state.
    pub fn intent(&self) -> Result<FabricIntent, JobsError> {
        Ok(FabricIntent::clone(&*self.intent_of(&self.jobs())?))
    }

    /// The intent of `held` ([`intent::Kept`]: kept when it was built for
    /// exactly these decisions, whatever changed the state since (a
    /// commit, a re-read, recovery); else rebuilt where one decision
    /// changes it, else built whole).
    fn intent_of(&self, held: &[Decision]) -> Result<Arc<FabricIntent>, intent::IntentError> {
        let mut kept = self.intents.lock().unwrap_or_else(|e| e.into_inner());
        kept.intent(&self.topo, held)
    }

    /// A journal left by an interrupted run, if any.
    pub async fn pending_journal(&self) -> Result<Option<Journal>, JobsError> {
        self.store.journal().await
    }

    /// Place a job of `gpus` GPUs and plan its admission. Touches nothing.
    pub fn plan_submit(&self, job: &JobId, gpus: u32) -> Result<Plan, JobsError> {
        self.plan_submit_by(job, gpus, self.policy)
    }

    /// [`Fabric::plan_submit`] with `policy` for this job
    /// ([`placement::fabric_placer`]: vclos, ocs-vclos, or titan over the
    /// fabric's own isolation).
    pub fn plan_submit_by(
        &self,
        job: &JobId,
        gpus: u32,
        policy: Policy,
    ) -> Result<Plan, JobsError> {
        intent::name::check_job_id(&self.topo, job)?;
        let mut placer = placement::fabric_placer(policy, self.state.clone(), self.slicing)?;
        let req = JobRequest::new(job.clone(), gpus);
        match placer.place(&req)? {
            placement::Outcome::Placed(d) => self.plan_decision(Arc::unwrap_or_clone(d)),
            placement::Outcome::Blocked(b) => Err(JobsError::Blocked {
                job: job.clone(),
                why: match b {
                    Blocked::Gpu => "not enough free GPUs / idle servers",
                    Blocked::Network => "no isolated network slice is free",
                },
            }),
        }
    }

    /// Place a job on the servers (or GPUs) a scheduler chose (`named`,
    /// topology names; [`placement::given`]) and plan its admission.
    /// `gpus` defaults to every GPU named. Touches nothing.
    pub fn plan_submit_on(
        &self,
        job: &JobId,
        gpus: Option<u32>,
        named: &given::Named,
    ) -> Result<Plan, JobsError> {
        self.plan_submit_on_by(job, gpus, named, self.policy)
    }

    /// [`Fabric::plan_submit_on`] with `policy` for this job (vclos or
    /// ocs-vclos; titan chooses GPUs itself and is refused, naming the
    /// field: [`TITAN_NAMED`]).
    pub fn plan_submit_on_by(
        &self,
        job: &JobId,
        gpus: Option<u32>,
        named: &given::Named,
        policy: Policy,
    ) -> Result<Plan, JobsError> {
        check_submit_on(&self.topo, job, policy)?;
        let alloc = named.resolve(&self.topo, job)?;
        let gpus = gpus.unwrap_or_else(|| alloc.gpus(&self.topo));
        let req = JobRequest::new(job.clone(), gpus);
        match given::place_on(policy, &self.state, self.slicing, &req, &alloc)? {
            Given::Placed(d) => self.plan_decision(Arc::unwrap_or_clone(d)),
            Given::Refused(r) => Err(JobsError::NotOnServers {
                job: job.clone(),
                why: r.why,
                suggested: (r.suggested.iter())
                    .map(|&s| self.topo.server(s).name.to_string())
                    .collect(),
            }),
        }
    }

    /// Plan admitting a decision (placed, or hand-written). Touches nothing.
    pub fn plan_decision(&self, decision: Decision) -> Result<Plan, JobsError> {
        Ok(plan::plan_on(
            &self.state,
            &|d: &[Decision]| self.intent_of(d),
            &Running::new(),
            Action::Admit(decision),
        )?)
    }

    /// Plan releasing a held job. Touches nothing.
    pub fn plan_release(&self, job: &JobId) -> Result<Plan, JobsError> {
        Ok(plan::plan_on(
            &self.state,
            &|d: &[Decision]| self.intent_of(d),
            &Running::new(),
            Action::Release(job.clone()),
        )?)
    }

    /// Apply a plan as one transaction. `Err` means nothing was sent to any
    /// device; otherwise the report says what happened, and the state (in
    /// memory and state.json) changed only if it is `Committed`.
    ///
    /// The one exception is [`JobsError::NotSaved`]: every device committed
    /// but state.json could not be written; the journal is kept and the
    /// next writer adopts the change from the devices.
    pub async fn apply(
        &mut self,
        plan: &Plan,
        progress: &dyn Progress,
    ) -> Result<ApplyReport, JobsError> {
        let took = self.lock_for(plan.action, Some(&plan.job)).await?;
        let r = self.apply_locked(plan, progress).await;
        if took {
            self.unlock();
        }
        r
    }

    async fn apply_locked(
        &mut self,
        plan: &Plan,
        progress: &dyn Progress,
    ) -> Result<ApplyReport, JobsError> {
        let Checked {
            held,
            read,
            next,
            new,
            op,
            set,
        } = self.check_plan(plan).await?;
        let devices: Vec<String> = set.changes.iter().map(|c| c.device.clone()).collect();
        // Foreign steering: the devices the change set does not prepare are
        // read now; the others are checked on prepare's read (TxGuard).
        let touched = foreign::touched(&self.topo, &plan.devices);
        let outside: Vec<String> = (touched.keys())
            .filter(|d| !devices.contains(d))
            .cloned()
            .collect();
        let outside = self.read_for_foreign(&touched, &outside).await?;
        let j = self.journal_for(plan, op, held, new.clone(), devices.clone());
        // Named now (the exclusive create), made durable while the devices
        // prepare; no device commits before it is (see `journal`).
        let unsynced = self.store.begin(&j).await?;
        let (done, synced) = tokio::sync::oneshot::channel();
        let sync = tokio::spawn(async move {
            let r = unsynced.sync().await;
            let _ = done.send(r.as_ref().map(|_| ()).map_err(ToString::to_string));
            r
        });
        // No device commits before the journal is durable, the devices are
        // checked for foreign steering and, on a store whose lock can be
        // lost (etcd), the lock is checked still held with time to spare
        // (issue 18's fencing: the journal carries the term, the save
        // compares the lock again).
        let mut guard = TxGuard::new(&self.topo, touched, self.lock.as_deref(), synced);
        guard.outside = outside;
        let factory = self.factory.as_ref();
        let applied =
            controller::apply_guarded(set, factory, &self.options, progress, &guard).await;
        let refused = guard.refused();
        let lost = guard.lost();
        let synced = sync.await.unwrap_or_else(|e| {
            Err(JobsError::Journal {
                file: self.store.journal_name(),
                message: format!("the task writing it failed: {e}"),
            })
        });
        let report = match (applied, synced) {
            (Ok(report), Ok(())) => report,
            (Err(e), _) => {
                self.store.remove_journal().await?;
                return Err(e.into());
            }
            // Never durable, so nothing was committed (the gate held it).
            (Ok(_), Err(e)) => {
                self.store.remove_journal().await?;
                return Err(e);
            }
        };
        if report.is_committed() {
            self.save_committed(plan, &devices, read.version, &new, next)
                .await?;
        } else if report.is_unchanged() {
            self.store.remove_journal().await?;
            if !refused.is_empty() {
                return Err(JobsError::ForeignSteering(refused));
            }
            // Nothing changed; if the lock's check is what stopped it, say
            // that (a leader steps down on it) rather than a device refusal:
            // as the check found it then (on a loaded machine the lease may
            // be renewed by now, so a second check could pass), or as it is
            // now.
            if let Some(e) = lost {
                return Err(e);
            }
            if let Some(l) = &self.lock {
                l.check().await?;
            }
        } else {
            // Some device could not be put back: keep the journal so the
            // next open (or `vclos reconcile`) settles it from the devices.
            warn!(job = %plan.job, "rollback failed; journal kept for recovery");
        }
        Ok(report)
    }

    /// Check a plan against the held state before anything is written.
    async fn check_plan(&self, plan: &Plan) -> Result<Checked, JobsError> {
        if self.store.journal().await?.is_some() {
            return Err(JobsError::PendingJournal(self.store.journal_name()));
        }
        let held = self.jobs();
        // The version the new state is written against (compare-and-swap).
        let read = self.store.load().await?;
        if read.decisions != held {
            return Err(JobsError::Stale(format!(
                "{} changed since this fabric was loaded",
                self.store.state_name()
            )));
        }
        let mut next = self.state.clone();
        let (op, admit, releasing) = match plan.action {
            "admit" => {
                next.admit(&plan.decision)?;
                (Operation::Admit, true, None)
            }
            "release" => {
                if self.state.decision(&plan.job) != Some(&plan.decision) {
                    return Err(JobsError::Stale(format!(
                        "job `{}` is not held with this decision",
                        plan.job
                    )));
                }
                next.release(&plan.job)?;
                (Operation::Release, false, Some(&plan.job))
            }
            other => return Err(JobsError::Stale(format!("unknown plan action `{other}`"))),
        };
        let new: Vec<Decision> = next.decisions().into_iter().cloned().collect();
        let candidate = self.intent_of(&new)?;
        let set = changes::change_set(&plan.devices, &candidate, &self.base)?;
        set.validate()?;
        changes::guard_ocs(&self.topo, &self.state, &set, releasing)?;
        let fresh = plan::device_commands(&*self.intent_of(&held)?, &candidate, admit);
        if !same_changes(&fresh, &plan.devices) {
            return Err(JobsError::Stale(
                "its device changes are not those the current state gives".into(),
            ));
        }
        Ok(Checked {
            held,
            read,
            next,
            new,
            op,
            set,
        })
    }

    /// The journal of applying `plan`, with the writer lock's holder and term.
    fn journal_for(
        &self,
        plan: &Plan,
        op: Operation,
        held: Vec<Decision>,
        new: Vec<Decision>,
        devices: Vec<String>,
    ) -> Journal {
        let mut j = Journal::new(
            &self.topo.name,
            op,
            plan.decision.clone(),
            held,
            new,
            devices,
        );
        j.owner = self.lock.as_ref().map(|l| l.holder().clone());
        j.term = self.lock.as_ref().and_then(|l| l.term());
        j
    }

    /// Every device committed: save the new state against the version read,
    /// adopt it, remove the journal (a failure is [`JobsError::NotSaved`]).
    async fn save_committed(
        &mut self,
        plan: &Plan,
        devices: &[String],
        read: Version,
        new: &[Decision],
        next: FabricState,
    ) -> Result<(), JobsError> {
        let not_saved = |stage: &str, cause: String| JobsError::NotSaved {
            job: plan.job.clone(),
            action: plan.action,
            devices: devices.to_vec(),
            stage: stage.to_string(),
            cause,
        };
        let state = self.store.state_name();
        let version = (self.store.save(read, new).await)
            .map_err(|e| not_saved(&format!("{state} could not be written"), e.to_string()))?;
        self.state = next;
        self.version = version;
        self.store.remove_journal().await.map_err(|e| {
            not_saved(
                &format!("{state} was saved but the journal could not be removed"),
                e.to_string(),
            )
        })?;
        info!(job = %plan.job, action = plan.action, "committed; state saved");
        Ok(())
    }

    /// Place, plan and apply a job.
    pub async fn submit(
        &mut self,
        job: &JobId,
        gpus: u32,
        progress: &dyn Progress,
    ) -> Result<Applied, JobsError> {
        let plan = self.plan_submit(job, gpus)?;
        self.apply_plan(plan, progress).await
    }

    /// [`Fabric::apply`], keeping the plan with its report.
    pub async fn apply_plan(
        &mut self,
        plan: Plan,
        progress: &dyn Progress,
    ) -> Result<Applied, JobsError> {
        let report = self.apply(&plan, progress).await?;
        Ok(Applied { plan, report })
    }

    /// [`Fabric::submit`] on the servers a scheduler chose
    /// ([`Fabric::plan_submit_on`]).
    pub async fn submit_on(
        &mut self,
        job: &JobId,
        gpus: Option<u32>,
        named: &given::Named,
        progress: &dyn Progress,
    ) -> Result<Applied, JobsError> {
        let plan = self.plan_submit_on(job, gpus, named)?;
        self.apply_plan(plan, progress).await
    }

    /// Plan and apply a job's release.
    pub async fn release(
        &mut self,
        job: &JobId,
        progress: &dyn Progress,
    ) -> Result<Applied, JobsError> {
        let plan = self.plan_release(job)?;
        self.apply_plan(plan, progress).await
    }

    /// A device's running configuration, through its driver.
    pub async fn device_config(&self, device: &str) -> Result<String, JobsError> {
        if self.topo.device_id(device).is_none() {
            return Err(JobsError::UnknownDevice(device.to_string()));
        }
        Ok(devices::get_config(&self.factory, device, self.read_timeout).await?)
    }

    /// Read `names`, parsing each; unreadable devices are returned apart.
    async fn read(&self, names: &[String]) -> (Running, Vec<(String, String)>) {
        let mut running = Running::new();
        let mut bad = Vec::new();
        for (d, r) in devices::read_all(&self.factory, names, self.read_timeout).await {
            let parsed = r.map_err(JobsError::from).and_then(|text| {
                let id = self
                    .topo
                    .device_id(&d)
                    .ok_or_else(|| JobsError::UnknownDevice(d.clone()))?;
                Ok(crate::dialect::dialect(self.topo.device(id).mgmt.dialect).parse(&d, &text)?)
            });
            match parsed {
                Ok(items) => {
                    running.insert(d, items);
                }
                Err(e) => bad.push((d, e.to_string())),
            }
        }
        (running, bad)
    }

    /// Refuse (before sending anything) device plans that configure a port
    /// carrying foreign steering; the devices they configure are read first.
    async fn guard_foreign(&self, plans: &[DevicePlan]) -> Result<(), JobsError> {
        let touched = foreign::touched(&self.topo, plans);
        let names: Vec<String> = touched.keys().cloned().collect();
        self.read_for_foreign(&touched, &names).await.map(drop)
    }

    /// Read `names` (of the `touched` devices) and refuse, before anything
    /// is sent, if a port touched on them carries foreign steering; what
    /// was read otherwise.
    async fn read_for_foreign(
        &self,
        touched: &foreign::Touched,
        names: &[String],
    ) -> Result<Running, JobsError> {
        if names.is_empty() {
            return Ok(Running::new());
        }
        let (running, bad) = self.read(names).await;
        if let Some((device, e)) = bad.into_iter().next() {
            return Err(JobsError::Refused {
                device,
                message: format!("cannot be read to check it for foreign steering: {e}"),
            });
        }
        let conflicts = foreign::conflicts(touched, &running);
        if conflicts.is_empty() {
            Ok(running)
        } else {
            Err(JobsError::ForeignSteering(conflicts))
        }
    }

    fn all_devices(&self) -> Vec<String> {
        self.topo.devices.iter().map(|d| d.name.clone()).collect()
    }

    fn drifts(&self, intent: &FabricIntent, running: &Running) -> Vec<Drift> {
        running
            .iter()
            .filter_map(|(d, items)| {
                let have = changes::managed(&self.base, d, items.clone());
                devices::drift(intent, d, &have)
            })
            .collect()
    }

    /// Settle a journal left by an interrupted run (see the module doc).
    /// `Ok(None)`: there was none. An unreachable device is an error and
    /// keeps the journal.
    ///
    /// Runs under the state lock (taken for the call if not held), so the
    /// journal's writer is gone; the journal is checked against state.json
    /// and validated ([`Fabric::check_journal`]) before any device is read.
    pub async fn recover(
        &mut self,
        progress: &dyn Progress,
    ) -> Result<Option<Recovery>, JobsError> {
        if self.store.journal().await?.is_none() {
            return Ok(None);
        }
        let took = self.lock_for("recover", None).await?;
        let r = self.recover_locked(progress).await;
        if took {
            self.unlock();
        }
        r
    }

    async fn recover_locked(
        &mut self,
        progress: &dyn Progress,
    ) -> Result<Option<Recovery>, JobsError> {
        let Some(j) = self.store.journal().await? else {
            return Ok(None);
        };
        let file = self.store.journal_name();
        let held = self.check_journal(&j).await?;
        // What a conditional write compares (a torn state.json: nothing).
        let read = held.as_ref().map(|c| c.version).unwrap_or_default();
        let (running, bad) = self.read(&j.devices).await;
        if let Some((d, e)) = bad.first() {
            return Err(JobsError::Journal {
                file,
                message: format!("cannot recover: {d} cannot be read: {e}"),
            });
        }
        let new_intent = self.intent_of(&j.new)?;
        let drift = self.drifts(&new_intent, &running);
        if drift.iter().all(Drift::holds_intent) {
            let version = self.store.save(read, &j.new).await?;
            self.state = FabricState::from_decisions(Arc::clone(&self.topo), &j.new)?;
            self.version = version;
            self.store.remove_journal().await?;
            info!(job = %j.decision.job, "recovery: devices hold the new state; adopted");
            return Ok(Some(Recovery {
                journal: j,
                outcome: RecoveryOutcome::AdoptedNew,
                drift,
                rollback: None,
            }));
        }
        // Put back what differs from the old intent, undoing in the reverse
        // order of the interrupted operation.
        let old_intent = self.intent_of(&j.old)?;
        let undo_admit = j.operation == Operation::Admit;
        let plans = plan::device_plans(&self.topo, &old_intent, &old_intent, &running, !undo_admit);
        // A foreign policy on a port the rollback configures: the journal
        // stays (this error) until it is removed by hand.
        self.guard_foreign(&plans).await?;
        let set = changes::change_set(&plans, &old_intent, &self.base)?;
        // A new leader settling its predecessor's journal is fenced like
        // any transaction of its own.
        let guard = TxGuard::lock_only(&self.topo, self.lock.as_deref());
        let factory = self.factory.as_ref();
        let report =
            controller::apply_guarded(set, factory, &self.options, progress, &guard).await?;
        let outcome = if report.is_committed() {
            // state.json normally still holds the old state; rewrite it only
            // if the crash came after (or while) it was replaced.
            let version = match self.store.load().await {
                Ok(held) if held.decisions == j.old => held.version,
                Ok(held) => self.store.save(held.version, &j.old).await?,
                Err(_) => self.store.save(read, &j.old).await?,
            };
            self.state = FabricState::from_decisions(Arc::clone(&self.topo), &j.old)?;
            self.version = version;
            self.store.remove_journal().await?;
            info!(job = %j.decision.job, "recovery: devices put back; old state kept");
            RecoveryOutcome::RolledBack
        } else {
            RecoveryOutcome::Failed {
                reason: match &report.outcome {
                    controller::Outcome::Aborted { cause }
                    | controller::Outcome::RolledBack { cause }
                    | controller::Outcome::RollbackFailed { cause, .. }
                    | controller::Outcome::Abandoned { cause, .. } => cause.clone(),
                    controller::Outcome::Committed => String::new(),
                },
            }
        };
        Ok(Some(Recovery {
            journal: j,
            outcome,
            drift,
            rollback: Some(report),
        }))
    }

    /// Whether journal `j` may be acted on: written for this topology; its
    /// previous state is state.json's (or its next state is: the writer
    /// died after saving; a torn state.json is settled by it); both states
    /// are valid, and the next is the previous with the journal's decision
    /// admitted or released. Nothing is changed either way. Returns the
    /// committed state it was checked against (None: torn).
    pub async fn check_journal(&self, j: &Journal) -> Result<Option<Committed>, JobsError> {
        let bad = |message: String| {
            JobsError::Journal {
            file: self.store.journal_name(),
            message: format!(
                "{message}; recovery refused, nothing was changed: compare it with {} and remove whichever is wrong",
                self.store.state_name()
            ),
        }
        };
        if j.topology != self.topo.name {
            return Err(bad(format!("written for topology `{}`", j.topology)));
        }
        let held = match self.store.load().await {
            Ok(held) if held.decisions == j.old || held.decisions == j.new => Some(held),
            Ok(_) => {
                return Err(bad(
                    "neither its previous nor its next state is what state.json holds (a journal of another run, or an edited state.json)".into(),
                ))
            }
            Err(JobsError::Store(store::StoreError::Torn { .. })) => None,
            Err(e) => return Err(e),
        };
        let mut s = FabricState::from_decisions(Arc::clone(&self.topo), &j.old)
            .map_err(|e| bad(format!("its previous state is invalid: {e}")))?;
        match j.operation {
            Operation::Admit => s.admit(&j.decision).map_err(|e| {
                bad(format!(
                    "its decision cannot be admitted to its previous state: {e}"
                ))
            })?,
            Operation::Release => {
                if s.decision(&j.decision.job) != Some(&j.decision) {
                    return Err(bad(format!(
                        "job `{}` is not held with its decision in its previous state",
                        j.decision.job
                    )));
                }
                s.release(&j.decision.job)
                    .map_err(|e| bad(format!("its release cannot be done: {e}")))?;
            }
        }
        if s.decisions().into_iter().cloned().collect::<Vec<_>>() != j.new {
            return Err(bad(format!(
                "its next state is not its previous state with job `{}` {}",
                j.decision.job,
                match j.operation {
                    Operation::Admit => "admitted",
                    Operation::Release => "released",
                }
            )));
        }
        Ok(held)
    }

    /// Compare every device with the state's intent; with `fix`, push the
    /// intent to the devices that differ (the state never changes here).
    /// With `fix` it runs under the state lock (taken for the call if not
    /// held); without, it only reads.
    pub async fn reconcile(
        &mut self,
        fix: bool,
        progress: &dyn Progress,
    ) -> Result<Reconcile, JobsError> {
        let took = fix && self.lock_for("reconcile --fix", None).await?;
        let r = self.reconcile_locked(fix, progress).await;
        if took {
            self.unlock();
        }
        r
    }

    async fn reconcile_locked(
        &mut self,
        fix: bool,
        progress: &dyn Progress,
    ) -> Result<Reconcile, JobsError> {
        let intent = self.intent()?;
        let (running, unreachable) = self.read(&self.all_devices()).await;
        let drift: Vec<Drift> = self
            .drifts(&intent, &running)
            .into_iter()
            .filter(|d| !d.is_empty())
            .collect();
        let mut fix_refused = Vec::new();
        let fix = if fix && drift.iter().any(|d| !d.holds_intent()) {
            // Foreign steering is never deleted (no dialect renders its
            // removal); a fix that must configure a port carrying it is
            // refused whole, with every conflict listed.
            let plans = plan::device_plans(&self.topo, &intent, &intent, &running, true);
            fix_refused = foreign::conflicts(&foreign::touched(&self.topo, &plans), &running);
            if fix_refused.is_empty() {
                let set = changes::change_set(&plans, &intent, &self.base)?;
                Some(controller::apply(set, self.factory.as_ref(), &self.options, progress).await?)
            } else {
                None
            }
        } else {
            None
        };
        Ok(Reconcile {
            drift,
            unreachable,
            fix,
            fix_refused,
        })
    }

    /// Jobs, pending journal, and every device's reachability and drift.
    pub async fn status(&self) -> Result<Status, JobsError> {
        let intent = self.intent()?;
        let (running, bad) = self.read(&self.all_devices()).await;
        let bad: BTreeMap<String, String> = bad.into_iter().collect();
        let devices = self
            .topo
            .devices
            .iter()
            .map(|d| DeviceHealth {
                device: d.name.clone(),
                role: d.role,
                error: bad.get(&d.name).cloned(),
                drift: running.get(&d.name).and_then(|items| {
                    devices::drift(
                        &intent,
                        &d.name,
                        &changes::managed(&self.base, &d.name, items.clone()),
                    )
                }),
            })
            .collect();
        Ok(Status {
            topology: self.topo.name.clone(),
            jobs: self.jobs(),
            writer: self.writer().await?,
            journal: self.store.journal().await?,
            devices,
        })
    }
}

/// The state on disk, validated (an invalid one names its file).
pub fn stored_state(dir: &Path, topo: &Arc<Topology>) -> Result<FabricState, JobsError> {
    Ok(dir_state(&DirStore::new(dir, &topo.name), topo)?.0)
}

/// [`held_state`] of a state directory, without a runtime.
fn dir_state(store: &DirStore, topo: &Arc<Topology>) -> Result<(FabricState, Version), JobsError> {
    let held = match store.load_now() {
        Err(JobsError::Store(e @ store::StoreError::Torn { .. })) => {
            torn(store, e, store.journal_now()?)?
        }
        other => other?,
    };
    validated(store, topo, held)
}

/// The committed state of `store`, validated (an invalid one names its
/// file or key): the stored decisions, or, when a power loss tore
/// state.json while it was replaced, the previous state of the journal
/// that is always there then (recovery settles it).
async fn held_state(
    store: &dyn Store,
    topo: &Arc<Topology>,
) -> Result<(FabricState, Version), JobsError> {
    let held = match store.load().await {
        Err(JobsError::Store(e @ store::StoreError::Torn { .. })) => {
            torn(store, e, store.journal().await?)?
        }
        other => other?,
    };
    validated(store, topo, held)
}

fn torn(
    store: &dyn Store,
    e: store::StoreError,
    journal: Option<Journal>,
) -> Result<Committed, JobsError> {
    match journal {
        Some(j) => {
            warn!(error = %e, store = %store.location(), "state torn; using the journal's previous state until recovery");
            Ok(Committed {
                decisions: j.old,
                version: Version::default(),
            })
        }
        None => Err(e.into()),
    }
}

fn validated(
    store: &dyn Store,
    topo: &Arc<Topology>,
    held: Committed,
) -> Result<(FabricState, Version), JobsError> {
    let state =
        FabricState::from_decisions(Arc::clone(topo), &held.decisions).map_err(|error| {
            JobsError::InvalidState {
                file: store.state_name(),
                error: Box::new(error),
            }
        })?;
    Ok((state, held.version))
}

/// Whether a plan changes the devices of `fresh` with the same commands in
/// the same stages.
fn same_changes(fresh: &[(usize, String, Vec<String>)], plan: &[DevicePlan]) -> bool {
    fresh.len() == plan.len()
        && fresh
            .iter()
            .zip(plan)
            .all(|((stage, device, commands), p)| {
                *stage == p.stage && *device == p.diff.device && *commands == p.diff.commands
            })
}
