//! The job lifecycle on the emulated testbed-sonic fabric (SONiC leaves over
//! SSH with JSON Patches, Huawei CE spines, TL1 OCS), through the real
//! drivers: submit and release with isolation verified from the devices'
//! own configs; a SONiC leaf's redirect makes its OCS link busy; a job id or
//! decision that tries to smuggle shell syntax never reaches a device.
#![allow(clippy::unwrap_used)]

#[path = "lifecycle_common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use vclos::controller::{DriverFactory, NoProgress};
use vclos::decision::{Decision, SharedLink, Sharing, SharingPhase};
use vclos::dialect::dialect;
use vclos::emulator::fabric::Switch;
use vclos::emulator::ocs::OcsError;
use vclos::emulator::sonic::{validate, SonicDevice};
use vclos::intent::{addressing, Item, PortName};
use vclos::jobs::Fabric;
use vclos::names::JobId;
use vclos::placement::Policy;
use vclos::topology::{Dialect, LeafId, OcsId};
use vclos_drivers::LoadMode;

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

async fn sonic_emu() -> common::Emu {
    common::emu_on(common::SONIC, Duration::ZERO).await
}

fn sonic(emu: &common::Emu, device: &str) -> Arc<SonicDevice> {
    match emu.fab.switch(device) {
        Some(Switch::Sonic(d)) => d.clone(),
        other => panic!("{device} is not a SONiC switch: {other:?}"),
    }
}

/// Every device holds the state's intent, and every held job verifies
/// isolated from the running configs read through the real drivers.
async fn assert_verified(emu: &common::Emu, f: &mut Fabric) {
    let r = f.reconcile(false, &NoProgress).await.unwrap();
    assert!(r.unreachable.is_empty() && r.drift.is_empty(), "{r:?}");
    let configs = emu.configs(f).await;
    let reports = vclos::verification::verify_fabric(&emu.topo, &f.jobs(), &configs).unwrap();
    assert_eq!(reports.len(), f.jobs().len(), "{reports:?}");
    assert!(reports.iter().all(|r| r.ok()), "{reports:?}");
}

