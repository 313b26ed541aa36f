//! Verification from device state, end to end on the emulated testbed:
//! switches start from the baseline; switch configs made over SSH make OCS
//! links busy (the OCS refuses to move them over TL1 and in memory); correct
//! jobs installed through the real drivers verify clean, and configs broken
//! on the devices (leaf CLI, spine CLI, OCS TL1) are caught by verification
//! read back through the real drivers, naming the device port; `vclos
//! verify` does the same from the command line.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use vclos::controller::{DriverFactory, TopologyDrivers};
use vclos::decision::Decision;
use vclos::dialect::{claimed, dialect};
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::emulator::ocs::OcsError;
use vclos::intent::{self, addressing, Item, PortName};
use vclos::names::JobId;
use vclos::topology::{self, Dialect, LeafId, OcsId, Topology};
use vclos::verification::{self, fetch, sample, Report};
use vclos_drivers::LoadMode;

const TESTBED: &str = include_str!("../topologies/testbed-ocs.yaml");
const PW: &str = "VCLOS_TEST_VERIFY_PW";

/// A running emulated fabric and a topology aimed at it.
struct Lab {
    fab: EmulatedFabric,
    topo: Arc<Topology>,
    drivers: Arc<TopologyDrivers>,
    yaml: String,
    dir: tempfile::TempDir,
}

async fn lab(yaml: &str) -> Lab {
    std::env::set_var(PW, "admin");
    let dir = tempfile::tempdir().unwrap();
    let topo = Arc::new(topology::from_str("testbed-ocs.yaml", yaml).unwrap());
    let fab = EmulatedFabric::start(topo, FabricOptions::default())
        .await
        .unwrap();
    let yaml = fab
        .aim("t", yaml, &dir.path().join("known_hosts"), PW)
        .unwrap();
    let topo = Arc::new(topology::from_str("emu.yaml", &yaml).unwrap());
    let drivers = Arc::new(TopologyDrivers::new(topo.clone()));
    Lab {
        fab,
        topo,
        drivers,
        yaml,
        dir,
    }
}

impl Lab {
    fn dialect(&self, device: &str) -> Dialect {
        let id = self.topo.device_id(device).unwrap();
        self.topo.device(id).mgmt.dialect
    }

    /// The device's running config through its real driver.
    async fn get_config(&self, device: &str) -> String {
        let mut drv = self.drivers.driver(device).unwrap();
        drv.open().await.unwrap_or_else(|e| panic!("{e}"));
        let text = drv.get_config().await.unwrap();
        drv.close().await.unwrap();
        text
    }

    async fn items(&self, device: &str) -> BTreeSet<Item> {
        let text = self.get_config(device).await;
        dialect(self.dialect(device)).parse(device, &text).unwrap()
    }

    /// Take `device` from `old` to `new` through its real driver (the
    /// dialect's change commands, loaded and committed).
    async fn push(
        &self,
        device: &str,
        old: &BTreeSet<Item>,
        new: &BTreeSet<Item>,
    ) -> Result<(), vclos_drivers::DriverError> {
        let cmds = dialect(self.dialect(device)).changes(old, new);
        let mut drv = self.drivers.driver(device)?;
        drv.open().await?;
        let r = async {
            if self.dialect(device) == Dialect::Openconfig {
                for doc in &cmds {
                    drv.load_candidate(doc, LoadMode::Merge).await?;
                }
            } else {
                drv.load_candidate(&cmds.join("\n"), LoadMode::Merge)
                    .await?;
            }
            drv.commit(None).await.map(|_| ())
        }
        .await;
        let _ = drv.close().await;
        r
    }

