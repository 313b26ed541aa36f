//! The controller's transaction through real `Tl1Driver`s against two
//! emulated OCS on loopback: a change that commits, and faults (a DENY on
//! commit, a connection dropped half-way through a commit, a read-back that
//! does not match) after which EVERY OCS must hold exactly its starting
//! patch table and the report must say so.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use vclos::controller::{
    apply, ApplyOptions, ApplyReport, ChangeSet, DeviceChange, DeviceStatus, DriverFactory,
    NoProgress, Outcome, Verify,
};
use vclos::emulator::busy::NeverBusy;
use vclos::emulator::faults::Faults;
use vclos::emulator::ocs::OcsModel;
use vclos::emulator::tl1::{self, Login, Tl1Options, Tl1Server};
use vclos::topology::{DeviceId, Ocs, OcsId, Role};
use vclos_drivers::telnet::TelnetConfig;
use vclos_drivers::tl1::{Tl1Config, Tl1Driver};
use vclos_drivers::{Driver, DriverError, LoadMode};

const PASSWORD: &str = "ctl-pw";
/// Both OCS start with ports 1~5 and 2~6 patched (indices 0~4, 1~5).
const START: [(u16, u16); 2] = [(0, 4), (1, 5)];

struct Box_ {
    model: Arc<OcsModel>,
    faults: Arc<Faults>,
    _server: Tl1Server,
    addr: SocketAddr,
}

async fn ocs(name: &str, id: u32) -> Box_ {
    let spec = Ocs {
        name: name.into(),
        device: DeviceId(id),
        ports: (1..=8).map(|i| i.to_string().into()).collect(),
        port_peer: vec![None; 8],
        patches: START.to_vec(),
    };
    let model = Arc::new(
        OcsModel::new(OcsId(id), &spec, Arc::new(NeverBusy))
            .with_switching_delay(Duration::from_millis(50)),
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
    Box_ {
        addr: server.local_addr(),
        model,
        faults,
        _server: server,
    }
}

struct Fabric {
    ocs: HashMap<&'static str, Box_>,
}

impl Fabric {
    async fn new() -> Self {
        let mut ocs = HashMap::new();
        ocs.insert("ocs1", self::ocs("ocs1", 0).await);
        ocs.insert("ocs2", self::ocs("ocs2", 1).await);
        Self { ocs }
    }

    /// Real TL1 drivers, fresh per transaction.
    fn factory(&self) -> impl DriverFactory + '_ {
        move |name: &str| -> Result<Box<dyn Driver>, DriverError> {
            let b = self.ocs.get(name).ok_or_else(|| DriverError {
                device: name.into(),
                step: vclos_drivers::Step::Open,
                kind: vclos_drivers::ErrorKind::Connect("not in this fabric".into()),
            })?;
            Ok(Box::new(Tl1Driver::new(
                name,
                Tl1Config {
                    host: b.addr.ip().to_string(),
                    port: b.addr.port(),
                    username: "admin".into(),
                    password: PASSWORD.into(),
                    telnet: TelnetConfig {
                        command_timeout: Duration::from_secs(5),
                        connect_timeout: Duration::from_secs(2),
                        connect_attempts: 2,
                        retry_backoff: Duration::from_millis(10),
                        ..TelnetConfig::default()
                    },
                },
            )))
        }
    }

    async fn apply(&self, set: ChangeSet) -> ApplyReport {
        apply(set, &self.factory(), &ApplyOptions::default(), &NoProgress)
            .await
            .unwrap()
    }

    fn patches(&self, name: &str) -> Vec<(u16, u16)> {
        self.ocs[name].model.patches()
    }

    fn assert_untouched(&self, report: &ApplyReport) {
        for name in ["ocs1", "ocs2"] {
            assert_eq!(
                self.patches(name),
                START,
                "{name} is back as it was\n{report}"
            );
        }
    }
}

/// ocs1 (stage 0, merge): move port 1 from 5 to 3.
/// ocs2 (stage 1, replace): 1~3, 2~6, 7~8.
fn change_set() -> ChangeSet {
    ChangeSet::new(vec![
        DeviceChange::new("ocs1", Role::Ocs, 0, "DLT-PATCH::1:;\nENT-PATCH::1,3:;\n")
            .with_verify(Verify::Equals("\"1,3\"\n\"2,6\"\n".into())),
        DeviceChange::new("ocs2", Role::Ocs, 1, "1,3\n2,6\n7,8\n")
            .with_mode(LoadMode::Replace)
            .with_verify(Verify::Equals("\"1,3\"\n\"2,6\"\n\"7,8\"\n".into())),
    ])
}

