//! The job lifecycle on the emulated testbed-ocs fabric, over the wire with
//! the real drivers: submit, release, OCS rewiring, and device configs
//! compared with the state's intent after every step.
#![allow(clippy::unwrap_used)]

#[path = "lifecycle_common/mod.rs"]
mod common;

use std::time::Duration;

use vclos::controller::NoProgress;
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::Policy;

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// Every device holds exactly the state's intent, and state.json lists the jobs.
async fn assert_in_sync(emu: &common::Emu, f: &mut Fabric, jobs: &[&str]) {
    let r = f.reconcile(false, &NoProgress).await.unwrap();
    assert!(r.unreachable.is_empty(), "{:?}", r.unreachable);
    assert!(r.drift.is_empty(), "drift: {:?}", r.drift);
    let stored: Vec<String> = vclos::state::store::load(&emu.state_dir(), &emu.topo.name)
        .unwrap()
        .iter()
        .map(|d| d.job.to_string())
        .collect();
    assert_eq!(stored, jobs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_lifecycle_with_and_without_ocs_rewiring() {
    let emu = common::emu(Duration::ZERO).await;
    let mut f = emu.fabric().await;
    let start = emu.configs(&f).await;

    // Two whole-leaf jobs: no device changes at all.
    for j in ["a", "b"] {
        let done = f.submit(&id(j), 12, &NoProgress).await.unwrap();
        assert!(done.plan.devices.is_empty());
        assert!(done.report.is_committed(), "{}", done.report);
    }
    assert_eq!(emu.configs(&f).await, start);

    // A plain vClos job across both leaves: spines and leaves, no OCS.
    let mut f = f.with_policy(Policy::Vclos);
    let c = f.submit(&id("c"), 8, &NoProgress).await.unwrap();
    assert!(c.report.is_committed(), "{}", c.report);
    assert!(c.plan.decision.vclos.cross_connects.is_empty());
    let touched: Vec<&str> = c
        .plan
        .devices
        .iter()
        .map(|d| d.diff.device.as_str())
        .collect();
    assert!(
        !touched.contains(&"ocs1") && touched.contains(&"leaf1"),
        "{touched:?}"
    );
    assert_in_sync(&emu, &mut f, &["a", "b", "c"]).await;

    for j in ["a", "b"] {
        assert!(f
            .release(&id(j), &NoProgress)
            .await
            .unwrap()
            .report
            .is_committed());
    }

    // An OCS-vClos job that rewires the OCS (stage 0), then the leaves.
    let mut f = f.with_policy(Policy::OcsVclos);
    let d = f.submit(&id("d"), 24, &NoProgress).await.unwrap();
    assert!(d.report.is_committed(), "{}", d.report);
    assert!(!d.plan.decision.vclos.cross_connects.is_empty());
    let ocs = d.report.device("ocs1").unwrap();
    assert_eq!(ocs.stage, 0);
    assert!(d
        .report
        .devices
        .iter()
        .all(|x| x.device == "ocs1" || x.stage > 0));
    assert_in_sync(&emu, &mut f, &["c", "d"]).await;
    let patches = emu.fab.ocs(vclos::topology::OcsId(0)).patches();
    let cc = &d.plan.decision.vclos.cross_connects[0];
    let (a, b) = (
        emu.fab
            .ocs(vclos::topology::OcsId(0))
            .port_index(&cc.a)
            .unwrap(),
        emu.fab
            .ocs(vclos::topology::OcsId(0))
            .port_index(&cc.b)
            .unwrap(),
    );
    assert!(patches.contains(&(a.min(b), a.max(b))), "{patches:?}");

    // Release everything: every device is back to its exact starting config.
    for j in ["d", "c"] {
        let r = f.release(&id(j), &NoProgress).await.unwrap();
        assert!(r.report.is_committed(), "{}", r.report);
    }
    assert_in_sync(&emu, &mut f, &[]).await;
    assert_eq!(emu.configs(&f).await, start);
    assert!(f.pending_journal().await.unwrap().is_none());
}
