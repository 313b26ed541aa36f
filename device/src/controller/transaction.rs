//! The transaction state machine: prepare everywhere, commit stage by stage,
//! verify, confirm — or roll back what was committed, last stage first.
//!
//! ```text
//!  prepare (all devices, bounded fan-out)      any failure ─▶ discard all ─▶ Aborted
//!     │
//!  commit + read-back, stage 0, 1, ... (each stage concurrent, bounded)
//!     │                                        any failure ─┐
//!  confirm (commit-confirm devices)            any failure ─┤
//!     │                                                     ▼
//!  close ─▶ Committed           rollback stages in reverse ─▶ RolledBack
//!                                                  (or RollbackFailed, loudly)
//! ```
//!
//! Each device is a [`Slot`]: its change, its driver and what has happened
//! to it. A phase moves the slots it concerns into tokio tasks (one per
//! device, each in a tracing span naming the device) and takes them back, so
//! no lock is ever held and a device is touched by one task at a time.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;
use vclos_drivers::{Capabilities, CommitId, Driver, DriverError, ErrorKind, Step};

use super::change::{
    normalise, ApplyOptions, ChangeSet, ChangeSetError, DeviceChange, DriverFactory,
};
use super::fanout::bounded;
use super::progress::Progress;
use super::report::{
    ApplyReport, DeviceError, DeviceReport, DeviceStatus, Outcome, Phase, StageTiming,
};

/// Apply `set` as one transaction across its devices. See the module docs
/// of [`crate::controller`] for the guarantees.
///
/// Returns `Err` only for a change set the controller refuses before
/// touching any device; every device-side failure is in the report.
pub async fn apply(
    set: ChangeSet,
    factory: &dyn DriverFactory,
    options: &ApplyOptions,
    progress: &dyn Progress,
) -> Result<ApplyReport, ChangeSetError> {
    apply_gated(set, factory, options, progress, std::future::ready(Ok(()))).await
}

/// [`apply`], awaiting `gate` after every device prepared and before the
/// first commit: an `Err` there aborts the transaction with that cause
/// (nothing was committed anywhere). Prepare never changes a device's
/// running configuration (the driver contract), so work that must be done
/// before the fabric changes — the lifecycle's write-ahead journal reaching
/// the disk — can run during prepare and be waited for here.
pub async fn apply_gated(
    set: ChangeSet,
    factory: &dyn DriverFactory,
    options: &ApplyOptions,
    progress: &dyn Progress,
    gate: impl Future<Output = Result<(), String>> + Send,
) -> Result<ApplyReport, ChangeSetError> {
    let guard = Gate(std::sync::Mutex::new(Some(Box::pin(gate))));
    apply_guarded(set, factory, options, progress, &guard).await
}