    /// Edit `device`'s running items with `f` and push the result.
    async fn edit(&self, device: &str, f: impl FnOnce(&mut BTreeSet<Item>)) {
        let old = self.items(device).await;
        let mut new = old.clone();
        f(&mut new);
        assert_ne!(old, new, "the edit of {device} changes nothing");
        self.push(device, &old, &new)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Every device's config through the real drivers.
    async fn configs(&self) -> BTreeMap<String, String> {
        let names = self.topo.devices.iter().map(|d| d.name.clone()).collect();
        let factory: Arc<dyn DriverFactory> = self.drivers.clone();
        fetch::fetch_configs(factory, names, 4)
            .await
            .into_iter()
            .map(|(d, r)| (d, r.unwrap_or_else(|e| panic!("{e}"))))
            .collect()
    }

    async fn verify(&self, held: &[Decision]) -> Vec<Report> {
        let configs = self.configs().await;
        verification::verify_fabric(&self.topo, held, &configs).unwrap()
    }

    /// Install `held` (intent over the baseline) through the real drivers.
    async fn install(&self, held: &[Decision]) {
        let want = intent::build(&self.topo, held).unwrap();
        for d in &want.devices {
            let have = self.items(&d.device).await;
            let want = claimed(dialect(d.dialect), &d.items);
            if have != want {
                self.push(&d.device, &have, &want)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
    }
}

fn violations(r: &[Report]) -> String {
    r.iter()
        .flat_map(|r| r.violations.iter().map(move |v| format!("{}: {v}", r.job)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn port(s: &str) -> PortName {
    PortName::new(s).unwrap()
}

/// A source route on leaf1's first server port onto `uplink`.
fn redirect(uplink: &str) -> Item {
    Item::Redirect {
        job: JobId::new("t").unwrap(),
        index: 1,
        port: port("100GE1/0/1"),
        uplink: port(uplink),
        destinations: vec![addressing::leaf_gpu_prefix(LeafId(1))],
    }
}

/// Rebind the address item of port `name` into `vrf` (`None`: the global
/// table), keeping its address.
fn set_vrf(s: &mut BTreeSet<Item>, name: &str, vrf: Option<intent::VrfName>) {
    let old = s
        .iter()
        .find(|i| matches!(i, Item::Address { port, .. } if port.as_str() == name))
        .cloned()
        .unwrap_or_else(|| panic!("no address on {name}"));
    let Item::Address { port, net, .. } = old.clone() else {
        unreachable!()
    };
    s.remove(&old);
    s.insert(Item::Address { port, vrf, net });
}

/// TL1 commands through the real TL1 driver.
async fn tl1(lab: &Lab, cmds: &str) -> Result<(), vclos_drivers::DriverError> {
    let mut drv = lab.drivers.driver("ocs1")?;
    drv.open().await?;
    drv.load_candidate(cmds, LoadMode::Merge).await?;
    let r = drv.commit(None).await.map(|_| ());
    let _ = drv.close().await;
    r
}

#[tokio::test]
async fn switches_start_from_the_baseline_over_every_protocol() {
    // leaf2 speaks OpenConfig over NETCONF; the rest Huawei CE CLI / TL1.
    let mut lines: Vec<&str> = TESTBED.lines().collect();
    let at = lines.iter().position(|l| *l == "  - name: leaf2").unwrap();
    lines[at + 1] = "    mgmt: {host: 127.0.0.1, port: 830, protocol: netconf, dialect: openconfig, credential: lab}";
    let yaml = lines.join("\n");
    let lab = lab(&yaml).await;
    assert_eq!(lab.dialect("leaf2"), Dialect::Openconfig);
    let baseline = intent::baseline(&lab.topo).unwrap();
    for d in &baseline.devices {
        let want = claimed(dialect(d.dialect), &d.items);
        assert!(!want.is_empty(), "{}", d.device);
        assert_eq!(
            lab.items(&d.device).await,
            want,
            "{} over its driver",
            d.device
        );
    }
    // The in-memory entry point reads the same state.
    let mem = verification::parse_configs(&lab.topo, &lab.fab.running_configs()).unwrap();
    for d in &baseline.devices {
        assert_eq!(mem[&d.device], claimed(dialect(d.dialect), &d.items));
    }
    assert!(lab.verify(&[]).await.is_empty(), "no jobs, no findings");
}

#[tokio::test]
async fn switch_configs_make_ocs_links_busy_whoever_asks() {
    let lab = lab(TESTBED).await;
    let ocs = lab.fab.ocs(OcsId(0));
    // leaf1:100GE1/0/17 is cabled to ocs1:1, patched to ocs1:33 (spine1-1:100GE1/0/1).
    lab.edit("leaf1", |s| {
        s.insert(redirect("100GE1/0/17"));
    })
    .await;
    let e = tl1(&lab, "DLT-PATCH::1&33:1;").await.unwrap_err();
    assert!(e.to_string().contains("SARB"), "{e}");
    assert!(matches!(
        ocs.disconnect(0).await,
        Err(OcsError::Busy { .. })
    ));
    // A redirect onto another uplink leaves this link idle.
    tl1(&lab, "DLT-PATCH::2&34:1;")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    lab.edit("leaf1", |s| {
        s.retain(|i| !matches!(i, Item::Redirect { .. }));
    })
    .await;
    tl1(&lab, "DLT-PATCH::1&33:1;")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    ocs.connect(0, 32).await.unwrap();

    // spine1-1:100GE1/0/1 (ocs1:33) bound to a job VRF.
    let vrf = intent::VrfName::new("Vrf-t-1").unwrap();
    let bind = |s: &mut BTreeSet<Item>, on: bool| {
        if on {
            s.insert(Item::Vrf { name: vrf.clone() });
        } else {
            s.retain(|i| !matches!(i, Item::Vrf { .. }));
        }
        set_vrf(s, "100GE1/0/1", on.then(|| vrf.clone()));
    };
    lab.edit("spine1", |s| bind(s, true)).await;
    let e = tl1(&lab, "DLT-PATCH::1&33:1;").await.unwrap_err();
    assert!(e.to_string().contains("SARB"), "{e}");
    assert!(matches!(
        ocs.disconnect(32).await,
        Err(OcsError::Busy { .. })
    ));
    lab.edit("spine1", |s| bind(s, false)).await;
    tl1(&lab, "DLT-PATCH::1&33:1;")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ocs.partner(32), None);
}

/// Jobs a and b on spine1's logical spines; spine2's are free.
fn jobs(t: &Topology) -> Vec<Decision> {
    vec![
        sample::vclos_decision(
            t,
            "a",
            &["srv1", "srv5"],
            &["spine1-1", "spine1-2", "spine1-3", "spine1-4"],
        )
        .unwrap(),
        sample::vclos_decision(
            t,
            "b",
            &["srv2", "srv6"],
            &["spine1-5", "spine1-6", "spine1-7", "spine1-8"],
        )
        .unwrap(),
    ]
}

#[tokio::test]
async fn configs_broken_on_the_devices_are_caught() {
    let lab = lab(TESTBED).await;
    let held = jobs(&lab.topo);
    lab.install(&held).await;
    let r = lab.verify(&held).await;
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(Report::ok), "{}", violations(&r));

    // 1. A swapped redirect on the leaf CLI: job a's GPU on leaf1 port 1 now
    //    leaves by job b's uplink toward spine1-5.
    let good = lab.items("leaf1").await;
    lab.edit("leaf1", |s| {
        let old = s
            .iter()
            .find(|i| matches!(i, Item::Redirect { job, port, .. } if job.as_str() == "a" && port.as_str() == "100GE1/0/1"))
            .cloned()
            .unwrap();
        let Item::Redirect { job, index, port, destinations, .. } = old.clone() else {
            unreachable!()
        };
        s.remove(&old);
        s.insert(Item::Redirect { job, index, port, uplink: self::port("100GE1/0/21"), destinations });
    })
    .await;
    let v = violations(&lab.verify(&held).await);
    assert!(
        v.contains("a: srv1/gpu0 -> srv5/gpu0 leaves the job's virtual Clos at leaf1:100GE1/0/21"),
        "{v}"
    );
    assert!(
        v.contains("a: link out of leaf1:100GE1/0/21 is shared with job b"),
        "{v}"
    );
    lab.push("leaf1", &lab.items("leaf1").await, &good)
        .await
        .unwrap();
    assert!(lab.verify(&held).await.iter().all(Report::ok));

    // 2. A VRF binding another job's port on the spine CLI: spine1-5's port
    //    toward leaf2 (job b's) is bound into job a's VRF of spine1-1.
    let good = lab.items("spine1").await;
    lab.edit("spine1", |s| {
        set_vrf(
            s,
            "100GE1/0/10",
            Some(intent::VrfName::new("Vrf-a-1").unwrap()),
        )
    })
    .await;
    let v = violations(&lab.verify(&held).await);
    assert!(
        v.contains("b: srv2/gpu0 -> srv6/gpu0 unreachable: VRF Vrf-b-5 routes leaf leaf2 out of spine1-5:100GE1/0/10, which is not bound to it"),
        "{v}"
    );
    lab.push("spine1", &lab.items("spine1").await, &good)
        .await
        .unwrap();
    assert!(lab.verify(&held).await.iter().all(Report::ok));

    // 3. An OCS patch to the wrong spine over TL1. A live link cannot be
    //    moved (its switch ports steer traffic onto it), so the fault is
    //    made as a faulty install would: job c's link from leaf1 toward
    //    spine2-1 (ocs1:9~41) is patched to spine2-5 (ocs1:45) while idle,
    //    then c's switch configs go in.
    let c = sample::vclos_decision(
        &lab.topo,
        "c",
        &["srv3", "srv7"],
        &["spine2-1", "spine2-2", "spine2-3", "spine2-4"],
    )
    .unwrap();
    tl1(
        &lab,
        "DLT-PATCH::9&41:1;\nDLT-PATCH::13&45:2;\nENT-PATCH::9,45:3;",
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let mut all = held.clone();
    all.push(c);
    // Switch configs only: the OCS keeps the faulty table.
    let want = intent::build(&lab.topo, &all).unwrap();
    for d in want.devices.iter().filter(|d| d.dialect != Dialect::Tl1) {
        let have = lab.items(&d.device).await;
        lab.push(&d.device, &have, &claimed(dialect(d.dialect), &d.items))
            .await
            .unwrap();
    }
    let r = lab.verify(&all).await;
    let v = violations(&r);
    assert!(
        v.contains("c: srv3/gpu0 -> srv7/gpu0 unreachable: spine2-5:100GE1/0/9 is bound to no VRF"),
        "{v}"
    );
    assert!(r[0].ok() && r[1].ok(), "jobs a and b are unaffected: {v}");
    // Now live, the wrong patch cannot be moved back.
    let e = tl1(&lab, "DLT-PATCH::9&45:1;").await.unwrap_err();
    assert!(e.to_string().contains("SARB"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vclos_verify_reads_the_devices_and_exits_nonzero_on_violations() {
    let lab = lab(TESTBED).await;
    let held = jobs(&lab.topo);
    lab.install(&held).await;
    let topo_file = lab.dir.path().join("emu.yaml");
    std::fs::write(&topo_file, &lab.yaml).unwrap();
    let state = lab.dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    vclos::state::store::save(&state, &lab.topo.name, &held).unwrap();
    let run = |json: bool, topo: std::path::PathBuf| {
        let state = state.clone();
        async move {
            let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_vclos"));
            cmd.arg("verify")
                .arg("--topology")
                .arg(&topo)
                .arg("--state")
                .arg(&state);
            if json {
                cmd.arg("--json");
            }
            let out = cmd.env(PW, "admin").output().await.unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        }
    };
    let (code, out, err) = run(false, topo_file.clone()).await;
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("a: OK (56 flows)") && out.contains("b: OK (56 flows)"),
        "{out}"
    );

    // Break job b's VRF binding on the device; the JSON names the port.
    lab.edit("spine1", |s| set_vrf(s, "100GE1/0/10", None))
        .await;
    let (code, out, err) = run(true, topo_file.clone()).await;
    assert_eq!(code, Some(1), "{out}{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["ok"], false);
    assert_eq!(j["devices"], 5);
    assert_eq!(j["reports"][0]["violations"].as_array().unwrap().len(), 0);
    let vb = j["reports"][1]["violations"].to_string();
    assert!(vb.contains("spine1-5:100GE1/0/10"), "{vb}");

    // A device that cannot be read is an error naming it.
    let dead = lab.yaml.replace(
        &format!("port: {}", lab.fab.endpoints()["leaf2"].port),
        "port: 1",
    );
    let dead_file = lab.dir.path().join("dead.yaml");
    std::fs::write(&dead_file, dead).unwrap();
    let (code, out, err) = run(false, dead_file).await;
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("error: leaf2: cannot read the running configuration"),
        "{err}"
    );
    assert!(err.contains("1 of 5 devices could not be read"), "{err}");
}
