//! Crash safety and refusing before sending, in process: an apply dropped
//! mid-transaction (as a kill -9 would) leaves a journal; the next open
//! recovers so that state and devices agree and no reservation leaks. A
//! forged plan moving a busy OCS link is refused before any device hears
//! of it.
#![allow(clippy::unwrap_used)]

#[path = "lifecycle_common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::hook::{At, Hooked, Then};
use tokio::sync::Notify;
use vclos::controller::{DriverFactory, NoProgress};
use vclos::emulator::faults::Action;
use vclos::jobs::{Fabric, JobsError, RecoveryOutcome};
use vclos::names::JobId;

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// Submit a 24-GPU OCS job and "die" when `device` reaches `at`.
async fn die_during_submit(emu: &common::Emu, device: &str, at: At) {
    let reached = Arc::new(Notify::new());
    let r = reached.clone();
    let factory: Arc<dyn DriverFactory> = Hooked::new(
        emu.drivers(),
        device,
        at,
        Then::Hang {
            before: Arc::new(move || r.notify_one()),
        },
    );
    let mut f: Fabric = emu.fabric_with(factory);
    let plan = f.plan_submit(&id("j1"), 24).unwrap();
    tokio::select! {
        r = f.apply(&plan, &NoProgress) => panic!("apply finished: {r:?}"),
        () = reached.notified() => {}
    }
    // The apply future is dropped here: its tasks die with it.
    assert!(f.pending_journal().unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_ocs_committed_recovers_to_the_old_state() {
    let emu = common::emu(Duration::ZERO).await;
    let f = emu.fabric().await;
    let before = emu.configs(&f).await;
    let state = emu.state_bytes();
    // Leaves are stage 2: the OCS (stage 0) has committed when leaf1 hangs.
    die_during_submit(&emu, "leaf1", At::Commit).await;
    assert_ne!(emu.configs(&f).await["ocs1"], before["ocs1"]);

    let (g, rec) = Fabric::open(emu.topo.clone(), emu.state_dir())
        .await
        .unwrap();
    let rec = rec.unwrap();
    assert_eq!(rec.outcome, RecoveryOutcome::RolledBack, "{rec}");
    assert!(g.jobs().is_empty());
    assert!(g.pending_journal().unwrap().is_none());
    assert_eq!(emu.configs(&g).await, before);
    assert_eq!(emu.state_bytes(), state);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_every_commit_recovers_to_the_new_state() {
    let emu = common::emu(Duration::ZERO).await;
    let _ = emu.fabric().await;
    // Close comes after every stage committed and verified.
    die_during_submit(&emu, "leaf2", At::Close).await;
    let (mut g, rec) = Fabric::open(emu.topo.clone(), emu.state_dir())
        .await
        .unwrap();
    let rec = rec.unwrap();
    assert_eq!(rec.outcome, RecoveryOutcome::AdoptedNew, "{rec}");
    let jobs: Vec<String> = g.jobs().iter().map(|d| d.job.to_string()).collect();
    assert_eq!(jobs, ["j1"]);
    // The state on disk says the same, and the devices hold its intent.
    let stored = vclos::state::store::load(&emu.state_dir(), &emu.topo.name).unwrap();
    assert_eq!(stored, g.jobs());
    let r = g.reconcile(false, &NoProgress).await.unwrap();
    assert!(r.drift.is_empty(), "{:?}", r.drift);
    // And the job releases normally.
    let rel = g.release(&id("j1"), &NoProgress).await.unwrap();
    assert!(rel.report.is_committed(), "{}", rel.report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_plan_moving_a_busy_link_is_refused_before_sending() {
    let emu = common::emu(Duration::ZERO).await;
    let mut f = emu.fabric().await;
    let held = f.submit(&id("a"), 24, &NoProgress).await.unwrap();
    assert!(held.report.is_committed(), "{}", held.report);
    let busy = held.plan.decision.vclos.cross_connects[0].clone();
    let before = emu.configs(&f).await;
    let state = emu.state_bytes();

    // A hand-written decision reusing job a's OCS port is refused by the state.
    let mut d = held.plan.decision.clone();
    d.job = id("b");
    let e = f.plan_decision(d).unwrap_err();
    assert!(e.to_string().contains("held by job `a`"), "{e}");

    // A forged plan: a legitimate one for another job, with an OCS command
    // on job a's port slipped in. Canaries: every device drops the
    // connection at its next command, so any contact would show.
    for d in &emu.topo.devices {
        emu.fab.faults(&d.name).unwrap().drop_next();
    }
    let mut forged = f.plan_release(&id("a")).unwrap();
    forged.job = id("b");
    forged.action = "admit";
    forged.decision.job = id("b");
    // A valid decision in itself (one free GPU, no network part), so that
    // only the slipped-in command is wrong.
    let free = emu
        .topo
        .servers
        .iter()
        .find(|s| !held.plan.decision.gpus.iter().any(|g| g.server == s.name))
        .unwrap();
    forged.decision.stage = vclos::decision::Stage::Server;
    forged.decision.gpus = vec![vclos::decision::GpuRef {
        server: free.name.clone(),
        gpu: 0,
    }];
    forged.decision.vclos = Default::default();
    forged.decision.source_routes.clear();
    forged.devices.retain(|p| p.diff.device == "ocs1");
    forged.devices[0].diff.commands = vec![format!("DLT-PATCH::{}&{}:1;", busy.a, busy.b)];
    let e = f.apply(&forged, &NoProgress).await.unwrap_err();
    match &e {
        JobsError::BusyLink { device, holder, .. } => {
            assert_eq!((device.as_str(), holder.as_str()), ("ocs1", "a"), "{e}");
        }
        other => panic!("expected BusyLink, got {other}"),
    }
    // Nothing reached any device: every canary is still armed.
    for d in &emu.topo.devices {
        assert_eq!(
            emu.fab.faults(&d.name).unwrap().on_command(),
            Action::Drop,
            "{} was contacted",
            d.name
        );
    }
    assert!(f.pending_journal().unwrap().is_none());
    assert_eq!(emu.state_bytes(), state);
    assert_eq!(emu.configs(&f).await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_whose_commands_were_altered_is_refused_before_sending() {
    let emu = common::emu(Duration::ZERO).await;
    let mut f = emu.fabric().await;
    let state = emu.state_bytes();
    let good = f.plan_submit(&id("a"), 24).unwrap();
    let leaf = good
        .devices
        .iter()
        .position(|p| p.diff.device == "leaf1")
        .unwrap();
    let mut extra = good.clone();
    extra.devices[leaf]
        .diff
        .commands
        .push("interface 100GE1/0/1".into());
    let mut missing = good.clone();
    missing.devices[leaf].diff.commands.pop();
    let mut restaged = good.clone();
    restaged.devices[leaf].stage = 0;
    for (what, forged) in [("extra", extra), ("missing", missing), ("stage", restaged)] {
        for d in &emu.topo.devices {
            emu.fab.faults(&d.name).unwrap().drop_next();
        }
        let e = f.apply(&forged, &NoProgress).await.unwrap_err();
        assert!(
            e.to_string().contains("not those the current state gives"),
            "{what}: {e}"
        );
        for d in &emu.topo.devices {
            let canary = emu.fab.faults(&d.name).unwrap().on_command();
            assert_eq!(canary, Action::Drop, "{what}: {} was contacted", d.name);
        }
        assert!(f.pending_journal().unwrap().is_none());
        assert_eq!(emu.state_bytes(), state);
    }
    // The plan as made applies.
    let r = f.apply(&good, &NoProgress).await.unwrap();
    assert!(r.is_committed(), "{r}");
}

/// What a power loss while state.json was being replaced can leave.
fn tear_state(emu: &common::Emu, bytes: &[u8]) {
    std::fs::create_dir_all(emu.state_dir()).unwrap();
    std::fs::write(emu.state_dir().join("state.json"), bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_state_file_is_settled_from_the_journal() {
    // The devices hold the new state: recovery adopts it.
    let emu = common::emu(Duration::ZERO).await;
    let _ = emu.fabric().await;
    die_during_submit(&emu, "leaf2", At::Close).await;
    tear_state(&emu, b"{\n  \"version\": 1,\n  \"topol");
    let loaded = Fabric::load(emu.topo.clone(), emu.state_dir()).unwrap();
    assert!(
        loaded.jobs().is_empty(),
        "the journal's old state until recovery"
    );
    let (g, rec) = Fabric::open(emu.topo.clone(), emu.state_dir())
        .await
        .unwrap();
    assert_eq!(rec.unwrap().outcome, RecoveryOutcome::AdoptedNew);
    let stored = vclos::state::store::load(&emu.state_dir(), &emu.topo.name).unwrap();
    assert_eq!(stored, g.jobs());
    assert_eq!(stored.len(), 1);

    // The devices hold the old state: recovery puts it back, state.json too.
    let emu = common::emu(Duration::ZERO).await;
    let f = emu.fabric().await;
    let before = emu.configs(&f).await;
    die_during_submit(&emu, "leaf1", At::Commit).await;
    tear_state(&emu, &[0u8; 300]);
    let (g, rec) = Fabric::open(emu.topo.clone(), emu.state_dir())
        .await
        .unwrap();
    assert_eq!(rec.unwrap().outcome, RecoveryOutcome::RolledBack);
    assert!(g.jobs().is_empty());
    let stored = vclos::state::store::load(&emu.state_dir(), &emu.topo.name).unwrap();
    assert!(stored.is_empty());
    assert_eq!(emu.configs(&g).await, before);
    assert!(g.pending_journal().unwrap().is_none());

    // Without a journal a torn state.json is an error, not an empty fabric.
    tear_state(&emu, b"");
    let e = Fabric::load(emu.topo.clone(), emu.state_dir()).unwrap_err();
    assert!(e.to_string().contains("torn"), "{e}");
}