/// What the caller checks during a transaction.
///
/// * [`Guard::before_commit`]: once every device prepared, before the first
///   commit, with the running configurations prepare read (by device): work
///   that must be done before the fabric changes (the journal reaching
///   disk), and checks of what the devices run that would otherwise need
///   reading them again (foreign steering on the ports a change touches).
///   An `Err` aborts: nothing is committed anywhere.
/// * [`Guard::check`]: the writer's right to touch devices, again before
///   every commit stage after the first and before any rollback. A leader
///   that lost its lease mid-transaction must not go on committing, nor roll
///   back devices its successor may already have settled: once the check
///   fails the transaction stops touching devices ([`Outcome::Abandoned`])
///   and leaves them to the next writer's recovery.
#[async_trait::async_trait]
pub trait Guard: Send + Sync {
    async fn before_commit(&self, running: &BTreeMap<&str, &str>) -> Result<(), String>;
    async fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// [`apply_gated`]'s guard: its future before the first commit, nothing
/// after (a writer holding `flock` cannot lose it while it lives).
struct Gate<F>(std::sync::Mutex<Option<std::pin::Pin<Box<F>>>>);

#[async_trait::async_trait]
impl<F: Future<Output = Result<(), String>> + Send> Guard for Gate<F> {
    async fn before_commit(&self, _: &BTreeMap<&str, &str>) -> Result<(), String> {
        let gate = self.0.lock().ok().and_then(|mut g| g.take());
        match gate {
            Some(gate) => gate.await,
            None => Ok(()),
        }
    }
}

/// [`apply`] with a [`Guard`].
pub async fn apply_guarded(
    set: ChangeSet,
    factory: &dyn DriverFactory,
    options: &ApplyOptions,
    progress: &dyn Progress,
    guard: &dyn Guard,
) -> Result<ApplyReport, ChangeSetError> {
    set.validate()?;
    if options.max_parallel == 0 {
        return Err(ChangeSetError::NoParallelism);
    }
    let started = Instant::now();
    let stages = set.stages();
    let mut tx = Tx {
        slots: set
            .changes
            .into_iter()
            .map(|c| Some(Slot::new(c, factory)))
            .collect(),
        max: options.max_parallel,
        limits: Limits {
            step: options.step_timeout,
            confirm: options.confirm_timeout,
        },
        progress,
        timings: Vec::new(),
    };

    let cause = tx.run_phases(&stages, guard).await;
    let committing = !tx.select(|s| s.commit_attempted).is_empty();
    let fenced = match (&cause, committing) {
        (Some(_), true) => guard.check().await.err(),
        _ => None,
    };
    if let (Some(cause), Some(why)) = (&cause, &fenced) {
        tracing::error!(error = %why, "lost the right to write mid-transaction: no rollback; the next writer settles the devices");
        let devices = tx.select(|s| s.commit_attempted);
        let devices = devices
            .iter()
            .filter_map(|&i| tx.slots[i].as_ref().map(|s| s.change.device.clone()))
            .collect();
        let open = tx.select(|s| s.driver.is_some());
        tx.run(Phase::Close, None, &open, finish).await;
        return Ok(ApplyReport {
            outcome: Outcome::Abandoned {
                cause: format!("{cause}; {why}"),
                devices,
            },
            devices: tx.slots.into_iter().flatten().map(|s| s.report).collect(),
            stage_timings: tx.timings,
            duration: started.elapsed(),
        });
    }
    if cause.is_some() {
        for &stage in stages.iter().rev() {
            let touched = tx.select(|s| s.change.stage == stage && s.commit_attempted);
            tx.run(Phase::Rollback, Some(stage), &touched, roll_back)
                .await;
        }
    }
    let open = tx.select(|s| s.driver.is_some());
    tx.run(Phase::Close, None, &open, finish).await;

    let reports: Vec<DeviceReport> = tx
        .slots
        .into_iter()
        .flatten()
        .map(|mut s| {
            if cause.is_some() && s.report.status == DeviceStatus::Unchanged {
                s.report.status = DeviceStatus::Discarded;
            }
            s.report
        })
        .collect();
    let outcome = match cause {
        None => Outcome::Committed,
        Some(cause) => {
            let failed: Vec<String> = reports
                .iter()
                .filter(|d| d.status == DeviceStatus::RollbackFailed)
                .map(|d| d.device.clone())
                .collect();
            if !failed.is_empty() {
                for d in &failed {
                    tracing::error!(device = %d, "ROLLBACK FAILED: device needs an operator");
                }
                Outcome::RollbackFailed {
                    cause,
                    devices: failed,
                }
            } else if reports.iter().any(|d| d.status == DeviceStatus::RolledBack)
                || tx.timings.iter().any(|t| t.phase == Phase::Commit)
            {
                Outcome::RolledBack { cause }
            } else {
                Outcome::Aborted { cause }
            }
        }
    };
    tracing::info!(outcome = ?outcome, "transaction finished");
    Ok(ApplyReport {
        outcome,
        devices: reports,
        stage_timings: tx.timings,
        duration: started.elapsed(),
    })
}

/// Per-call limits handed to device tasks.
#[derive(Debug, Clone, Copy)]
struct Limits {
    step: Duration,
    confirm: Duration,
}

/// One device in the transaction.
struct Slot {
    change: DeviceChange,
    driver: Option<Box<dyn Driver>>,
    caps: Capabilities,
    /// Running config before the transaction: what a rollback must restore.
    snapshot: Option<String>,
    commit: Option<CommitId>,
    /// A commit was sent (it may have failed halfway).
    commit_attempted: bool,
    confirm_pending: bool,
    report: DeviceReport,
}

impl Slot {
    fn new(change: DeviceChange, factory: &dyn DriverFactory) -> Self {
        let report = DeviceReport {
            device: change.device.clone(),
            role: change.role,
            stage: change.stage,
            diff: String::new(),
            status: DeviceStatus::PrepareFailed,
            commit_confirm: false,
            duration: Duration::ZERO,
            error: None,
            rollback_error: None,
            notes: Vec::new(),
        };
        let mut slot = Self {
            driver: None,
            caps: Capabilities::default(),
            snapshot: None,
            commit: None,
            commit_attempted: false,
            confirm_pending: false,
            report,
            change,
        };
        match factory.driver(&slot.change.device) {
            Ok(d) => slot.driver = Some(d),
            Err(e) => slot.fail(Phase::Prepare, e.to_string()),
        }
        slot
    }

