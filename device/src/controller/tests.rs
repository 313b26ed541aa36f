//! Transaction tests against mockall mocks of `Driver`.
//!
//! Each mock behaves like a small device (running config, candidate,
//! checkpoints) and logs every call to a shared, ordered log, so tests
//! assert both what each device ended as and the order of operations across
//! devices. Timing tests run on tokio's paused clock: virtual time makes
//! "96 devices in ~20 ms" exact and deterministic.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mockall::automock;
use vclos_drivers::{Capabilities, CommitId, Driver, DriverError, ErrorKind, LoadMode, Step};

use super::*;
use crate::topology::Role;

/// The driver contract as plain synchronous calls, so mockall can mock it
/// directly (and `rollback` takes its id by value); [`Adapter`] turns a mock
/// into an async [`Driver`], optionally slow or spied on.
#[automock]
trait Dev: Send {
    fn name(&self) -> String;
    fn capabilities(&self) -> Capabilities;
    fn open(&mut self) -> Result<(), DriverError>;
    fn close(&mut self) -> Result<(), DriverError>;
    fn get_config(&mut self) -> Result<String, DriverError>;
    fn load_candidate(&mut self, config: &str, mode: LoadMode) -> Result<(), DriverError>;
    fn compare_config(&mut self) -> Result<String, DriverError>;
    fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError>;
    fn confirm(&mut self) -> Result<(), DriverError>;
    fn discard(&mut self) -> Result<(), DriverError>;
    fn rollback(&mut self, to: Option<CommitId>) -> Result<(), DriverError>;
}

