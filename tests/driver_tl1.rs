//! `Tl1Driver` against the emulated OCS over loopback Telnet: the NAPALM-style
//! contract end to end, and every injected fault surfacing as a DriverError
//! that names the device and the step.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use vclos::emulator::busy::StaticBusy;
use vclos::emulator::faults::Faults;
use vclos::emulator::ocs::OcsModel;
use vclos::emulator::tl1::{self, Login, Tl1Options, Tl1Server};
use vclos::topology::{DeviceId, Ocs, OcsId};
use vclos_drivers::telnet::TelnetConfig;
use vclos_drivers::tl1::{Tl1Config, Tl1Driver};
use vclos_drivers::{Driver, ErrorKind, LoadMode, Step};

const PASSWORD: &str = "s3cret-pw";

struct Rig {
    server: Tl1Server,
    model: Arc<OcsModel>,
    faults: Arc<Faults>,
    busy: Arc<StaticBusy>,
}

/// Eight ports "1".."8"; patches 1~5 and 2~6; 5 ms switching.
async fn rig() -> Rig {
    let ocs = Ocs {
        name: "ocs1".into(),
        device: DeviceId(0),
        ports: (1..=8).map(|i| i.to_string().into()).collect(),
        port_peer: vec![None; 8],
        patches: vec![(0, 4), (1, 5)],
    };
    let busy = Arc::new(StaticBusy::new());
    let model = Arc::new(
        OcsModel::new(OcsId(0), &ocs, busy.clone()).with_switching_delay(Duration::from_millis(5)),
    );
    let faults = Arc::new(Faults::new());
    let opts = Tl1Options {
        faults: faults.clone(),
        ..Tl1Options::new(Login {
            username: "admin".into(),
            password: PASSWORD.into(),
        })
    };
    let server = tl1::serve(model.clone(), opts).await.unwrap();
    Rig {
        server,
        model,
        faults,
        busy,
    }
}

fn driver(rig: &Rig, password: &str, command_timeout: Duration) -> Tl1Driver {
    let addr = rig.server.local_addr();
    Tl1Driver::new(
        "ocs1",
        Tl1Config {
            host: addr.ip().to_string(),
            port: addr.port(),
            username: "admin".into(),
            password: password.into(),
            telnet: TelnetConfig {
                command_timeout,
                connect_timeout: Duration::from_secs(2),
                connect_attempts: 2,
                retry_backoff: Duration::from_millis(10),
                ..TelnetConfig::default()
            },
        },
    )
}

const INITIAL: &str = "\"1,5\"\n\"2,6\"\n";

#[tokio::test]
async fn merge_commit_and_rollback_end_to_end() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_secs(5));
    d.open().await.unwrap();
    assert_eq!(d.get_config().await.unwrap(), INITIAL);

    // Given ENT before DLT; the driver frees the port first.
    d.load_candidate("ENT-PATCH::1,3:;\nDLT-PATCH::1:;\n", LoadMode::Merge)
        .await
        .unwrap();
    assert_eq!(
        rig.model.patches(),
        vec![(0, 4), (1, 5)],
        "load does not touch the device"
    );
    assert_eq!(
        d.compare_config().await.unwrap(),
        "DLT-PATCH::1:;\nENT-PATCH::1,3:;\n"
    );

    let id = d.commit(None).await.unwrap();
    assert_eq!(rig.model.patches(), vec![(0, 2), (1, 5)]);
    assert_eq!(d.get_config().await.unwrap(), "\"1,3\"\n\"2,6\"\n");
    assert_eq!(
        d.compare_config().await.unwrap(),
        "",
        "commit consumed the candidate"
    );

    d.rollback(Some(&id)).await.unwrap();
    assert_eq!(rig.model.patches(), vec![(0, 4), (1, 5)]);
    assert_eq!(d.get_config().await.unwrap(), INITIAL);
    d.close().await.unwrap();
}