    /// Record the first failure (later ones only matter as notes).
    fn fail(&mut self, phase: Phase, message: String) {
        tracing::warn!(%phase, error = %message, "device step failed");
        if self.report.error.is_none() {
            self.report.error = Some(DeviceError { phase, message });
        } else {
            self.report.notes.push(format!("{phase}: {message}"));
        }
    }

    /// What is known of this slot without its driver, kept in case the task
    /// driving it dies.
    fn shadow(&self) -> Self {
        Self {
            change: self.change.clone(),
            driver: None,
            caps: self.caps,
            snapshot: None,
            commit: self.commit.clone(),
            commit_attempted: self.commit_attempted,
            confirm_pending: self.confirm_pending,
            report: self.report.clone(),
        }
    }

    /// The shadow of a slot whose task died in `phase`: its driver is gone,
    /// so a device that may have changed is in an unknown state.
    fn lost(mut self, phase: Phase) -> Self {
        let msg = format!(
            "{}: controller task died during {phase}",
            self.change.device
        );
        let may_have_changed = self.commit_attempted
            || (phase == Phase::Commit && self.report.status != DeviceStatus::Unchanged);
        if may_have_changed {
            self.commit_attempted = true;
            self.report.status = DeviceStatus::RollbackFailed;
            self.report.rollback_error = Some(msg.clone());
        }
        self.fail(phase, msg);
        self
    }

    fn span(&self, phase: Phase) -> tracing::Span {
        tracing::info_span!(
            "device",
            device = %self.change.device,
            role = %self.change.role,
            stage = self.change.stage,
            %phase
        )
    }
}

/// Run one driver call with the controller's backstop timeout.
async fn timed<T>(
    device: &str,
    step: Step,
    limit: Duration,
    call: impl Future<Output = Result<T, DriverError>>,
) -> Result<T, DriverError> {
    tracing::debug!(%step, "driver call");
    match tokio::time::timeout(limit, call).await {
        Ok(r) => r,
        Err(_) => Err(DriverError {
            device: device.to_string(),
            step,
            kind: ErrorKind::Timeout(limit),
        }),
    }
}

/// The engine's state between phases.
struct Tx<'a> {
    slots: Vec<Option<Slot>>,
    max: usize,
    limits: Limits,
    progress: &'a dyn Progress,
    timings: Vec<StageTiming>,
}

impl Tx<'_> {
    fn select(&self, pred: impl Fn(&Slot) -> bool) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| self.slots[i].as_ref().is_some_and(&pred))
            .collect()
    }

    /// Prepare, pass the gate, then commit stage by stage, then confirm.
    /// `Some(cause)` if anything failed (the caller rolls back).
    async fn run_phases(&mut self, stages: &[u32], guard: &dyn Guard) -> Option<String> {
        let all: Vec<usize> = (0..self.slots.len()).collect();
        let ready = self.select(|s| s.driver.is_some());
        let prepared = self.run(Phase::Prepare, None, &ready, prepare).await;
        if !prepared || ready.len() < all.len() {
            return self.cause(&all);
        }
        let running: BTreeMap<&str, &str> = (self.slots.iter().flatten())
            .filter_map(|s| Some((s.change.device.as_str(), s.snapshot.as_deref()?)))
            .collect();
        if let Err(why) = guard.before_commit(&running).await {
            tracing::warn!(error = %why, "not committing: the check before commit failed");
            return Some(why);
        }
        for (k, &stage) in stages.iter().enumerate() {
            if k > 0 {
                if let Err(why) = guard.check().await {
                    return Some(why);
                }
            }
            let members = self.select(|s| s.change.stage == stage);
            if !self.run(Phase::Commit, Some(stage), &members, commit).await {
                return self.cause(&members);
            }
        }
        let pending = self.select(|s| s.confirm_pending);
        if !self.run(Phase::Confirm, None, &pending, confirm).await {
            return self.cause(&pending);
        }
        None
    }

    /// The failure to report as the transaction's cause, from `among`.
    fn cause(&self, among: &[usize]) -> Option<String> {
        let errors: Vec<&DeviceError> = among
            .iter()
            .filter_map(|&i| self.slots[i].as_ref())
            .filter_map(|s| s.report.error.as_ref())
            .collect();
        let first = errors.first()?;
        Some(match errors.len() {
            1 => first.message.clone(),
            n => format!("{} (and {} more failure(s))", first.message, n - 1),
        })
    }

    /// Run `step` on the slots `which`, bounded; true if every device succeeded.
    async fn run<F, Fut>(
        &mut self,
        phase: Phase,
        stage: Option<u32>,
        which: &[usize],
        step: F,
    ) -> bool
    where
        F: Fn(Slot, Limits) -> Fut,
        Fut: Future<Output = (Slot, bool)> + Send + 'static,
    {
        if which.is_empty() {
            return true;
        }
        self.progress.phase_started(phase, stage, which.len());
        let t0 = Instant::now();
        let mut items = Vec::with_capacity(which.len());
        let mut shadows = Vec::with_capacity(which.len());
        for &i in which {
            if let Some(slot) = self.slots[i].take() {
                shadows.push((i, slot.shadow()));
                items.push(slot);
            }
        }
        let (limits, progress) = (self.limits, self.progress);
        let results = bounded(
            items,
            self.max,
            |slot| {
                let span = slot.span(phase);
                step(slot, limits).instrument(span)
            },
            |(slot, ok)| progress.device_done(phase, &slot.change.device, *ok),
        )
        .await;
        let mut all_ok = true;
        for ((i, shadow), result) in shadows.into_iter().zip(results) {
            let slot = match result {
                Some((slot, ok)) => {
                    all_ok &= ok;
                    slot
                }
                None => {
                    all_ok = false;
                    progress.device_done(phase, &shadow.change.device, false);
                    shadow.lost(phase)
                }
            };
            self.slots[i] = Some(slot);
        }
        self.timings.push(StageTiming {
            phase,
            stage,
            devices: which.len(),
            duration: t0.elapsed(),
        });
        self.progress.phase_done(phase, stage, all_ok);
        all_ok
    }
}