/// Ordered record of every driver call: (device, step).
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(String, &'static str)>>>);

impl Log {
    fn push(&self, dev: &str, step: &'static str) {
        self.0.lock().unwrap().push((dev.to_string(), step));
    }
    fn all(&self) -> Vec<(String, &'static str)> {
        self.0.lock().unwrap().clone()
    }
    /// Positions of `step` calls on devices in `devs` (all devices if empty).
    fn at(&self, step: &str, devs: &[&str]) -> Vec<usize> {
        self.all()
            .iter()
            .enumerate()
            .filter(|(_, (d, s))| *s == step && (devs.is_empty() || devs.contains(&d.as_str())))
            .map(|(i, _)| i)
            .collect()
    }
    fn count(&self, dev: &str, step: &str) -> usize {
        self.all()
            .iter()
            .filter(|(d, s)| d == dev && *s == step)
            .count()
    }
}

/// How one mock device misbehaves.
#[derive(Clone, Copy, Default)]
struct Spec {
    commit_confirm: bool,
    /// This step returns an error (nothing changes).
    fail: Option<Step>,
    /// The commit applies half the change, then errors.
    partial_commit: bool,
    /// Running after commit is not what was loaded.
    wrong_readback: bool,
    /// The driver panics in commit (a bug in a driver).
    panic_in_commit: bool,
}

fn err(dev: &str, step: Step, kind: ErrorKind) -> DriverError {
    DriverError {
        device: dev.to_string(),
        step,
        kind,
    }
}

#[derive(Default)]
struct DevState {
    running: String,
    candidate: Option<String>,
    checkpoints: Vec<String>,
}

/// A mock that behaves like a device with a candidate and checkpoints.
fn device(name: &str, spec: Spec, log: &Log, state: Arc<Mutex<DevState>>) -> MockDev {
    let n = name.to_string();
    state.lock().unwrap().running = format!("{n} before\n");
    let fails = move |s: Step| spec.fail == Some(s);
    let mut d = MockDev::new();
    d.expect_name().return_const(n.clone());
    d.expect_capabilities().return_const(Capabilities {
        candidate: true,
        commit_confirm: spec.commit_confirm,
        rollback: true,
        ..Capabilities::default()
    });
    let (l, nm) = (log.clone(), n.clone());
    d.expect_open().returning(move || {
        l.push(&nm, "open");
        if fails(Step::Open) {
            return Err(err(&nm, Step::Open, ErrorKind::Connect("refused".into())));
        }
        Ok(())
    });
    let (l, nm) = (log.clone(), n.clone());
    d.expect_close().returning(move || {
        l.push(&nm, "close");
        Ok(())
    });
    let (l, nm, st) = (log.clone(), n.clone(), state.clone());
    d.expect_get_config().returning(move || {
        l.push(&nm, "get");
        Ok(st.lock().unwrap().running.clone())
    });
    let (l, nm, st) = (log.clone(), n.clone(), state.clone());
    d.expect_load_candidate().returning(move |cfg, _| {
        l.push(&nm, "load");
        if fails(Step::Load) {
            return Err(err(
                &nm,
                Step::Load,
                ErrorKind::Rejected("bad syntax".into()),
            ));
        }
        st.lock().unwrap().candidate = Some(cfg.to_string());
        Ok(())
    });
    let (l, nm, st) = (log.clone(), n.clone(), state.clone());
    d.expect_compare_config().returning(move || {
        l.push(&nm, "compare");
        Ok(st
            .lock()
            .unwrap()
            .candidate
            .clone()
            .map(|c| format!("+{c}"))
            .unwrap_or_default())
    });
    let (l, nm, st) = (log.clone(), n.clone(), state.clone());
    d.expect_commit().returning(move |_| {
        l.push(&nm, "commit");
        assert!(!spec.panic_in_commit, "{nm}: driver bug");
        let mut s = st.lock().unwrap();
        if fails(Step::Commit) {
            return Err(err(
                &nm,
                Step::Commit,
                ErrorKind::Rejected("refused".into()),
            ));
        }
        let cand = s.candidate.take().unwrap_or_default();
        let before = std::mem::take(&mut s.running);
        s.checkpoints.push(before);
        if spec.partial_commit {
            s.running = format!("{nm} half-done\n");
            return Err(err(
                &nm,
                Step::Commit,
                ErrorKind::Disconnected("connection reset".into()),
            ));
        }
        s.running = if spec.wrong_readback {
            "something else\n".to_string()
        } else {
            cand
        };
        Ok(CommitId(format!("{nm}-c{}", s.checkpoints.len())))
    });
    let (l, nm) = (log.clone(), n.clone());
    d.expect_confirm().returning(move || {
        l.push(&nm, "confirm");
        if fails(Step::Confirm) {
            return Err(err(&nm, Step::Confirm, ErrorKind::Timeout(Duration::ZERO)));
        }
        Ok(())
    });
    let (l, nm, st) = (log.clone(), n.clone(), state.clone());
    d.expect_discard().returning(move || {
        l.push(&nm, "discard");
        st.lock().unwrap().candidate = None;
        Ok(())
    });
    let (l, nm, st) = (log.clone(), n.clone(), state);
    d.expect_rollback().returning(move |_| {
        l.push(&nm, "rollback");
        if fails(Step::Rollback) {
            return Err(err(
                &nm,
                Step::Rollback,
                ErrorKind::Disconnected("gone".into()),
            ));
        }
        let mut s = st.lock().unwrap();
        match s.checkpoints.pop() {
            Some(before) => {
                s.running = before;
                Ok(())
            }
            None => Err(err(
                &nm,
                Step::Rollback,
                ErrorKind::Rejected("no commit".into()),
            )),
        }
    });
    d
}

/// A fabric of mock devices: name -> (role, stage, spec).
struct Rig {
    log: Log,
    states: HashMap<String, Arc<Mutex<DevState>>>,
    specs: HashMap<String, Spec>,
    set: ChangeSet,
    /// Commit delay per device (none: instant).
    delays: HashMap<String, Duration>,
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    seen: Arc<Mutex<HashMap<String, Option<Duration>>>>,
}

impl Rig {
    fn new(devs: &[(&str, Role, u32, Spec)]) -> Self {
        let mut rig = Rig {
            log: Log::default(),
            states: HashMap::new(),
            specs: HashMap::new(),
            set: ChangeSet::default(),
            delays: HashMap::new(),
            now: Arc::default(),
            peak: Arc::default(),
            seen: Arc::default(),
        };
        for &(name, role, stage, spec) in devs {
            let payload = format!("{name} after\n");
            rig.set.push(
                DeviceChange::new(name, role, stage, payload.clone())
                    .with_verify(Verify::Equals(payload)),
            );
            rig.states.insert(name.to_string(), Arc::default());
            rig.specs.insert(name.to_string(), spec);
        }
        rig
    }

    fn factory(&self) -> impl DriverFactory + '_ {
        move |name: &str| -> Result<Box<dyn Driver>, DriverError> {
            let (Some(spec), Some(state)) = (self.specs.get(name), self.states.get(name)) else {
                return Err(err(
                    name,
                    Step::Open,
                    ErrorKind::Connect("no such device".into()),
                ));
            };
            let mut d = Adapter::new(device(name, *spec, &self.log, state.clone()));
            d.delay = self.delays.get(name).copied().unwrap_or_default();
            d.now = self.now.clone();
            d.peak = self.peak.clone();
            d.seen = self.seen.clone();
            Ok(Box::new(d))
        }
    }

    async fn apply(&self, opts: &ApplyOptions) -> ApplyReport {
        apply(self.set.clone(), &self.factory(), opts, &NoProgress)
            .await
            .unwrap()
    }

    fn running(&self, name: &str) -> String {
        self.states[name].lock().unwrap().running.clone()
    }

    fn status(report: &ApplyReport, name: &str) -> DeviceStatus {
        report.device(name).unwrap().status
    }
}