#[tokio::test]
async fn replace_computes_the_difference() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_secs(5));
    // No explicit open: the first call connects and logs in.
    d.load_candidate("# wanted\n\"2,6\"\n   \"3,1\"\n7,8\n", LoadMode::Replace)
        .await
        .unwrap();
    assert_eq!(
        d.compare_config().await.unwrap(),
        "DLT-PATCH::1:;\nENT-PATCH::1,3:;\nENT-PATCH::7,8:;\n"
    );
    d.commit(None).await.unwrap();
    assert_eq!(rig.model.patches(), vec![(0, 2), (1, 5), (6, 7)]);
    // A second commit with the same intent changes nothing.
    d.load_candidate("2,6\n1,3\n7,8\n", LoadMode::Replace)
        .await
        .unwrap();
    assert_eq!(d.compare_config().await.unwrap(), "");
    d.commit(None).await.unwrap();
    d.rollback(None).await.unwrap(); // back to before the (empty) second commit
    assert_eq!(rig.model.patches(), vec![(0, 2), (1, 5), (6, 7)]);
    d.rollback(None).await.unwrap(); // and before the first
    assert_eq!(rig.model.patches(), vec![(0, 4), (1, 5)]);
    let e = d.rollback(None).await.unwrap_err();
    assert_eq!(
        (e.step, matches!(e.kind, ErrorKind::Rejected(_))),
        (Step::Rollback, true)
    );
}

#[tokio::test]
async fn bad_candidates_discard_and_unsupported_confirm() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_secs(5));
    let e = d
        .load_candidate("1,2\n2,3\n", LoadMode::Replace)
        .await
        .unwrap_err();
    assert_eq!((e.device.as_str(), e.step), ("ocs1", Step::Load));
    let e = d
        .load_candidate("RTRV-PATCH:::1;", LoadMode::Merge)
        .await
        .unwrap_err();
    assert_eq!(e.step, Step::Load);

    d.load_candidate("DLT-PATCH::ALL:;", LoadMode::Merge)
        .await
        .unwrap();
    d.discard().await.unwrap();
    assert_eq!(d.compare_config().await.unwrap(), "");
    d.commit(None).await.unwrap();
    assert_eq!(
        rig.model.patches().len(),
        2,
        "discarded candidate was not applied"
    );

    let caps = d.capabilities();
    assert!(!caps.commit_confirm && !caps.atomic && caps.rollback && caps.replace);
    let e = d.commit(Some(Duration::from_secs(60))).await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Unsupported(_)));
    assert!(matches!(
        d.confirm().await.unwrap_err().kind,
        ErrorKind::Unsupported(_)
    ));
}

#[tokio::test]
async fn wrong_password_is_an_auth_error_without_the_password() {
    let rig = rig().await;
    let mut d = driver(&rig, "not-the-password", Duration::from_secs(5));
    let e = d.open().await.unwrap_err();
    assert_eq!(
        (e.device.as_str(), e.step, e.kind.clone()),
        ("ocs1", Step::Open, ErrorKind::Auth)
    );
    assert!(!e.to_string().contains("not-the-password"));
    assert!(
        !format!("{d:?}").contains("not-the-password"),
        "Debug redacts"
    );
    // A password TL1 cannot frame is refused before anything is sent.
    let mut d = driver(&rig, "a;DLT-PATCH::ALL:1", Duration::from_secs(5));
    assert_eq!(d.open().await.unwrap_err().kind, ErrorKind::Auth);
    assert_eq!(rig.model.patches().len(), 2);
}

#[tokio::test]
async fn connect_failure_is_bounded_and_named() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_secs(5));
    drop(rig.server); // nothing listens any more
    let e = d.open().await.unwrap_err();
    assert_eq!((e.device.as_str(), e.step), ("ocs1", Step::Open));
    assert!(matches!(e.kind, ErrorKind::Connect(_)), "{e}");
}

#[tokio::test]
async fn dropped_connection_mid_commit_then_rollback_recovers() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_secs(5));
    d.open().await.unwrap();
    d.load_candidate("DLT-PATCH::1:;", LoadMode::Merge)
        .await
        .unwrap();
    rig.faults.drop_next();
    let e = d.commit(None).await.unwrap_err();
    assert_eq!((e.device.as_str(), e.step), ("ocs1", Step::Commit));
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
    assert!(
        e.to_string().starts_with("ocs1: commit: connection lost"),
        "{e}"
    );
    // The driver reconnects by itself; the candidate is still pending.
    d.commit(None).await.unwrap();
    assert_eq!(rig.model.patches(), vec![(1, 5)]);
}

