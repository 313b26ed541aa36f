//! Real drivers made from a topology reach every device of the emulated
//! fabric: SSH CLI (host keys verified), NETCONF and Telnet/TL1.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use vclos::controller::{DriverFactory, TopologyDrivers};
use vclos::emulator::fabric::{EmulatedFabric, FabricOptions};
use vclos::topology;
use vclos_drivers::ErrorKind;

const TESTBED: &str = include_str!("../topologies/testbed-ocs.yaml");

/// Start the fabric and return it with a topology aimed at it, whose
/// password variable is `var`.
async fn fabric(var: &str, dir: &tempfile::TempDir) -> (EmulatedFabric, Arc<topology::Topology>) {
    let topo = Arc::new(topology::from_str("testbed-ocs.yaml", TESTBED).unwrap());
    let fab = EmulatedFabric::start(topo, FabricOptions::default())
        .await
        .unwrap();
    let text = fab
        .aim("t", TESTBED, &dir.path().join("known_hosts"), var)
        .unwrap();
    (
        fab,
        Arc::new(topology::from_str("emu.yaml", &text).unwrap()),
    )
}

#[tokio::test]
async fn every_device_answers_get_config_through_its_real_driver() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("VCLOS_TEST_FACTORY_PW", "admin");
    let (_fab, topo) = fabric("VCLOS_TEST_FACTORY_PW", &dir).await;
    let drivers = TopologyDrivers::new(topo.clone());
    for d in &topo.devices {
        let mut drv = drivers.driver(&d.name).unwrap();
        drv.open().await.unwrap_or_else(|e| panic!("{e}"));
        let cfg = drv.get_config().await.unwrap();
        match d.role {
            topology::Role::Ocs => assert!(cfg.contains("\"1,33\""), "{cfg}"),
            _ => assert!(cfg.contains(&format!("sysname {}", d.name)), "{cfg}"),
        }
        drv.close().await.unwrap();
    }
}

#[tokio::test]
async fn missing_secret_and_unknown_host_key_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (_fab, topo) = fabric("VCLOS_TEST_FACTORY_UNSET", &dir).await;
    let drivers = TopologyDrivers::new(topo.clone());
    let e = drivers.driver("leaf1").err().unwrap();
    assert_eq!(e.device, "leaf1");
    assert!(
        e.to_string()
            .contains("environment variable VCLOS_TEST_FACTORY_UNSET is not set"),
        "{e}"
    );

    std::env::set_var("VCLOS_TEST_FACTORY_PW2", "admin");
    let (_fab2, topo2) = fabric("VCLOS_TEST_FACTORY_PW2", &dir).await;
    // Keys of another fabric instance: the host key no longer matches.
    std::fs::write(
        dir.path().join("known_hosts"),
        _fab.known_hosts().replace(
            &_fab.endpoints()["leaf1"].port.to_string(),
            &_fab2.endpoints()["leaf1"].port.to_string(),
        ),
    )
    .unwrap();
    let mut drv = TopologyDrivers::new(topo2).driver("leaf1").unwrap();
    let e = drv.open().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::HostKey(_)), "{e}");
}