const OK: Spec = Spec {
    commit_confirm: false,
    fail: None,
    partial_commit: false,
    wrong_readback: false,
    panic_in_commit: false,
};

fn fail_at(step: Step) -> Spec {
    Spec {
        fail: Some(step),
        ..OK
    }
}

/// Two OCS (stage 0), two spines (stage 1), two leaves (stage 2).
fn fabric(overrides: &[(&str, Spec)]) -> Rig {
    let spec = |n: &str| {
        overrides
            .iter()
            .find(|(o, _)| *o == n)
            .map_or(OK, |(_, s)| *s)
    };
    Rig::new(&[
        ("ocs1", Role::Ocs, 0, spec("ocs1")),
        ("ocs2", Role::Ocs, 0, spec("ocs2")),
        ("spine1", Role::Spine, 1, spec("spine1")),
        ("spine2", Role::Spine, 1, spec("spine2")),
        ("leaf1", Role::Leaf, 2, spec("leaf1")),
        ("leaf2", Role::Leaf, 2, spec("leaf2")),
    ])
}

const ALL: [&str; 6] = ["ocs1", "ocs2", "spine1", "spine2", "leaf1", "leaf2"];

#[tokio::test]
async fn happy_path_prepares_all_then_commits_stage_by_stage() {
    let rig = fabric(&[]);
    let report = rig.apply(&ApplyOptions::default()).await;
    assert_eq!(report.outcome, Outcome::Committed, "{report}");
    for d in ALL {
        assert_eq!(Rig::status(&report, d), DeviceStatus::Committed);
        assert_eq!(rig.running(d), format!("{d} after\n"));
        assert_eq!(report.device(d).unwrap().diff, format!("+{d} after\n"));
        assert_eq!(rig.log.count(d, "commit"), 1);
        assert_eq!(rig.log.count(d, "close"), 1);
        assert_eq!(rig.log.count(d, "discard"), 0, "committed, not discarded");
        assert_eq!(
            rig.log.count(d, "confirm"),
            0,
            "no commit-confirm capability"
        );
    }
    let log = &rig.log;
    let last_compare = *log.at("compare", &[]).iter().max().unwrap();
    let first_commit = *log.at("commit", &[]).iter().min().unwrap();
    assert!(last_compare < first_commit, "prepare all before any commit");
    // Stage N's commits and read-backs all precede stage N+1's first commit.
    let stage = |s: &[&str]| {
        let commits = log.at("commit", s);
        let gets = log.at("get", s);
        (
            *commits.iter().min().unwrap(),
            *commits.iter().chain(gets.iter()).max().unwrap(),
        )
    };
    let (s0, s1, s2) = (
        stage(&["ocs1", "ocs2"]),
        stage(&["spine1", "spine2"]),
        stage(&["leaf1", "leaf2"]),
    );
    assert!(s0.1 < s1.0 && s1.1 < s2.0, "{s0:?} {s1:?} {s2:?}");
    let phases: Vec<(Phase, Option<u32>)> = report
        .stage_timings
        .iter()
        .map(|t| (t.phase, t.stage))
        .collect();
    assert_eq!(
        phases,
        vec![
            (Phase::Prepare, None),
            (Phase::Commit, Some(0)),
            (Phase::Commit, Some(1)),
            (Phase::Commit, Some(2)),
            (Phase::Close, None),
        ]
    );
}

