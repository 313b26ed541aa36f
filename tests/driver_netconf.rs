//! The NETCONF driver against the emulated NETCONF device over loopback SSH.
#![allow(clippy::unwrap_used)]

mod netconf_emu;

use std::sync::Arc;
use std::time::Duration;

use vclos::emulator::netconf::NetconfDevice;
use vclos::emulator::ssh::SshServer;
use vclos_drivers::netconf::NetconfDriver;
use vclos_drivers::ssh::{HostKeyCheck, Password, SshOptions};
use vclos_drivers::{Driver, ErrorKind, LoadMode, Step};

async fn start() -> (Arc<NetconfDevice>, SshServer) {
    netconf_emu::start("SPINE1").await
}

fn driver(srv: &SshServer) -> NetconfDriver {
    NetconfDriver::new("SPINE1", netconf_emu::options(srv, Duration::from_secs(5)))
}

fn vrf(name: &str) -> String {
    // The identity prefixed and declared, as openconfig-network-instance
    // requires (an unprefixed `L3VRF` is refused when the emulator has the
    // models).
    format!(
        r#"<config><network-instances xmlns="http://openconfig.net/yang/network-instance"><network-instance><name>{name}</name><config><name>{name}</name><type xmlns:oc-ni-types="http://openconfig.net/yang/network-instance-types">oc-ni-types:L3VRF</type></config></network-instance></network-instances></config>"#
    )
}

#[tokio::test]
async fn merge_delete_commit_and_get_config() {
    let (dev, srv) = start().await;
    let mut d = driver(&srv);
    d.open().await.unwrap();
    assert!(d.capabilities().commit_confirm);
    d.load_candidate(&vrf("JOB7"), LoadMode::Merge)
        .await
        .unwrap();
    let diff = d.compare_config().await.unwrap();
    assert!(
        diff.contains("+      <name>JOB7</name>") || diff.contains("+    <name>JOB7</name>"),
        "{diff}"
    );
    d.commit(None).await.unwrap();
    d.load_candidate(&vrf("JOB8"), LoadMode::Merge)
        .await
        .unwrap();
    d.commit(None).await.unwrap();
    let run = d.get_config().await.unwrap();
    assert!(run.contains("JOB7") && run.contains("JOB8"));
    let del = r#"<config xmlns:nc="urn:ietf:params:xml:ns:netconf:base:1.0"><network-instances xmlns="http://openconfig.net/yang/network-instance"><network-instance nc:operation="delete"><name>JOB7</name></network-instance></network-instances></config>"#;
    d.load_candidate(del, LoadMode::Merge).await.unwrap();
    d.commit(None).await.unwrap();
    let run = d.get_config().await.unwrap();
    assert!(!run.contains("JOB7") && run.contains("JOB8"), "{run}");
    assert_eq!(dev.running().children[0].children.len(), 1);
    // Driver rollback restores the checkpoint taken before its last commit.
    d.rollback(None).await.unwrap();
    assert!(d.get_config().await.unwrap().contains("JOB7"));
    d.close().await.unwrap();
}

#[tokio::test]
async fn lock_denied_names_the_holder_session() {
    let (_dev, srv) = start().await;
    let mut a = driver(&srv);
    let mut b = driver(&srv);
    a.open().await.unwrap();
    b.open().await.unwrap();
    a.load_candidate(&vrf("JOB7"), LoadMode::Merge)
        .await
        .unwrap();
    let e = b
        .load_candidate(&vrf("JOB8"), LoadMode::Merge)
        .await
        .unwrap_err();
    assert_eq!(e.step, Step::Load);
    assert_eq!(
        e.kind,
        ErrorKind::Locked(format!("session {}", a.session_id().unwrap()))
    );
    a.discard().await.unwrap();
    b.load_candidate(&vrf("JOB8"), LoadMode::Merge)
        .await
        .unwrap();
}

#[tokio::test]
async fn validate_failure_is_rejected_and_discarded() {
    let (dev, srv) = start().await;
    let mut d = driver(&srv);
    d.open().await.unwrap();
    let bad = vrf("JOB7").replacen("<config><name>JOB7</name>", "<config><name>OTHER</name>", 1);
    let e = d.load_candidate(&bad, LoadMode::Merge).await.unwrap_err();
    let ErrorKind::Rejected(m) = &e.kind else {
        panic!("{e}")
    };
    assert!(m.starts_with("invalid-value"), "{m}");
    assert!(dev.state().candidate.children.is_empty(), "discarded");
    assert_eq!(dev.state().lock_candidate, None, "unlocked");
}

