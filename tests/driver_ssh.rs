//! The Huawei CE driver against the emulated switch over real loopback SSH.
#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use vclos::emulator::cli::SwitchDevice;
use vclos::emulator::faults::Faults;
use vclos::emulator::ssh::{serve, Login, Service, SshServer};
use vclos::emulator::vrp::VrpConfig;
use vclos_drivers::huawei_ce::HuaweiCeDriver;
use vclos_drivers::ssh::{HostKeyCheck, Password, SshOptions};
use vclos_drivers::{CommitId, Driver, ErrorKind, LoadMode, Step};

async fn start() -> (Arc<SwitchDevice>, SshServer) {
    let dev = SwitchDevice::new("LEAF1", VrpConfig::new("LEAF1"), Arc::new(Faults::new()));
    let srv = serve(Service::Cli(dev.clone()), Login::default())
        .await
        .unwrap();
    (dev, srv)
}

fn known_hosts(lines: &[String]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    f
}

fn opts(srv: &SshServer, check: HostKeyCheck, password: &str) -> SshOptions {
    let mut o = SshOptions::new(
        "127.0.0.1",
        srv.local_addr().port(),
        "admin",
        Password::new(password),
        check,
    );
    o.command_timeout = Duration::from_secs(5);
    o.connect_timeout = Duration::from_secs(5);
    o.connect_retries = 0;
    o
}

const INTENT: &str = "\
acl number 3001
 rule 5 permit ip source 10.1.0.0 0.0.255.255
traffic policy P1
interface 100GE1/0/1
 traffic-policy P1 inbound
";

#[tokio::test]
async fn load_compare_commit_rollback_discard_end_to_end() {
    let (dev, srv) = start().await;
    let kh = known_hosts(&[srv.known_hosts_line()]);
    let mut d = HuaweiCeDriver::new(
        "LEAF1",
        opts(&srv, HostKeyCheck::KnownHosts(kh.path().into()), "admin"),
    );
    d.open().await.unwrap();
    let before = d.get_config().await.unwrap();
    assert!(before.contains("sysname LEAF1"));
    d.load_candidate(INTENT, LoadMode::Merge).await.unwrap();
    let diff = d.compare_config().await.unwrap();
    assert!(
        diff.contains("+acl number 3001") && diff.contains("+ traffic-policy P1 inbound"),
        "{diff}"
    );
    // Not yet running.
    assert!(!dev.running_config().render().contains("acl"));
    let id = d.commit(None).await.unwrap();
    assert_eq!(id, CommitId("1000000001".into()));
    let after = d.get_config().await.unwrap();
    assert!(after.contains("acl number 3001\n rule 5 permit"), "{after}");
    assert_eq!(after, dev.running_config().render());
    // A second change, then roll back the last commit.
    d.load_candidate("interface 100GE1/0/1\n description x\n", LoadMode::Merge)
        .await
        .unwrap();
    d.commit(None).await.unwrap();
    d.rollback(None).await.unwrap();
    let cur = dev.running_config().render();
    assert!(cur.contains("acl number 3001") && !cur.contains("description x"));
    // Undo a commit by id: running as it was before it. An older commit
    // point is never undone behind a later commit's back.
    d.load_candidate("interface 100GE1/0/2\n", LoadMode::Merge)
        .await
        .unwrap();
    let third = d.commit(None).await.unwrap();
    assert!(d.rollback(Some(&id)).await.is_err());
    d.rollback(Some(&third)).await.unwrap();
    assert_eq!(dev.running_config().render(), after);
    // Discard leaves running alone.
    d.load_candidate("interface 100GE1/0/3\n description y\n", LoadMode::Merge)
        .await
        .unwrap();
    d.discard().await.unwrap();
    assert_eq!(d.compare_config().await.unwrap(), "");
    assert_eq!(dev.running_config().render(), after);
    d.close().await.unwrap();
}

#[tokio::test]
async fn load_errors_clear_the_candidate_and_name_the_line() {
    let (_dev, srv) = start().await;
    let mut d = HuaweiCeDriver::new(
        "LEAF1",
        opts(&srv, HostKeyCheck::InsecureAcceptAny, "admin"),
    );
    d.open().await.unwrap();
    let e = d
        .load_candidate("interface 100GE1/0/1\n frobnicate\n", LoadMode::Merge)
        .await
        .unwrap_err();
    assert_eq!((e.device.as_str(), e.step), ("LEAF1", Step::Load));
    let ErrorKind::Rejected(msg) = &e.kind else {
        panic!("{e}")
    };
    assert!(
        msg.contains("line 2") && msg.contains("Unrecognized command"),
        "{msg}"
    );
    assert_eq!(d.compare_config().await.unwrap(), "");
    // Loaded in batches: a long candidate whose error sits in the second
    // batch is named by its own line, and nothing of it stays behind.
    let mut long = String::new();
    for p in 1..=130 {
        long.push_str(&format!("interface 100GE1/0/{p}\n description d{p}\n"));
    }
    long.push_str(" frobnicate\ninterface 100GE1/0/131\n description d131\n");
    let e = d.load_candidate(&long, LoadMode::Merge).await.unwrap_err();
    assert!(e.to_string().contains("line 261 `frobnicate`"), "{e}");
    assert_eq!(d.compare_config().await.unwrap(), "");
    long.truncate(long.find(" frobnicate").unwrap());
    d.load_candidate(&long, LoadMode::Merge).await.unwrap();
    let diff = d.compare_config().await.unwrap();
    assert!(
        diff.contains("+ description d1\n") && diff.contains("+ description d130\n"),
        "{diff}"
    );
    d.discard().await.unwrap();
    // Lines that would leave the candidate are refused before sending.
    let e = d
        .load_candidate("commit\n", LoadMode::Merge)
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Rejected(_)));
    let e = d.load_candidate("x", LoadMode::Replace).await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Unsupported(_)));
}