#[tokio::test]
async fn prepare_failure_commits_nothing_and_discards_everywhere() {
    let rig = fabric(&[("spine2", fail_at(Step::Load))]);
    let report = rig.apply(&ApplyOptions::default()).await;
    let Outcome::Aborted { cause } = &report.outcome else {
        panic!("{report}")
    };
    assert!(cause.starts_with("spine2: load-candidate: "), "{cause}");
    assert!(report.is_unchanged());
    assert!(rig.log.at("commit", &[]).is_empty(), "nothing committed");
    for d in ALL {
        assert_eq!(rig.running(d), format!("{d} before\n"));
        assert_eq!(rig.log.count(d, "discard"), 1, "{d} discarded");
        assert_eq!(rig.log.count(d, "close"), 1);
        assert_eq!(rig.log.count(d, "load"), 1, "every device was prepared");
    }
    assert_eq!(Rig::status(&report, "spine2"), DeviceStatus::PrepareFailed);
    let e = report.device("spine2").unwrap().error.clone().unwrap();
    assert_eq!(e.phase, Phase::Prepare);
    assert_eq!(Rig::status(&report, "leaf1"), DeviceStatus::Discarded);
}

#[tokio::test]
async fn unreachable_device_from_the_factory_aborts() {
    let mut rig = fabric(&[]);
    rig.set.push(DeviceChange::new("ghost", Role::Leaf, 2, "x"));
    let report = rig.apply(&ApplyOptions::default()).await;
    assert!(
        matches!(&report.outcome, Outcome::Aborted { cause } if cause.contains("ghost: open: cannot connect")),
        "{report}"
    );
    assert!(rig.log.at("commit", &[]).is_empty());
    assert_eq!(rig.log.at("discard", &[]).len(), 6);
}

#[tokio::test]
async fn commit_failure_rolls_back_committed_stages_in_reverse() {
    let rig = fabric(&[("spine2", fail_at(Step::Commit))]);
    let report = rig.apply(&ApplyOptions::default()).await;
    let Outcome::RolledBack { cause } = &report.outcome else {
        panic!("{report}")
    };
    assert!(
        cause.starts_with("spine2: commit: device rejected"),
        "{cause}"
    );
    for d in ALL {
        assert_eq!(rig.running(d), format!("{d} before\n"), "{d} as before");
    }
    for d in ["ocs1", "ocs2", "spine1"] {
        assert_eq!(Rig::status(&report, d), DeviceStatus::RolledBack, "{d}");
        assert_eq!(rig.log.count(d, "rollback"), 1);
    }
    // The refused commit changed nothing: no rollback, just a discard.
    assert_eq!(Rig::status(&report, "spine2"), DeviceStatus::Discarded);
    assert_eq!(rig.log.count("spine2", "rollback"), 0);
    for d in ["leaf1", "leaf2"] {
        assert_eq!(rig.log.count(d, "commit"), 0, "later stage never committed");
        assert_eq!(rig.log.count(d, "discard"), 1);
        assert_eq!(Rig::status(&report, d), DeviceStatus::Discarded);
    }
    // Stage 1 rolled back before stage 0.
    let spine_rb = rig.log.at("rollback", &["spine1"]);
    let ocs_rb = rig.log.at("rollback", &["ocs1", "ocs2"]);
    assert!(spine_rb.iter().max() < ocs_rb.iter().min());
    let rb: Vec<Option<u32>> = report
        .stage_timings
        .iter()
        .filter(|t| t.phase == Phase::Rollback)
        .map(|t| t.stage)
        .collect();
    assert_eq!(rb, vec![Some(1), Some(0)]);
}