#[tokio::test]
async fn confirmed_commit_reverts_unless_confirmed() {
    let (dev, srv) = start().await;
    let mut d = driver(&srv);
    d.open().await.unwrap();
    d.load_candidate(&vrf("JOB7"), LoadMode::Merge)
        .await
        .unwrap();
    d.commit(Some(Duration::from_secs(1))).await.unwrap();
    assert_eq!(dev.running().children.len(), 1);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        dev.running().children.is_empty(),
        "reverted after the timeout"
    );
    d.close().await.unwrap();
    // Confirmed in time: stays.
    let mut d = driver(&srv);
    d.open().await.unwrap();
    d.load_candidate(&vrf("JOB7"), LoadMode::Merge)
        .await
        .unwrap();
    d.commit(Some(Duration::from_secs(1))).await.unwrap();
    d.confirm().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(dev.running().children.len(), 1);
    // rollback() during a pending confirmed commit is cancel-commit.
    d.load_candidate(&vrf("JOB8"), LoadMode::Merge)
        .await
        .unwrap();
    d.commit(Some(Duration::from_secs(60))).await.unwrap();
    assert_eq!(dev.running().children[0].children.len(), 2);
    d.rollback(None).await.unwrap();
    assert_eq!(dev.running().children[0].children.len(), 1);
}

#[tokio::test]
async fn malformed_xml_gets_rpc_error_and_session_survives() {
    let (_dev, srv) = start().await;
    let mut d = driver(&srv);
    d.open().await.unwrap();
    let e = d
        .rpc(
            Step::GetConfig,
            "<get-config><source><running/></get-config>",
        )
        .await
        .unwrap_err();
    let ErrorKind::Rejected(m) = &e.kind else {
        panic!("{e}")
    };
    assert!(m.starts_with("malformed-message"), "{m}");
    // The session and the device keep serving.
    d.get_config().await.unwrap();
    let mut d2 = driver(&srv);
    d2.open().await.unwrap();
    d2.get_config().await.unwrap();
}

#[tokio::test]
async fn faults_refuse_drop_and_delay() {
    let (dev, srv) = start().await;
    let mut d = driver(&srv);
    d.open().await.unwrap();
    d.load_candidate(&vrf("JOB7"), LoadMode::Merge)
        .await
        .unwrap();
    dev.faults().refuse_commits(true);
    let e = d.commit(None).await.unwrap_err();
    assert_eq!((e.device.as_str(), e.step), ("SPINE1", Step::Commit));
    assert!(matches!(e.kind, ErrorKind::Rejected(_)));
    dev.faults().clear();
    dev.faults().drop_next();
    let e = d.commit(None).await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
    assert!(dev.running().children.is_empty());
    dev.faults().clear();
    let mut short = {
        let mut x = SshOptions::new(
            "127.0.0.1",
            srv.local_addr().port(),
            "admin",
            Password::new("admin"),
            HostKeyCheck::InsecureAcceptAny,
        );
        x.command_timeout = Duration::from_millis(300);
        NetconfDriver::new("SPINE1", x)
    };
    dev.faults().clear();
    short.open().await.unwrap();
    dev.faults().delay_replies(Duration::from_secs(2));
    let e = short.get_config().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Timeout(Duration::from_millis(300)));
}

/// A sub-interface through the real driver: the dialect's changes applied
/// one edit-config each, committed, read back with get-config, parse back
/// to the intent; then job b's part removed again.
#[tokio::test]
async fn subinterface_changes_round_trip_through_the_driver() {
    use vclos::dialect::dialect;
    use vclos::topology::Dialect;
    let (_dev, srv) = start().await;
    let mut d = driver(&srv);
    d.open().await.unwrap();
    let oc = dialect(Dialect::Openconfig);
    let spine = netconf_emu::shared_spine();
    let mut a_only = spine.clone();
    a_only.retain(|i| !i.to_string().contains("Vrf-b-1") && !i.to_string().contains(".101"));
    let none = std::collections::BTreeSet::new();
    for (from, to) in [(&none, &spine), (&spine, &a_only), (&a_only, &spine)] {
        for c in oc.changes(from, to) {
            d.load_candidate(&c, LoadMode::Merge).await.unwrap();
        }
        d.commit(None).await.unwrap();
        let back = oc.parse("SPINE1", &d.get_config().await.unwrap()).unwrap();
        assert_eq!(&back, to);
    }
    d.close().await.unwrap();
}