#[tokio::test]
async fn fail_after_n_leaves_a_partial_commit_that_rollback_undoes() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_secs(5));
    d.open().await.unwrap();
    d.load_candidate("1,3\n2,6\n", LoadMode::Replace)
        .await
        .unwrap();
    // RTRV (checkpoint) and DLT pass, the ENT fails.
    rig.faults.fail_after(Some(2));
    let e = d.commit(None).await.unwrap_err();
    assert_eq!((e.device.as_str(), e.step), ("ocs1", Step::Commit));
    let ErrorKind::Rejected(msg) = &e.kind else {
        panic!("{e}")
    };
    assert!(
        msg.starts_with("SROF") && msg.contains("ENT-PATCH::1,3"),
        "{msg}"
    );
    assert_eq!(
        rig.model.patches(),
        vec![(1, 5)],
        "the DLT ran, the ENT did not"
    );
    rig.faults.clear();
    d.rollback(None).await.unwrap();
    assert_eq!(rig.model.patches(), vec![(0, 4), (1, 5)]);
}

#[tokio::test]
async fn denied_commit_and_busy_links_are_rejections() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_secs(5));
    d.load_candidate("DLT-PATCH::2:;", LoadMode::Merge)
        .await
        .unwrap();
    rig.faults.refuse_commits(true);
    let e = d.commit(None).await.unwrap_err();
    assert_eq!(e.step, Step::Commit);
    assert!(
        matches!(&e.kind, ErrorKind::Rejected(m) if m.starts_with("SROF")),
        "{e}"
    );
    rig.faults.refuse_commits(false);

    rig.busy.set_busy(OcsId(0), 5, true); // port 6, patched to 2
    let e = d.commit(None).await.unwrap_err();
    assert!(
        matches!(&e.kind, ErrorKind::Rejected(m) if m.starts_with("SARB") && m.contains("busy")),
        "{e}"
    );
    assert_eq!(rig.model.patches().len(), 2);
    rig.busy.set_busy(OcsId(0), 5, false);
    d.commit(None).await.unwrap();
    assert_eq!(rig.model.patches(), vec![(0, 4)]);
}

#[tokio::test]
async fn slow_replies_hit_the_command_timeout() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_millis(300));
    d.open().await.unwrap();
    rig.faults.delay_replies(Duration::from_secs(3));
    let e = d.get_config().await.unwrap_err();
    assert_eq!(
        (e.device.as_str(), e.step, e.kind.clone()),
        (
            "ocs1",
            Step::GetConfig,
            ErrorKind::Timeout(Duration::from_millis(300))
        )
    );
    rig.faults.clear();
    assert_eq!(
        d.get_config().await.unwrap(),
        INITIAL,
        "reconnects after a timeout"
    );
}

#[tokio::test]
async fn reuse_checks_the_session_and_forgets_earlier_checkpoints() {
    let rig = rig().await;
    let mut d = driver(&rig, PASSWORD, Duration::from_secs(5));
    let e = d.reuse().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
    assert_eq!(rig.faults.logins(), 0, "reuse never connects");
    d.open().await.unwrap();
    d.load_candidate("DLT-PATCH::1:;\nENT-PATCH::1,3:;\n", LoadMode::Merge)
        .await
        .unwrap();
    d.commit(None).await.unwrap();
    d.reuse().await.unwrap();
    // The next transaction's rollback(None) cannot undo the last one's commit.
    let e = d.rollback(None).await.unwrap_err();
    assert_eq!(e.step, Step::Rollback);
    assert!(matches!(e.kind, ErrorKind::Rejected(_)), "{e}");
    assert_eq!(rig.model.patches(), vec![(0, 2), (1, 5)]);
    // Nor commit a candidate loaded before it.
    d.load_candidate("DLT-PATCH::2:;\n", LoadMode::Merge)
        .await
        .unwrap();
    d.reuse().await.unwrap();
    assert_eq!(d.compare_config().await.unwrap(), "");
    assert_eq!(rig.faults.logins(), 1, "one login for everything");
    // The OCS closes its sessions: reuse says so; the next call reconnects.
    rig.faults.disconnect_all();
    let e = d.reuse().await.unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Disconnected(_)), "{e}");
    assert_eq!(d.get_config().await.unwrap(), "\"1,3\"\n\"2,6\"\n");
    assert_eq!(rig.faults.logins(), 2);
}
