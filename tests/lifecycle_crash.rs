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
    assert!(f.pending_journal().await.unwrap().is_some());
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
    assert!(g.pending_journal().await.unwrap().is_none());
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
    forged.decision.requested_gpus = Some(1);
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
    assert!(f.pending_journal().await.unwrap().is_none());
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
        assert!(f.pending_journal().await.unwrap().is_none());
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
    assert!(g.pending_journal().await.unwrap().is_none());

    // Without a journal a torn state.json is an error, not an empty fabric.
    tear_state(&emu, b"");
    let e = Fabric::load(emu.topo.clone(), emu.state_dir()).unwrap_err();
    let said = e.to_string();
    assert!(
        said.contains("damaged") && said.contains("restore the file from a backup"),
        "{e}"
    );
}

/// Journal as JSON, to forge the ones recovery must refuse.
fn journal_json(emu: &common::Emu) -> serde_json::Value {
    let text = std::fs::read(emu.state_dir().join("journal.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

fn write_journal(emu: &common::Emu, j: &serde_json::Value) {
    std::fs::write(
        emu.state_dir().join("journal.json"),
        serde_json::to_vec_pretty(j).unwrap(),
    )
    .unwrap();
}

/// Recovery with `j` in place is refused, naming `why`, and changes
/// nothing: devices, state.json and the journal stay as they are.
async fn refused_recovery(emu: &common::Emu, j: &serde_json::Value, why: &str) {
    write_journal(emu, j);
    let reader = emu.fabric_with(Arc::new(emu.drivers()));
    let configs = emu.configs(&reader).await;
    let state = emu.state_bytes();
    let Err(e) = Fabric::open(emu.topo.clone(), emu.state_dir()).await else {
        panic!("recovery of a journal it must refuse went ahead ({why})");
    };
    let text = e.to_string();
    assert!(
        text.contains("journal.json") && text.contains(why),
        "{text}"
    );
    assert!(text.contains("nothing was changed"), "{text}");
    assert_eq!(emu.configs(&reader).await, configs);
    assert_eq!(emu.state_bytes(), state);
    assert_eq!(&journal_json(emu), j, "the journal is kept as it was");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_checks_the_journal_against_the_state_before_acting() {
    let emu = common::emu(Duration::ZERO).await;
    let mut f = emu.fabric().await;
    let a = f.submit(&id("a"), 4, &NoProgress).await.unwrap();
    assert!(a.report.is_committed(), "{}", a.report);
    drop(f);
    die_during_submit(&emu, "leaf1", At::Commit).await;
    let real = journal_json(&emu);

    // A stale journal: its previous state is not state.json's (a job was
    // admitted since). Recovering it would drop job `a` from the state
    // while its configuration stays on the devices.
    let mut stale = real.clone();
    stale["old"] = serde_json::json!([]);
    stale["new"] = serde_json::json!([real["decision"].clone()]);
    refused_recovery(&emu, &stale, "neither its previous nor its next state").await;

    // A journal that double-books job a's GPUs: never written to state.json.
    let mut double = real.clone();
    let mut twin = real["old"][0].clone();
    twin["job"] = "twin".into();
    double["decision"] = twin.clone();
    double["new"] = serde_json::json!([real["old"][0].clone(), twin]);
    refused_recovery(&emu, &double, "cannot be admitted to its previous state").await;

    // A next state that is not the previous one plus the decision.
    let mut odd = real.clone();
    odd["new"] = serde_json::json!([real["decision"].clone()]);
    refused_recovery(&emu, &odd, "its next state is not its previous state").await;
    let mut odd = real.clone();
    odd["new"] = real["old"].clone();
    refused_recovery(&emu, &odd, "its next state is not its previous state").await;

    // The real journal still recovers.
    write_journal(&emu, &real);
    let (g, rec) = Fabric::open(emu.topo.clone(), emu.state_dir())
        .await
        .unwrap();
    assert_eq!(rec.unwrap().outcome, RecoveryOutcome::RolledBack);
    let jobs: Vec<String> = g.jobs().iter().map(|d| d.job.to_string()).collect();
    assert_eq!(jobs, ["a"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_writers_journal_is_never_recovered_by_another() {
    let emu = common::emu(Duration::ZERO).await;
    let _ = emu.fabric().await;
    // The writer stops mid-transaction (OCS committed, leaf1 hangs) but is
    // alive: it still holds the state lock.
    let reached = Arc::new(Notify::new());
    let r = reached.clone();
    let factory: Arc<dyn DriverFactory> = Hooked::new(
        emu.drivers(),
        "leaf1",
        At::Commit,
        Then::Hang {
            before: Arc::new(move || r.notify_one()),
        },
    );
    let mut writer = emu.fabric_with(factory);
    let plan = writer.plan_submit(&id("j1"), 24).unwrap();
    tokio::select! {
        r = writer.apply(&plan, &NoProgress) => panic!("apply finished: {r:?}"),
        () = reached.notified() => {}
    }
    assert!(writer.is_locked());
    let journal = journal_json(&emu);
    let reader = emu.fabric_with(Arc::new(emu.drivers()));
    let configs = emu.configs(&reader).await;

    // Another fabric (another process or task) neither recovers nor writes.
    let mut other = emu.fabric_with(Arc::new(emu.drivers()));
    other.wait = Duration::from_millis(300);
    let e = other.recover(&NoProgress).await.unwrap_err();
    assert!(matches!(e, JobsError::Lock(_)), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("pid {}", std::process::id())) && text.contains("of job `j1`"),
        "{text}"
    );
    let plan = other.plan_submit(&id("j2"), 8).unwrap();
    assert!(matches!(
        other.apply(&plan, &NoProgress).await,
        Err(JobsError::Lock(_))
    ));
    let status = reader.status().await.unwrap();
    assert!(status.writer.is_some() && status.journal.is_some());
    assert_eq!(journal_json(&emu), journal);
    assert_eq!(emu.configs(&reader).await, configs);

    // Once the writer is gone, the next writer settles its journal.
    drop(writer);
    let rec = other.recover(&NoProgress).await.unwrap().unwrap();
    assert_eq!(rec.outcome, RecoveryOutcome::RolledBack, "{rec}");
    assert!(!other.is_locked(), "a lock taken for one call is released");
    assert!(reader.status().await.unwrap().writer.is_none());
}

/// The emulated fabric's state file, its bytes now, and drivers after
/// which, once every device committed a change (leaf2's session closing),
/// state.json becomes a directory, so it cannot be replaced (rename(2):
/// EISDIR). Once only.
async fn unsaveable(emu: &common::Emu) -> (std::path::PathBuf, Vec<u8>, Arc<dyn DriverFactory>) {
    let _ = emu.fabric().await;
    let state_file = emu.state_dir().join("state.json");
    let saved = std::fs::read(&state_file).unwrap();
    let block = {
        let f = state_file.clone();
        Arc::new(move || {
            std::fs::remove_file(&f).unwrap();
            std::fs::create_dir(&f).unwrap();
        })
    };
    let factory: Arc<dyn DriverFactory> = Hooked::new(
        emu.drivers(),
        "leaf2",
        At::Close,
        Then::Around {
            before: block,
            after: Arc::new(|| {}),
        },
    );
    (state_file, saved, factory)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn devices_committed_but_state_unsaved_says_so_and_keeps_the_journal() {
    let emu = common::emu(Duration::ZERO).await;
    let (state_file, saved, factory) = unsaveable(&emu).await;
    let mut f = emu.fabric_with(factory);
    let plan = f.plan_submit(&id("j1"), 24).unwrap();
    let e = f.apply(&plan, &NoProgress).await.unwrap_err();
    assert!(matches!(e, JobsError::NotSaved { .. }), "{e}");
    let text = e.to_string();
    for want in [
        "COMMITTED",
        "leaf1",
        "leaf2",
        "ocs1",
        "state.json",
        "journal is kept",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    assert!(f.pending_journal().await.unwrap().is_some());
    drop(f);
    // Repaired by hand, the next writer adopts the change from the devices.
    std::fs::remove_dir(&state_file).unwrap();
    std::fs::write(&state_file, saved).unwrap();
    let (g, rec) = Fabric::open(emu.topo.clone(), emu.state_dir())
        .await
        .unwrap();
    assert_eq!(rec.unwrap().outcome, RecoveryOutcome::AdoptedNew);
    assert_eq!(g.jobs().len(), 1);
}

/// `curl` (a third-party client) against `vclos serve`'s API.
async fn http(url: String, method: &'static str, body: Option<&'static str>) -> (u16, String) {
    tokio::task::spawn_blocking(move || {
        let mut c = std::process::Command::new("curl");
        c.args(["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method]);
        c.args(["-H", &format!("Authorization: Bearer {SERVE_TOKEN}")]);
        if let Some(b) = body {
            c.args(["-H", "Content-Type: application/json", "-d", b]);
        }
        let out = c.arg(&url).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.parse().unwrap(), body.to_string())
    })
    .await
    .unwrap()
}

const SERVE_TOKEN: &str = "serve-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_settles_its_own_unsaved_change_before_the_next_one() {
    let emu = common::emu(Duration::ZERO).await;
    // Once, after every device committed j1: state.json cannot be replaced.
    let (state_file, saved, factory) = unsaveable(&emu).await;
    let mut f = emu.fabric_with(factory);
    f.lock("serve", None).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let config = vclos::server::Config {
        listen: listener.local_addr().unwrap(),
        token: Some(vclos::server::Token::from_file_text(SERVE_TOKEN).unwrap()),
        request_timeout: Duration::from_secs(60),
        max_waiting: 4,
        tls: None,
        elect: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(vclos::server::serve_on(
        listener,
        f,
        config,
        vclos::server::Limits::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    let jobs = format!("{url}/v1/jobs");
    let (code, body) = http(jobs.clone(), "POST", Some(r#"{"id": "j1", "gpus": 24}"#)).await;
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("journal is kept"), "{body}");
    assert_eq!(http(format!("{url}/readyz"), "GET", None).await.0, 503);
    // Still unwritable: the next change tries to settle first, fails, and
    // says why; nothing else happens.
    let (code, body) = http(jobs.clone(), "POST", Some(r#"{"id": "j2", "gpus": 4}"#)).await;
    assert!(code >= 500, "{code} {body}");
    // Repaired by hand (no restart, no `vclos reconcile`, which the
    // service's lock refuses): the next change adopts j1 from the devices,
    // then admits j2.
    std::fs::remove_dir(&state_file).unwrap();
    std::fs::write(&state_file, &saved).unwrap();
    let (code, body) = http(jobs.clone(), "POST", Some(r#"{"id": "j2", "gpus": 4}"#)).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(http(format!("{url}/readyz"), "GET", None).await.0, 200);
    let (code, list) = http(jobs, "GET", None).await;
    assert_eq!(code, 200);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let held: Vec<&str> = (list.as_array().unwrap().iter())
        .map(|d| d["job"].as_str().unwrap())
        .collect();
    assert_eq!(held, ["j1", "j2"], "{list}");
    let st: serde_json::Value = serde_json::from_slice(&emu.state_bytes()).unwrap();
    assert_eq!(st["decisions"].as_array().unwrap().len(), 2, "{st}");
    stop.send(()).unwrap();
    served.await.unwrap().unwrap();
}