#[tokio::test]
async fn change_set_commits_on_both_ocs() {
    let fab = Fabric::new().await;
    let report = fab.apply(change_set()).await;
    assert_eq!(report.outcome, Outcome::Committed, "{report}");
    assert_eq!(fab.patches("ocs1"), vec![(0, 2), (1, 5)]);
    assert_eq!(fab.patches("ocs2"), vec![(0, 2), (1, 5), (6, 7)]);
    let d2 = report.device("ocs2").unwrap();
    assert_eq!(d2.status, DeviceStatus::Committed);
    assert_eq!(
        d2.diff,
        "DLT-PATCH::1:;\nENT-PATCH::1,3:;\nENT-PATCH::7,8:;\n"
    );
    assert!(!d2.commit_confirm, "TL1 has no commit-confirm");
    // Stage 1 waited for stage 0's switching: the disconnect is immediate,
    // the new connection takes the 50 ms switching time.
    let stage0 = &report.stage_timings[1];
    assert_eq!(stage0.stage, Some(0));
    assert!(stage0.duration >= Duration::from_millis(50), "{report}");

    // Applying the same set again: ocs2's replace is now a no-op.
    let again = ChangeSet::new(vec![change_set().changes.remove(1)]);
    let report = fab.apply(again).await;
    assert!(report.is_committed(), "{report}");
    assert_eq!(
        report.device("ocs2").unwrap().status,
        DeviceStatus::Unchanged
    );
}

#[tokio::test]
async fn denied_commit_on_the_second_ocs_rolls_the_first_back() {
    let fab = Fabric::new().await;
    fab.ocs["ocs2"].faults.refuse_commits(true);
    let report = fab.apply(change_set()).await;
    let Outcome::RolledBack { cause } = &report.outcome else {
        panic!("{report}")
    };
    assert!(
        cause.starts_with("ocs2: commit: device rejected the request: SROF"),
        "{cause}"
    );
    fab.assert_untouched(&report);
    assert_eq!(
        report.device("ocs1").unwrap().status,
        DeviceStatus::RolledBack
    );
    // The DENY came on the first change: nothing to undo on ocs2.
    assert_eq!(
        report.device("ocs2").unwrap().status,
        DeviceStatus::Discarded
    );
}

#[tokio::test]
async fn connection_dropped_mid_commit_is_rolled_back_everywhere() {
    let fab = Fabric::new().await;
    // ocs2 runs DLT-PATCH then two ENT-PATCH; drop the connection as soon
    // as the DLT has hit the table (its reply waits out 50 ms of switching).
    let (model, faults) = (
        fab.ocs["ocs2"].model.clone(),
        fab.ocs["ocs2"].faults.clone(),
    );
    let watcher = tokio::spawn(async move {
        while model.patches() == START {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        faults.drop_next();
    });
    let report = fab.apply(change_set()).await;
    watcher.await.unwrap();
    let Outcome::RolledBack { cause } = &report.outcome else {
        panic!("{report}")
    };
    assert!(
        cause.starts_with("ocs2: commit: connection lost"),
        "{cause}"
    );
    fab.assert_untouched(&report);
    for name in ["ocs1", "ocs2"] {
        assert_eq!(
            report.device(name).unwrap().status,
            DeviceStatus::RolledBack,
            "{name}: {report}"
        );
    }
}

#[tokio::test]
async fn read_back_mismatch_rolls_back_both() {
    let fab = Fabric::new().await;
    let mut set = change_set();
    set.changes[1].verify = Verify::ContainsLines("\"4,8\"".into());
    let report = fab.apply(set).await;
    let Outcome::RolledBack { cause } = &report.outcome else {
        panic!("{report}")
    };
    assert_eq!(
        cause,
        "ocs2: read-back: running config lacks \"\\\"4,8\\\"\""
    );
    fab.assert_untouched(&report);
    assert!(report
        .devices
        .iter()
        .all(|d| d.status == DeviceStatus::RolledBack));
}

#[tokio::test]
async fn unreachable_ocs_aborts_before_anything_moves() {
    let fab = Fabric::new().await;
    let mut set = change_set();
    set.push(DeviceChange::new("ocs3", Role::Ocs, 0, "DLT-PATCH::1:;"));
    let report = fab.apply(set).await;
    assert!(
        matches!(&report.outcome, Outcome::Aborted { cause } if cause.starts_with("ocs3: open")),
        "{report}"
    );
    fab.assert_untouched(&report);
}