#[tokio::test]
async fn half_applied_commit_is_rolled_back_too() {
    let rig = fabric(&[(
        "spine2",
        Spec {
            partial_commit: true,
            ..OK
        },
    )]);
    let report = rig.apply(&ApplyOptions::default()).await;
    assert!(
        matches!(report.outcome, Outcome::RolledBack { .. }),
        "{report}"
    );
    assert_eq!(Rig::status(&report, "spine2"), DeviceStatus::RolledBack);
    assert_eq!(rig.log.count("spine2", "rollback"), 1);
    for d in ALL {
        assert_eq!(rig.running(d), format!("{d} before\n"), "{d} as before");
    }
    let e = report.device("spine2").unwrap().error.clone().unwrap();
    assert_eq!(
        (e.phase, e.message.as_str()),
        (
            Phase::Commit,
            "spine2: commit: connection lost: connection reset"
        )
    );
}

#[tokio::test]
async fn read_back_mismatch_rolls_back() {
    let rig = fabric(&[(
        "leaf1",
        Spec {
            wrong_readback: true,
            ..OK
        },
    )]);
    let report = rig.apply(&ApplyOptions::default()).await;
    let Outcome::RolledBack { cause } = &report.outcome else {
        panic!("{report}")
    };
    assert!(
        cause.starts_with("leaf1: read-back: line 1: expected"),
        "{cause}"
    );
    assert_eq!(
        report
            .device("leaf1")
            .unwrap()
            .error
            .as_ref()
            .unwrap()
            .phase,
        Phase::Verify
    );
    for d in ALL {
        assert_eq!(Rig::status(&report, d), DeviceStatus::RolledBack, "{d}");
        assert_eq!(rig.running(d), format!("{d} before\n"));
    }
}

#[tokio::test]
async fn rollback_failure_is_loud() {
    let rig = fabric(&[
        ("ocs2", fail_at(Step::Rollback)),
        ("leaf2", fail_at(Step::Commit)),
    ]);
    let report = rig.apply(&ApplyOptions::default()).await;
    let Outcome::RollbackFailed { cause, devices } = &report.outcome else {
        panic!("{report}")
    };
    assert!(cause.starts_with("leaf2: commit"), "{cause}");
    assert_eq!(devices, &vec!["ocs2".to_string()]);
    assert!(!report.is_unchanged() && !report.is_committed());
    let d = report.device("ocs2").unwrap();
    assert_eq!(d.status, DeviceStatus::RollbackFailed);
    assert!(d
        .rollback_error
        .as_ref()
        .unwrap()
        .contains("ocs2: rollback: connection lost"));
    assert_eq!(
        rig.running("ocs2"),
        "ocs2 after\n",
        "really not rolled back"
    );
    // Everything else still rolled back.
    for n in ["ocs1", "spine1", "spine2", "leaf1"] {
        assert_eq!(rig.running(n), format!("{n} before\n"), "{n}");
    }
    let text = report.to_string();
    assert!(
        text.contains("FAILED AND ROLLBACK FAILED on ocs2"),
        "{text}"
    );
    assert!(text.contains("!!! ocs2: ROLLBACK FAILED"), "{text}");
    assert!(text.contains("restore it by hand"), "{text}");
    assert_eq!(report.rollback_failures().count(), 1);
}

#[tokio::test]
async fn a_driver_that_panics_mid_commit_is_reported_as_unknown_state() {
    let rig = fabric(&[(
        "spine1",
        Spec {
            panic_in_commit: true,
            ..OK
        },
    )]);
    let report = rig.apply(&ApplyOptions::default()).await;
    let Outcome::RollbackFailed { cause, devices } = &report.outcome else {
        panic!("{report}")
    };
    assert_eq!(cause, "spine1: controller task died during commit");
    assert_eq!(devices, &vec!["spine1".to_string()]);
    // Its driver is gone, so nothing more is sent to it; the rest is undone.
    assert_eq!(rig.log.count("spine1", "rollback"), 0);
    assert_eq!(rig.log.count("spine1", "close"), 0);
    for d in ["ocs1", "ocs2", "spine2"] {
        assert_eq!(Rig::status(&report, d), DeviceStatus::RolledBack, "{d}");
        assert_eq!(rig.running(d), format!("{d} before\n"));
    }
    assert!(report.to_string().contains("!!! spine1: ROLLBACK FAILED"));
}

