//! Faults injected at every step of admission and release: whatever fails,
//! every device ends exactly as it was (full running configurations compared
//! before and after), state.json is byte-identical and no journal is left.
#![allow(clippy::unwrap_used)]

#[path = "lifecycle_common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::hook::{At, Hooked, Then};
use vclos::controller::{DriverFactory, NoProgress, Outcome};
use vclos::emulator::faults::Faults;
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::Policy;

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

enum Step {
    Admit,
    Release,
}

/// Run `job` (admit, or admit cleanly then release) under `factory` and
/// assert nothing changed.
async fn fails_cleanly(
    emu: &common::Emu,
    policy: Policy,
    gpus: u32,
    step: Step,
    arm: impl FnOnce(&common::Emu) -> Arc<dyn DriverFactory>,
) -> vclos::controller::ApplyReport {
    let mut f = emu.fabric().await.with_policy(policy);
    if let Step::Release = step {
        let r = f.submit(&id("j1"), gpus, &NoProgress).await.unwrap();
        assert!(r.report.is_committed(), "{}", r.report);
    }
    let before = emu.configs(&f).await;
    let state = emu.state_bytes();
    let factory = arm(emu);
    let mut g: Fabric = emu.fabric_with(factory).with_policy(policy);
    let report = match step {
        Step::Admit => g.submit(&id("j1"), gpus, &NoProgress).await.unwrap().report,
        Step::Release => g.release(&id("j1"), &NoProgress).await.unwrap().report,
    };
    assert!(!report.is_committed(), "{report}");
    assert!(report.is_unchanged(), "{report}");
    for d in &emu.topo.devices {
        emu.fab.faults(&d.name).unwrap().clear();
    }
    assert_eq!(emu.configs(&f).await, before, "{report}");
    assert_eq!(emu.state_bytes(), state);
    assert!(g.pending_journal().await.unwrap().is_none());
    assert_eq!(g.jobs(), f.jobs());
    report
}

fn faults(emu: &common::Emu, d: &str) -> Arc<Faults> {
    emu.fab.faults(d).unwrap().clone()
}