#[tokio::test]
async fn host_key_and_password_are_checked() {
    let (_dev, srv) = start().await;
    let (_dev2, other) = start().await;
    // A known_hosts entry for this address but holding another server's key.
    let wrong = format!(
        "[127.0.0.1]:{} {}",
        srv.local_addr().port(),
        other.host_key_openssh()
    );
    let kh = known_hosts(&[wrong]);
    let mut d = HuaweiCeDriver::new(
        "LEAF1",
        opts(&srv, HostKeyCheck::KnownHosts(kh.path().into()), "admin"),
    );
    let e = d.open().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::HostKey(_)), "{e}");
    assert_eq!(e.step, Step::Open);
    // No entry at all.
    let empty = known_hosts(&[other.known_hosts_line()]);
    let mut d = HuaweiCeDriver::new(
        "LEAF1",
        opts(&srv, HostKeyCheck::KnownHosts(empty.path().into()), "admin"),
    );
    assert!(matches!(
        d.open().await.unwrap_err().kind,
        ErrorKind::HostKey(_)
    ));
    // Verification disabled.
    let mut d = HuaweiCeDriver::new(
        "LEAF1",
        opts(&srv, HostKeyCheck::InsecureAcceptAny, "admin"),
    );
    d.open().await.unwrap();
    // Wrong password.
    let mut d = HuaweiCeDriver::new("LEAF1", opts(&srv, HostKeyCheck::InsecureAcceptAny, "nope"));
    let e = d.open().await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert!(!e.to_string().contains("nope"));
}

#[tokio::test]
async fn faults_surface_as_driver_errors_naming_device_and_step() {
    let (dev, srv) = start().await;
    let mut d = HuaweiCeDriver::new(
        "LEAF1",
        opts(&srv, HostKeyCheck::InsecureAcceptAny, "admin"),
    );
    d.open().await.unwrap();
    d.load_candidate("interface 100GE1/0/1\n description x\n", LoadMode::Merge)
        .await
        .unwrap();
    // Refused commit: error, candidate kept.
    dev.faults().refuse_commits(true);
    let e = d.commit(None).await.unwrap_err();
    assert_eq!((e.device.as_str(), e.step), ("LEAF1", Step::Commit));
    assert!(matches!(e.kind, ErrorKind::Rejected(_)), "{e}");
    assert!(d.compare_config().await.unwrap().contains("description x"));
    dev.faults().clear();
    // Dropped mid-commit.
    dev.faults().drop_next();
    let e = d.commit(None).await.unwrap_err();
    assert_eq!(e.step, Step::Commit);
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
    assert!(e.to_string().starts_with("LEAF1: commit: "));
    assert!(dev.commits().is_empty());
    // Slow device: the command timeout fires.
    let mut o = opts(&srv, HostKeyCheck::InsecureAcceptAny, "admin");
    o.command_timeout = Duration::from_millis(300);
    let mut d = HuaweiCeDriver::new("LEAF1", o);
    d.open().await.unwrap();
    dev.faults().delay_replies(Duration::from_secs(2));
    let e = d.get_config().await.unwrap_err();
    assert_eq!(e.step, Step::GetConfig);
    assert_eq!(e.kind, ErrorKind::Timeout(Duration::from_millis(300)));
}

#[tokio::test]
async fn reuse_returns_to_user_view_and_refuses_uncommitted_edits() {
    let (dev, srv) = start().await;
    let kh = known_hosts(&[srv.known_hosts_line()]);
    let mut d = HuaweiCeDriver::new(
        "LEAF1",
        opts(&srv, HostKeyCheck::KnownHosts(kh.path().into()), "admin"),
    );
    let e = d.reuse().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
    assert_eq!(dev.faults().logins(), 0, "reuse never connects");
    d.open().await.unwrap();
    d.reuse().await.unwrap();
    // A committed change leaves the shell in system view; reuse leaves it
    // where a fresh session starts, and the next transaction works as one.
    d.load_candidate(INTENT, LoadMode::Merge).await.unwrap();
    d.commit(None).await.unwrap();
    d.reuse().await.unwrap();
    d.load_candidate("interface 100GE1/0/2\n description y\n", LoadMode::Merge)
        .await
        .unwrap();
    // Uncommitted edits: not reusable, and reuse does not touch them.
    let e = d.reuse().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Rejected(_)), "{e}");
    assert!(d.compare_config().await.unwrap().contains("description y"));
    d.commit(None).await.unwrap();
    assert!(dev.running_config().render().contains("description y"));
    assert_eq!(dev.faults().logins(), 1, "one login for everything");
    // The device closes its sessions: reuse says so.
    dev.faults().disconnect_all();
    let e = d.reuse().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
}
