//! The emulated testbed-ocs (or testbed-sonic) fabric with a topology aimed
//! at it, shared by the lifecycle integration tests.
#![allow(clippy::unwrap_used, dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use vclos::controller::{ApplyOptions, NoProgress};
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::jobs::Fabric;
use vclos::topology::{self, Topology};

pub mod hook;

pub const TESTBED: &str = include_str!("../../topologies/testbed-ocs.yaml");
pub const SONIC: &str = include_str!("../../topologies/testbed-sonic.yaml");
pub const PASSWORD_VAR: &str = "VCLOS_TEST_LIFECYCLE_PW";

/// A running emulated fabric and a topology aimed at it.
pub struct Emu {
    pub fab: EmulatedFabric,
    pub topo: Arc<Topology>,
    pub dir: tempfile::TempDir,
}

pub async fn emu(switch_delay: Duration) -> Emu {
    emu_on(TESTBED, switch_delay).await
}

/// The emulated fabric of the topology file `text`.
pub async fn emu_on(text: &str, switch_delay: Duration) -> Emu {
    let opts = FabricOptions {
        switch_delay,
        ..FabricOptions::default()
    };
    emu_with(text, opts).await
}

/// The emulated fabric of the topology file `text`, served with `opts`.
pub async fn emu_with(text: &str, opts: FabricOptions) -> Emu {
    std::env::set_var(PASSWORD_VAR, "admin");
    let dir = tempfile::tempdir().unwrap();
    let base = Arc::new(topology::from_str("t.yaml", text).unwrap());
    let fab = EmulatedFabric::start(base, opts).await.unwrap();
    let text = fab
        .aim("t", text, &dir.path().join("known_hosts"), PASSWORD_VAR)
        .unwrap();
    std::fs::write(dir.path().join("emu.yaml"), &text).unwrap();
    let topo = Arc::new(topology::from_str("emu.yaml", &text).unwrap());
    vclos::state::store::init(&dir.path().join("state"), &topo.name).unwrap();
    Emu { fab, topo, dir }
}

impl Emu {
    pub fn state_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("state")
    }

    /// A fabric on the state directory with short timeouts, devices brought
    /// to the (empty) state's intent first.
    pub async fn fabric(&self) -> Fabric {
        let mut f = Fabric::load(self.topo.clone(), self.state_dir())
            .unwrap()
            .with_options(options());
        f.read_timeout = Duration::from_secs(5);
        let r = f.reconcile(true, &NoProgress).await.unwrap();
        if let Some(fix) = &r.fix {
            assert!(fix.is_committed(), "{fix}");
        }
        f
    }

    /// Every device's full running configuration, read through its driver.
    pub async fn configs(&self, f: &Fabric) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for d in &self.topo.devices {
            out.insert(d.name.clone(), f.device_config(&d.name).await.unwrap());
        }
        out
    }

    /// Successful logins so far, per device.
    pub fn logins(&self) -> BTreeMap<String, u64> {
        self.topo
            .devices
            .iter()
            .map(|d| (d.name.clone(), self.fab.faults(&d.name).unwrap().logins()))
            .collect()
    }

    /// Release `job` on `f`, whose pooled sessions every device has closed
    /// since `before` (logins then): each device the release touches (the
    /// OCS among them) is logged in to once more, no other is, the pool
    /// counts one reconnect per touched device, and the fabric ends as the
    /// state says.
    pub async fn release_reconnecting(
        &self,
        f: &mut Fabric,
        job: &vclos::names::JobId,
        before: &BTreeMap<String, u64>,
    ) {
        let reconnected = f.sessions().unwrap().stats().reconnected;
        let r = f.release(job, &NoProgress).await.unwrap();
        assert!(r.report.is_committed(), "{}", r.report);
        // The devices changed, and the switches the foreign-steering check
        // reads before them.
        let mut touched: Vec<String> = r
            .plan
            .devices
            .iter()
            .map(|d| d.diff.device.clone())
            .collect();
        touched.extend(vclos::jobs::foreign::touched(&self.topo, &r.plan.devices).into_keys());
        touched.sort();
        touched.dedup();
        assert!(touched.contains(&"ocs1".to_string()), "{touched:?}");
        for (d, n) in &self.logins() {
            let want = before[d] + u64::from(touched.contains(d));
            assert_eq!(*n, want, "{d}: one reconnect if touched, none otherwise");
        }
        let s = f.sessions().unwrap().stats();
        assert_eq!(
            (s.reconnected - reconnected) as usize,
            touched.len(),
            "{s:?}"
        );
        let rec = f.reconcile(false, &NoProgress).await.unwrap();
        assert!(
            rec.drift.is_empty() && rec.unreachable.is_empty(),
            "{rec:?}"
        );
    }

    /// state.json bytes (empty when absent).
    pub fn state_bytes(&self) -> Vec<u8> {
        std::fs::read(self.state_dir().join("state.json")).unwrap_or_default()
    }
}

pub fn options() -> ApplyOptions {
    ApplyOptions {
        step_timeout: Duration::from_secs(3),
        ..ApplyOptions::default()
    }
}

impl Emu {
    /// Real drivers with short transport timeouts.
    pub fn drivers(&self) -> vclos::controller::TopologyDrivers {
        let mut d = vclos::controller::TopologyDrivers::new(self.topo.clone());
        d.command_timeout = Duration::from_millis(400);
        d.connect_timeout = Duration::from_secs(2);
        d
    }

    /// A fabric on the state directory using `factory` (no reconcile).
    pub fn fabric_with(&self, factory: Arc<dyn vclos::controller::DriverFactory>) -> Fabric {
        let mut f = Fabric::load_with(self.topo.clone(), self.state_dir(), factory)
            .unwrap()
            .with_options(options());
        f.read_timeout = Duration::from_secs(5);
        f
    }
}