/// `db` passes the sonic-yang-models rules the emulator encodes
/// (`vclos::emulator::sonic::validate`) with nothing left out but the
/// `REDIRECT_ACTION` field of each rule, the one thing the models cannot
/// express; and it holds at least one such rule.
fn assert_models_hold(db: &vclos_drivers::configdb::ConfigDb) {
    let rules = db["ACL_RULE"].as_object().unwrap();
    let only: Vec<String> = rules
        .iter()
        .filter(|(_, r)| r.get("REDIRECT_ACTION").is_some())
        .map(|(k, _)| {
            format!(
                "/ACL_RULE/{}/REDIRECT_ACTION",
                k.replace('~', "~0").replace('/', "~1")
            )
        })
        .collect();
    assert!(!only.is_empty(), "no redirect rule");
    validate::check(db, db, &only).unwrap_or_else(|e| panic!("{e}"));
    // Each of those fields is what the models refuse.
    let e = validate::check(db, db, &only[1..]).unwrap_err();
    assert!(e.contains("field REDIRECT_ACTION has no leaf"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_on_sonic_leaves_with_isolation_verified() {
    let emu = sonic_emu().await;
    assert_eq!(
        emu.topo.devices[emu.topo.device_id("leaf1").unwrap().index()]
            .mgmt
            .dialect,
        Dialect::Sonic
    );
    let mut f = emu.fabric().await.with_policy(Policy::Vclos);
    let start = emu.configs(&f).await;
    assert!(start["leaf1"].contains("\"DATAACL\""), "{}", start["leaf1"]);

    // Two jobs within one leaf each (no device changes), then a vClos job
    // that must span both leaves: SONiC leaves and CE spines.
    for j in ["a", "b"] {
        let done = f.submit(&id(j), 12, &NoProgress).await.unwrap();
        assert!(done.plan.devices.is_empty() && done.report.is_committed());
    }
    let c = f.submit(&id("c"), 8, &NoProgress).await.unwrap();
    assert!(c.report.is_committed(), "{}", c.report);
    let leaf = c.report.device("leaf1").unwrap();
    assert!(
        leaf.diff
            .contains("+            \"REDIRECT_ACTION\": \"Ethernet"),
        "{}",
        leaf.diff
    );
    assert_verified(&emu, &mut f).await;
    for d in ["leaf1", "leaf2"] {
        assert_models_hold(&sonic(&emu, d).running());
    }
    let leaf1 = sonic(&emu, "leaf1");
    let items = dialect(Dialect::Sonic)
        .parse("leaf1", &leaf1.running_text())
        .unwrap();
    assert!(items
        .iter()
        .any(|i| matches!(i, Item::Redirect { job, .. } if job.as_str() == "c")));
    assert!(leaf1.file_names().is_empty(), "no patch file left behind");
    for j in ["a", "b"] {
        let r = f.release(&id(j), &NoProgress).await.unwrap();
        assert!(r.report.is_committed(), "{}", r.report);
    }

    // An OCS-vClos job that rewires the OCS first.
    let mut f = f.with_policy(Policy::OcsVclos);
    let d = f.submit(&id("d"), 24, &NoProgress).await.unwrap();
    assert!(d.report.is_committed(), "{}", d.report);
    assert!(!d.plan.decision.vclos.cross_connects.is_empty());
    assert_eq!(d.report.device("ocs1").unwrap().stage, 0);
    assert_verified(&emu, &mut f).await;

    // Release everything: every device back to its exact starting config.
    for j in ["d", "c"] {
        let r = f.release(&id(j), &NoProgress).await.unwrap();
        assert!(r.report.is_committed(), "{}", r.report);
    }
    assert_verified(&emu, &mut f).await;
    assert_eq!(emu.configs(&f).await, start);
    assert!(f.pending_journal().await.unwrap().is_none());
}

/// TL1 commands through the real TL1 driver.
async fn tl1(emu: &common::Emu, cmds: &str) -> Result<(), vclos_drivers::DriverError> {
    let mut drv = emu.drivers().driver("ocs1")?;
    drv.open().await?;
    drv.load_candidate(cmds, LoadMode::Merge).await?;
    let r = drv.commit(None).await.map(|_| ());
    let _ = drv.close().await;
    r
}

/// Source-route leaf1's first server port onto `uplink`, or remove every
/// redirect, through leaf1's real SONiC driver.
async fn steer(emu: &common::Emu, uplink: Option<&str>) {
    let factory = emu.drivers();
    let mut drv = factory.driver("leaf1").unwrap();
    drv.open().await.unwrap();
    let d = dialect(Dialect::Sonic);
    let old = d.parse("leaf1", &drv.get_config().await.unwrap()).unwrap();
    let mut new = old.clone();
    new.retain(|i| !matches!(i, Item::Redirect { .. }));
    if let Some(u) = uplink {
        new.insert(Item::Redirect {
            job: id("t"),
            index: 1,
            port: PortName::new("Ethernet0").unwrap(),
            uplink: PortName::new(u).unwrap(),
            destinations: vec![addressing::leaf_gpu_prefix(LeafId(1))],
        });
    }
    drv.load_candidate(&d.changes(&old, &new).join("\n"), LoadMode::Merge)
        .await
        .unwrap();
    drv.commit(None).await.unwrap();
    drv.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sonic_leaf_redirect_makes_its_ocs_link_busy() {
    let emu = sonic_emu().await;
    let ocs = emu.fab.ocs(OcsId(0));
    // leaf1:Ethernet64 is cabled to ocs1:1, patched to ocs1:33 (spine1-1).
    steer(&emu, Some("Ethernet64")).await;
    let e = tl1(&emu, "DLT-PATCH::1&33:1;").await.unwrap_err();
    assert!(e.to_string().contains("SARB"), "{e}");
    assert!(matches!(
        ocs.disconnect(0).await,
        Err(OcsError::Busy { .. })
    ));
    // Steered onto another uplink instead: this link is idle again.
    steer(&emu, Some("Ethernet68")).await;
    tl1(&emu, "DLT-PATCH::1&33:1;")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        ocs.disconnect(1).await,
        Err(OcsError::Busy { .. })
    ));
    steer(&emu, None).await;
    ocs.disconnect(1).await.unwrap();
    assert_eq!(ocs.partner(0), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggled_names_never_reach_the_shell() {
    let emu = sonic_emu().await;
    let f = emu.fabric().await;
    let history: Vec<_> = ["leaf1", "leaf2"]
        .iter()
        .map(|d| sonic(&emu, d).history().len())
        .collect();
    let topo = emu.dir.path().join("emu.yaml");
    let state = emu.state_dir();
    let vclos = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_vclos"))
            .args(args)
            .args([
                "--topology",
                topo.to_str().unwrap(),
                "--state",
                state.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    for bad in ["j1';sudo reboot;'", "j1$(reboot)", "j1\nreboot", "Vrf'"] {
        let err = vclos(&["job", "submit", "--id", bad, "--gpus", "8"]);
        assert!(err.contains("invalid job id"), "{err}");
    }
    // A hand-written decision with a quote in its job id or in a port name.
    let plan = f
        .with_policy(Policy::Vclos)
        .plan_submit(&id("ok"), 24)
        .unwrap();
    let good = serde_yaml_ng::to_string(&plan.decision).unwrap();
    for (from, to, why) in [
        ("job: ok", "job: ok';reboot;'", "invalid job id"),
        (
            "Ethernet0",
            "Ethernet0';reboot",
            "has no server port `Ethernet0';reboot`",
        ),
    ] {
        assert!(good.contains(from), "{good}");
        let path = emu.dir.path().join("bad.yaml");
        std::fs::write(&path, good.replacen(from, to, 1)).unwrap();
        let err = vclos(&["apply", "--decision", path.to_str().unwrap(), "--yes"]);
        assert!(err.contains(why), "{err}");
    }
    assert!(JobId::new("j1';reboot").is_err());
    let after: Vec<_> = ["leaf1", "leaf2"]
        .iter()
        .map(|d| sonic(&emu, d).history().len())
        .collect();
    assert_eq!(after, history, "a SONiC shell was contacted");
}

/// Job `id` joining every link of `c` (VLAN 101, issue 16) from the other
/// servers of c's leaves: c's decision with each GPU moved to the next
/// server of its leaf (same GPU index, so the port behind it).
fn joiner(topo: &vclos::topology::Topology, c: &Decision, id: &str) -> Decision {
    let mut d = c.clone();
    d.job = JobId::new(id).unwrap();
    let next = |server: &str| {
        let s = topo.server(topo.server_id(server).unwrap());
        let on = &topo.leaf(s.leaf).servers;
        let i = on
            .iter()
            .position(|x| &*topo.server(*x).name == server)
            .unwrap();
        topo.server(on[(i + 1) % on.len()]).name.clone()
    };
    // The port of a leaf whose GPU moves: the same GPU of the next server.
    let port = |leaf: &str, p: &str| {
        let l = topo.leaf(topo.leaf_id(leaf).unwrap());
        let i = l.server_ports.iter().position(|x| &**x == p).unwrap();
        let (s, g) = l.server_port_owner[i].unwrap();
        let to = topo.server(topo.server_id(&next(&topo.server(s).name)).unwrap());
        l.server_ports[to.ports[g as usize] as usize].clone()
    };
    for g in &mut d.gpus {
        g.server = next(&g.server);
    }
    for vl in &mut d.vclos.leaves {
        let leaf = vl.leaf.clone();
        vl.server_ports.iter_mut().for_each(|p| *p = port(&leaf, p));
    }
    for r in &mut d.source_routes {
        r.server_port = port(&r.leaf.clone(), &r.server_port);
    }
    let links = (c.vclos.links.iter())
        .map(|l| SharedLink {
            leaf: l.leaf.clone(),
            uplink: l.uplink.clone(),
            with: vec![c.job.clone()],
            vlan: 101,
        })
        .collect();
    let phase = |ms, demand| SharingPhase { ms, demand };
    d.sharing = Some(Box::new(Sharing {
        time_shift_ms: 125,
        score: 1.0,
        profile: vec![phase(175, 0.0), phase(75, 1.0)],
        links,
        time_shared: Vec::new(),
    }));
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joiners_subinterfaces_apply_and_read_back_as_the_intent() {
    let emu = sonic_emu().await;
    let mut f = emu.fabric().await.with_policy(Policy::Vclos);
    for j in ["a", "b"] {
        f.submit(&id(j), 12, &NoProgress).await.unwrap();
    }
    let c = f.submit(&id("c"), 8, &NoProgress).await.unwrap();
    assert!(c.report.is_committed(), "{}", c.report);
    for j in ["a", "b"] {
        f.release(&id(j), &NoProgress).await.unwrap();
    }
    let c = c.plan.decision;
    let d = joiner(&emu.topo, &c, "d");
    let intent = vclos::intent::build(&emu.topo, &[c.clone(), d]).unwrap();
    let dialect = dialect(Dialect::Sonic);
    for leaf in ["leaf1", "leaf2"] {
        let want = &intent.device(leaf).unwrap().items;
        assert!(want
            .iter()
            .any(|i| matches!(i, Item::Subinterface { vlan: 101, .. })));
        // Applied through the leaf's real driver, read back, parsed.
        let mut drv = emu.drivers().driver(leaf).unwrap();
        drv.open().await.unwrap();
        let start = drv.get_config().await.unwrap();
        let old = dialect.parse(leaf, &start).unwrap();
        let patch = dialect.changes(&old, want).join("\n");
        drv.load_candidate(&patch, LoadMode::Merge).await.unwrap();
        drv.commit(None).await.unwrap();
        let back = dialect
            .parse(leaf, &drv.get_config().await.unwrap())
            .unwrap();
        // What SONiC holds of the intent (a routed port is implicit there).
        let claimed: BTreeSet<Item> = (want.iter())
            .filter(|i| dialect.claims(i.kind()))
            .cloned()
            .collect();
        assert_eq!(back, claimed, "{leaf}");
        let db = sonic(&emu, leaf).running();
        assert_models_hold(&db);
        // d's rules name the far end of each sub-interface's /31 on it.
        let rules = db["ACL_RULE"].as_object().unwrap();
        let onto: Vec<&str> = (rules.iter())
            .filter(|(k, _)| k.starts_with("v-d-"))
            .filter_map(|(_, r)| r["REDIRECT_ACTION"].as_str())
            .collect();
        assert!(!onto.is_empty(), "{rules:?}");
        for t in onto {
            let (ip, sub) = t.split_once('@').unwrap();
            let addr = db["VLAN_SUB_INTERFACE"]
                .as_object()
                .unwrap()
                .keys()
                .find_map(|k| k.strip_prefix(&format!("{sub}|")))
                .unwrap();
            let net: vclos::intent::Ipv4Net = addr.parse().unwrap();
            assert_eq!(net.other_end().to_string(), ip, "{t}");
        }
        // d leaves again: exactly the configuration before.
        let patch = dialect.changes(&back, &old).join("\n");
        drv.load_candidate(&patch, LoadMode::Merge).await.unwrap();
        drv.commit(None).await.unwrap();
        assert_eq!(drv.get_config().await.unwrap(), start, "{leaf}");
        drv.close().await.unwrap();
    }
}