#[tokio::test]
async fn commit_confirm_only_where_supported_and_confirmed_after_verification() {
    let cc = Spec {
        commit_confirm: true,
        ..OK
    };
    let rig = fabric(&[("spine1", cc), ("leaf2", cc)]);
    let opts = ApplyOptions {
        confirm_timeout: Duration::from_secs(77),
        ..ApplyOptions::default()
    };
    let report = rig.apply(&opts).await;
    assert!(report.is_committed(), "{report}");
    let seen = rig.seen.lock().unwrap().clone();
    for d in ALL {
        let want = matches!(d, "spine1" | "leaf2").then_some(Duration::from_secs(77));
        assert_eq!(seen[d], want, "{d}");
        assert_eq!(
            rig.log.count(d, "confirm"),
            usize::from(want.is_some()),
            "{d}"
        );
        assert_eq!(report.device(d).unwrap().commit_confirm, want.is_some());
    }
    // Confirmed only after every device's read-back.
    let last_get = *rig.log.at("get", &[]).iter().max().unwrap();
    let first_confirm = *rig.log.at("confirm", &[]).iter().min().unwrap();
    assert!(first_confirm > last_get);
}

#[tokio::test]
async fn commit_confirmed_devices_are_not_confirmed_when_a_later_stage_fails() {
    let cc = Spec {
        commit_confirm: true,
        ..OK
    };
    let bad = Spec {
        wrong_readback: true,
        ..OK
    };
    let rig = fabric(&[("spine1", cc), ("leaf1", bad)]);
    let report = rig.apply(&ApplyOptions::default()).await;
    assert!(
        matches!(report.outcome, Outcome::RolledBack { .. }),
        "{report}"
    );
    assert_eq!(rig.log.count("spine1", "confirm"), 0);
    assert_eq!(rig.log.count("spine1", "rollback"), 1);
    assert_eq!(rig.running("spine1"), "spine1 before\n");
}

#[tokio::test]
async fn confirm_failure_rolls_everything_back() {
    let cc_bad = Spec {
        commit_confirm: true,
        fail: Some(Step::Confirm),
        ..OK
    };
    let rig = fabric(&[("leaf2", cc_bad)]);
    let report = rig.apply(&ApplyOptions::default()).await;
    let Outcome::RolledBack { cause } = &report.outcome else {
        panic!("{report}")
    };
    assert!(cause.starts_with("leaf2: confirm: timed out"), "{cause}");
    for d in ALL {
        assert_eq!(rig.running(d), format!("{d} before\n"), "{d}");
        assert_eq!(Rig::status(&report, d), DeviceStatus::RolledBack, "{d}");
    }
}

#[tokio::test]
async fn invalid_sets_are_refused_before_any_device_is_touched() {
    let mut rig = fabric(&[]);
    rig.set
        .push(DeviceChange::new("leaf1", Role::Leaf, 3, "again"));
    let e = apply(
        rig.set.clone(),
        &rig.factory(),
        &ApplyOptions::default(),
        &NoProgress,
    )
    .await
    .unwrap_err();
    assert_eq!(e, ChangeSetError::Duplicate("leaf1".into()));
    let rig = fabric(&[]);
    let opts = ApplyOptions {
        max_parallel: 0,
        ..ApplyOptions::default()
    };
    let e = apply(rig.set.clone(), &rig.factory(), &opts, &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(e, ChangeSetError::NoParallelism);
    assert!(rig.log.all().is_empty());
}

#[tokio::test]
async fn report_serialises_for_json() {
    let rig = fabric(&[("spine2", fail_at(Step::Commit))]);
    let report = rig.apply(&ApplyOptions::default()).await;
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["outcome"]["result"], "rolled-back");
    assert!(v["outcome"]["cause"]
        .as_str()
        .unwrap()
        .starts_with("spine2: commit"));
    let spine1 = &v["devices"][2];
    assert_eq!(spine1["device"], "spine1");
    assert_eq!(spine1["role"], "spine");
    assert_eq!(spine1["status"], "rolled-back");
    assert!(spine1["duration_ms"].is_f64());
    assert_eq!(v["devices"][3]["error"]["phase"], "commit");
    let back: ApplyReport = serde_json::from_value(v).unwrap();
    assert_eq!(back.outcome, report.outcome);
    assert_eq!(back.devices.len(), 6);
}

// ---------------------------------------------------------------------------
// The adapter from a mock to a `Driver`.