// ---------------------------------------------------------------------------
// Device steps. Each takes its slot by value, returns it with `ok`.

/// Open, snapshot running, load the candidate, get the device's diff.
async fn prepare(mut s: Slot, lim: Limits) -> (Slot, bool) {
    let t0 = Instant::now();
    let res = async {
        let dev = s.change.device.as_str();
        let Some(d) = s.driver.as_mut() else {
            return Ok(());
        };
        s.caps = d.capabilities();
        timed(dev, Step::Open, lim.step, d.open()).await?;
        s.snapshot = Some(timed(dev, Step::GetConfig, lim.step, d.get_config()).await?);
        let load = d.load_candidate(&s.change.payload, s.change.mode);
        timed(dev, Step::Load, lim.step, load).await?;
        s.report.diff = timed(dev, Step::Compare, lim.step, d.compare_config()).await?;
        Ok::<_, DriverError>(())
    }
    .await;
    s.report.duration += t0.elapsed();
    match res {
        Ok(()) => {
            s.report.status = if s.report.diff.trim().is_empty() {
                DeviceStatus::Unchanged
            } else {
                DeviceStatus::Discarded
            };
            tracing::info!(diff_lines = s.report.diff.lines().count(), "prepared");
            (s, true)
        }
        Err(e) => {
            s.fail(Phase::Prepare, e.to_string());
            (s, false)
        }
    }
}

/// Commit (with commit-confirm where the device has it), then read back
/// and verify. Devices with an empty diff are only verified.
async fn commit(mut s: Slot, lim: Limits) -> (Slot, bool) {
    let t0 = Instant::now();
    let ok = commit_and_verify(&mut s, lim).await;
    s.report.duration += t0.elapsed();
    (s, ok)
}

async fn commit_and_verify(s: &mut Slot, lim: Limits) -> bool {
    let dev = s.change.device.as_str();
    let Some(d) = s.driver.as_mut() else {
        return false;
    };
    if s.report.status != DeviceStatus::Unchanged {
        let confirm = s.caps.commit_confirm.then_some(lim.confirm);
        s.commit_attempted = true;
        // Wait for the device to answer: for the OCS that is after the
        // switch has settled, so the next stage sees the new circuits.
        match timed(dev, Step::Commit, lim.step, d.commit(confirm)).await {
            Ok(id) => {
                tracing::info!(commit = %id.0, confirm = ?confirm, "committed");
                s.commit = Some(id);
                s.confirm_pending = confirm.is_some();
                s.report.commit_confirm = confirm.is_some();
                s.report.status = DeviceStatus::Committed;
            }
            Err(e) => {
                s.fail(Phase::Commit, e.to_string());
                return false;
            }
        }
    }
    let running = timed(dev, Step::GetConfig, lim.step, d.get_config()).await;
    let checked = match running {
        Ok(running) => s
            .change
            .verify
            .check(&running)
            .map_err(|m| format!("{dev}: read-back: {m}")),
        Err(e) => Err(e.to_string()),
    };
    match checked {
        Ok(()) => {
            tracing::debug!("read-back verified");
            true
        }
        Err(m) => {
            s.fail(Phase::Verify, m);
            false
        }
    }
}