/// Arm `arm` on `device` exactly when its commit starts; clear after.
fn at_commit(
    emu: &common::Emu,
    device: &str,
    arm: impl Fn(&Faults) + Send + Sync + 'static,
) -> Arc<dyn DriverFactory> {
    let f = faults(emu, device);
    let g = f.clone();
    Hooked::new(
        emu.drivers(),
        device,
        At::Commit,
        Then::Around {
            before: Arc::new(move || arm(&f)),
            after: Arc::new(move || g.clear()),
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaf_connection_drop_mid_commit_after_the_ocs_rewired() {
    let emu = common::emu(Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::OcsVclos, 24, Step::Admit, |e| {
        at_commit(e, "leaf2", |f| f.drop_next())
    })
    .await;
    assert!(matches!(r.outcome, Outcome::RolledBack { .. }), "{r}");
    // The OCS had committed (stage 0) and was put back.
    assert_eq!(
        r.device("ocs1").unwrap().status,
        vclos::controller::DeviceStatus::RolledBack,
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocs_deny_on_commit() {
    let emu = common::emu(Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::OcsVclos, 24, Step::Admit, |e| {
        at_commit(e, "ocs1", |f| f.refuse_commits(true))
    })
    .await;
    assert!(r.device("ocs1").unwrap().error.is_some(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spine_timeout_by_delayed_replies() {
    let emu = common::emu(Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::Vclos, 32, Step::Admit, |e| {
        at_commit(e, "spine1", |f| f.delay_replies(Duration::from_millis(900)))
    })
    .await;
    let e = r.device("spine1").unwrap().error.clone().unwrap();
    assert!(e.message.contains("timed out"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spine_refuses_its_commit() {
    let emu = common::emu(Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::Vclos, 32, Step::Admit, |e| {
        at_commit(e, "spine2", |f| f.refuse_commits(true))
    })
    .await;
    assert!(matches!(r.outcome, Outcome::RolledBack { .. }), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaf_fails_after_n_commands_on_release() {
    let emu = common::emu(Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::Vclos, 32, Step::Release, |e| {
        at_commit(e, "leaf1", |f| f.fail_after(Some(1)))
    })
    .await;
    assert!(r.device("leaf1").unwrap().error.is_some(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocs_deny_on_release_puts_the_leaves_back() {
    let emu = common::emu(Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::OcsVclos, 24, Step::Release, |e| {
        at_commit(e, "ocs1", |f| f.refuse_commits(true))
    })
    .await;
    // Release order: leaves first (committed, then rolled back), OCS last.
    assert_eq!(r.device("ocs1").unwrap().stage, 2, "{r}");
    assert_eq!(
        r.device("leaf1").unwrap().status,
        vclos::controller::DeviceStatus::RolledBack,
        "{r}"
    );
}

// The same guarantees with SONiC leaves (testbed-sonic): a fault while a
// leaf's JSON Patch is being committed leaves every device as it was.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sonic_leaf_refuses_its_patch_after_the_ocs_and_spines_committed() {
    let emu = common::emu_on(common::SONIC, Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::OcsVclos, 24, Step::Admit, |e| {
        at_commit(e, "leaf2", |f| f.refuse_commits(true))
    })
    .await;
    assert!(matches!(r.outcome, Outcome::RolledBack { .. }), "{r}");
    let leaf = r.device("leaf2").unwrap();
    assert!(
        leaf.error
            .as_ref()
            .unwrap()
            .message
            .contains("refused the change"),
        "{r}"
    );
    assert_eq!(
        r.device("ocs1").unwrap().status,
        vclos::controller::DeviceStatus::RolledBack,
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sonic_leaf_drops_the_connection_mid_commit() {
    let emu = common::emu_on(common::SONIC, Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::Vclos, 32, Step::Admit, |e| {
        at_commit(e, "leaf1", |f| f.drop_next())
    })
    .await;
    assert!(r.device("leaf1").unwrap().error.is_some(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sonic_leaf_fails_after_its_checkpoint_on_release() {
    let emu = common::emu_on(common::SONIC, Duration::ZERO).await;
    let r = fails_cleanly(&emu, Policy::Vclos, 32, Step::Release, |e| {
        at_commit(e, "leaf1", |f| f.fail_after(Some(1)))
    })
    .await;
    let e = r.device("leaf1").unwrap().error.clone().unwrap();
    assert!(
        e.message.contains("Resource temporarily unavailable"),
        "{r}"
    );
}

/// A writer lock whose check refuses `refusals` times, then holds: an etcd
/// lease on a loaded machine, not renewed in time for one check and
/// renewed right after.
#[derive(Debug)]
struct Lapsing {
    holder: vclos::state::lock::Holder,
    refusals: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl vclos::store::WriterLock for Lapsing {
    fn holder(&self) -> &vclos::state::lock::Holder {
        &self.holder
    }

    async fn set_operation(
        &mut self,
        _: &str,
        _: Option<&str>,
    ) -> Result<(), vclos::jobs::JobsError> {
        Ok(())
    }

    async fn check(&self) -> Result<(), vclos::jobs::JobsError> {
        use std::sync::atomic::Ordering::SeqCst;
        match self
            .refusals
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
        {
            Ok(_) => Err(vclos::store::RemoteError::LockLost {
                location: "test".into(),
                why: "its lease was not renewed in time".into(),
            }
            .into()),
            Err(_) => Ok(()),
        }
    }
}

/// The lock's check refuses right before the first device commit, and
/// holds again when asked after the transaction (the lease renewed late,
/// as a loaded CI machine once showed through `vclos serve`, which then
/// answered `502`, "the devices refused"): the change is refused as a lost
/// lock (what a leader steps down on, and the service answers `503` with
/// `Retry-After`), nothing changed on any device or in state.json, no
/// journal is left, and the next change goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lapsing_before_the_commit_is_a_lost_lock_not_a_device_refusal() {
    use std::sync::atomic::AtomicUsize;
    let emu = common::emu(Duration::ZERO).await;
    let mut f = emu.fabric().await.with_policy(Policy::OcsVclos);
    let lock = Lapsing {
        holder: vclos::state::lock::Holder::me("test", None),
        refusals: AtomicUsize::new(1),
    };
    f.adopt_lock(Box::new(lock)).await.unwrap();
    let before = emu.configs(&f).await;
    let state = emu.state_bytes();
    let e = f.submit(&id("a"), 24, &NoProgress).await.unwrap_err();
    assert!(
        matches!(
            e,
            vclos::jobs::JobsError::Remote(vclos::store::RemoteError::LockLost { .. })
        ),
        "{e}"
    );
    assert_eq!(emu.configs(&f).await, before);
    assert_eq!(emu.state_bytes(), state);
    assert!(f.pending_journal().await.unwrap().is_none());
    assert!(f.jobs().is_empty());
    let r = f.submit(&id("a"), 24, &NoProgress).await.unwrap();
    assert!(r.report.is_committed(), "{}", r.report);
    assert_eq!(f.jobs().len(), 1);
}