/// A mock as an async `Driver`. With `delay`, commit first sleeps that long
/// (counting commits in flight and the peak); with `seen`, records the
/// confirm timeout each commit was given.
struct Adapter {
    mock: MockDev,
    name: String,
    delay: Duration,
    now: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    seen: Arc<Mutex<HashMap<String, Option<Duration>>>>,
}

impl Adapter {
    fn new(mock: MockDev) -> Self {
        Self {
            name: mock.name(),
            mock,
            delay: Duration::ZERO,
            now: Arc::default(),
            peak: Arc::default(),
            seen: Arc::default(),
        }
    }
}

#[async_trait]
impl Driver for Adapter {
    fn device(&self) -> &str {
        &self.name
    }
    fn capabilities(&self) -> Capabilities {
        self.mock.capabilities()
    }
    async fn open(&mut self) -> Result<(), DriverError> {
        self.mock.open()
    }
    async fn close(&mut self) -> Result<(), DriverError> {
        self.mock.close()
    }
    async fn get_config(&mut self) -> Result<String, DriverError> {
        self.mock.get_config()
    }
    async fn load_candidate(&mut self, c: &str, m: LoadMode) -> Result<(), DriverError> {
        self.mock.load_candidate(c, m)
    }
    async fn compare_config(&mut self) -> Result<String, DriverError> {
        self.mock.compare_config()
    }
    async fn commit(&mut self, confirm: Option<Duration>) -> Result<CommitId, DriverError> {
        self.seen.lock().unwrap().insert(self.name.clone(), confirm);
        if !self.delay.is_zero() {
            let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.peak.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            self.now.fetch_sub(1, Ordering::SeqCst);
        }
        self.mock.commit(confirm)
    }
    async fn confirm(&mut self) -> Result<(), DriverError> {
        self.mock.confirm()
    }
    async fn discard(&mut self) -> Result<(), DriverError> {
        self.mock.discard()
    }
    async fn rollback(&mut self, to: Option<&CommitId>) -> Result<(), DriverError> {
        self.mock.rollback(to.cloned())
    }
}

/// `n` leaves in stage 0 whose commit takes 20 ms of (virtual) time.
async fn slow_fan_out(n: usize, max_parallel: usize, delay: Duration) -> (ApplyReport, usize) {
    let names: Vec<String> = (0..n).map(|i| format!("leaf{i}")).collect();
    let devs: Vec<(&str, Role, u32, Spec)> = names
        .iter()
        .map(|s| (s.as_str(), Role::Leaf, 0, OK))
        .collect();
    let mut rig = Rig::new(&devs);
    rig.delays = names.iter().map(|n| (n.clone(), delay)).collect();
    let opts = ApplyOptions {
        max_parallel,
        ..ApplyOptions::default()
    };
    let report = rig.apply(&opts).await;
    (report, rig.peak.load(Ordering::SeqCst))
}

fn commit_time(report: &ApplyReport) -> Duration {
    report
        .stage_timings
        .iter()
        .find(|t| t.phase == Phase::Commit)
        .unwrap()
        .duration
}

#[tokio::test(start_paused = true)]
async fn ninety_six_devices_commit_in_one_device_time() {
    let ms = Duration::from_millis;
    let (report, peak) = slow_fan_out(96, 96, ms(20)).await;
    assert!(report.is_committed(), "{report}");
    assert_eq!(peak, 96, "all 96 commits in flight together");
    let t = commit_time(&report);
    assert!(
        t >= ms(20) && t < ms(25),
        "stage took {t:?} of virtual time"
    );
    // The whole transaction: only the commits sleep.
    assert!(report.duration < ms(25), "{:?}", report.duration);
    // One device alone takes the same time.
    let (one, _) = slow_fan_out(1, 96, ms(20)).await;
    assert!(commit_time(&one) >= ms(20) && commit_time(&one) < ms(25));
}

#[tokio::test(start_paused = true)]
async fn max_parallel_bounds_devices_in_flight() {
    let ms = Duration::from_millis;
    let (report, peak) = slow_fan_out(96, 32, ms(20)).await;
    assert!(report.is_committed(), "{report}");
    assert_eq!(peak, 32);
    // Three waves of 32.
    let t = commit_time(&report);
    assert!(t >= ms(60) && t < ms(65), "{t:?}");
}