/// Confirm a commit-confirmed commit (only after everything verified).
async fn confirm(mut s: Slot, lim: Limits) -> (Slot, bool) {
    let t0 = Instant::now();
    let dev = s.change.device.as_str();
    let res = match s.driver.as_mut() {
        Some(d) => timed(dev, Step::Confirm, lim.step, d.confirm()).await,
        None => Ok(()),
    };
    s.report.duration += t0.elapsed();
    match res {
        Ok(()) => {
            s.confirm_pending = false;
            tracing::info!("confirmed");
            (s, true)
        }
        Err(e) => {
            s.fail(Phase::Confirm, e.to_string());
            (s, false)
        }
    }
}

/// Put a device that was (or may have been) changed back to its snapshot.
///
/// Judged by what the device runs afterwards, not by what the driver says:
/// a rollback that "succeeded" but left running different from the snapshot
/// is a failure, and one that errored but left running equal is a success.
async fn roll_back(mut s: Slot, lim: Limits) -> (Slot, bool) {
    let t0 = Instant::now();
    let ok = roll_back_device(&mut s, lim).await;
    s.report.duration += t0.elapsed();
    (s, ok)
}

async fn roll_back_device(s: &mut Slot, lim: Limits) -> bool {
    let dev = s.change.device.as_str();
    let Some(d) = s.driver.as_mut() else {
        return false;
    };
    let same = |snap: &Option<String>, running: &str| {
        snap.as_deref()
            .is_some_and(|before| normalise(before) == normalise(running))
    };
    let attempt = match s.commit.clone() {
        Some(id) => timed(dev, Step::Rollback, lim.step, d.rollback(Some(&id))).await,
        None => {
            // The commit itself failed: it may have changed nothing, part
            // or all of the candidate. Look before undoing anything, so a
            // driver checkpoint older than this transaction is never used.
            if let Ok(running) = timed(dev, Step::GetConfig, lim.step, d.get_config()).await {
                if same(&s.snapshot, &running) {
                    s.report.status = DeviceStatus::Discarded;
                    s.report
                        .notes
                        .push("the failed commit changed nothing".to_string());
                    tracing::info!("failed commit left running unchanged");
                    return true;
                }
            }
            timed(dev, Step::Rollback, lim.step, d.rollback(None)).await
        }
    };
    let after = timed(dev, Step::GetConfig, lim.step, d.get_config()).await;
    let verdict = match (&attempt, after) {
        (_, Ok(running)) if same(&s.snapshot, &running) => Ok(()),
        (Ok(()), Ok(_)) if s.snapshot.is_none() => Ok(()),
        (Ok(()), Ok(_)) => Err(
            "the rollback reported success but running differs from the pre-transaction configuration"
                .to_string(),
        ),
        (Ok(()), Err(e)) => {
            s.report.notes.push(format!("not re-read after rollback: {e}"));
            Ok(())
        }
        (Err(e), Ok(_)) => Err(e.to_string()),
        (Err(e), Err(read)) => Err(format!("{e}; then could not read running: {read}")),
    };
    match verdict {
        Ok(()) => {
            if let Err(e) = attempt {
                s.report.notes.push(format!(
                    "{e}; but running equals the pre-transaction configuration"
                ));
            }
            s.report.status = DeviceStatus::RolledBack;
            s.confirm_pending = false;
            tracing::info!("rolled back");
            true
        }
        Err(why) => {
            tracing::error!(error = %why, "ROLLBACK FAILED");
            s.report.status = DeviceStatus::RollbackFailed;
            s.report.rollback_error = Some(why.clone());
            s.fail(Phase::Rollback, format!("{dev}: {why}"));
            false
        }
    }
}

/// Discard what was never committed, close the session, drop the driver.
async fn finish(mut s: Slot, lim: Limits) -> (Slot, bool) {
    let t0 = Instant::now();
    let dev = s.change.device.clone();
    let mut ok = true;
    if let Some(mut d) = s.driver.take() {
        let uncommitted = matches!(
            s.report.status,
            DeviceStatus::PrepareFailed | DeviceStatus::Discarded | DeviceStatus::Unchanged
        );
        if uncommitted && s.commit.is_none() {
            if let Err(e) = timed(&dev, Step::Discard, lim.step, d.discard()).await {
                s.report.notes.push(format!("discard: {e}"));
                ok = false;
            }
        }
        if let Err(e) = timed(&dev, Step::Close, lim.step, d.close()).await {
            s.report.notes.push(format!("close: {e}"));
            ok = false;
        }
    }
    s.report.duration += t0.elapsed();
    (s, ok)
}
