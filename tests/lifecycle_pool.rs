//! Device sessions kept open across transactions, end to end on the
//! emulated testbed-ocs over loopback SSH and Telnet/TL1 with the real
//! drivers: reuse is asserted from the devices' own login counts.
#![allow(clippy::unwrap_used)]

#[path = "lifecycle_common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::hook::{At, Hooked, Then};
use vclos::controller::{DeviceStatus, NoProgress, Outcome, PoolOptions, SessionPool};
use vclos::jobs::{foreign, Fabric};
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::plan::Plan;

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// Successful logins so far, per device.
fn logins(emu: &common::Emu) -> BTreeMap<String, u64> {
    emu.logins()
}

/// Every device a plan's apply opens a session to: the devices it changes,
/// and before them the switches the foreign-steering check reads that the
/// change does not prepare (the others are checked on prepare's read).
fn sessions_of(emu: &common::Emu, plan: &Plan) -> Vec<String> {
    let mut d: Vec<String> = plan.devices.iter().map(|d| d.diff.device.clone()).collect();
    d.extend(foreign::touched(&emu.topo, &plan.devices).into_keys());
    d.sort();
    d.dedup();
    d
}

/// Sessions lent by a plan's apply: one per device changed, plus one per
/// switch the foreign-steering check reads first: those outside the change
/// (the changed ones are checked on what prepare read, not read again).
fn lent_by(emu: &common::Emu, plan: &Plan) -> usize {
    let changed: Vec<&str> = plan.devices.iter().map(|d| &*d.diff.device).collect();
    let touched = foreign::touched(&emu.topo, &plan.devices);
    plan.devices.len()
        + touched
            .keys()
            .filter(|d| !changed.contains(&d.as_str()))
            .count()
}

fn pool(emu: &common::Emu) -> Arc<SessionPool> {
    Arc::new(SessionPool::new(
        Arc::new(emu.drivers()),
        PoolOptions::default(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_and_releases_reuse_one_session_per_device() {
    let emu = common::emu(Duration::ZERO).await;
    // `Fabric::load` pools by default; its reconcile read every device once.
    let mut f = emu.fabric().await.with_policy(Policy::OcsVclos);
    let first = logins(&emu);
    assert!(first.values().all(|&n| n == 1), "{first:?}");
    let mut lent = 0;
    for j in ["a", "b"] {
        let r = f.submit(&id(j), 24, &NoProgress).await.unwrap();
        assert!(r.report.is_committed(), "{}", r.report);
        lent += lent_by(&emu, &r.plan);
        let r = f.release(&id(j), &NoProgress).await.unwrap();
        assert!(r.report.is_committed(), "{}", r.report);
        lent += lent_by(&emu, &r.plan);
    }
    assert!(lent >= 4, "the transactions touched devices");
    assert_eq!(logins(&emu), first, "no device was logged in to again");
    let pool = Arc::clone(f.sessions().unwrap());
    let s = pool.stats();
    let n = emu.topo.devices.len() as u64;
    assert_eq!((s.opened, s.reused), (n, lent as u64), "{s:?}");
    assert_eq!((s.reconnected, s.discarded), (0, 0), "{s:?}");
    assert_eq!(pool.idle_devices().len() as u64, n);
    // Shutdown closes them; the fabric still works, with fresh sessions.
    f.shutdown().await;
    assert!(pool.idle_devices().is_empty());
    let r = f.submit(&id("c"), 24, &NoProgress).await.unwrap();
    assert!(r.report.is_committed(), "{}", r.report);
    assert!(pool.idle_devices().is_empty());
    // Without kept sessions, each device logs in once: the changed ones
    // for the change (their check reads nothing more), the others for the
    // check's read.
    let after = logins(&emu);
    for d in sessions_of(&emu, &r.plan) {
        assert_eq!(after[&d], first[&d] + 1, "{d}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_the_devices_dropped_are_reconnected_transparently() {
    let emu = common::emu(Duration::ZERO).await;
    let mut f = emu.fabric().await.with_policy(Policy::OcsVclos);
    let r = f.submit(&id("a"), 24, &NoProgress).await.unwrap();
    assert!(r.report.is_committed(), "{}", r.report);
    let before = logins(&emu);
    // Every device closes its sessions between the two transactions (a
    // reboot, or its own idle timeout).
    for d in &emu.topo.devices {
        emu.fab.faults(&d.name).unwrap().disconnect_all();
    }
    emu.release_reconnecting(&mut f, &id("a"), &before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_broken_mid_transaction_is_not_returned_and_rollback_is_exact() {
    let emu = common::emu(Duration::ZERO).await;
    let f = emu.fabric().await;
    let pool = pool(&emu);
    // Warm the pool with a committed job that rewired the OCS.
    let mut g = Fabric::load_pooled(emu.topo.clone(), emu.state_dir(), pool.clone())
        .unwrap()
        .with_options(common::options())
        .with_policy(Policy::OcsVclos);
    let a = g.submit(&id("a"), 24, &NoProgress).await.unwrap();
    assert!(a.report.is_committed(), "{}", a.report);
    let before = emu.configs(&f).await;
    let state = emu.state_bytes();
    let warm = logins(&emu);

    // leaf2's connection drops in the middle of its commit, after the OCS
    // (stage 0, through its reused session) has committed.
    let leaf2 = emu.fab.faults("leaf2").unwrap().clone();
    let clear = leaf2.clone();
    let hooked = Hooked::around(
        pool.clone(),
        "leaf2",
        At::Commit,
        Then::Around {
            before: Arc::new(move || leaf2.drop_next()),
            after: Arc::new(move || clear.clear()),
        },
    );
    let mut h = emu.fabric_with(hooked).with_policy(Policy::OcsVclos);
    let hb = h.submit(&id("b"), 8, &NoProgress).await.unwrap();
    let r = hb.report;
    assert!(matches!(r.outcome, Outcome::RolledBack { .. }), "{r}");
    assert_eq!(
        r.device("ocs1").unwrap().status,
        DeviceStatus::RolledBack,
        "{r}"
    );
    // Rollback on reused sessions restored exactly the configuration after
    // job a, not the one before it, and the state is untouched.
    assert_eq!(emu.configs(&f).await, before, "{r}");
    assert_eq!(emu.state_bytes(), state);
    // leaf2's session broke: it was not returned; the others were.
    assert!(!pool.idle_devices().contains(&"leaf2".to_string()));
    assert!(pool.idle_devices().contains(&"ocs1".to_string()));
    assert!(pool.stats().discarded >= 1);

    // The next transaction logs in to leaf2 again, and to nothing else.
    let again = logins(&emu);
    let b = g.submit(&id("b"), 8, &NoProgress).await.unwrap();
    assert!(b.report.is_committed(), "{}", b.report);
    let after = logins(&emu);
    for (d, n) in &after {
        let want = again[d] + u64::from(d == "leaf2");
        assert_eq!(*n, want, "{d}: logins {warm:?} -> {again:?} -> {after:?}");
    }
    let mut used: Vec<String> = [&a.plan, &hb.plan, &b.plan]
        .into_iter()
        .flat_map(|p| sessions_of(&emu, p))
        .collect();
    used.sort();
    used.dedup();
    assert_eq!(g.sessions().unwrap().idle_devices(), used);
    g.shutdown().await;
    assert!(pool.idle_devices().is_empty());
}