#[tokio::test(start_paused = true)]
async fn a_hung_commit_times_out_and_is_rolled_back() {
    let mut rig = fabric(&[]);
    rig.delays.insert("leaf2".into(), Duration::from_secs(3600));
    let opts = ApplyOptions {
        step_timeout: Duration::from_secs(5),
        ..ApplyOptions::default()
    };
    let report = rig.apply(&opts).await;
    let Outcome::RolledBack { cause } = &report.outcome else {
        panic!("{report}")
    };
    assert_eq!(cause, "leaf2: commit: timed out after 5s");
    for d in ALL {
        assert_eq!(rig.running(d), format!("{d} before\n"), "{d}");
    }
    assert_eq!(
        rig.log.count("leaf2", "commit"),
        0,
        "never reached the device"
    );
    assert_eq!(Rig::status(&report, "leaf2"), DeviceStatus::Discarded);
}

/// Records progress calls.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Progress for Recorder {
    fn phase_started(&self, phase: Phase, stage: Option<u32>, devices: usize) {
        self.0
            .lock()
            .unwrap()
            .push(format!("start {phase} {stage:?} {devices}"));
    }
    fn device_done(&self, phase: Phase, device: &str, ok: bool) {
        self.0
            .lock()
            .unwrap()
            .push(format!("done {phase} {device} {ok}"));
    }
    fn phase_done(&self, phase: Phase, stage: Option<u32>, ok: bool) {
        self.0
            .lock()
            .unwrap()
            .push(format!("end {phase} {stage:?} {ok}"));
    }
}

#[tokio::test]
async fn progress_hooks_follow_the_phases() {
    let rig = fabric(&[("spine1", fail_at(Step::Commit))]);
    let rec = Recorder::default();
    apply(
        rig.set.clone(),
        &rig.factory(),
        &ApplyOptions::default(),
        &rec,
    )
    .await
    .unwrap();
    let calls = rec.0.lock().unwrap().clone();
    let starts: Vec<&String> = calls.iter().filter(|c| c.starts_with("start")).collect();
    assert_eq!(
        starts,
        [
            "start prepare None 6",
            "start commit Some(0) 2",
            "start commit Some(1) 2",
            "start rollback Some(1) 2",
            "start rollback Some(0) 2",
            "start close None 6",
        ]
    );
    assert!(calls.contains(&"done commit spine1 false".to_string()));
    assert!(calls.contains(&"done commit spine2 true".to_string()));
    assert!(calls.contains(&"end commit Some(1) false".to_string()));
    assert!(calls.contains(&"end commit Some(0) true".to_string()));
    let done = calls
        .iter()
        .filter(|c| c.starts_with("done prepare"))
        .count();
    assert_eq!(done, 6);
}

#[tokio::test]
async fn the_gate_is_passed_after_every_prepare_and_before_any_commit() {
    // Passed: the gate is awaited between the last load and the first commit.
    let rig = fabric(&[]);
    let log = rig.log.clone();
    let gate = async move {
        log.push("gate", "passed");
        Ok(())
    };
    let report = apply_gated(
        rig.set.clone(),
        &rig.factory(),
        &ApplyOptions::default(),
        &NoProgress,
        gate,
    )
    .await
    .unwrap();
    assert!(report.is_committed(), "{report}");
    let gate = rig.log.at("passed", &[])[0];
    assert!(rig.log.at("compare", &[]).iter().all(|&i| i < gate));
    assert!(rig.log.at("commit", &[]).iter().all(|&i| i > gate));

    // Refused: nothing is committed, every candidate is discarded.
    let rig = fabric(&[]);
    let report = apply_gated(
        rig.set.clone(),
        &rig.factory(),
        &ApplyOptions::default(),
        &NoProgress,
        std::future::ready(Err("journal not durable".to_string())),
    )
    .await
    .unwrap();
    assert!(
        matches!(&report.outcome, Outcome::Aborted { cause } if cause == "journal not durable"),
        "{report}"
    );
    assert!(rig.log.at("commit", &[]).is_empty());
    assert_eq!(rig.log.at("discard", &[]).len(), ALL.len());
    for d in ALL {
        assert_eq!(rig.running(d), format!("{d} before\n"));
    }
}
